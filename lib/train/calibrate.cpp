#include "train/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/stats.h"
#include "core/timer.h"
#include "kernels/blas.h"
#include "kernels/kernels.h"
#include "kernels/optim.h"
#include "model/data.h"
#include "train/calibrate_device.h"

namespace prophet {
namespace {

constexpr int kWarmup = 2;
constexpr int kRepeats = 7;

// The local executor, timed: how long the expert part of a forward/backward takes.
class TimedExecutor final : public MoeExecutor<float> {
  public:
    explicit TimedExecutor(MoeExecutor<float>* inner) : inner_(inner) {}
    void forward(int layer, int N, const float* h, const int* idx, const float* w, float* out) override {
        const int64_t t0 = now_ns();
        inner_->forward(layer, N, h, idx, w, out);
        forward_s += (now_ns() - t0) * 1e-9;
    }
    void backward(int layer, int N, const float* dout, float* dh, float* dw) override {
        const int64_t t0 = now_ns();
        inner_->backward(layer, N, dout, dh, dw);
        backward_s += (now_ns() - t0) * 1e-9;
    }
    const char* name() const override { return "timed-local"; }
    double forward_s = 0, backward_s = 0;

  private:
    MoeExecutor<float>* inner_;
};

}  // namespace

double time_collective(Communicator& comm, const std::function<void()>& fn, int repeats) {
    std::vector<double> samples;
    for (int r = 0; r < kWarmup + repeats; ++r) {
        comm.barrier();
        const int64_t t0 = now_ns();
        fn();
        double t = (now_ns() - t0) * 1e-9;
        comm.all_reduce_max(&t, 1);
        if (r >= kWarmup) samples.push_back(t);
    }
    return median(samples);
}

double time_a2a(Communicator& comm, size_t per_peer, int repeats) {
    const int D = comm.size();
    std::vector<char> send(per_peer * D, 1), recv(per_peer * D, 0);
    std::vector<size_t> bytes(D, per_peer), offsets(D);
    for (int r = 0; r < D; ++r) offsets[r] = per_peer * r;
    bytes[comm.rank()] = 0;
    return time_collective(
        comm,
        [&] {
            comm.all_to_all_v(send.data(), bytes.data(), offsets.data(), recv.data(), bytes.data(), offsets.data());
        },
        repeats);
}

double time_p2p(Communicator& comm, size_t bytes, size_t working_set_bytes, int repeats) {
    const size_t count = std::max<size_t>(1, working_set_bytes / std::max<size_t>(1, bytes));
    std::vector<std::vector<char>> buffers(count, std::vector<char>(bytes, 1));
    size_t next = 0;
    const auto send_next = [&] {
        char* buffer = buffers[next++ % count].data();
        if (comm.rank() == 0) comm.isend(buffer, bytes, 1, 7301)->wait();
        if (comm.rank() == 1) comm.irecv(buffer, bytes, 0, 7301)->wait();
    };
    // NOTE: a buffer's first message costs about 8x a later one (shared-memory MPI on the suite's VMs: 0.5 against
    // 4-5 GB/s from memory); the trainer sends the same parameter and gradient buffers every step, so every buffer
    // is sent once untimed
    if (count > 1)
        for (size_t i = 0; i < count; ++i) send_next();
    return time_collective(comm, send_next, repeats);
}

void static_ep_step_masks(const Model<float>& model, int rank, int D, std::vector<char>* skip,
                          std::vector<char>* include) {
    const int per_rank = model.config.E / D;
    skip->assign(model.num_tensors(), 0);
    include->assign(model.num_tensors(), 0);
    for (int i = 0; i < model.num_tensors(); ++i) {
        const ParamTensor& t = model.tensor(i);
        const bool home = t.is_expert && t.expert / per_rank == rank;
        (*skip)[i] = t.is_expert && !home;
        (*include)[i] = t.is_expert ? home : rank == 0;  // dense tensors counted once, as the trainer does
    }
}

namespace {

// ---- all-to-all by message size, point to point, Trans and Agg of one expert ----
void calibrate_communication(Communicator& comm, const ModelConfig& m, Calibration* cal) {
    const int D = comm.size();
    const int C = m.C, F = m.hidden_size();
    for (size_t per_peer : {1024ul, 4096ul, 16384ul, 65536ul, 262144ul, 1048576ul}) {
        // nothing to self: the model's R_i counts other devices only
        cal->a2a_received_bytes.push_back(static_cast<double>(per_peer) * (D - 1));
        cal->a2a_seconds.push_back(time_a2a(comm, per_peer));
    }
    {
        const size_t bytes = 4u << 20;
        cal->p2p_bytes_per_s = static_cast<double>(bytes) / time_p2p(comm, bytes);
    }
    const size_t count = 2 * static_cast<size_t>(C) * F;  // one expert's w1 + w2
    std::vector<float> expert(count, 0.5f);
    std::vector<int> everyone(D);
    for (int r = 0; r < D; ++r) everyone[r] = r;
    const double bytes = static_cast<double>(count) * sizeof(float);
    const double t_trans = time_collective(
        comm, [&] { comm.broadcast_subset_async(expert.data(), count * sizeof(float), 0, everyone, 7302)->wait(); });
    const double t_agg =
        time_collective(comm, [&] { comm.reduce_sum_subset_async(expert.data(), count, 0, everyone, 7303)->wait(); });
    cal->trans_bytes_per_s = (D - 1) * bytes / (D * t_trans);
    cal->agg_bytes_per_s = (D - 1) * bytes / (D * t_agg);
}

// ---- expert FFN throughput at this rank's token count, and the wait of an all-to-all that follows compute with
// no barrier between, as in a step: ranks that share cores reach it at different times, and a rank descheduled
// for a time slice holds up the others. A chain of kChain (FFN, all-to-all) pairs after one barrier, as a step's
// blocks run them: wait = (chain - kChain (FFN alone + all-to-all alone)) / kChain, slowest rank, medians; the
// cost model adds it to every all-to-all (a2a_latency_us). Message: this rank's M K routed rows of C floats
// spread evenly over the D ranks.
void calibrate_expert_compute(Communicator& comm, const ModelConfig& m, Calibration* cal) {
    const int D = comm.size();
    const int C = m.C, F = m.hidden_size();
    const int M = (m.B / D) * m.T;
    std::vector<float> x(static_cast<size_t>(M) * C, 0.01f), w1(static_cast<size_t>(C) * F, 0.02f),
        w2(static_cast<size_t>(F) * C, 0.02f), pre(static_cast<size_t>(M) * F), act(pre.size()),
        y(static_cast<size_t>(M) * C);
    auto ffn = [&] {
        gemm<float>(false, false, M, F, C, 1.0f, x.data(), C, w1.data(), F, 0.0f, pre.data(), F);
        gelu_forward<float>(act.data(), pre.data(), pre.size());
        gemm<float>(false, false, M, C, F, 1.0f, act.data(), F, w2.data(), C, 0.0f, y.data(), C);
    };
    const double t = time_collective(comm, ffn);
    cal->expert_flops_per_s = 4.0 * M * C * F / t;

    constexpr int kChain = 16;
    const size_t per_peer = std::max<size_t>(1, static_cast<size_t>(M) * m.K * C * sizeof(float) / D);
    std::vector<char> send(per_peer * D, 1), recv(per_peer * D, 0);
    std::vector<size_t> bytes(D, per_peer), offsets(D);
    for (int r = 0; r < D; ++r) offsets[r] = per_peer * r;
    bytes[comm.rank()] = 0;
    auto a2a = [&] {
        comm.all_to_all_v(send.data(), bytes.data(), offsets.data(), recv.data(), bytes.data(), offsets.data());
    };
    const double alone = time_collective(comm, a2a);
    const double chained = time_collective(comm, [&] {
        for (int i = 0; i < kChain; ++i) {
            ffn();
            a2a();
        }
    });
    cal->a2a_wait_s = std::max(0.0, chained / kChain - t - alone);
}

// ---- non-expert block time per layer (forward, backward): the model with a timed local executor, medians
void calibrate_non_expert(Communicator& comm, Model<float>& model, TimedExecutor& timed, const TrainSettings& settings,
                          Calibration* cal) {
    const ModelConfig& m = settings.model;
    const int D = comm.size();
    auto data = make_data_source(settings.data, m.T, m.B);
    const int B_local = m.B / D;
    std::vector<int32_t> inputs(static_cast<size_t>(B_local) * m.T), targets(inputs.size());
    const auto [first, last] = rank_sequences(m.B, comm.rank(), D);
    data->batch(0, first, last, inputs.data(), targets.data());
    std::vector<double> fnec, bnec;
    for (int r = 0; r < kWarmup + kRepeats; ++r) {
        timed.forward_s = timed.backward_s = 0;
        model_zero_grad(model);
        comm.barrier();
        const int64_t t0 = now_ns();
        model_forward(model, inputs.data(), targets.data(), B_local, static_cast<double>(m.B) * m.T);
        const int64_t t1 = now_ns();
        model_backward(model);
        const int64_t t2 = now_ns();
        double times[2] = {(static_cast<double>(t1 - t0) * 1e-9 - timed.forward_s) / m.L,
                           (static_cast<double>(t2 - t1) * 1e-9 - timed.backward_s) / m.L};
        comm.all_reduce_max(times, 2);
        if (r >= kWarmup) {
            fnec.push_back(times[0]);
            bnec.push_back(times[1]);
        }
    }
    cal->fnec_s = median(fnec);
    cal->bnec_s = median(bnec);
}

// ---- the step's tail, as Trainer::step runs it after the last backward block: the dense-gradient all-reduce,
// the global gradient norm (its all-reduce), AdamW on the dense tensors and this rank's home experts under static
// EP (experts [r E/D, (r+1) E/D)), the loss all-reduce, and the next step's zero-grad. The first repeat reduces
// the last backward's gradients, later ones the zeros zero-grad left: the same work.
void calibrate_step_tail(Communicator& comm, Model<float>& model, const TrainSettings& settings, Calibration* cal) {
    std::vector<char> skip, include;
    static_ep_step_masks(model, comm.rank(), comm.size(), &skip, &include);
    cal->step_tail_s = time_collective(comm, [&] {
        Span<float> dense = model_dense_grads(model);
        comm.all_reduce_sum(dense.data, dense.size);
        double norm_sq = grad_norm_sq(model, &include);
        comm.all_reduce_sum(&norm_sq, 1);
        const double clip = grad_clip_scale(std::sqrt(norm_sq), settings.grad_clip);
        adamw_step(model, settings.lr.max_lr, settings.adamw, clip, &skip);
        double loss = 1.0;
        comm.all_reduce_sum(&loss, 1);
        model_zero_grad(model);
    });
}

}  // namespace

Calibration calibrate_machine(Communicator& comm, const Model<float>& trained, const TrainSettings& settings) {
    const int D = comm.size();
    if (D < 2)
        throw Error(kExitConfig,
                    "calibration needs at least 2 ranks to measure communication; fix: mpirun -np 2 "
                    "(or more) prophet profile --calibrate ...");
    Calibration cal;
    cal.num_ranks = D;
    calibrate_communication(comm, settings.model, &cal);
    calibrate_expert_compute(comm, settings.model, &cal);
    {
        Model<float> model(trained.config);
        TimedExecutor timed(model.local_executor.get());
        model_set_executor(model, static_cast<MoeExecutor<float>*>(&timed));
        calibrate_non_expert(comm, model, timed, settings, &cal);
        calibrate_step_tail(comm, model, settings, &cal);
    }
    calibrate_on_device(comm, trained, settings, &cal);  // device.kind = cuda: the GPU's compute figures
    return cal;
}

ClusterSpec calibration_cluster(const Calibration& cal, int num_devices) {
    ClusterSpec c;
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    c.name = std::string("calibrated-") + host + "-" + std::to_string(num_devices) + "rank";
    c.num_devices = num_devices;
    c.devices_per_node = num_devices;
    c.compute_flops = cal.expert_flops_per_s;
    // one bandwidth step per measured size; the boundary between two steps is the geometric mean of their sizes
    for (size_t i = 0; i < cal.a2a_seconds.size(); ++i) {
        const double upper = i + 1 < cal.a2a_seconds.size()
                                 ? std::sqrt(cal.a2a_received_bytes[i] * cal.a2a_received_bytes[i + 1])
                                 : std::numeric_limits<double>::infinity();
        c.a2a_bandwidth.push_back({upper, cal.a2a_received_bytes[i] / cal.a2a_seconds[i]});
    }
    c.trans_bytes_per_s = cal.trans_bytes_per_s;
    c.agg_bytes_per_s = cal.agg_bytes_per_s;
    c.intra_node_bytes_per_s = cal.p2p_bytes_per_s;
    c.inter_node_bytes_per_s = cal.p2p_bytes_per_s;
    c.fnec_s = cal.fnec_s;
    c.bnec_s = cal.bnec_s;
    c.step_tail_s = cal.step_tail_s;
    c.a2a_latency_s = cal.a2a_wait_s;
    return c;
}

std::string calibration_json(const Calibration& cal) {
    nlohmann::json j = {{"num_ranks", cal.num_ranks},
                        {"a2a_received_bytes", cal.a2a_received_bytes},
                        {"a2a_seconds", cal.a2a_seconds},
                        {"p2p_gbit_s", cal.p2p_bytes_per_s * 8 / 1e9},
                        {"trans_gbit_s", cal.trans_bytes_per_s * 8 / 1e9},
                        {"agg_gbit_s", cal.agg_bytes_per_s * 8 / 1e9},
                        {"expert_gflop_s", cal.expert_flops_per_s / 1e9},
                        {"fnec_ms", cal.fnec_s * 1e3},
                        {"bnec_ms", cal.bnec_s * 1e3},
                        {"step_tail_ms", cal.step_tail_s * 1e3},
                        {"a2a_wait_us", cal.a2a_wait_s * 1e6},
                        {"blas", blas_config()}};
    return j.dump();
}

void write_cluster_file(const ClusterSpec& cluster, const Calibration& cal, const std::string& path,
                        const std::string& extra_toml) {
    std::ostringstream out;
    out << "# Calibrated by `prophet profile --calibrate` on " << cal.num_ranks << " ranks of this machine.\n";
    out << "# all-to-all: every rank sends m bytes to each other rank; the steps below are bytes received per rank.\n";
    for (size_t i = 0; i < cal.a2a_seconds.size(); ++i)
        out << "#   received " << cal.a2a_received_bytes[i] / 1024.0 << " KiB in " << cal.a2a_seconds[i] * 1e6
            << " us\n";
    out << "# point to point " << cal.p2p_bytes_per_s * 8 / 1e9 << " Gbit/s; " << blas_config() << "\n";
    out << cluster_to_toml(cluster);
    out << "source = \"prophet profile --calibrate\"\n";
    out << extra_toml;
    write_file_atomically(path, out.str());  // a unique temporary renamed over `path`
}

}  // namespace prophet
