// policies.cpp: the per-layer policies (static, fastermoe, prophet, broadcast-top-n, exhaustive).
// Offline policies live in policy_eplb.cpp and policy_moetuner.cpp.
#include "balance/policies.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace prophet {
namespace {

// Replicates expert e onto `holders` in an owner-rule flow, updating H, R, sent and route in O(|holders|)
// instead of recomputing the flow (what lets the greedy plan E = 256, D = 64 in milliseconds).
void replicate_owner_rule(LayerFlow& flow, Placement& placement, const int64_t* counts, int e,
                          const std::vector<int>& holders) {
    const int D = flow.num_devices;
    const int E = flow.num_experts;
    const int o = placement.owner[e];
    for (int h : holders) {
        if (placement.holds(e, h)) continue;
        const int64_t n = counts[static_cast<size_t>(h) * E + e];
        placement.add_replica(e, h);
        flow.replica_holders[e] += 1;
        flow.destination[static_cast<size_t>(h) * E + e] = h;
        flow.computed[h] += n;
        flow.computed[o] -= n;
        flow.sent[h] -= n;
        flow.received[o] -= n;
        flow.route[static_cast<size_t>(h) * D + o] -= n;
        flow.route[static_cast<size_t>(h) * D + h] += n;
    }
}

void replicate(LayerFlow& flow, Placement& placement, const int64_t* counts, int e, const std::vector<int>& holders,
               RouteRule rule, const CostModel& cost) {
    if (rule == RouteRule::kOwner) {
        replicate_owner_rule(flow, placement, counts, e, holders);
        return;
    }
    for (int h : holders) placement.add_replica(e, h);
    flow = compute_flow(counts, flow.num_devices, flow.num_experts, placement, rule, &cost);  // kFlow: priced
}

// [E] tokens routed to each expert, summed over devices
std::vector<int64_t> expert_loads(const int64_t* counts, int D, int E) {
    std::vector<int64_t> load(E, 0);
    for (int d = 0; d < D; ++d)
        for (int e = 0; e < E; ++e) load[e] += counts[static_cast<size_t>(d) * E + e];
    return load;
}

// expert indices by descending load, ties to the lower index
std::vector<int> experts_by_load(const std::vector<int64_t>& load) {
    std::vector<int> order(load.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return load[a] > load[b]; });
    return order;
}

int argmax(const std::vector<int64_t>& v) {
    return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());  // first of ties
}

// DeepSpeed's capacity of device d, ceil(k * S_local / E * cf) token slots per expert: k * S_local is the device's
// token-expert assignments, the sum of its row of counts [D*E]
int64_t device_capacity(const int64_t* counts, int d, int E, double capacity_factor) {
    int64_t assignments = 0;
    for (int e = 0; e < E; ++e) assignments += counts[static_cast<size_t>(d) * E + e];
    return static_cast<int64_t>(std::ceil(static_cast<double>(assignments) / E * capacity_factor));
}

// T' (balance.cost_eq) of placement p for the layer counts [D*E], its flow computed afresh
double placement_cost(const int64_t* counts, const Placement& p, const CostModel& cost, const BalanceOptions& options) {
    const LayerFlow flow = compute_flow(counts, p.num_devices, p.num_experts, p, options.route_rule, &cost);
    return layer_cost(predict_layer(cost, flow, p), options.cost_eq);
}

// [D] each device's owned experts in index order
std::vector<std::vector<int>> experts_owned_by(const Placement& placement) {
    std::vector<std::vector<int>> owned_by(placement.num_devices);
    for (int e = 0; e < placement.num_experts; ++e) owned_by[placement.owner[e]].push_back(e);
    return owned_by;
}

// The device Algorithm 1 picks next: the one computing the most tokens (first of ties), counted in times_picked
// [D]; -1 when the devices are balanced (Eq 7: max - min computed < threshold tokens) or the device repeats (was
// picked as often as it owns experts, owned_by [D][its experts]).
int next_heavy_device(const LayerFlow& flow, double threshold, const std::vector<std::vector<int>>& owned_by,
                      std::vector<int>& times_picked) {
    const int64_t h_max = *std::max_element(flow.computed.begin(), flow.computed.end());
    const int64_t h_min = *std::min_element(flow.computed.begin(), flow.computed.end());
    if (static_cast<double>(h_max - h_min) < threshold) return -1;
    const int heavy = argmax(flow.computed);
    if (times_picked[heavy] >= static_cast<int>(owned_by[heavy].size())) return -1;
    ++times_picked[heavy];
    return heavy;
}

// the static placement plus the replicas of the first `keep` chosen experts (chosen_holders: each one's holders)
Placement prefix_placement(int D, int E, const std::vector<int>& chosen,
                           const std::vector<std::vector<int>>& chosen_holders, int keep) {
    Placement result = Placement::make_static(D, E);
    for (int i = 0; i < keep; ++i)
        for (int d : chosen_holders[i]) result.add_replica(chosen[i], d);
    return result;
}

