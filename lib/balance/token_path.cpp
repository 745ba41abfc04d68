#include "balance/token_path.h"

#include <algorithm>

#include "core/enum_table.h"
#include "core/error.h"

namespace prophet {

namespace {

// share[e*D + g]: the fraction of expert e's tokens computed on device g under the rule (sums to 1 per expert).
// An expert with no tokens gets its rule's split of a token (owner: all on the owner) so the share is defined.
std::vector<double> computed_shares(const int64_t* counts, const Placement& p, RouteRule rule) {
    const int D = p.num_devices, E = p.num_experts;
    std::vector<double> share(static_cast<size_t>(E) * D, 0.0);
    if (solves_split_per_batch(rule)) {  // the split's own per-expert shares (an expert with no tokens: its owner)
        const LayerFlow flow = compute_flow(counts, D, E, p, rule);
        for (int e = 0; e < E; ++e) {
            const int64_t* on = flow.expert_device.data() + static_cast<size_t>(e) * D;
            double load = 0;
            for (int g = 0; g < D; ++g) load += static_cast<double>(on[g]);
            for (int g = 0; g < D; ++g)
                share[static_cast<size_t>(e) * D + g] = load > 0 ? on[g] / load : (g == p.owner[e] ? 1.0 : 0.0);
        }
        return share;
    }
    const std::vector<int> destination = routing_destination(counts, p, rule);
    for (int e = 0; e < E; ++e) {
        double* s = share.data() + static_cast<size_t>(e) * D;
        double load = 0;
        for (int src = 0; src < D; ++src) load += static_cast<double>(counts[static_cast<size_t>(src) * E + e]);
        if (rule == RouteRule::kEvenSplit || load == 0) {
            // even split: every source splits over all holders; the integer remainder is spread fractionally
            const double holders = 1.0 + p.num_replicas_of(e);
            for (int g = 0; g < D; ++g)
                if (p.holds(e, g)) s[g] = rule == RouteRule::kEvenSplit ? 1.0 / holders : (g == p.owner[e] ? 1.0 : 0.0);
            continue;
        }
        for (int src = 0; src < D; ++src) {
            const size_t at = static_cast<size_t>(src) * E + e;
            s[destination[at]] += static_cast<double>(counts[at]) / load;
        }
    }
    return share;
}

constexpr EnumName<TokenPath> kTokenPathNames[] = {{TokenPath::kHome, "home"},
                                                   {TokenPath::kLayerToLayer, "layer_to_layer"}};

}  // namespace

// balance.token_path also takes "auto", which options.cpp reads before calling this
TokenPath parse_token_path(const std::string& name) {
    if (const std::optional<TokenPath> path = find_enum(kTokenPathNames, name)) return *path;
    throw_config_error("balance.token_path", name, "must be auto, " + enum_choices(kTokenPathNames),
                       "--set balance.token_path=layer_to_layer");
}

const char* token_path_name(TokenPath path) { return enum_name(kTokenPathNames, path); }

TokenPathFlow layer_to_layer_flow(const int64_t* counts, const int64_t* transitions,
                                  const std::vector<Placement>& placements, RouteRule rule) {
    const int L = static_cast<int>(placements.size());
    PROPHET_ASSERT(L >= 1 && (L == 1 || transitions != nullptr));
    const int D = placements[0].num_devices, E = placements[0].num_experts;
    const size_t DD = static_cast<size_t>(D) * D, DE = static_cast<size_t>(D) * E, EE = static_cast<size_t>(E) * E;
    TokenPathFlow f;
    f.num_layers = L;
    f.num_devices = D;
    f.inbound.assign(static_cast<size_t>(L) * DD, 0.0);
    f.returned.assign(DD, 0.0);

    const LayerFlow first = compute_flow(counts, D, E, placements[0], rule);
    std::copy(first.route.begin(), first.route.end(), f.inbound.begin());
    const LayerFlow last = compute_flow(counts + (L - 1) * DE, D, E, placements[L - 1], rule);
    for (int src = 0; src < D; ++src)
        for (int dst = 0; dst < D; ++dst)
            f.returned[static_cast<size_t>(dst) * D + src] =
                static_cast<double>(last.route[static_cast<size_t>(src) * D + dst]);

    std::vector<double> here = computed_shares(counts, placements[0], rule);  // [E][D] at layer l
    for (int l = 0; l + 1 < L; ++l) {
        const std::vector<double> next = computed_shares(counts + (l + 1) * DE, placements[l + 1], rule);
        const int64_t* R = transitions + l * EE;
        double* into = f.inbound.data() + (l + 1) * DD;
        for (int e1 = 0; e1 < E; ++e1) {
            const double* s1 = here.data() + static_cast<size_t>(e1) * D;
            for (int e2 = 0; e2 < E; ++e2) {
                const double r = static_cast<double>(R[static_cast<size_t>(e1) * E + e2]);
                if (r == 0) continue;
                const double* s2 = next.data() + static_cast<size_t>(e2) * D;
                for (int g1 = 0; g1 < D; ++g1) {
                    if (s1[g1] == 0) continue;
                    for (int g2 = 0; g2 < D; ++g2)
                        if (s2[g2] != 0) into[static_cast<size_t>(g1) * D + g2] += r * s1[g1] * s2[g2];
                }
            }
        }
        here = next;
    }
    return f;
}

double moved_tokens(const double* route, int num_devices) {
    double moved = 0;
    for (int src = 0; src < num_devices; ++src)
        for (int dst = 0; dst < num_devices; ++dst)
            if (src != dst) moved += route[static_cast<size_t>(src) * num_devices + dst];
    return moved;
}

std::vector<TokenPathLayer> token_path_layers(const CostModel& cost, const TokenPathFlow& flow) {
    const int L = flow.num_layers, D = flow.num_devices;
    const double token_bytes = cost.token_bytes();
    auto in_bytes = [&](const double* route) {
        std::vector<double> bytes(route, route + static_cast<size_t>(D) * D);
        for (double& b : bytes) b *= token_bytes;
        return bytes;
    };
    std::vector<TokenPathLayer> out(L);
    for (int l = 0; l < L; ++l) {
        out[l].in_s = a2a_time_s(cost, in_bytes(flow.into(l)));
        out[l].in_bytes = moved_tokens(flow.into(l), D) * token_bytes;
    }
    out[L - 1].out_s = a2a_time_s(cost, in_bytes(flow.returned.data()));
    out[L - 1].out_bytes = moved_tokens(flow.returned.data(), D) * token_bytes;
    return out;
}

void apply_token_path(CostBreakdown& c, const TokenPathLayer& layer) {
    // undo the home path's all-to-all terms (cost_model.cpp's Eq 6, Eq 8 and FasterMoE sums), then add the new
    const double old_a2a = c.a2a_s;
    const double a2a = 0.5 * (layer.in_s + layer.out_s);
    c.eq6_s += 4.0 * (a2a - old_a2a);
    c.eq8_s += 4.0 * (a2a - old_a2a);
    c.fastermoe_s += 4.0 * (a2a - old_a2a) - std::max(0.0, c.trans_s - old_a2a) - std::max(0.0, c.agg_s - old_a2a) +
                     std::max(0.0, c.trans_s - a2a) + std::max(0.0, c.agg_s - a2a);
    c.a2a_s = a2a;
    c.a2a_bytes = 0.5 * (layer.in_bytes + layer.out_bytes);
}

}  // namespace prophet
