// moe_executor.h: where the experts of an MoE layer are computed, behind one interface.
//
// The model computes routing (gate logits, top-K, gate weights, capacity drops) itself and hands the executor
// "these tokens go to these experts with these weights". The executor decides where expert parameters live and
// where their FLOPs run: LocalMoeExecutor (here) runs all E experts of every layer in this process with a
// sequential per-expert loop and is the oracle; an expert-parallel executor (lib/moe, later) runs the same
// contract across MPI ranks under any placement and is tested against this one.
//
// Contract, for every implementation:
//  - forward(l, ...) for l = 0..L-1, then backward(l, ...) for l = L-1..0, once each per step. An executor keeps
//    whatever it needs from forward(l) until backward(l) by copying it: pointers passed to a call are only valid
//    during that call (the model reuses dout's buffer right after backward returns, for example).
//  - expert_idx entries are in [0,E), or -1 for an assignment dropped by the capacity limit, which contributes
//    nothing to out and gets dgate_w = 0.
//  - out[n] = sum_k gate_w[n,k] * expert_{expert_idx[n,k]}(h[n]), summed in k order (k = 0 first), so the result
//    for a token does not depend on which expert, rank or batch of tokens computed each term.
//  - expert(x) = gelu_tanh(x W1) W2 with W1 [C,F], W2 [F,C], no biases.
//  - backward OVERWRITES dh [N,C] and dgate_w [N,K] and ACCUMULATES (+=) into the expert parameter gradients
//    of the experts it holds.
#pragma once

#include <vector>

namespace prophet {

template <typename Float>
struct MoeExecutor {
    virtual ~MoeExecutor() = default;
    // h [N,C]: this rank's tokens after ln2; expert_idx [N,K]; gate_w [N,K]; out [N,C] (overwrite)
    virtual void forward(int layer, int N, const Float* h, const int* expert_idx, const Float* gate_w, Float* out) = 0;
    // dout [N,C]: d loss / d out; dh [N,C] (overwrite); dgate_w [N,K] (overwrite); expert grads (+=)
    virtual void backward(int layer, int N, const Float* dout, Float* dh, Float* dgate_w) = 0;
    virtual const char* name() const = 0;
    // Called by model_forward before block `layer`'s non-expert compute (ln1, attention, ln2, gate): a scheduler
    // launches communication that should run beside that compute (the block-wise schedule's Trans).
    virtual void block_forward_begin(int layer) { (void)layer; }
};

// Pointers to one expert's parameters and gradients (in the model's arena, or wherever an executor keeps them).
template <typename Float>
struct ExpertWeights {
    const Float* w1;  // [C,F]
    const Float* w2;  // [F,C]
    Float* dw1;       // [C,F]
    Float* dw2;       // [F,C]
};

// All experts of all layers in this process; per expert: gather its tokens, GEMM, gelu, GEMM; then combine.
template <typename Float>
class LocalMoeExecutor final : public MoeExecutor<Float> {
  public:
    // weights [L*E], indexed layer * E + expert
    LocalMoeExecutor(int L, int E, int K, int C, int F, std::vector<ExpertWeights<Float>> weights);

    void forward(int layer, int N, const Float* h, const int* expert_idx, const Float* gate_w, Float* out) override;
    void backward(int layer, int N, const Float* dout, Float* dh, Float* dgate_w) override;
    const char* name() const override { return "local"; }

  private:
    // What forward(l) keeps for backward(l). M = number of kept (not dropped) assignments, <= N*K; "slot" s is
    // a row of the expert-sorted buffers, in expert order and, within an expert, in (token, k) order.
    struct LayerState {
        int N = 0;
        int M = 0;
        std::vector<int> expert_offsets;  // [E+1] slots of expert e: [expert_offsets[e], expert_offsets[e+1])
        std::vector<int> slot_token;      // [N*K] (first M used) token of each slot
        std::vector<int> assignment_slot; // [N*K] slot of assignment n*K+k, -1 if dropped
        std::vector<Float> gate_w;        // [N*K] copy of the gate weights
        std::vector<Float> x;             // [M,C] gathered expert inputs
        std::vector<Float> pre;           // [M,F] x W1
        std::vector<Float> act;           // [M,F] gelu(pre)
        std::vector<Float> y;             // [M,C] act W2, before the gate weight
    };

    // forward's steps: the expert-sorted layout of the kept assignments, the experts over it, the weighted combine
    void sort_assignments(LayerState& st, int N, const int* expert_idx, const Float* gate_w) const;
    void run_experts(int layer, LayerState& st, const Float* h) const;
    void combine(const LayerState& st, int N, Float* out) const;
    // backward's steps, in reverse: combine, experts (accumulating dW1, dW2), dispatch
    void combine_backward(const LayerState& st, int N, const Float* dout, Float* dgate_w);
    void experts_backward(int layer, const LayerState& st);
    void dispatch_backward(const LayerState& st, int N, Float* dh) const;

    int L_, E_, K_, C_, F_;
    std::vector<ExpertWeights<Float>> weights_;  // [L*E]
    std::vector<LayerState> layers_;             // [L]
    // backward scratch, shared by the layers
    std::vector<Float> dy_;    // [M,C] gate_w * dout, gathered
    std::vector<Float> dpre_;  // [M,F]
    std::vector<Float> dx_;    // [M,C]
};

}  // namespace prophet
