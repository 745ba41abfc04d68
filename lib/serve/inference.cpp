#include "serve/inference.h"

#include <algorithm>

#include "core/error.h"
#include "core/timer.h"
#include "moe/ep_executor.h"
#include "serve/token_path_exchange.h"

namespace prophet::serve {

void count_transitions(const int* dispatch_idx, int L, int N, int K, int E, int64_t* out) {
    for (int l = 0; l + 1 < L; ++l) {
        int64_t* table = out + static_cast<size_t>(l) * E * E;  // [E][E]
        for_each_layer_pair(dispatch_idx, l, N, K, [&](int e1, int e2) { ++table[static_cast<size_t>(e1) * E + e2]; });
    }
}

InferenceEngine::InferenceEngine(Communicator& comm, Model<float>& model, RouteRule rule)
    : comm_(comm), model_(model), rule_(rule) {
    const ModelConfig& m = model_.config;
    PROPHET_ASSERT_MSG(m.B % comm_.size() == 0, "the global batch must split evenly over the ranks");
    executor_ = std::make_unique<ExpertParallelExecutor>(&comm_, model_, rule);
    executor_->set_resident_replicas(true);  // no update between batches: replicas stay resident, as when serving
    model_set_executor(model_, static_cast<MoeExecutor<float>*>(executor_.get()));
    inputs_.resize(static_cast<size_t>(m.B / comm_.size()) * m.T);
    targets_.resize(inputs_.size());
}

InferenceEngine::~InferenceEngine() { model_set_executor<float>(model_, nullptr); }

void InferenceEngine::set_placement_provider(PlacementProvider provider) {
    executor_->set_placement_provider(std::move(provider));
}

BatchResult InferenceEngine::forward(const DataSource& data, int64_t step, bool record_transitions) {
    const ModelConfig& m = model_.config;
    const int D = comm_.size(), r = comm_.rank(), L = m.L, E = m.E;
    const int B_local = m.B / D;
    BatchResult b;
    b.step = step;
    const auto [first, last] = rank_sequences(m.B, r, D);
    data.batch(step, first, last, inputs_.data(), targets_.data());

    comm_.barrier();  // every rank starts the batch together: forward_ms is the batch's latency
    const int64_t t0 = now_ns();
    double loss = model_forward(model_, inputs_.data(), targets_.data(), B_local, static_cast<double>(m.B) * m.T);
    double forward_ms = static_cast<double>(now_ns() - t0) * 1e-6;
    comm_.all_reduce_max(&forward_ms, 1);
    comm_.all_reduce_sum(&loss, 1);
    b.forward_ms = forward_ms;
    b.loss = loss;

    // this rank's times per layer, then every rank's: [D][L][3] -> [L][D] per kind
    std::vector<double> mine(static_cast<size_t>(L) * 3), all(static_cast<size_t>(D) * L * 3);
    std::vector<int64_t> rows_mine(L), rows_all(static_cast<size_t>(D) * L);
    b.counts.resize(static_cast<size_t>(L) * D * E);
    for (int l = 0; l < L; ++l) {
        const MoeLayerStats& s = executor_->layer_stats(l);
        mine[l * 3 + 0] = s.expert_fwd_ms;
        mine[l * 3 + 1] = s.dispatch_fwd_ms + s.combine_fwd_ms;
        mine[l * 3 + 2] = s.layout_ms + s.plan_ms + s.trans_ms + s.dispatch_fwd_ms + s.expert_fwd_ms + s.combine_fwd_ms;
        rows_mine[l] = s.rows_computed;
        std::copy(s.counts.begin(), s.counts.end(), b.counts.begin() + static_cast<long>(l) * D * E);
        b.placements.push_back(s.placement);
    }
    comm_.all_gather(mine.data(), mine.size() * sizeof(double), all.data());
    comm_.all_gather(rows_mine.data(), rows_mine.size() * sizeof(int64_t), rows_all.data());
    b.expert_ms.resize(static_cast<size_t>(L) * D);
    b.a2a_ms.resize(b.expert_ms.size());
    b.layer_ms.resize(b.expert_ms.size());
    b.rows_computed.resize(b.expert_ms.size());
    for (int d = 0; d < D; ++d)
        for (int l = 0; l < L; ++l) {
            const size_t src = (static_cast<size_t>(d) * L + l) * 3, dst = static_cast<size_t>(l) * D + d;
            b.expert_ms[dst] = all[src + 0];
            b.a2a_ms[dst] = all[src + 1];
            b.layer_ms[dst] = all[src + 2];
            b.rows_computed[dst] = rows_all[static_cast<size_t>(d) * L + l];
        }
    if (record_transitions && L > 1) {
        b.transitions.assign(static_cast<size_t>(L - 1) * E * E, 0);
        count_transitions(model_.acts.dispatch_idx, L, B_local * m.T, m.K, E, b.transitions.data());
        comm_.all_reduce_sum(b.transitions.data(), b.transitions.size());
    }
    if (exchange_token_path_ && L > 1) {
        TokenPathExchange x = exchange_layer_to_layer(comm_, model_.acts.dispatch_idx, B_local * m.T, m.K, b.counts,
                                                      b.placements, rule_, m.C);
        b.token_path_route = std::move(x.route);
        b.token_path_ms = std::move(x.boundary_ms);
        b.token_path_bytes = std::move(x.sent_bytes);
    }
    return b;
}

}  // namespace prophet::serve
