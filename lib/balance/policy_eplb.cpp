// policy_eplb.cpp: DeepSeek EPLB (replicate, then pack), written from its description, not copied.
//
// Per layer, from loads [E] summed over a profiling window:
//   replicate: S = E + R physical slots; every expert gets one, then each extra slot goes to the expert with
//              the largest load / copies (ties: lower expert index), never beyond one copy per device;
//   pack:      physical experts (weight load / copies) in descending weight go to the lightest device that
//              still has room (exactly S / D slots each) and does not already hold that expert (upstream EPLB
//              allows the duplicate, its issue #22). When every device with room holds it, one swap repairs
//              it (see pack_without_duplicates for the proof that the swap exists).
//   hierarchical: groups of E / groups consecutive experts are packed to nodes (equal group count per node),
//              then replicate with S / nodes slots and pack onto the node's devices, per node; replicas never
//              leave their node. Needs groups % nodes == 0, else it runs the global policy and says so.
// The first-packed copy of an expert is its owner; the others are replicas.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "balance/policies.h"
#include "core/error.h"

namespace prophet {

namespace {

// counts[i] physical copies of each of n items with loads w[i]: one each, then each of `slots - n` extra slots
// to argmax w / count among items with count < cap (ties: lower index). Optimal for min-max w / count.
std::vector<int> replicate(const std::vector<double>& w, int slots, int cap) {
    const int n = static_cast<int>(w.size());
    std::vector<int> count(n, 1);
    for (int extra = slots - n; extra > 0; --extra) {
        int best = -1;
        for (int i = 0; i < n; ++i) {
            if (count[i] >= cap) continue;
            if (best < 0 || w[i] / count[i] > w[best] / count[best]) best = i;
        }
        PROPHET_ASSERT_MSG(best >= 0, "EPLB replicate: more slots than items * cap (validated before)");
        ++count[best];
    }
    return count;
}

// Balanced packing with a cardinality constraint (EPLB's balanced_packing): items by descending weight (ties:
// lower index) to the lightest pack (ties: lower index) that has fewer than items / packs items.
// Returns pack[i].
std::vector<int> balanced_packing(const std::vector<double>& w, int num_packs) {
    const int n = static_cast<int>(w.size());
    PROPHET_ASSERT(num_packs > 0 && n % num_packs == 0);
    const int per_pack = n / num_packs;
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return w[a] > w[b]; });
    std::vector<double> load(num_packs, 0.0);
    std::vector<int> size(num_packs, 0), pack(n, -1);
    for (int i : order) {
        int best = -1;
        for (int p = 0; p < num_packs; ++p)
            if (size[p] < per_pack && (best < 0 || load[p] < load[best])) best = p;
        pack[i] = best;
        load[best] += w[i];
        ++size[best];
    }
    return pack;
}

struct Copy {
    int item;       // logical expert (local index within the packing call)
    int copy;       // 0 = first copy of the item
    double weight;  // load / copies
};

// The bins of one packing: each bin's load and items, and every copy's bin.
class PackBins {
  public:
    PackBins(const std::vector<int>& counts, int num_bins)
        : load_(num_bins, 0.0), items_(num_bins), bin_of_(counts.size()) {
        for (size_t i = 0; i < counts.size(); ++i) bin_of_[i].assign(counts[i], -1);
    }

    bool holds(int bin, int item) const {
        return std::find(items_[bin].begin(), items_[bin].end(), item) != items_[bin].end();
    }
    bool has_room(int bin, int slots_per_bin) const { return static_cast<int>(items_[bin].size()) < slots_per_bin; }
    double load(int bin) const { return load_[bin]; }
    const std::vector<int>& items(int bin) const { return items_[bin]; }
    int num_bins() const { return static_cast<int>(load_.size()); }
    std::vector<std::vector<int>>& bin_of() { return bin_of_; }

    void place(int bin, int item, int copy, double weight) {
        items_[bin].push_back(item);
        load_[bin] += weight;
        bin_of_[item][copy] = bin;
    }

    // moves item's copy (of weight w) from bin `from` to bin `to`
    void move(int item, double w, int from, int to) {
        auto& items = items_[from];
        items.erase(std::find(items.begin(), items.end(), item));
        load_[from] -= w;
        for (int& b : bin_of_[item])
            if (b == from) b = to;
        items_[to].push_back(item);
        load_[to] += w;
    }

  private:
    std::vector<double> load_;              // [bins] summed copy weights
    std::vector<std::vector<int>> items_;   // [bins] items held
    std::vector<std::vector<int>> bin_of_;  // [item][copy]
};

