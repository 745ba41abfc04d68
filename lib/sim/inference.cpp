#include "sim/inference.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace prophet::sim {

namespace {

bool same_placement(const Placement& a, const Placement& b) { return a.owner == b.owner && a.replica == b.replica; }

// Device i's time in one all-to-all of route_bytes [D*D] (src*D + dst, bytes; diagonal stays local), without the
// latency: uniform, max(sent, received) / B̄; topology-aware, the busiest of i's links in either direction.
double one_way_s(const CostModel& cost, const double* route_bytes, int i) {
    const ClusterSpec& cl = cost.cluster;
    const int D = cl.num_devices;
    double t = 0;
    if (cost.topology_aware) {
        for (int j = 0; j < D; ++j) {
            if (j == i) continue;
            const double out = route_bytes[static_cast<size_t>(i) * D + j];
            const double in = route_bytes[static_cast<size_t>(j) * D + i];
            t = std::max({t, out / (cl.link_bytes_per_s(i, j) * cost.bandwidth_scale),
                          in / (cl.link_bytes_per_s(j, i) * cost.bandwidth_scale)});
        }
        return t;
    }
    double sent = 0, received = 0;
    for (int j = 0; j < D; ++j) {
        if (j == i) continue;
        sent += route_bytes[static_cast<size_t>(i) * D + j];
        received += route_bytes[static_cast<size_t>(j) * D + i];
    }
    const double bytes = std::max(sent, received);
    return bytes > 0 ? bytes / (cl.a2a_bytes_per_s(bytes) * cost.bandwidth_scale) : 0.0;
}

std::vector<int64_t> scaled(const int64_t* values, size_t n, double token_scale) {
    std::vector<int64_t> out(n);
    for (size_t k = 0; k < n; ++k)
        out[k] = static_cast<int64_t>(std::llround(static_cast<double>(values[k]) * token_scale));
    return out;
}

// Replaces the home path's a2a_s of one batch's L layers (times [L]) by the layer-to-layer path's: per device,
// the all-to-all into each layer, and for the last layer also the one back home.
void apply_layer_to_layer(const CostModel& cost, const int64_t* counts, const int64_t* transitions,
                          const std::vector<Placement>& placements, RouteRule rule, InferenceLayerTime* times) {
    const int L = static_cast<int>(placements.size()), D = cost.cluster.num_devices;
    const TokenPathFlow flow = layer_to_layer_flow(counts, transitions, placements, rule);
    auto bytes_of = [&](const double* route) {
        std::vector<double> b(route, route + static_cast<size_t>(D) * D);
        for (double& x : b) x *= cost.token_bytes();
        return b;
    };
    const std::vector<double> home = bytes_of(flow.returned.data());
    for (int l = 0; l < L; ++l) {
        const std::vector<double> in = bytes_of(flow.into(l));
        for (int i = 0; i < D; ++i) {
            times[l].a2a_s[i] = one_way_s(cost, in.data(), i) + cost.cluster.a2a_latency_s;
            if (l == L - 1) times[l].a2a_s[i] += one_way_s(cost, home.data(), i) + cost.cluster.a2a_latency_s;
        }
    }
}

}  // namespace

InferenceLayerTime simulate_inference_layer(const CostModel& cost, const int64_t* counts, const Placement& placement,
                                            RouteRule rule, double token_scale, bool charge_trans) {
    const int D = placement.num_devices, E = placement.num_experts;
    PROPHET_ASSERT(cost.cluster.num_devices == D && token_scale > 0);
    const std::vector<int64_t> scaled_counts = scaled(counts, static_cast<size_t>(D) * E, token_scale);  // [D][E]
    const LayerFlow flow = compute_flow(scaled_counts.data(), D, E, placement, rule, &cost);
    const ClusterSpec& cl = cost.cluster;
    const double flops = cl.compute_flops * cost.compute_scale;
    InferenceLayerTime t;
    t.expert_s.assign(D, 0.0);
    t.a2a_s.assign(D, 0.0);
    t.trans_s.assign(D, 0.0);
    t.computed = flow.computed;
    std::vector<double> route_bytes(flow.route.size());
    for (size_t k = 0; k < route_bytes.size(); ++k)
        route_bytes[k] = static_cast<double>(flow.route[k]) * cost.token_bytes();
    for (int i = 0; i < D; ++i) {
        t.expert_s[i] = static_cast<double>(flow.computed[i]) * cost.expert_flops_per_token() / flops;
        // dispatch, and the combine that mirrors it
        t.a2a_s[i] = 2.0 * (one_way_s(cost, route_bytes.data(), i) + cl.a2a_latency_s);
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
                                                   const std::vector<Placement>& initial, TokenPath path,
                                                   const std::vector<int64_t>& transitions) {
    const int I = static_cast<int>(placements.size());
    if (I == 0) return {};
    const int L = static_cast<int>(placements[0].size());
    const int D = placements[0][0].num_devices, E = placements[0][0].num_experts;
    PROPHET_ASSERT(counts.size() == static_cast<size_t>(I) * L * D * E);
    const bool layer_to_layer = path == TokenPath::kLayerToLayer && L > 1;
    const size_t batch_transitions = static_cast<size_t>(std::max(0, L - 1)) * E * E;
    PROPHET_ASSERT_MSG(!layer_to_layer || transitions.size() == static_cast<size_t>(I) * batch_transitions,
                       "the layer-to-layer token path needs transitions [I][L-1][E][E]");
    std::vector<Placement> previous = initial;
    if (previous.empty()) previous.assign(L, Placement::make_static(D, E));
    std::vector<InferenceLayerTime> out;  // [I][L]
    for (int i = 0; i < I; ++i) {
        for (int l = 0; l < L; ++l) {
            const Placement& p = placements[i][l];
            out.push_back(simulate_inference_layer(cost, counts.data() + (static_cast<size_t>(i) * L + l) * D * E, p,
                                                   rule, token_scale, !same_placement(p, previous[l])));
            previous[l] = p;
        }
        if (layer_to_layer) {
            const size_t at = static_cast<size_t>(i) * L * D * E;
            const std::vector<int64_t> c = scaled(counts.data() + at, static_cast<size_t>(L) * D * E, token_scale);
            const std::vector<int64_t> t =
                scaled(transitions.data() + i * batch_transitions, batch_transitions, token_scale);
            apply_layer_to_layer(cost, c.data(), t.data(), placements[i], rule,
                                 out.data() + static_cast<size_t>(i) * L);
        }
    }
    return out;
}

}  // namespace prophet::sim
