// calibrate_ops.cpp: the per-op model's microbenchmarks (see calibrate_ops.h).
#include "train/calibrate_ops.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>
#include <string>
#include <vector>

#include "comm/comm_paced.h"
#include "core/error.h"
#include "kernels/blas.h"
#include "kernels/kernels.h"
#include "train/calibrate.h"

namespace prophet {

namespace {

double time_allreduce(Communicator& comm, size_t count) {
    std::vector<float> data(count, 1.0f);
    return time_collective(comm, [&] { comm.all_reduce_sum(data.data(), count); });
}

// GEMM tables at model m's shapes for M = 16 .. 4096 rows (sim::GemmOp; each linear layer out = x W, W [k, n]:
// forward x W (nn), dx = dy W^T (nt, an [M, k] output over n), dW = x^T dy (tn)) for qkv, proj, gate and the
// experts' W1 and W2; the LM head's logits = x wte^T (nt), dx = dlogits wte (nn) and dwte = dlogits^T x (tn).
// Appended to t.gemms unless a table of that op and (N, K) is there already (e.g. E = C).
void add_gemm_tables(Communicator& comm, const ModelConfig& m, sim::OpTables& t) {
    using sim::GemmOp;
    const int C = m.C, F = m.hidden_size(), E = m.E, V = m.V;
    const std::vector<double> rows = {16, 64, 256, 1024, 4096};
    std::vector<std::tuple<GemmOp, int, int>> shapes;  // (op, N, K)
    for (const auto& [n, k] : {std::pair{3 * C, C}, {C, C}, {E, C}, {F, C}, {C, F}}) {
        shapes.emplace_back(GemmOp::kNN, n, k);
        shapes.emplace_back(GemmOp::kNT, k, n);
        shapes.emplace_back(GemmOp::kTN, n, k);
    }
    shapes.emplace_back(GemmOp::kNT, V, C);
    shapes.emplace_back(GemmOp::kNN, C, V);
    shapes.emplace_back(GemmOp::kTN, C, V);
    for (const std::tuple<GemmOp, int, int>& shape : shapes) {
        // named copies, not structured bindings: the lambdas below capture them, which C++20 allows but clang
        // (clang-tidy) accepts only from version 16
        const GemmOp op = std::get<0>(shape);
        const int n = std::get<1>(shape), k = std::get<2>(shape);
        if (std::any_of(t.gemms.begin(), t.gemms.end(),
                        [&](const sim::GemmTable& g) { return g.op == op && g.n == n && g.k == k; }))
            continue;
        sim::GemmTable g;
        g.op = op;
        g.n = n;
        g.k = k;
        g.m = rows;
        for (double mr : rows) {
            const int M = static_cast<int>(mr);
            // a [M, K] (tn: the layer input x), b the weight (nn [K, N], nt [N, K]) or tn's dy [M, N]
            std::vector<float> a(static_cast<size_t>(M) * k, 0.01f),
                b(static_cast<size_t>(op == GemmOp::kTN ? M : k) * n, 0.02f), out(static_cast<size_t>(M + k) * n);
            g.seconds.push_back(time_collective(comm, [&] {
                if (op == GemmOp::kNN)
                    gemm<float>(false, false, M, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, out.data(), n);
                else if (op == GemmOp::kNT)
                    gemm<float>(false, true, M, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, out.data(), n);
                else  // accumulated, as the trainer's weight gradients are
                    gemm<float>(true, false, k, n, M, 1.0f, a.data(), k, b.data(), n, 1.0f, out.data(), n);
            }));
        }
        t.gemms.push_back(std::move(g));
    }
}

// FLOP/s of the causal attention kernel at model m's width and heads, at this rank's B/D sequences
double attention_rate(Communicator& comm, const ModelConfig& m) {
    const int B = std::max(1, m.B / comm.size()), T = m.T, NH = std::max(1, m.NH), C = m.C;
    std::vector<float> qkv(static_cast<size_t>(B) * T * 3 * C, 0.01f), out(static_cast<size_t>(B) * T * C),
        att(static_cast<size_t>(B) * NH * T * T);
    const double s = time_collective(comm, [&] { attention_forward<float>(out.data(), att.data(), qkv.data(), B, T, C, NH); });
    const double flop = static_cast<double>(B) * NH * T * T * (static_cast<double>(C) / NH) * 4.0;
    return flop / std::max(1e-9, s);
}

// The emulated link's own cost per paced message (comm/comm_paced.h): all-to-alls of 4 KiB and 64 KiB per peer
// through a paced communicator, minus what the model already charges (the unpaced all-to-all's time, the link
// latency, and the bytes at the link rate, which the egress queue serialises: (D - 1) x per_peer), per message;
// the mean of the two sizes, at least 0. `paced` is comm itself when the run has a link (settings.link_gbps),
// otherwise a paced wrapper at a reference 1 Gbit/s (the cost is the wire thread's sleep, wake-up and hand-off,
// not the rate's). 0 when the MPI cannot run the wire thread (no MPI_THREAD_MULTIPLE).
double link_message_seconds(Communicator& comm, const TrainSettings& settings) {
    const bool has_link = settings.link_gbps > 0;
    if (!has_link && comm.name() == std::string("mpi") && mpi_thread_level() != "MPI_THREAD_MULTIPLE") return 0.0;
    const LinkEmulation link{(has_link ? settings.link_gbps : 1.0) * 1e9 / 8,
                             has_link ? settings.link_latency_us * 1e-6 : 0.0, settings.comm_timeout_s};
    std::unique_ptr<Communicator> wrapper = has_link ? nullptr : make_paced_communicator(&comm, link);
    Communicator& paced = has_link ? comm : *wrapper;
    const int peers = comm.size() - 1;
    double sum = 0;
    for (const size_t per_peer : {size_t{4} << 10, size_t{64} << 10}) {
        const double unpaced = has_link ? 0.0 : time_a2a(comm, per_peer);
        const double modelled = unpaced + peers * (link.latency_s + per_peer / link.bytes_per_s);
        sum += (time_a2a(paced, per_peer) - modelled) / peers;
    }
    return std::max(0.0, sum / 2);
}

}  // namespace

ModelConfig parse_ops_shape(const std::string& text, const ModelConfig& base) {
    ModelConfig m = base;
    const std::map<std::string, int*> keys = {{"C", &m.C}, {"F", &m.F}, {"NH", &m.NH}, {"V", &m.V},
                                              {"E", &m.E}, {"T", &m.T}, {"B", &m.B}};
    const char* allowed = "comma-separated KEY=N with KEY one of C, F, NH, V, E, T, B and N a positive integer";
    size_t start = 0;
    while (start <= text.size()) {
        const size_t end = std::min(text.find(',', start), text.size());
        const std::string item = text.substr(start, end - start);
        const size_t eq = item.find('=');
        const auto key = keys.find(eq == std::string::npos ? item : item.substr(0, eq));
        int value = 0;
        try {
            size_t used = 0;
            if (eq != std::string::npos) value = std::stoi(item.substr(eq + 1), &used);
            if (used != item.size() - eq - 1) value = 0;
        } catch (const std::exception&) {
            value = 0;
        }
        if (key == keys.end() || value <= 0)
            throw_config_error("--ops-shape", text, std::string("must be ") + allowed + " (bad item '" + item + "')",
                               "e.g. --ops-shape C=128,F=1024,NH=8");
        *key->second = value;
        start = end + 1;
    }
    model_config_validate(m);
    return m;
}

sim::OpTables calibrate_op_tables(Communicator& comm, const TrainSettings& settings,
                                  const std::vector<ModelConfig>& further_shapes) {
    const int D = comm.size();
    if (D < 2)
        throw Error(kExitConfig, "calibration needs at least 2 ranks to measure communication; fix: mpirun -np 2 "
                                 "(or more) prophet profile --calibrate ...");
    const ModelConfig& m = settings.model;
    const int C = m.C, F = m.hidden_size(), E = m.E, V = m.V;
    sim::OpTables t;
    t.calibrated_on = "V=" + std::to_string(V) + " T=" + std::to_string(m.T) + " C=" + std::to_string(C) +
                      " NH=" + std::to_string(m.NH) + " L=" + std::to_string(m.L) + " E=" + std::to_string(E) +
                      " K=" + std::to_string(m.K) + " F=" + std::to_string(F) + " B=" + std::to_string(m.B) +
                      " D=" + std::to_string(D);

    // ---- GEMMs and the attention rate at the model's shapes, and at every further shape asked for ----
    add_gemm_tables(comm, m, t);
    t.attn_flops_per_s = attention_rate(comm, m);
    for (const ModelConfig& shape : further_shapes) {
        add_gemm_tables(comm, shape, t);
        t.attn_flops_per_s_at[{shape.C, std::max(1, shape.NH)}] = attention_rate(comm, shape);
    }

    // ---- streaming: a copy (read + write) ----
    {
        const size_t small = 4096, large = 8u << 20;
        std::vector<char> a(large, 1), b(large, 0);
        const double t_small = time_collective(comm, [&] { std::memcpy(b.data(), a.data(), small); });
        const double t_large = time_collective(comm, [&] { std::memcpy(b.data(), a.data(), large); });
        t.stream_latency_s = t_small;
        t.stream_bytes_per_s = 2.0 * large / std::max(1e-9, t_large - t_small);
    }

    // ---- all-to-all, point to point, all-reduce: latency from a small message, bandwidth from a large one ----
    {
        const double small = time_a2a(comm, 1024), large = time_a2a(comm, 1u << 20);
        t.a2a_latency_s = small / (D - 1);
        t.a2a_bytes_per_s = (1u << 20) * static_cast<double>(D - 1) / std::max(1e-9, large - small);
    }
    {
        const double small = time_p2p(comm, 8), large = time_p2p(comm, 4u << 20);
        t.p2p_latency_s = small;
        t.p2p_bytes_per_s = (4u << 20) / std::max(1e-9, large - small);
    }
    {
        const size_t count = 1u << 20;  // 4 MiB of floats
        const double small = time_allreduce(comm, 2), large = time_allreduce(comm, count);
        const double steps = 2.0 * (D - 1);
        t.allreduce_latency_s = small / steps;
        // large = steps (latency + bytes / (D bw))  ->  bw = bytes / (D (large / steps - latency))
        t.allreduce_bytes_per_s =
            count * 4.0 / (D * std::max(1e-12, large / steps - t.allreduce_latency_s));
    }
    t.link_message_s = link_message_seconds(comm, settings);
    return t;
}

}  // namespace prophet
