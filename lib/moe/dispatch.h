// dispatch.h: the dispatch and combine stages of an expert-parallel MoE layer, forward and backward, as flat
// functions over a MoeDispatchLayout (layout.h) so a scheduler can split, reorder or overlap them.
//
// Forward:   h --pack--> send --exchange--> recv --sort--> sorted   (dispatch: rows to the computing rank)
//            sorted y --unsort--> recv --exchange back--> send y --reduce--> out   (combine: rows back, sum in k)
// Backward is the reverse (DeepEP: the backward of dispatch is a combine and vice versa):
//            dout --reduce_backward--> send dy (+ dgate_w) --dispatch--> sorted dy
//            sorted dx --combine--> send dx --pack_backward--> dh
// Row orders: layout.h. Every function overwrites its output; C is the row width in floats.
#pragma once

#include "moe/layout.h"

namespace prophet {

class Communicator;

// send [M_send,C] (overwrite): row s = h[slot_token[s]]; h [N,C]
void moe_dispatch_pack(const MoeDispatchLayout& layout, int C, const float* h, float* send);
// dispatch direction: send [M_send,C] -> recv [M_recv,C]. One all_to_all_v; the self part is a local copy.
void moe_dispatch_exchange(Communicator* comm, const MoeDispatchLayout& layout, int C, const float* send, float* recv);
// recv [M_recv,C] (by source) -> sorted [M_recv,C] (by expert)
void moe_dispatch_sort(const MoeDispatchLayout& layout, int C, const float* recv, float* sorted);

// sorted [M_recv,C] (by expert) -> recv [M_recv,C] (by source)
void moe_combine_unsort(const MoeDispatchLayout& layout, int C, const float* sorted, float* recv);
// combine direction: recv [M_recv,C] -> send [M_send,C] (each row back in its source's slot)
void moe_combine_exchange(Communicator* comm, const MoeDispatchLayout& layout, int C, const float* recv, float* send);
// out [N,C] (overwrite): out[n] = sum_k gate_w[n,k] * rows[slot(n,k)], k = 0 first, dropped terms skipped.
// gate_w [N*K], rows [M_send,C]. The same arithmetic as LocalMoeExecutor's combine.
void moe_combine_reduce(const MoeDispatchLayout& layout, int C, const float* gate_w, const float* rows, float* out);

// Backward of moe_combine_reduce: dgate_w [N*K] (overwrite; 0 where dropped) = dout[n] . rows[slot],
// drows [M_send,C] (overwrite) = gate_w[n,k] * dout[n]. dout [N,C], rows [M_send,C] (the forward's y).
void moe_combine_reduce_backward(const MoeDispatchLayout& layout, int C, const float* gate_w, const float* dout,
                                 const float* rows, float* dgate_w, float* drows);
// Backward of moe_dispatch_pack: dh [N,C] (overwrite) = sum_k drows[slot(n,k)], k = 0 first. drows [M_send,C]
void moe_dispatch_pack_backward(const MoeDispatchLayout& layout, int C, const float* drows, float* dh);

}  // namespace prophet
