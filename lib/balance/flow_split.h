// flow_split.h: the combinatorial routing split that flow's planner scores its candidate placements with, in
// place of the routing LP of flow_routing.h (which stays the per-batch router and this split's oracle in tests).
//
// One MoE layer, counts c[s][e] [D*E], holders G(e). Experts with one holder are fixed on their owner: h0_g tokens
// on device g. A replicated expert's load w_e = sum_s c[s][e] may be split over G(e) in any shares.
//   compute   min over fractional splits of max_g H_g, exactly: the network source -> e (capacity w_e) -> g in
//             G(e) (unbounded) -> sink (T - h0_g) carries every w_e iff T >= the optimum T*. Newton's parametric
//             search starts at the averaging bound max(max_g h0_g, (W + h0(holders)) / |holders|); while the
//             max-flow falls short, the residual source side (experts A, devices S, every holder of A inside S)
//             proves T* >= (w(A) + h0(S)) / |S| > T, so T rises to that ratio and the flow, still feasible,
//             is augmented (MaxFlow resumes). The search ends at T* (the last ratio, or the start).
//   tokens    each expert's fractional shares are rounded by largest remainder to integers summing to w_e (a
//             device may exceed T* by under one token per replicated expert it holds), then filled from the
//             expert's groups: every holder first takes its own device's tokens (they cross no link), the
//             rest come from the nearest sources (same NVLink domain, same node, elsewhere; then device order).
//             The max-flow starts from the near-first assignment as far as T allows: each holder's own tokens,
//             then (on a cluster of several nodes) every source's tokens on its holders in the same node,
//             nearest first; it only moves what the start cannot place (after a rise of T it is started again
//             at T*), so a replicated expert's tokens stay in their node wherever the compute optimum leaves
//             room, and a holder in every node keeps that expert's tokens off the inter-node links.
// The all-to-all is not minimised as the LP does: the split is the compute optimum with locality as the
// tie-break, a cheaper proxy for comparing placements; set_slack splits at a level above the optimum instead, so
// that a caller can trade compute for locality by trying a few levels. Work: one max-flow (two after a rise of T) on
// (replicated experts + D) nodes, O(D + classes * holders) per replicated expert to fill groups (classes: the
// sources' distinct (node, NVLink domain)), O(D * E) to build the LayerFlow.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "balance/cluster.h"
#include "balance/flow_routing.h"
#include "balance/max_flow.h"
#include "balance/placement.h"
#include "core/error.h"

namespace prophet {

struct FastSplitReport {
    double max_computed = 0;  // T*: the least max_g H_g of any fractional split (tokens)
    int max_flow_solves = 0;  // Newton steps (0: nothing replicated carries tokens)
};

// The split of one layer's counts under many placements (flow's candidates): the expert loads are summed once,
// and the owner rule's routes of the last owner vector and their per-device totals are kept, so a placement with
// the same owners costs a copy of the [D*D] routes, O(E * D / 8) to find its replicas and O((D + classes *
// holders) * replicated experts) to split them, beyond its max-flow, instead of O(D * E). Buffers are kept across
// placements.
class FastSplitter {
  public:
    // counts [D*E] must outlive the splitter; cluster: link classes for the nearest-source order (nullptr: device
    // order)
    FastSplitter(const int64_t* counts, int num_devices, int num_experts, const ClusterSpec* cluster);
    FastSplitter() = default;  // reset() before use
    // The splitter of other counts (or another layer) with its buffers kept: what the constructor builds, and the
    // cached owner routes and the near start forgotten. Buffers built fresh for every plan cost page faults (a
    // plan's parts reach D * E * 24 bytes): about a fifth of a plan at E = 256, D = 64, top-8 (bench_planner).
    void reset(const int64_t* counts, int num_devices, int num_experts, const ClusterSpec* cluster);
    // The split as a LayerFlow: route exact, expert_device filled, destination naming the owner as under kFlow
    // (flow_from_parts of the split's parts).
    LayerFlow split(const Placement& placement, FastSplitReport* report = nullptr);
    // The same totals (computed, received, sent, route, replica_holders, total_tokens: what predict_layer reads)
    // without the [D*E] destination and expert_device, which stay empty.
    LayerFlow split_totals(const Placement& placement, FastSplitReport* report = nullptr);
    // split_totals without its copy: a view of the splitter's own buffer, valid until the next call (the owner
    // rule's routes stay in it; the last placement's changes are undone before the next one's are made).
    const LayerFlow& totals(const Placement& placement, FastSplitReport* report = nullptr);
    // The whole-token parts of the last split(), split_totals() or totals() call: every replicated expert's groups
    // with tokens (holders ascending per group); groups not listed follow the owner rule. Valid until the next call.
    const std::vector<SplitPart>& last_parts() const { return parts_; }
    // On a cluster of several nodes, start the max-flow node-local (each source's tokens to its holders inside its
    // node first) instead of holder-local only. Off by default: it suits placements with copies in every node
    // (flow_hotset.h); on flow's other families it gave splits up to 2% dearer under flow's own model.
    void set_near_start(bool on) { near_start_ = on; }
    // Split at the compute level T*(1 + slack) instead of T* (slack >= 0; 0 by default): every device may compute
    // up to that level, so the near start keeps more tokens in their node and the max-flow moves only what it
    // cannot place. The compute optimum is the wrong trade where an all-to-all costs more than the compute it
    // evens out (flow's hot-set candidates at DeepSeek-V3 scale: docs/policies.md). FastSplitReport::max_computed
    // stays T*. With the near start on, the same placement split again (at another slack or the same) reuses its
    // instance, and at a slack above 0 the level the search found for it: the same split, max_flow_solves counting
    // only the solves made.
    void set_slack(double slack) {
        PROPHET_ASSERT(slack >= 0);
        slack_ = slack;
    }

