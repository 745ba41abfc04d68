// token_path.h: where a token's activation travels between consecutive MoE layers, and what that moves.
//
// Two dispatches (balance.token_path):
//   home            every system here but MoETuner (Megatron, DeepSpeed, Pro-Prophet, FasterMoE, EPLB): each
//                   MoE layer dispatches a token from its home device (where its attention runs) to its experts'
//                   devices and combines the outputs back home, so layer l's traffic is compute_flow(counts_l)'s
//                   route one way and its mirror back; which device hosts layer l+1's experts relative to layer
//                   l's changes no byte.
//   layer_to_layer  MoETuner's (Go & Mahajan 2025, the traffic its ILP 2 minimises; ExFlow's context-coherent
//                   dispatch): a token computed by expert e1 of layer l on device g1 goes from g1 straight to the
//                   device g2 computing its expert e2 of layer l+1, nothing when g1 = g2. Only layer 0's dispatch
//                   leaves the home device, and only layer L-1's output returns home. Every (e1, e2) pair of a
//                   token's k x k choices moves one activation (the trace's transitions count them so, and so does
//                   MoETuner's C[c1,c2,l]); under top-1 a layer boundary moves a token once instead of twice
//                   (combine home, dispatch again), under top-2 four times, as the home path's 2 + 2.
// Which device computes a token of expert e at layer l is the routing rule's (compute_flow), as in the home
// path, so compute loads are the same under both paths. The transitions do not say on which of e1's holders a
// token was, so with replicas the traffic g1 -> g2 of a pair (e1, e2) is R[e1,e2] * share_l(e1, g1) *
// share_{l+1}(e2, g2), share = the fraction of e's tokens computed on g (fractional tokens); owner-only
// placements (static, MoETuner) have shares 0 or 1 and the traffic is exact.
//
// Units: tokens (token-expert activations); bytes = tokens * CostModel::token_bytes().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "balance/cost_model.h"
#include "balance/placement.h"

namespace prophet {

enum class TokenPath { kHome, kLayerToLayer };
TokenPath parse_token_path(const std::string& name);  // "home" | "layer_to_layer" (exit 3 naming balance.token_path)
const char* token_path_name(TokenPath path);
// The dispatch of each policy's own paper (its registry row): layer_to_layer for moetuner and moetuner-joint,
// home for every other (and unknown names).
TokenPath paper_token_path(const std::string& policy);

// The layer-to-layer traffic of one batch (iteration): every transfer of the forward pass.
struct TokenPathFlow {
    int num_layers = 0, num_devices = 0;
    std::vector<double> inbound;   // [L][D*D] tokens moved into layer l, src*D + dst (diagonal: stays local);
                                   //   l = 0 from the home devices (compute_flow's route), l > 0 from layer l-1's
    std::vector<double> returned;  // [D*D] layer L-1's outputs back to their home devices (compute_flow's route^T)
    const double* into(int layer) const {
        return inbound.data() + static_cast<size_t>(layer) * num_devices * num_devices;
    }
};

// counts [L][D][E] (tokens device d routes to expert e), transitions [L-1][E][E] (tokens at e1 of layer l and e2
// of layer l+1, each of a token's k x k pairs once), placements [L]. Layers with L = 1 have no transitions.
TokenPathFlow layer_to_layer_flow(const int64_t* counts, const int64_t* transitions,
                                  const std::vector<Placement>& placements, RouteRule rule);

// Off-diagonal tokens of a [D*D] route (what leaves its source device).
double moved_tokens(const double* route, int num_devices);

// Per layer under layer_to_layer: the forward all-to-all time into the layer (a2a_time_s of its inbound route)
// and out of it (the return home, last layer only; between layers the next layer's inbound counts it), and the
// bytes each moves. Backward moves the gradients along the same path in reverse: same bytes, same time.
struct TokenPathLayer {
    double in_s = 0, out_s = 0;
    double in_bytes = 0, out_bytes = 0;
};
std::vector<TokenPathLayer> token_path_layers(const CostModel& cost, const TokenPathFlow& flow);

// Replaces the home path's all-to-all in a layer's cost by the layer-to-layer one: a2a_s becomes the mean of the
// layer's two transfers, (in_s + out_s) / 2, so Eq 6's 4 T_A2A = 2 (in + out) (forward and backward), and
// a2a_bytes the mean one-direction bytes (in + out) / 2; eq6_s, eq8_s and fastermoe_s are recomputed with it.
void apply_token_path(CostBreakdown& cost, const TokenPathLayer& layer);

}  // namespace prophet
