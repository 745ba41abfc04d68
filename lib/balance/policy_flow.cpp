// policy_flow.cpp: flow's candidate placements, their scoring, the transfer gate and the planning load.
#include "balance/policy_flow.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "balance/flow_chain_trim.h"
#include "balance/flow_extra_copies.h"
#include "balance/flow_hotset.h"
#include "balance/flow_repack.h"
#include "balance/flow_split.h"
#include "balance/moves.h"
#include "core/error.h"

namespace prophet {
namespace {

std::vector<double> loads_of(const int64_t* counts, int D, int E) {
    std::vector<double> load(E, 0.0);
    for (int d = 0; d < D; ++d)
        for (int e = 0; e < E; ++e) load[e] += static_cast<double>(counts[static_cast<size_t>(d) * E + e]);
    return load;
}

// EPLB's replication order, produced as far as it is asked for: each extra copy to argmax load / copies (ties:
// lower index), at most D copies per expert, experts without load never. O(log E) per copy (a heap), so a walk
// that stops early never pays for the copies it does not reach.
class CopyOrder {
  public:
    CopyOrder(const std::vector<double>& load, int D) : load_(load), copies_(load.size(), 1), D_(D) {
        for (int e = 0; e < static_cast<int>(load.size()); ++e)
            if (load[e] > 0 && D > 1) heap_.push_back(e);
        std::make_heap(heap_.begin(), heap_.end(), less_);
    }
    CopyOrder(const CopyOrder&) = delete;  // less_ points at this object
    CopyOrder& operator=(const CopyOrder&) = delete;
    // the expert of extra copy i (i < available())
    int operator[](int i) {
        while (static_cast<int>(order_.size()) <= i) {
            PROPHET_ASSERT(!heap_.empty());
            std::pop_heap(heap_.begin(), heap_.end(), less_);
            const int e = heap_.back();
            order_.push_back(e);
            if (++copies_[e] < D_)
                std::push_heap(heap_.begin(), heap_.end(), less_);
            else
                heap_.pop_back();
        }
        return order_[i];
    }
    // the most extra copies there can be
    int available() const {
        int n = 0;
        for (double w : load_) n += w > 0 ? D_ - 1 : 0;
        return n;
    }

  private:
    const std::vector<double>& load_;
    std::vector<int> copies_, heap_, order_;
    int D_;
    // heap order: larger load / copies first, ties to the lower index
    std::function<bool(int, int)> less_ = [this](int a, int b) {
        const double wa = load_[a] / copies_[a], wb = load_[b] / copies_[b];
        return wa < wb || (wa == wb && a > b);
    };
};

// The anchored family, grown one copy at a time: owners fixed, est[d] = sum over held copies of load / copies.
struct Anchored {
    Placement placement;
    std::vector<double> est;            // [D]
    std::vector<int> copies, replicas;  // [E], [D]
    bool local = false;                 // place by the most tokens sent (else by the lightest estimated load)

    Anchored(const Placement& owners, const std::vector<double>& load, bool by_tokens)
        : placement(Placement::make_owners(owners.num_devices, owners.owner)), est(owners.num_devices, 0.0),
          copies(owners.num_experts, 1), replicas(owners.num_devices, 0), local(by_tokens) {
        for (int e = 0; e < owners.num_experts; ++e) est[owners.owner[e]] += load[e];
    }

    // cl: the link classes of the nearness tie-break (nullptr: none, balance.flow_topology = false)
    int pick(int e, const int64_t* counts, const ClusterSpec* cl, int cap) const {
        const int D = placement.num_devices, E = placement.num_experts, owner = placement.owner[e];
        double lightest = std::numeric_limits<double>::infinity();
        for (int d = 0; d < D; ++d)
            if (!placement.holds(e, d) && (cap <= 0 || replicas[d] < cap)) lightest = std::min(lightest, est[d]);
        int best = -1;
        auto near = [&](int d) {  // 2: the owner's NVLink domain, 1: its node, 0: elsewhere (or no cluster)
            if (!cl) return 0;
            const ClusterSpec::LinkClass c = cl->link_class(owner, d);
            return c == ClusterSpec::LinkClass::kNvlink ? 2 : c == ClusterSpec::LinkClass::kIntraNode ? 1 : 0;
        };
        for (int d = 0; d < D; ++d) {
            if (placement.holds(e, d) || (cap > 0 && replicas[d] >= cap)) continue;
            if (best < 0) {
                best = d;
                continue;
            }
            if (local) {
                const int64_t a = counts[static_cast<size_t>(d) * E + e], b = counts[static_cast<size_t>(best) * E + e];
                if (a > b || (a == b && est[d] < est[best])) best = d;
                continue;
            }
            // within 2% of the lightest: the nearer device (cheaper Trans / Agg and all-to-all), then the lighter
            const double slack = lightest * 1.02 + 1e-9;
            const bool in_d = est[d] <= slack, in_best = est[best] <= slack;
            if (in_d != in_best) {
                if (in_d) best = d;
                continue;
            }
            if (in_d && near(d) != near(best)) {
                if (near(d) > near(best)) best = d;
                continue;
            }
            if (est[d] < est[best]) best = d;
        }
        return best;
    }