// the lightest bin (ties: lower index) with room that does not hold item; -1 when none
int lightest_free_bin(const PackBins& bins, int item, int slots_per_bin) {
    int best = -1;
    for (int b = 0; b < bins.num_bins(); ++b) {
        if (!bins.has_room(b, slots_per_bin) || bins.holds(b, item)) continue;
        if (best < 0 || bins.load(b) < bins.load(best)) best = b;
    }
    return best;
}

// The repair when every bin with room holds c's item: the lightest bin with room, and the full bin lacking the
// item whose item f (not in the room bin) moves there, minimising the larger of the two loads (ties: lower b,
// lower f); then c goes where f was.
void place_by_swap(PackBins& bins, const Copy& c, const std::vector<double>& w, const std::vector<int>& counts,
                   int slots_per_bin) {
    int room = -1;
    for (int b = 0; b < bins.num_bins(); ++b)
        if (bins.has_room(b, slots_per_bin) && (room < 0 || bins.load(b) < bins.load(room))) room = b;
    PROPHET_ASSERT_MSG(room >= 0, "EPLB pack: no bin has room although copies remain");
    int swap_bin = -1, swap_item = -1;
    double swap_cost = 0;
    for (int b = 0; b < bins.num_bins(); ++b) {
        if (b == room || bins.holds(b, c.item)) continue;
        for (int f : bins.items(b)) {
            if (bins.holds(room, f)) continue;
            const double wf = w[f] / counts[f];
            const double cost = std::max(bins.load(b) - wf + c.weight, bins.load(room) + wf);
            if (swap_bin < 0 || cost < swap_cost) {
                swap_bin = b;
                swap_item = f;
                swap_cost = cost;
            }
        }
    }
    PROPHET_ASSERT_MSG(swap_bin >= 0, "EPLB pack: the duplicate-repair swap must exist (see the proof above)");
    bins.move(swap_item, w[swap_item] / counts[swap_item], swap_bin, room);
    bins.place(swap_bin, c.item, c.copy, c.weight);
}

// Packs copies of items onto num_bins bins with exactly slots_per_bin copies each and no two copies of one item
// in one bin. counts[i] <= num_bins and sum(counts) == num_bins * slots_per_bin are the caller's preconditions.
// Returns bin_of[i][k] for copy k of item i.
//
// Copies go in descending weight (ties: item, then copy index) to the lightest bin (ties: lower index) that has
// room and does not hold the item. If every bin with room holds the item (bin r, say), a swap repairs it, and it
// always exists: the item has at most num_bins copies and one is still unplaced, so some bin b lacks it; b is
// full (otherwise it would qualify) with slots_per_bin distinct items; r has at most slots_per_bin - 1 items,
// one of which is the item (not in b), so at most slots_per_bin - 2 of b's items are also in r, leaving at least
// two items f of b not in r. Moving f's copy b -> r (r has room, lacks f) and placing the item on b keeps every
// bin duplicate-free. Each copy is placed once with at most one swap, so packing terminates after
// sum(counts) steps. The swap chosen minimises the larger of the two bins' loads (ties: lower b, lower f).
std::vector<std::vector<int>> pack_without_duplicates(const std::vector<double>& w, const std::vector<int>& counts,
                                                      int num_bins, int slots_per_bin, int* repairs) {
    const int n = static_cast<int>(w.size());
    std::vector<Copy> copies;
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < counts[i]; ++k) copies.push_back({i, k, w[i] / counts[i]});
    PROPHET_ASSERT(static_cast<int>(copies.size()) == num_bins * slots_per_bin);
    std::stable_sort(copies.begin(), copies.end(), [](const Copy& a, const Copy& b) { return a.weight > b.weight; });
    PackBins bins(counts, num_bins);
    for (const Copy& c : copies) {
        const int best = lightest_free_bin(bins, c.item, slots_per_bin);
        if (best >= 0) {
            bins.place(best, c.item, c.copy, c.weight);
            continue;
        }
        ++*repairs;
        place_by_swap(bins, c, w, counts, slots_per_bin);
    }
    return std::move(bins.bin_of());
}