// The heaviest device's unchosen expert with the most tokens (-1: none left). An unchosen expert has no replicas
// yet, so all of its tokens are computed on its owner. owned [experts of the device], load [E] tokens per expert.
int prophet_candidate(const std::vector<int>& owned, const std::vector<uint8_t>& is_chosen,
                      const std::vector<int64_t>& load) {
    int candidate = -1;
    for (int e : owned)
        if (!is_chosen[e] && (candidate < 0 || load[e] > load[candidate])) candidate = e;
    return candidate;
}

// BottomK: the candidate's replica holders in device order: every non-owner device except the n holding the
// fewest of its tokens (n = balance.exclude_devices, or < 0: those holding none) and devices at the replica cap.
// replicas_held [D] replicas per device so far; others: scratch reused across steps.
std::vector<int> bottom_k_holders(const int64_t* counts, int D, int E, int candidate, int owner,
                                  const BalanceOptions& options, const std::vector<int>& replicas_held,
                                  std::vector<int>& others) {
    others.clear();
    for (int d = 0; d < D; ++d)
        if (d != owner) others.push_back(d);
    std::stable_sort(others.begin(), others.end(), [&](int a, int b) {
        return counts[static_cast<size_t>(a) * E + candidate] < counts[static_cast<size_t>(b) * E + candidate];
    });
    size_t num_excluded = 0;
    if (options.exclude_devices >= 0) {
        num_excluded = std::min<size_t>(options.exclude_devices, others.size());
    } else {
        while (num_excluded < others.size() && counts[static_cast<size_t>(others[num_excluded]) * E + candidate] == 0)
            ++num_excluded;
    }
    std::vector<int> holders;
    for (size_t i = num_excluded; i < others.size(); ++i) {
        const int d = others[i];
        if (options.max_replicas_per_device > 0 && replicas_held[d] >= options.max_replicas_per_device) continue;
        holders.push_back(d);
    }
    std::sort(holders.begin(), holders.end());
    return holders;
}

}  // namespace

Placement plan_static(int num_devices, int num_experts) { return Placement::make_static(num_devices, num_experts); }

int64_t static_dropped_tokens(const int64_t* counts, int num_devices, int num_experts, double capacity_factor) {
    if (capacity_factor <= 0) return 0;
    int64_t dropped = 0;
    for (int d = 0; d < num_devices; ++d) {
        const int64_t capacity = device_capacity(counts, d, num_experts, capacity_factor);
        for (int e = 0; e < num_experts; ++e)
            dropped += std::max<int64_t>(0, counts[static_cast<size_t>(d) * num_experts + e] - capacity);
    }
    return dropped;
}

std::vector<int64_t> deepspeed_dispatch_counts(const int64_t* counts, int num_devices, int num_experts,
                                               double capacity_factor, int64_t* dropped) {
    const int D = num_devices, E = num_experts;
    std::vector<int64_t> padded(static_cast<size_t>(D) * E);
    int64_t lost = 0;
    int64_t largest = 0;
    for (size_t i = 0; i < padded.size(); ++i) largest = std::max(largest, counts[i]);
    for (int d = 0; d < D; ++d) {
        const int64_t capacity = capacity_factor > 0 ? device_capacity(counts, d, E, capacity_factor) : largest;
        for (int e = 0; e < E; ++e) {
            const int64_t n = counts[static_cast<size_t>(d) * E + e];
            lost += std::max<int64_t>(0, n - capacity);
            padded[static_cast<size_t>(d) * E + e] = capacity;
        }
    }
    if (dropped) *dropped = lost;
    return padded;
}

Placement plan_broadcast_top(const int64_t* counts, int num_devices, int num_experts, int top_n) {
    const int D = num_devices;
    const int E = num_experts;
    const std::vector<int64_t> load = expert_loads(counts, D, E);
    const std::vector<int> order = experts_by_load(load);
    Placement p = Placement::make_static(D, E);
    for (int i = 0; i < std::min(top_n, E); ++i)
        for (int d = 0; d < D; ++d) p.add_replica(order[i], d);
    return p;
}

Placement plan_fastermoe(const int64_t* counts, int num_devices, int num_experts, const CostModel& cost,
                         const BalanceOptions& options) {
    // FasterMoE's SelectShadowExperts: walk experts by descending global load; shadow each to every device while
    // the modelled latency (Eq 6: no overlap of the broadcast) keeps falling; stop at the first rise.
    const int D = num_devices;
    const int E = num_experts;
    const std::vector<int64_t> load = expert_loads(counts, D, E);
    const std::vector<int> order = experts_by_load(load);

    Placement placement = Placement::make_static(D, E);
    LayerFlow flow = compute_flow(counts, D, E, placement, options.route_rule, &cost);
    double best = predict_layer(cost, flow, placement).eq6_s;
    std::vector<int> everyone(D);
    std::iota(everyone.begin(), everyone.end(), 0);
    for (int e : order) {
        if (load[e] == 0) break;
        Placement trial = placement;
        LayerFlow trial_flow = flow;
        replicate(trial_flow, trial, counts, e, everyone, options.route_rule, cost);
        if (options.max_replicas_per_device > 0 && !check_placement(trial, options.max_replicas_per_device).empty())
            break;
        const double lat = predict_layer(cost, trial_flow, trial).eq6_s;
        if (!(lat < best)) break;
        best = lat;
        placement = std::move(trial);
        flow = std::move(trial_flow);
    }
    return placement;
}