    void add_copy(int e, int d, const std::vector<double>& load) {
        const int D = placement.num_devices;
        const double before = load[e] / copies[e], after = load[e] / (copies[e] + 1);
        for (int h = 0; h < D; ++h)
            if (placement.holds(e, h)) est[h] -= before - after;
        placement.add_replica(e, d);
        est[d] += after;
        ++copies[e];
        ++replicas[d];
    }
};

// The repacked family's candidate with the first `extra` copies of order (flow_repack.h: every copy packed, bins
// relabelled to the devices of fewest weight moves against the current placement).
Placement repacked(CopyOrder& order, int extra, int num_experts, Repacker& repacker) {
    std::vector<int> copies(num_experts, 1);
    for (int i = 0; i < extra; ++i) ++copies[order[i]];
    return repacker.pack(copies);
}

// 0, 1, 2, 3, 4, 6, 8, 12, 16, 24, ... up to limit
std::vector<int> replica_schedule(int limit) {
    std::vector<int> r;
    for (int v = 0; v <= limit;) {
        r.push_back(v);
        v = v < 4 ? v + 1 : (v & (v - 1)) == 0 ? v + v / 2 : (v / 3) * 4;
    }
    if (r.back() != limit) r.push_back(limit);
    return r;
}

// seconds to copy in, once, the expert weights `next` holds that `current` does not (Eq 4's rate:
// bytes / (D * B_trans))
double one_off_transfer_s(const Placement& next, const Placement& current, const CostModel& cost) {
    const int D = current.num_devices, E = current.num_experts;
    int added = 0;
    for (int e = 0; e < E; ++e)
        for (int d = 0; d < D; ++d) added += next.holds(e, d) && !current.holds(e, d);
    return added * cost.expert_bytes() / (D * cost.cluster.trans_bytes_per_s * cost.bandwidth_scale);
}

// An owner move's charge against one candidate's time: price_owner_moves (training: weights and AdamW state, as
// the columns charge it in the iteration it happens) amortised over the batches the placement is expected to last,
// balance.flow_horizon when set, else the one iteration flow plans for.
double owner_move_charge_s(const Placement& next, const Placement& current, const CostModel& cost,
                           const BalanceOptions& o) {
    const double move_s = price_owner_moves(cost, current, next, kTrainingStateCopies).seconds;
    return move_s / std::max(1, o.flow_horizon);
}

// CandidateScore::at_best_level runs below 1.1 x the best time so far (levels gained 2-4% per hot-set candidate
// on a sampled DeepSeek-V3-scale layer; candidates further off did not win)
constexpr double kLevelSearchMargin = 1.1;

// A candidate's predicted time on the planning counts P. Under the routing LP (kFlow) or the max-flow router
// (kMaxFlow) with kFastSplit, candidates are compared with the combinatorial split (flow_split.h: the compute-optimal
// split, locality first; the batch itself is then routed by the rule); otherwise under the run's routing rule
// itself. `cost` is the planning model (flat under balance.flow_topology = false, whose split then takes sources in
// device order); without balance.flow_transfer_aware the time leaves out Trans/Agg (4 T_A2A + 3 T_FEC under either
// equation).
class CandidateScore {
  public:
    CandidateScore(const int64_t* P, int D, int E, const CostModel& cost, const BalanceOptions& o, FlowScoring scoring,
                   FastSplitter& splitter)
        : P_(P), D_(D), E_(E), cost_(cost), o_(o),
          fast_(solves_split_per_batch(o.route_rule) && scoring == FlowScoring::kFastSplit), splitter_(splitter) {
        splitter_.reset(P, D, E, o.flow_topology ? &cost.cluster : nullptr);
    }
    // near: a hot-set candidate, split with the node-local start (FastSplitter::set_near_start), and where its
    // compute-optimal split predicts less than search_below, at the best of a few compute levels (at_best_level)
    double operator()(const Placement& p, bool near = false, double search_below = 0) {
        splitter_.set_near_start(near);
        if (fast_ && near) return at_best_level(p, search_below);
        LayerFlow routed;  // under the run's routing rule; the split is the splitter's own buffer (no copy)
        const LayerFlow& flow =
            fast_ ? splitter_.totals(p) : (routed = compute_flow(P_, D_, E_, p, o_.route_rule, &cost_));
        return of(predict_layer(cost_, flow, p));
    }