void validate_eplb(const std::vector<double>& loads, int num_layers, int num_devices, int num_experts, int num_nodes,
                   const BalanceOptions& options, int redundant) {
    if (num_layers < 1 || num_devices < 1 || num_experts < 1)
        throw_config_error("model", "L=" + std::to_string(num_layers) + " D=" + std::to_string(num_devices) +
                                        " E=" + std::to_string(num_experts),
                           "eplb needs at least one layer, device and expert", "");
    if (loads.size() != static_cast<size_t>(num_layers) * num_experts)
        throw_config_error("eplb.loads", std::to_string(loads.size()) + " values",
                           "must hold L * E = " + std::to_string(static_cast<size_t>(num_layers) * num_experts),
                           "pass loads [L][E]");
    for (double v : loads)
        if (!std::isfinite(v) || v < 0)
            throw_config_error("eplb.loads", std::to_string(v), "loads must be finite and >= 0", "");
    // the value as the user gave it, or the default's resolved value named as such
    const std::string r = options.eplb_redundant_slots == -1
                              ? "-1 (the default, one per device: " + std::to_string(redundant) + ")"
                              : std::to_string(options.eplb_redundant_slots);
    if (redundant < 0)
        throw_config_error("balance.eplb_redundant_slots", r, "must be >= 0 or -1 (= D)", "");
    const int slots = num_experts + redundant;
    if (slots % num_devices != 0)
        throw_config_error("balance.eplb_redundant_slots", r,
                           "E + redundant slots = " + std::to_string(slots) + " must be a multiple of D = " +
                               std::to_string(num_devices),
                           "choose redundant slots so that E + slots divides evenly over the devices");
    if (static_cast<int64_t>(slots) > static_cast<int64_t>(num_experts) * num_devices)
        throw_config_error("balance.eplb_redundant_slots", r,
                           "more physical slots than E * D: some device would hold two copies of one expert",
                           "use at most E * (D - 1) redundant slots");
    if (options.eplb_mode != "global" && options.eplb_mode != "hierarchical")
        throw_config_error("balance.eplb_mode", options.eplb_mode, "must be global or hierarchical",
                           "--set balance.eplb_mode=global");
    if (options.eplb_mode == "hierarchical") {
        if (num_nodes < 1 || num_devices % num_nodes != 0)
            throw_config_error("cluster.devices_per_node", "nodes=" + std::to_string(num_nodes),
                               "D = " + std::to_string(num_devices) + " must be a multiple of the node count",
                               "use whole nodes");
        if (options.eplb_groups < 1 || num_experts % options.eplb_groups != 0)
            throw_config_error("balance.eplb_groups", std::to_string(options.eplb_groups),
                               "must be >= 1 and divide E = " + std::to_string(num_experts), "");
    }
}

}  // namespace

std::vector<double> even_split_device_loads(const Placement& placement, const double* layer_loads) {
    const int D = placement.num_devices;
    std::vector<double> per_device(D, 0.0);
    for (int e = 0; e < placement.num_experts; ++e) {
        const int holders = 1 + placement.num_replicas_of(e);
        for (int d = 0; d < D; ++d)
            if (placement.holds(e, d)) per_device[d] += layer_loads[e] / holders;
    }
    return per_device;
}

std::vector<Placement> plan_eplb(const std::vector<double>& loads, int num_layers, int num_devices, int num_experts,
                                 int num_nodes, const BalanceOptions& options) {
    return plan_eplb(loads, num_layers, num_devices, num_experts, num_nodes, options, nullptr);
}

