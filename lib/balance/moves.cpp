#include "balance/moves.h"

#include <algorithm>
#include <vector>

#include "balance/topology.h"
#include "core/error.h"

namespace prophet {
namespace {

// The flat rule: the busiest device's sent or received units of `unit` bytes over trans_gbit_s.
double flat_transfer_seconds(const CostModel& m, const std::vector<int64_t>& sent, const std::vector<int64_t>& received,
                             double unit) {
    const int64_t busiest =
        std::max(*std::max_element(sent.begin(), sent.end()), *std::max_element(received.begin(), received.end()));
    return static_cast<double>(busiest) * unit / (m.cluster.trans_bytes_per_s * m.bandwidth_scale);
}

// Seconds to send copies[from * D + to] units of `unit` bytes at once: flat, flat_transfer_seconds; topology-aware,
// the busiest resource of that traffic.
double transfer_seconds(const CostModel& m, const std::vector<int64_t>& copies, int D, double unit) {
    if (m.topology_aware) return topology_time(m.cluster, copies.data(), unit, false, m.bandwidth_scale);
    std::vector<int64_t> sent(static_cast<size_t>(D), 0), received(static_cast<size_t>(D), 0);
    for (int from = 0; from < D; ++from)
        for (int to = 0; to < D; ++to) {
            sent[from] += copies[static_cast<size_t>(from) * D + to];
            received[to] += copies[static_cast<size_t>(from) * D + to];
        }
    return flat_transfer_seconds(m, sent, received, unit);
}

}  // namespace

MoveCost price_owner_moves(const CostModel& m, const Placement& before, const Placement& after, double state_copies) {
    const int D = after.num_devices, E = after.num_experts;
    PROPHET_ASSERT(before.num_devices == D && before.num_experts == E);
    MoveCost move;
    for (int e = 0; e < E; ++e) move.experts += before.owner[e] != after.owner[e];
    if (move.experts == 0) return move;
    const double unit = m.expert_bytes() * state_copies;
    move.bytes = unit * move.experts;
    if (!m.topology_aware) {  // the flat rule from per-device counts, without the [D*D] matrix (flow prices many)
        std::vector<int64_t> sent(static_cast<size_t>(D), 0), received(static_cast<size_t>(D), 0);
        for (int e = 0; e < E; ++e)
            if (before.owner[e] != after.owner[e]) ++sent[before.owner[e]], ++received[after.owner[e]];
        move.seconds = flat_transfer_seconds(m, sent, received, unit);
        return move;
    }
    std::vector<int64_t> copies(static_cast<size_t>(D) * D, 0);  // [from * D + to] experts moved
    for (int e = 0; e < E; ++e)
        if (before.owner[e] != after.owner[e]) ++copies[static_cast<size_t>(before.owner[e]) * D + after.owner[e]];
    move.seconds = transfer_seconds(m, copies, D, unit);
    return move;
}

MoveCost price_new_copies(const CostModel& m, const std::vector<Placement>& before,
                          const std::vector<Placement>& after) {
    PROPHET_ASSERT(before.size() == after.size() && !after.empty());
    const int D = after[0].num_devices;
    MoveCost move;
    std::vector<int64_t> copies(static_cast<size_t>(D) * D, 0);  // [from * D + to], every layer at once
    for (size_t l = 0; l < after.size(); ++l) {
        PROPHET_ASSERT(before[l].num_devices == D && after[l].num_devices == D &&
                       before[l].num_experts == after[l].num_experts);
        for (int e = 0; e < after[l].num_experts; ++e)
            for (int d = 0; d < D; ++d)
                if (after[l].holds(e, d) && !before[l].holds(e, d)) {
                    ++move.experts;
                    ++copies[static_cast<size_t>(before[l].owner[e]) * D + d];
                }
    }
    if (move.experts == 0) return move;
    move.bytes = m.expert_bytes() * move.experts;
    move.seconds = transfer_seconds(m, copies, D, m.expert_bytes());
    return move;
}

MoveCost layer_owner_moves(const std::vector<LayerScore>& layers, size_t k, int num_layers, const CostModel& model,
                           double state_copies) {
    const size_t L = static_cast<size_t>(num_layers);
    PROPHET_ASSERT(L > 0 && k < layers.size());
    const Placement& now = layers[k].placement;
    if (k >= L) return price_owner_moves(model, layers[k - L].placement, now, state_copies);
    return price_owner_moves(model, Placement::make_static(now.num_devices, now.num_experts), now, state_copies);
}

void charge_owner_moves(std::vector<LayerScore>& layers, size_t first, int num_layers, const CostModel& model,
                        double state_copies) {
    PROPHET_ASSERT(first + static_cast<size_t>(num_layers) <= layers.size());
    for (size_t k = first; k < first + static_cast<size_t>(num_layers); ++k) {
        const double s = layer_owner_moves(layers, k, num_layers, model, state_copies).seconds;
        CostBreakdown& c = layers[k].cost;
        c.owner_move_s += s;
        c.eq6_s += s;
        c.eq8_s += s;
        c.fastermoe_s += s;
    }
}

MoveCost owner_moves_of(const PolicyScore& score, const CostModel& model, int num_layers, double state_copies,
                        std::vector<int>* per_iteration) {
    MoveCost total;
    const size_t L = static_cast<size_t>(num_layers);
    PROPHET_ASSERT(L > 0 && score.layers.size() % L == 0);
    if (per_iteration) per_iteration->assign(score.layers.size() / L, 0);
    for (size_t k = 0; k < score.layers.size(); ++k) {
        const MoveCost move = layer_owner_moves(score.layers, k, num_layers, model, state_copies);
        total.experts += move.experts;
        total.bytes += move.bytes;
        total.seconds += move.seconds;
        if (per_iteration) (*per_iteration)[k / L] += move.experts;
    }
    return total;
}

}  // namespace prophet