  private:
    double of(const CostBreakdown& c) const {
        return o_.flow_transfer_aware ? layer_cost(c, o_.cost_eq) : c.eq6_s - c.trans_s - c.agg_s;
    }
    double at_level(const Placement& p, double slack) {
        splitter_.set_slack(slack);
        const double s = of(predict_layer(cost_, splitter_.totals(p), p));
        splitter_.set_slack(0);
        return s;
    }
    // The split at compute levels T*(1 + slack) (FastSplitter::set_slack), the least predicted time: slack 0 and
    // 0.1, then 0.2 and 0.4 while the time falls, or 0.05 where 0.1 did not help. The routing LP trades compute
    // for all-to-all; the compute optimum alone overstated the hot-set candidates' all-to-all on a DeepSeek-V3-scale
    // layer by 6-18% against the LP's (docs/policies.md, flow item 3).
    double at_best_level(const Placement& p, double search_below) {
        const double even = at_level(p, 0.0);
        if (even >= search_below) return even;
        const double tenth = at_level(p, 0.1);
        if (tenth >= even) return std::min(even, at_level(p, 0.05));
        double best = tenth;
        for (double slack : {0.2, 0.4}) {
            const double s = at_level(p, slack);
            if (s >= best) break;
            best = s;
        }
        return best;
    }