Placement plan_prophet(const int64_t* counts, int num_devices, int num_experts, const CostModel& cost,
                       const BalanceOptions& options, ProphetTrace* trace) {
    // Algorithm 1 at expert granularity. With E = D it is the paper's loop exactly (the heaviest device's
    // expert, replicas to all devices but the n holding the fewest of its tokens, stop when balanced or when a
    // device repeats). With E > D the candidate is the heaviest device's unchosen expert with the most tokens
    // computed there, and a device may be picked as many times as it owns experts.
    const int D = num_devices, E = num_experts;
    Placement placement = Placement::make_static(D, E);
    LayerFlow flow = compute_flow(counts, D, E, placement, options.route_rule, &cost);
    const double threshold = options.alpha * static_cast<double>(flow.total_tokens) / E;  // Eq 7: alpha * I / E
    const std::vector<int64_t> load = expert_loads(counts, D, E);  // [E]

    const double cost_static = layer_cost(predict_layer(cost, flow, placement), options.cost_eq);
    double best_cost = cost_static;
    int best_prefix = 0;
    int improvements = 0;

    std::vector<int> chosen;                      // experts in the order picked
    std::vector<std::vector<int>> chosen_holders;  // their replica holders
    std::vector<uint8_t> is_chosen(E, 0);
    std::vector<int> times_picked(D, 0);
    // [D] each device's owned experts in index order (owners never move here), so a step scans E/D experts
    const std::vector<std::vector<int>> owned_by = experts_owned_by(placement);
    std::vector<int> replicas_held(D, 0);
    std::vector<int> others;  // reused across steps: the candidate's non-owner devices
    others.reserve(D);

    while (true) {
        const int heavy = next_heavy_device(flow, threshold, owned_by, times_picked);
        if (heavy < 0) break;
        const int candidate = prophet_candidate(owned_by[heavy], is_chosen, load);
        if (candidate < 0) break;
        is_chosen[candidate] = 1;
        const std::vector<int> holders =
            bottom_k_holders(counts, D, E, candidate, placement.owner[candidate], options, replicas_held, others);
        for (int d : holders) ++replicas_held[d];
        chosen.push_back(candidate);
        chosen_holders.push_back(holders);
        replicate(flow, placement, counts, candidate, holders, options.route_rule, cost);

        const double c = layer_cost(predict_layer(cost, flow, placement), options.cost_eq);
        if (c < best_cost) {
            best_cost = c;
            best_prefix = static_cast<int>(chosen.size());
            ++improvements;
        }
    }

    const int keep = options.prefix_rule == "improvements" ? improvements : best_prefix;
    Placement result = prefix_placement(D, E, chosen, chosen_holders, keep);
    if (trace) {
        trace->steps = static_cast<int>(chosen.size());  // every step chose one expert
        trace->chosen_prefix = keep;
        trace->cost_before_s = cost_static;
        trace->cost_after_s = placement_cost(counts, result, cost, options);
    }
    return result;
}

Placement plan_exhaustive(const int64_t* counts, int num_devices, int num_experts, const CostModel& cost,
                          const BalanceOptions& options) {
    const int D = num_devices;
    const int E = num_experts;
    const int bits_per_expert = D - 1;  // every non-owner device may or may not hold a replica
    const int total_bits = bits_per_expert * E;
    if (total_bits > 22)
        throw_config_error("balance.policy", "exhaustive",
                           "enumerates 2^((D-1)*E) placements; D = " + std::to_string(D) + ", E = " +
                               std::to_string(E) + " gives 2^" + std::to_string(total_bits) + " (limit 2^22)",
                           "use it on tiny instances only (e.g. D = E = 4)");
    const Placement base = Placement::make_static(D, E);
    Placement best = base;
    double best_cost = std::numeric_limits<double>::infinity();
    for (uint64_t mask = 0; mask < (uint64_t(1) << total_bits); ++mask) {
        Placement p = base;
        for (int e = 0; e < E; ++e) {
            int bit = 0;
            for (int d = 0; d < D; ++d) {
                if (d == base.owner[e]) continue;
                if (mask >> (e * bits_per_expert + bit) & 1) p.add_replica(e, d);
                ++bit;
            }
        }
        if (options.max_replicas_per_device > 0 && !check_placement(p, options.max_replicas_per_device).empty())
            continue;
        const double c = placement_cost(counts, p, cost, options);
        if (c < best_cost) {  // strict: ties keep the earlier (fewer-replica-first) mask
            best_cost = c;
            best = std::move(p);
        }
    }
    return best;
}

}  // namespace prophet
