#include "sim/inference.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace prophet::sim {

namespace {

bool same_placement(const Placement& a, const Placement& b) { return a.owner == b.owner && a.replica == b.replica; }

}  // namespace

InferenceLayerTime simulate_inference_layer(const CostModel& cost, const int64_t* counts, const Placement& placement,
                                            RouteRule rule, double token_scale, bool charge_trans) {
    const int D = placement.num_devices, E = placement.num_experts;
    PROPHET_ASSERT(cost.cluster.num_devices == D && token_scale > 0);
    std::vector<int64_t> scaled(static_cast<size_t>(D) * E);  // [D][E]
    for (size_t k = 0; k < scaled.size(); ++k)
        scaled[k] = static_cast<int64_t>(std::llround(static_cast<double>(counts[k]) * token_scale));
    const LayerFlow flow = compute_flow(scaled.data(), D, E, placement, rule);
    const ClusterSpec& cl = cost.cluster;
    const double flops = cl.compute_flops * cost.compute_scale;
    InferenceLayerTime t;
    t.expert_s.assign(D, 0.0);
    t.a2a_s.assign(D, 0.0);
    t.trans_s.assign(D, 0.0);
    t.computed = flow.computed;
    for (int i = 0; i < D; ++i) {
        t.expert_s[i] = static_cast<double>(flow.computed[i]) * cost.expert_flops_per_token() / flops;
        double one_way = 0;  // one all-to-all (dispatch; combine mirrors it)
        if (cost.topology_aware) {
            for (int j = 0; j < D; ++j) {
                if (j == i) continue;
                const double out = static_cast<double>(flow.route[static_cast<size_t>(i) * D + j]) * cost.token_bytes();
                const double in = static_cast<double>(flow.route[static_cast<size_t>(j) * D + i]) * cost.token_bytes();
                one_way = std::max({one_way, out / (cl.link_bytes_per_s(i, j) * cost.bandwidth_scale),
                                    in / (cl.link_bytes_per_s(j, i) * cost.bandwidth_scale)});
            }
        } else {
            const double bytes = static_cast<double>(std::max(flow.sent[i], flow.received[i])) * cost.token_bytes();
            if (bytes > 0) one_way = bytes / (cl.a2a_bytes_per_s(bytes) * cost.bandwidth_scale);
        }
        t.a2a_s[i] = 2.0 * (one_way + cl.a2a_latency_s);
    }
    if (charge_trans)
        for (int e = 0; e < E; ++e)
            for (int d = 0; d < D; ++d)
                if (placement.replica[static_cast<size_t>(e) * D + d])
                    t.trans_s[d] += cost.expert_bytes() / (cl.trans_bytes_per_s * cost.bandwidth_scale);
    return t;
}

std::vector<InferenceLayerTime> simulate_inference(const CostModel& cost, const std::vector<int64_t>& counts,
                                                   const std::vector<std::vector<Placement>>& placements,
                                                   RouteRule rule, double token_scale,
                                                   const std::vector<Placement>& initial) {
    const int I = static_cast<int>(placements.size());
    if (I == 0) return {};
    const int L = static_cast<int>(placements[0].size());
    const int D = placements[0][0].num_devices, E = placements[0][0].num_experts;
    PROPHET_ASSERT(counts.size() == static_cast<size_t>(I) * L * D * E);
    std::vector<Placement> previous = initial;
    if (previous.empty()) previous.assign(L, Placement::make_static(D, E));
    std::vector<InferenceLayerTime> out;  // [I][L]
    for (int i = 0; i < I; ++i)
        for (int l = 0; l < L; ++l) {
            const Placement& p = placements[i][l];
            out.push_back(simulate_inference_layer(cost, counts.data() + (static_cast<size_t>(i) * L + l) * D * E, p,
                                                   rule, token_scale, !same_placement(p, previous[l])));
            previous[l] = p;
        }
    return out;
}

}  // namespace prophet::sim