  private:
    // The replicated experts with load, their holders (device order) and the fixed loads of everything else;
    // refilled per placement, its buffers kept.
    struct Instance {
        std::vector<int> experts;        // [K] replicated experts with tokens
        std::vector<int> holder_start;   // [K + 1] expert k's holders: holders[holder_start[k] .. holder_start[k+1])
        std::vector<int> holders;        // devices, ascending per expert
        std::vector<int> holder_arc;     // [holders] the max-flow arc expert -> holder
        std::vector<double> share;       // [holders] fractional tokens on each holder
        std::vector<int64_t> load;       // [K] w_e
        std::vector<double> fixed;       // [D] h0: tokens of one-holder experts on their owner
        std::vector<int> replica_flags;  // [E] replica flags of each expert (LayerFlow::replica_holders)
        double total = 0;                // W = sum of load
    };
    const int64_t* counts_ = nullptr;
    int D_ = 0, E_ = 0;
    bool several_nodes_ = false;      // the cluster has more than one node: the start can keep tokens in their node
    bool near_start_ = false;         // set_near_start
    double slack_ = 0;                // set_slack
    std::vector<int64_t> by_expert_;  // [E*D] counts transposed: expert e's tokens from each source, contiguous
    // A source's distance row (0 same NVLink domain, 1 same node, 2 elsewhere) as device ranges (near_ranges).
    // Sources with the same row take a replicated expert's holders in the same order: source s is in class
    // source_class_[s], classes in the order of their first source.
    struct NearRanges {
        int domain_lo, domain_hi, node_lo, node_hi;
        bool operator==(const NearRanges&) const = default;
    };
    std::vector<int> source_class_;       // [D]
    std::vector<NearRanges> class_near_;  // [classes]
    static NearRanges near_ranges(const uint8_t* row, int D);
    // One replicated expert's holders in a class's order as index ranges [lo[i], hi[i]) of its (ascending)
    // holders: distance 0, 1 (two ranges), 2 (two ranges); the first kNodeSegments are inside the source's node.
    static constexpr int kSegments = 5, kNodeSegments = 3;
    struct Segments {
        int lo[kSegments], hi[kSegments];
    };
    std::vector<Segments> class_segments_;  // [K * classes], built once per placement (build_class_segments)
    struct Cursor {                         // the fill's place in one class's order
        int segment, j;
    };
    std::vector<int64_t> load_;  // [E] tokens per expert
    int64_t total_ = 0;
    std::vector<int> base_owner_;  // the owners base_ is for
    // route [D*D] of every expert's tokens to its owner in base_owner_, computed, received, sent; between calls of
    // totals() it also carries that placement's changes (applied_)
    LayerFlow base_;
    std::vector<int64_t> route_by_dst_;  // [D*D] scratch of update_base: route transposed
    std::vector<uint8_t> written_;       // [D] scratch of update_base: route_by_dst_'s row is written
    std::vector<SplitPart> applied_;     // (src, -, dst, tokens) route changes made to base_ by the last totals()
    std::vector<std::pair<int, int>> removed_;  // (expert, owner) owner-rule routes the last totals() took off
    Instance in_;
    Placement instance_of_;          // the placement in_ and class_segments_ are for (none: num_devices 0)
    double first_level_ = 0;         // its search's level before any slack (raise_until_feasible's first result)
    bool first_level_near_ = false;  // ... found with the near start on
    bool first_level_known_ = false;
    MaxFlow max_flow_{0};
    std::vector<int64_t> quota_, left_;  // scratch of the token fill
    std::vector<Cursor> cursor_;         // [classes] the fill's first holder of each class's order with quota left
    std::vector<double> rest_;           // scratch of the rounding
    std::vector<int> order_;
    std::vector<char> holds_any_;  // scratch of least_max_computed: [D] the device holds a replicated expert
    std::vector<int> device_arc_;  // [D] its max-flow arc to the sink
    std::vector<SplitPart> parts_;
    void update_base(const std::vector<int>& owner);
    void apply(int src, int dst, int64_t tokens);
    void owner_route(int expert, int owner, int64_t sign);
    void fill_instance(const Placement& placement);
    static constexpr int source_node = 0, sink_node = 1;  // of the max-flow network; experts from 2, then devices
    // scratch of the start: [D] what it leaves under T, [holders] its tokens, [D] a holder's own tokens it left
    // (-1: not a holder of the expert being started)
    std::vector<double> room_, started_, own_left_;
    void start_network(double t, const std::vector<char>& holds_any, std::vector<int>& device_arc);
    void start_near(int k, double& started);
    double least_max_computed(int* solves);
    double raise_until_feasible(double t, const std::vector<char>& holds_any, const std::vector<int>& device_arc,
                                int* solves);
    void build_class_segments();
    const Segments& class_segments(int k, int c) const;
    void fill_groups(int k, std::vector<SplitPart>& parts);
    const std::vector<SplitPart>& parts(const Placement& placement, FastSplitReport* report);
};

// One placement: FastSplitter(counts, ...).split(placement, report).
LayerFlow fast_split_layer(const int64_t* counts, int num_devices, int num_experts, const Placement& placement,
                           const ClusterSpec* cluster, FastSplitReport* report = nullptr);

// Largest remainder: integers summing to `total` closest to the fractional shares x[0..n) (ties: lower index).
std::vector<int64_t> round_shares(const double* x, int n, int64_t total);

}  // namespace prophet