namespace {

// How one EPLB plan divides the cluster: global (one node of D devices) or hierarchical (groups packed onto nodes,
// then experts within each node), and the physical slots.
struct EplbLayout {
    bool hierarchical = false;
    std::string note;          // why hierarchical fell back to global, or empty
    int slots = 0;             // S = E + redundant slots
    int slots_per_device = 0;  // S / D
    int nodes = 1;             // packing domains
    int devices_per_node = 0;
    int slots_per_node = 0;  // integral: S % D == 0 and D % nodes == 0
};

EplbLayout eplb_layout(int D, int E, int num_nodes, const BalanceOptions& options, int redundant) {
    EplbLayout out;
    out.slots = E + redundant;
    out.slots_per_device = out.slots / D;
    out.hierarchical = options.eplb_mode == "hierarchical";
    const int groups = options.eplb_groups;
    if (out.hierarchical && groups % num_nodes != 0) {
        out.hierarchical = false;
        out.note = "balance.eplb_groups = " + std::to_string(groups) + " is not a multiple of the node count " +
                   std::to_string(num_nodes) + ": ran the global policy";
    }
    out.nodes = out.hierarchical ? num_nodes : 1;
    out.devices_per_node = D / out.nodes;
    out.slots_per_node = out.slots / out.nodes;
    const int experts_per_node = E / out.nodes;  // integral: groups % nodes == 0 and E % groups == 0
    if (out.hierarchical && out.slots_per_node > experts_per_node * out.devices_per_node)
        throw_config_error(
            "balance.eplb_redundant_slots", std::to_string(redundant),
            "hierarchical: S / nodes = " + std::to_string(out.slots_per_node) +
                " slots exceed (E / nodes) * (D / nodes) = " + std::to_string(experts_per_node * out.devices_per_node) +
                ", so a device would hold an expert twice",
            "use fewer redundant slots or the global policy");
    return out;
}

// [nodes] the logical experts packed onto each node: all of them when global; hierarchical, groups of E / groups
// consecutive experts balanced over the nodes by their summed load (w [E])
std::vector<std::vector<int>> experts_per_node_of(const EplbLayout& layout, const double* w, int E, int groups) {
    std::vector<std::vector<int>> node_experts(layout.nodes);
    if (!layout.hierarchical) {
        node_experts[0].resize(E);
        std::iota(node_experts[0].begin(), node_experts[0].end(), 0);
        return node_experts;
    }
    const int group_size = E / groups;
    std::vector<double> group_load(groups, 0.0);
    for (int e = 0; e < E; ++e) group_load[e / group_size] += w[e];
    const std::vector<int> node_of_group = balanced_packing(group_load, layout.nodes);
    for (int g = 0; g < groups; ++g)
        for (int e = g * group_size; e < (g + 1) * group_size; ++e) node_experts[node_of_group[g]].push_back(e);
    return node_experts;
}

// One layer's placement from its loads w [E]: each node's experts replicated into its slots and packed onto its
// devices; copy 0 of each expert is its owner. copies [E] (may be null) gets each expert's copy count.
Placement eplb_layer(const EplbLayout& layout, const double* w, int D, int E, int groups, int* repairs, int* copies) {
    std::vector<int> owner(E, -1);
    std::vector<std::vector<int>> holders(E);  // devices of copies 1.. (replicas)
    const std::vector<std::vector<int>> node_experts = experts_per_node_of(layout, w, E, groups);
    for (int n = 0; n < layout.nodes; ++n) {
        const std::vector<int>& experts = node_experts[n];
        const int first_device = n * layout.devices_per_node;
        std::vector<double> local_w(experts.size());
        for (size_t i = 0; i < experts.size(); ++i) local_w[i] = w[experts[i]];
        const std::vector<int> counts = replicate(local_w, layout.slots_per_node, layout.devices_per_node);
        const auto bin_of =
            pack_without_duplicates(local_w, counts, layout.devices_per_node, layout.slots_per_device, repairs);
        for (size_t i = 0; i < experts.size(); ++i) {
            const int e = experts[i];
            owner[e] = first_device + bin_of[i][0];  // copy 0 is packed first among e's copies
            for (size_t k = 1; k < bin_of[i].size(); ++k) holders[e].push_back(first_device + bin_of[i][k]);
            if (copies) copies[e] = counts[i];
        }
    }
    Placement p = Placement::make_owners(D, owner);
    for (int e = 0; e < E; ++e)
        for (int d : holders[e]) {
            PROPHET_ASSERT(d != owner[e] && !p.holds(e, d));
            p.add_replica(e, d);
        }
    const std::string problem = check_placement(p, 0);
    PROPHET_ASSERT_MSG(problem.empty(), "eplb produced an invalid placement: " + problem);
    return p;
}

}  // namespace

std::vector<Placement> plan_eplb(const std::vector<double>& loads, int num_layers, int num_devices, int num_experts,
                                 int num_nodes, const BalanceOptions& options, EplbReport* report) {
    const int L = num_layers, D = num_devices, E = num_experts;
    // the default: one slot per device, at most E * (D - 1) (none on one device: a copy needs another device)
    const int redundant = options.eplb_redundant_slots == -1 ? std::min(D, E * (D - 1)) : options.eplb_redundant_slots;
    validate_eplb(loads, L, D, E, num_nodes, options, redundant);
    const EplbLayout layout = eplb_layout(D, E, num_nodes, options, redundant);
    if (report) {
        report->mode_used = layout.hierarchical ? "hierarchical" : "global";
        report->note = layout.note;
        report->physical_slots = layout.slots;
        report->slots_per_device = layout.slots_per_device;
        report->copies.assign(static_cast<size_t>(L) * E, 0);
    }
    std::vector<Placement> out;
    out.reserve(L);
    int repairs = 0;
    for (int l = 0; l < L; ++l)
        out.push_back(eplb_layer(layout, loads.data() + static_cast<size_t>(l) * E, D, E, options.eplb_groups, &repairs,
                                 report ? report->copies.data() + static_cast<size_t>(l) * E : nullptr));
    if (report) report->repairs = repairs;
    return out;
}

}  // namespace prophet
