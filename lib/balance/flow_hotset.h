// flow_hotset.h: the hot-set family of flow's candidates (policy_flow.h): the h hottest experts held in every
// replication group (every node, or every NVLink domain), each group's tokens for them computed inside the group,
// aimed at the all-to-all rather than at compute balance.
//
// One layer, planning counts P [D*E], load w_e = sum_s P[s][e]. Groups: consecutive blocks of g devices (a node,
// g = devices_per_node, or an NVLink domain, g = nvlink_domain), D / g of them. Given h:
//   hot       the h experts of largest load (ties: lower index), those with load only.
//   owners    kept (anchored), or spread: a star broadcast (cost_model.h) sends every copy of an expert out of its
//             owner's one NIC, so each device should own at most ceil(h / D) hot experts. While a device owns
//             more, its coldest hot expert swaps owners with the lightest cold (non-hot) expert of another device
//             below the limit: the same node first, then the fewest hot owners on the device's NIC, then the
//             fewest on the device, then device order. Devices keep their number of owned experts.
//   replicas  in every group without a holder of hot expert e and with tokens for it, one replica of e on the
//             group's device of least estimated load: est[d] starts at the load of the cold experts d owns plus
//             its group's tokens for the hot experts it owns; a group's n (expert, tokens) items go largest first
//             (ties: lower expert) to its lightest device with replica room (ties: lower device), which adds the
//             item's tokens. Room: at most ceil(n / g) replicas per device (each copy enters its holder through
//             one NIC, so the copies are spread evenly) and balance.max_replicas_per_device. Under a chain
//             broadcast (cost_model.h) a device forwards a copy for every hot expert it owns and every replica it
//             holds (but a chain's last), and the chain's rate is set by the device forwarding the most, so there
//             the room is instead: a device's owned hot experts plus its replicas (device-tier ones included)
//             within ceil((the group's owned hot experts and replicas so far + n) / g), which leaves the group room
//             for all n. An item no device of the group has room for (only under the cap) gets no replica (the
//             split then sends those tokens to another group's holder).
//   tiers     (chain only) the first `everywhere` of the h hot experts go on every device that sends them tokens,
//             within the cap, before any group's copies; each device computes its own tokens of them.
//   nics      (even_nics; nodes with several NICs) with every hot expert in every node, the tokens that cross
//             nodes are the cold experts': each enters its owner's rail NIC, w_e minus the owner's node's tokens
//             for e, the same for any device of the node. Per node, while it lowers the larger of the two, a
//             device on the node's busiest NIC swaps one cold expert with one of a device on its least busy NIC
//             (the pair that leaves the larger of the two NICs' ingress least; at most E swaps in all). The
//             routing LP cannot move those tokens (one holder), so only owners even the NICs out; inside a node
//             the moves ride NVLink or PCIe, not the NICs.
// Every hot expert then has a holder in every group that sends it tokens, so node-local routing (flow_split.h's
// nearest-first fill, the routing LP's all-to-all price) keeps those tokens inside the group, and only the cold
// experts' tokens cross groups. The candidates are scored by flow's cost model with every other; the planner keeps
// one only when it is cheaper (its transfers and owner moves included).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "balance/cluster.h"
#include "balance/cost_model.h"
#include "balance/placement.h"

namespace prophet {

struct HotSetShape {
    int hot = 0;                 // h: experts replicated into every group
    int group_size = 1;          // devices per replication group (divides D; < D)
    bool spread_owners = false;  // swap owners so no device owns more than ceil(h / D) hot experts
    bool even_nics = false;      // then swap cold owners inside each node to even its NICs' ingress (below)
    bool chain = false;          // chain broadcast: a hot owner starts its expert's chain (below, "replicas")
    int everywhere = 0;          // the device tier: the first of the h held on every device (below, "tiers")
};

// Builds the family's placements for one layer; the sort by load and the buffers are shared by its candidates.
class HotSetBuilder {
  public:
    // counts [D*E], load [E] (its column sums), current (owners kept or swapped from), cluster (nodes and NICs):
    // all must outlive the builder.
    HotSetBuilder(const int64_t* counts, const std::vector<double>& load, const Placement& current,
                  const ClusterSpec& cluster);
    // The placement of one shape within the cap (0: none); owner_swaps (may be nullptr): the swaps it made.
    Placement build(const HotSetShape& shape, int cap, int* owner_swaps = nullptr);
    int experts_with_load() const { return with_load_; }
    int num_experts() const { return E_; }
    int nics_per_node() const { return cluster_.nics_per_node; }