    const int64_t* P_;
    int D_, E_;
    const CostModel& cost_;
    const BalanceOptions& o_;
    bool fast_;
    FastSplitter& splitter_;
};

// The repacked family (owners may move; the relabelling keeps as many weights in place as it can) along the
// schedule, each candidate within the cap scored by consider(placement, replicas, /*packed=*/true); stops after two
// rises in a row.
template <class Consider>
void walk_repacked(const std::vector<double>& load, const Placement& current, CopyOrder& order,
                   const std::vector<int>& schedule, int cap, Consider&& consider) {
    double previous = std::numeric_limits<double>::infinity();
    Repacker repacker(load, current);
    for (size_t i = 0, rises = 0; i < schedule.size() && rises < 2; ++i) {
        const Placement p = repacked(order, schedule[i], current.num_experts, repacker);
        if (cap > 0 && repacker.most_replicas() > cap) continue;
        const double s = consider(p, schedule[i], true);
        rises = s >= previous ? rises + 1 : 0;
        previous = s;
    }
}

// One anchored family (owners stay; `local`: copies go to the device sending the expert the most tokens) grown
// along the schedule from R = 0 (scored at start_s), each candidate scored by consider(placement, replicas,
// /*packed=*/false); stops after two rises in a row.
template <class Consider>
void walk_anchored(const int64_t* P, const std::vector<double>& load, const Placement& current, CopyOrder& order,
                   const std::vector<int>& schedule, int cap, const ClusterSpec* near, bool local, double start_s,
                   Consider&& consider) {
    Anchored grow(current, load, local);
    double previous = start_s;
    int rises = 0, placed = 0;
    for (size_t i = 1; i < schedule.size() && rises < 2; ++i) {
        for (; placed < schedule[i]; ++placed) {
            const int d = grow.pick(order[placed], P, near, cap);
            if (d >= 0) grow.add_copy(order[placed], d, load);
        }
        const double s = consider(grow.placement, schedule[i], false);
        rises = s >= previous ? rises + 1 : 0;
        previous = s;
    }
}

// The cluster whose NICs the extra-copy pass relieves (flow_extra_copies.h), or none: it needs the links, and pays
// where one NIC serves a node (at DeepSeek-V3 scale, a rail NIC per GPU and a star broadcast, it gained 0.3% of the
// Sim time for 12% more planning time)
const ClusterSpec* nic_relief_cluster(const CostModel& cost, const BalanceOptions& o) {
    return o.flow_topology && cost.topology_aware && cost.cluster.nics_per_node == 1 ? &cost.cluster : nullptr;
}

// flow's candidate families (policy_flow.h) along EPLB's copy order, each candidate scored by
// consider(placement, replicas, packed, hot); best_s: the best time so far, which consider lowers (each anchored
// walk's rises count from it as it stands when the walk starts)
template <class Consider>
void walk_families(const int64_t* P, const std::vector<double>& load, const Placement& current, const CostModel& cost,
                   const BalanceOptions& o, const double& best_s, Consider&& consider) {
    const int cap = o.max_replicas_per_device;
    CopyOrder order(load, current.num_devices);
    const int limit = cap > 0 ? std::min(cap * current.num_devices, order.available()) : order.available();
    const std::vector<int> schedule = replica_schedule(limit);
    const ClusterSpec* near = o.flow_topology ? &cost.cluster : nullptr;
    for (bool local : {false, true})
        walk_anchored(P, load, current, order, schedule, cap, near, local, best_s, consider);
    walk_repacked(load, current, order, schedule, cap, consider);
    if (o.flow_hot_sets && o.flow_topology && cost.topology_aware)  // hottest experts in every node (flow_hotset.h)
        walk_hot_sets(P, load, current, cost, cap,
                      [&](const Placement& p, int h) { return consider(p, p.num_replicas(), true, h); });
}

}  // namespace

Placement plan_flow(const int64_t* P, int D, int E, const CostModel& cost, const BalanceOptions& o,
                    const Placement& current, FlowPlanReport* report, FlowScoring scoring, FlowScratch* scratch) {
    PROPHET_ASSERT(current.num_devices == D && current.num_experts == E);
    const std::vector<double> load = loads_of(P, D, E);
    CostModel flat;  // balance.flow_topology = false: the planning model without the topology
    if (!o.flow_topology) flat = cost, flat.topology_aware = false;
    FlowScratch own;
    CandidateScore score(P, D, E, o.flow_topology ? cost : flat, o, scoring,
                         scratch ? scratch->splitter : own.splitter);
    FlowPlanReport rep;
    Placement best = Placement::make_owners(D, current.owner);
    double best_s = score(best);
    int best_r = 0;
    ++rep.candidates;
    double best_move_s = 0;                                                     // the owner-move charge inside best_s
    auto consider = [&](const Placement& p, int r, bool packed, int hot = 0) {  // hot: a hot-set candidate's h
        ++rep.candidates;
        // anchored candidates keep their owners; transfer-unaware flow (ablation) sees no move cost
        const double move_s = packed && o.flow_transfer_aware ? owner_move_charge_s(p, current, cost, o) : 0.0;
        // hot-set candidates' compute levels are searched only near the best so far (CandidateScore)
        const double s = score(p, hot > 0, best_s * kLevelSearchMargin) + move_s;
        if (s < best_s)
            best = p, best_s = s, best_r = r, rep.repacked = packed, best_move_s = move_s, rep.hot_experts = hot;
        return s;
    };
    walk_families(P, load, current, cost, o, best_s, consider);
    bool refined = false;  // the last refinement of the best (a trim, an extra copy) became the best
    auto refine = [&, packed = rep.repacked, hot = rep.hot_experts](const Placement& p) {
        const double before = best_s, s = consider(p, p.num_replicas(), packed, hot);
        refined = best_s < before;
        return s;
    };
    if (o.flow_transfer_aware && o.flow_topology && cost.topology_aware)  // the chain's step (flow_chain_trim.h)
        walk_chain_trims(cost, load, Placement(best), [&](const Placement& p) {
            const double s = refine(p);
            if (refined) rep.chain_trim = chain_loads(cost, p).busiest();
            return s;
        });
    if (o.flow_transfer_aware && best.num_replicas() > 0)  // transfer-unaware, every copy would look free
        add_extra_copies(P, load, best, o.max_replicas_per_device, o.flow_extra_copy_rounds,
                         nic_relief_cluster(cost, o), [&](const Placement& p) {
                             refine(p);
                             return refined;
                         });
    // transfer gate (serving, flow_horizon > 0): keep the current placement unless the gain over the horizon pays
    // for the one-off transfer of the weights the new placement adds (Eq 4's rate: bytes / (D * B_trans))
    if (o.flow_horizon > 0 && o.flow_transfer_aware) {
        const double current_s = score(current);
        if ((current_s - (best_s - best_move_s)) * o.flow_horizon <=
            one_off_transfer_s(best, current, cost) + best_move_s * o.flow_horizon) {
            best = current, best_s = current_s, best_r = current.num_replicas(), rep.kept_current = true;
            rep.repacked = false, rep.hot_experts = 0, rep.chain_trim = 0;
        }
    }
    rep.replicas = best_r, rep.repacked = rep.repacked && rep.hot_experts == 0;  // a hot-set candidate is not repacked
    rep.predicted_s = best_s;
    if (report) *report = rep;
    return best;
}

}  // namespace prophet
