#include "train/memory_estimate.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/huge_pages.h"

namespace prophet {

MemoryEstimate estimate_train_memory(const ModelConfig& m, int world_size) {
    const double V = m.V, T = m.T, C = m.C, NH = m.NH, L = m.L, E = m.E, K = m.K, F = m.hidden_size();
    const double B = static_cast<double>(m.B / world_size);  // sequences per rank
    const double D = world_size;
    const double N = B * T;                                   // tokens per rank
    MemoryEstimate est;
    // param_layout: wte [V,C], wpe [T,C]; per layer ln1 2C, qkv C*3C + 3C, proj C*C + C, ln2 2C, gate C*E;
    // ln_f 2C; then per layer and expert w1 [C,F] and w2 [F,C]
    const double dense = V * C + T * C + L * (4 * C * C + 8 * C + C * E) + 2 * C;
    est.num_params = dense + L * E * 2 * C * F;
    est.parameters_bytes = 4.0 * est.num_params * sizeof(float);
    // acts_allocate (model/moe_gpt.cpp), buffer by buffer in its order
    const double forward_floats = N * C                      // encoded
                                  + L * N * C                // ln1
                                  + 2 * L * N                // ln1 mean, rstd
                                  + L * N * 3 * C            // qkv
                                  + L * B * NH * T * T       // att
                                  + 3 * L * N * C            // atty, residual_attn, ln2
                                  + 2 * L * N                // ln2 mean, rstd
                                  + 2 * L * N * E            // gate logits, probs
                                  + L * N * K                // gate_w
                                  + L * N * C                // residual_moe
                                  + N * C + 2 * N            // lnf, mean, rstd
                                  + N * V                    // probs
                                  + N * C;                   // branch
    const double backward_floats = 3 * N * C + 3 * N * C + T * T + N * K + 2 * N * E;  // dresidual dln datty, dqkv,
                                                                                       // datt, dgate_w, dgate_*
    const double ints = 2 * L * N * K + 2 * N;  // expert_idx, dispatch_idx, inputs, targets
    est.activations_bytes = (forward_floats + backward_floats) * sizeof(float) + ints * sizeof(int);
    // ExpertParallelExecutor with R rows computed here and M_send = N*K rows sent (dropless): per layer gate_w
    // N*K, y_src M_send*C, x R*C, pre and act R*F, the layout's slot arrays 2*N*K ints; shared send_ M_send*C,
    // recv_ sorted_ dx_sorted_ R*C each, dpre_ R*F. The row buffers (all but gate_w and the slot arrays) are
    // RowsVector: from 256 KiB rounded up to whole 2 MiB pages (core/huge_pages.h)
    auto rows = [](double floats) { return huge_pages_block_bytes(static_cast<size_t>(floats * sizeof(float))); };
    auto ep_bytes = [&](double R) {
        const double per_layer = N * K * sizeof(float) + rows(N * K * C) + rows(R * C) + 2 * rows(R * F);
        const double shared = rows(N * K * C) + 3 * rows(R * C) + rows(R * F);
        return L * per_layer + shared + L * 2 * N * K * sizeof(int);
    };
    est.ep_buffers_bytes = ep_bytes(N * K);
    est.ep_buffers_worst_bytes = ep_bytes(D * N * K);
    return est;
}

double available_memory_bytes() {
    std::ifstream meminfo("/proc/meminfo");
    for (std::string line; std::getline(meminfo, line);) {
        if (line.rfind("MemAvailable:", 0) != 0) continue;
        std::istringstream in(line.substr(13));
        double kib = 0;
        in >> kib;  // "MemAvailable:   12345678 kB"
        return kib * 1024.0;
    }
    return 0;
}

double memory_limit_bytes(double limit_gib, int ranks_on_node) {
    if (limit_gib > 0) return limit_gib * 1073741824.0;
    const double available = available_memory_bytes();
    return available > 0 ? available / std::max(1, ranks_on_node) : 0;
}

std::string format_gib(double bytes) {
    static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB"};
    int unit = 0;
    for (; unit < 3 && bytes >= 1024.0; ++unit) bytes /= 1024.0;
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, unit == 0 ? "%.0f %s" : "%.3g %s", bytes, kUnits[unit]);
    return buffer;
}

void check_memory_fits(const MemoryEstimate& est, double limit_gib, int ranks_on_node, const std::string& limit_key) {
    const double limit = memory_limit_bytes(limit_gib, ranks_on_node);
    if (limit <= 0 || est.total_bytes() <= limit) return;
    char gib[32];
    std::snprintf(gib, sizeof gib, "%g", limit_gib);
    const std::string source =
        limit_gib > 0 ? limit_key + " = " + gib
                      : "MemAvailable of /proc/meminfo / " + std::to_string(ranks_on_node) + " rank(s) on this node";
    throw Error(kExitResource,
                "resource error: the model needs at least " + format_gib(est.total_bytes()) + " per rank (" +
                    "parameters, gradients and AdamW state " + format_gib(est.parameters_bytes) + ", activations " +
                    format_gib(est.activations_bytes) + ", expert-parallel buffers " +
                    format_gib(est.ep_buffers_bytes) + " at balanced routing, up to " +
                    format_gib(est.ep_buffers_worst_bytes) + " skewed) but the limit is " + format_gib(limit) +
                    " (" + source + "); nothing was allocated; fix: a smaller model (model.C, model.L, model.E, "
                    "model.F), fewer sequences per rank (model.B or more ranks), or raise " + limit_key);
}

void check_train_memory(const Config& config, const ModelConfig& model, int world_size) {
    int ranks_on_node = world_size;
    for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"})
        if (const char* v = std::getenv(name); v && std::atoi(v) > 0) {
            ranks_on_node = std::atoi(v);  // Slurm's "4(x2)" reads as 4
            break;
        }
    check_memory_fits(estimate_train_memory(model, world_size), config.get_float("train.max_memory_gib"),
                      ranks_on_node, "train.max_memory_gib");
}

}  // namespace prophet
