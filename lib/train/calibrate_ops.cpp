// calibrate_ops.cpp: the per-op model's microbenchmarks (see calibrate_ops.h).
#include "train/calibrate_ops.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm_paced.h"
#include "core/error.h"
#include "kernels/blas.h"
#include "kernels/kernels.h"
#include "sim/gemm_grid_passes.h"
#include "train/calibrate.h"

namespace prophet {

namespace {

double time_allreduce(Communicator& comm, size_t count) {
    std::vector<float> data(count, 1.0f);
    return time_collective(comm, [&] { comm.all_reduce_sum(data.data(), count); });
}

// The small messages' repeats (latencies, the emulated link's cost per message): each is well under a millisecond,
// and one campaign's 7-sample median once took 128 us for an 8-byte point-to-point message that usually takes
// about 1 us (a disturbance over most of the 7), which the model then charged per Trans/Agg message
constexpr int kLatencyRepeats = 31;

// point to point's large message is timed from this many bytes of buffers, more than any cache of the machines the
// CPU trainer runs on (a 32 MiB L3 per core complex on the suite's EPYC VMs)
constexpr size_t kP2pWorkingSetBytes = size_t{64} << 20;

// The all-reduce by size class (OpTables::allreduce_sizes_*): the float all-reduce at each size of a grid from a
// few floats to 4 MiB, spanning the suite's dense gradients (~0.2-1 MB) and the small all-reduces (norm, stats).
// The step's dense all-reduce is priced between the two sizes around it, so a per-call cost that is not a
// bandwidth (the deterministic sum's reduce-scatter and all-gather, their synchronisation) is measured, not
// assumed linear from one large message.
constexpr size_t kAllReduceSizes[] = {8, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20};  // bytes

void measure_allreduce_sizes(Communicator& comm, sim::OpTables* t) {
    t->allreduce_ranks = comm.size();
    for (const size_t bytes : kAllReduceSizes) {
        t->allreduce_sizes_bytes.push_back(static_cast<double>(bytes));
        t->allreduce_sizes_s.push_back(time_allreduce(comm, bytes / sizeof(float)));
    }
}

// The GEMM grid's axes (sim::GemmGrid): rows M, output columns N, inner dimension K. They span the suite's
// shapes (experiments/train/*.toml and the validation campaigns: C = 64 .. 128, F = 128 .. 2048, 3C, E = 4 .. 8,
// V = 256, up to 1024 rows per GEMM); N and K are dense (factor 2) where the model widths lie. The grid is the same
// for every config, so a validated shape is never microbenchmarked: its rate is interpolated.
constexpr double kGridM[] = {16, 64, 256, 1024};
constexpr double kGridNK[] = {8, 32, 64, 128, 256, 512, 1024, 2048};

// seconds of one M x N x K GEMM of kind op (sim::GemmOp): nn out = a[M, K] W[K, N]; nt out = a[M, K] W[N, K]^T;
// tn dW[K, N] += a[M, K]^T dy[M, N] (accumulated, as the trainer's weight gradients are). Large ones repeat less.
double time_gemm(Communicator& comm, sim::GemmOp op, int M, int n, int k) {
    using sim::GemmOp;
    std::vector<float> a(static_cast<size_t>(M) * k, 0.01f),
        b(static_cast<size_t>(op == GemmOp::kTN ? M : k) * n, 0.02f), out(static_cast<size_t>(M + k) * n);
    const double flop = 2.0 * M * n * k;
    return time_collective(
        comm,
        [&] {
            if (op == GemmOp::kNN)
                gemm<float>(false, false, M, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, out.data(), n);
            else if (op == GemmOp::kNT)
                gemm<float>(false, true, M, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, out.data(), n);
            else
                gemm<float>(true, false, k, n, M, 1.0f, a.data(), k, b.data(), n, 1.0f, out.data(), n);
        },
        flop > 1e9 ? 3 : 7);
}

// The GEMM rate grid: every op at every (M, N, K) of the axes above, FLOP / seconds (the fastest pass's median),
// in `passes` passes over every point (kDefaultGemmGridPasses: why more than one).
sim::GemmGrid measure_gemm_grid(Communicator& comm, int passes, const GridProgress& progress) {
    sim::GemmGrid g;
    g.m.assign(std::begin(kGridM), std::end(kGridM));
    g.n.assign(std::begin(kGridNK), std::end(kGridNK));
    g.k = g.n;
    g.passes = passes;
    const size_t points = g.m.size() * g.n.size() * g.k.size();
    for (std::vector<double>& rate : g.flops_per_s) rate.assign(points, 0.0);
    const int total = passes * 3 * static_cast<int>(points);
    int done = 0;
    for (int pass = 0; pass < passes; ++pass)
        for (const sim::GemmOp op : {sim::GemmOp::kNN, sim::GemmOp::kNT, sim::GemmOp::kTN}) {
            double* rate = g.flops_per_s[static_cast<size_t>(op)].data();
            for (const double m : g.m)
                for (const double n : g.n)
                    for (const double k : g.k) {
                        const double s =
                            time_gemm(comm, op, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k));
                        *rate = std::max(*rate, 2.0 * m * n * k / std::max(1e-9, s));
                        ++rate;
                        if (progress) progress(++done, total);
                    }
        }
    return g;
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
// through a paced wrapper of `comm` (the unpaced communicator), minus what the model already charges (the unpaced
// all-to-all's time, the link latency, and the bytes at the link rate, which the egress queue serialises:
// (D - 1) x per_peer), per message; the mean of the two sizes, at least 0. The wrapper runs at the run's link
// (settings.link_gbps) or, without one, at a reference 1 Gbit/s (the cost is the wire thread's sleep, wake-up and
// hand-off, not the rate's). 0 when the MPI cannot run the wire thread (no MPI_THREAD_MULTIPLE).
double link_message_seconds(Communicator& comm, const TrainSettings& settings) {
    if (comm.name() == std::string("mpi") && mpi_thread_level() != "MPI_THREAD_MULTIPLE") return 0.0;
    const bool has_link = settings.link_gbps > 0;
    const LinkEmulation link{(has_link ? settings.link_gbps : 1.0) * 1e9 / 8,
                             has_link ? settings.link_latency_us * 1e-6 : 0.0, settings.comm_timeout_s};
    const std::unique_ptr<Communicator> paced = make_paced_communicator(&comm, link);
    const int peers = comm.size() - 1;
    double sum = 0;
    for (const size_t per_peer : {size_t{4} << 10, size_t{64} << 10}) {
        const double modelled =
            time_a2a(comm, per_peer, kLatencyRepeats) + peers * (link.latency_s + per_peer / link.bytes_per_s);
        sum += (time_a2a(*paced, per_peer, kLatencyRepeats) - modelled) / peers;
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

void check_grid_passes(int passes) {
    if (!sim::gemm_grid_passes_allowed(passes))
        throw_config_error(
            "--grid-passes", std::to_string(passes), sim::gemm_grid_passes_rule(),
            "--grid-passes " + std::to_string(kDefaultGemmGridPasses) + " (the default; 1 takes half the grid's time)");
}

sim::OpTables calibrate_op_tables(Communicator& comm, const TrainSettings& settings,
                                  const std::vector<ModelConfig>& further_shapes, int grid_passes,
                                  const GridProgress& grid_progress) {
    const int D = comm.size();
    if (D < 2)
        throw Error(kExitConfig, "calibration needs at least 2 ranks to measure communication; fix: mpirun -np 2 "
                                 "(or more) prophet profile --calibrate ...");
    check_grid_passes(grid_passes);
    const ModelConfig& m = settings.model;
    const int C = m.C, F = m.hidden_size(), E = m.E, V = m.V;
    sim::OpTables t;
    t.calibrated_on = "V=" + std::to_string(V) + " T=" + std::to_string(m.T) + " C=" + std::to_string(C) +
                      " NH=" + std::to_string(m.NH) + " L=" + std::to_string(m.L) + " E=" + std::to_string(E) +
                      " K=" + std::to_string(m.K) + " F=" + std::to_string(F) + " B=" + std::to_string(m.B) +
                      " D=" + std::to_string(D);

    // ---- the GEMM grid (every config's), the attention rate at the model's shape and at every further one ----
    t.gemm = measure_gemm_grid(comm, grid_passes, grid_progress);
    t.attn_flops_per_s = attention_rate(comm, m);
    for (const ModelConfig& shape : further_shapes)
        t.attn_flops_per_s_at[{shape.C, std::max(1, shape.NH)}] = attention_rate(comm, shape);

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
        const double small = time_a2a(comm, 1024, kLatencyRepeats), large = time_a2a(comm, 1u << 20);
        t.a2a_latency_s = small / (D - 1);
        t.a2a_bytes_per_s = (1u << 20) * static_cast<double>(D - 1) / std::max(1e-9, large - small);
    }
    {
        // the large message from a 64 MiB working set: Trans and Agg move parameters and gradients from memory,
        // about 4x slower than a cache-resident buffer on the suite's VMs (4.75 against 17.9 GB/s, 1 MiB messages
        // over OpenMPI's shared memory)
        const double small = time_p2p(comm, 8, 0, kLatencyRepeats),
                     large = time_p2p(comm, 4u << 20, kP2pWorkingSetBytes);
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
    measure_allreduce_sizes(comm, &t);
    t.link_message_s = link_message_seconds(comm, settings);
    return t;
}

}  // namespace prophet