  private:
    const int64_t* counts_;
    const std::vector<double>& load_;
    const Placement& current_;
    const ClusterSpec& cluster_;
    int D_, E_, with_load_ = 0;
    std::vector<int> by_load_;       // [E] experts, largest load first (ties: lower index)
    std::vector<uint8_t> is_hot_;    // [E]
    std::vector<int> owned_hot_;     // [D] hot experts each device owns (spread)
    std::vector<double> est_;        // [D] estimated tokens computed
    std::vector<int> replicas_;      // [D] group-tier replicas
    std::vector<int> all_replicas_;  // [D] replicas of both tiers (the cap)
    std::vector<int> chain_load_;    // [D] copies a device forwards: hot experts owned + replicas
    static constexpr uint8_t kGroupTier = 1, kDeviceTier = 2;  // is_hot_ values
    std::vector<double> cross_;                                // [E] even_nics: a cold expert's tokens from other nodes
    std::vector<std::pair<int64_t, int>> items_;               // (tokens, expert) of one group
    int spread(std::vector<int>& owner, int hot);
    int even_nics(std::vector<int>& owner);
    bool swap_once(std::vector<int>& owner, std::vector<double>& ingress, int first_nic, int last_nic,
                   const std::vector<int>& cold);
    double cross_ingress(int expert, int device) const;  // e's tokens from other nodes if `device` owns it
    int swap_target(int from, const std::vector<int>& owner, int limit) const;
    void place_group(Placement& p, int first_device, int group_size, int cap, bool chain);
    void place_everywhere(Placement& p, int cap);
    int lightest_with_room(int first_device, int group_size, int room, int cap, int chain_room) const;
    int64_t group_tokens(int expert, int first_device, int group_size) const;
};

// The replication group sizes worth trying on the cluster: devices_per_node and nvlink_domain, each when it
// divides D, is above 1 and below D (distinct, ascending).
std::vector<int> replication_group_sizes(const ClusterSpec& cluster, int num_devices);

// Per group size, h doubling from max(1, E / 32) up to max(1, E / 2) (and the experts with load), each shape's
// candidate scored by consider(placement, shape) (predicted seconds), until two rises in a row; then h at 3/4 and
// 3/2 of the best so far (the midpoints of the doubling); on nodes with several NICs, the best h once more with
// even_nics. The range keeps the walk to about 7 candidates at
// E = 256 (each costs a split and a topology-aware prediction). spread_owners: the owner rule of every shape (the
// planner spreads owners under a star broadcast, where each copy leaves its owner's NIC, and keeps them under a
// chain). chain: every shape places its copies by the chain rule ("replicas" above), and after the midpoints the
// device tier is tried: t = 1, 2 hottest experts everywhere, h = t + b/2, t + 3b/4, b and b + t around the best h
// so far, b (distinct, t < h <= the walk's largest h). Nothing to try: no call.
void walk_hot_sets(HotSetBuilder& builder, const std::vector<int>& group_sizes, bool spread_owners, bool chain, int cap,
                   const std::function<double(const Placement&, const HotSetShape&)>& consider);

// flow's walk of the family on a topology-aware cost model: every group size of the cluster, owners spread under
// a star broadcast, kept under a chain (with the chain rule and the device tier); consider(placement, h) as above.
void walk_hot_sets(const int64_t* counts, const std::vector<double>& load, const Placement& current,
                   const CostModel& cost, int cap, const std::function<double(const Placement&, int)>& consider);

}  // namespace prophet
