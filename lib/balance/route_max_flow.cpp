// route_max_flow.cpp: balance.route_to = "max_flow", the best of a few max-flow splits (route_max_flow.h).
#include "balance/route_max_flow.h"

#include <utility>

#include "balance/flow_split.h"

namespace prophet {

LayerFlow max_flow_route_layer(const int64_t* counts, int D, int E, const Placement& p, const CostModel* cost,
                               MaxFlowRouteReport* report) {
    return max_flow_route_priced(counts, D, E, p, layer_route_pricing(counts, D, E, p, cost),
                                 cost ? &cost->cluster : nullptr, report);
}

LayerFlow max_flow_route_priced(const int64_t* counts, int D, int E, const Placement& p, const RoutePricing& pricing,
                                const ClusterSpec* cluster, MaxFlowRouteReport* report) {
    MaxFlowRouteReport kept;
    if (p.num_replicas() == 0) {  // nothing to split: the owner rule
        LayerFlow flow = flow_from_parts(counts, D, E, p, {});
        kept.objective = route_objective(pricing, flow);
        if (report) *report = std::move(kept);
        return flow;
    }
    FastSplitter splitter(counts, D, E, cluster);
    for (const bool near : {false, true}) {
        splitter.set_near_start(near);
        for (const double slack : kMaxFlowLevels) {
            if (!near && slack > 0) break;  // the holder-local start at the compute optimum only
            splitter.set_slack(slack);
            const double objective = route_objective(pricing, splitter.totals(p));
            if (kept.splits_tried++ == 0 || objective < kept.objective) {
                kept.objective = objective;
                kept.parts = splitter.last_parts();
            }
        }
    }
    LayerFlow flow = flow_from_parts(counts, D, E, p, kept.parts);
    if (report) *report = std::move(kept);
    return flow;
}

}  // namespace prophet
