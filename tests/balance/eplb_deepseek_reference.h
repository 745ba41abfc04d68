// eplb_deepseek_reference.h: DeepSeek EPLB's rebalance_experts (github.com/deepseek-ai/EPLB, eplb.py, MIT),
// rewritten in C++ from its description as an independent oracle for the tests: its phy2log for the README's
// worked example, and its per-GPU load (sum over a GPU's physical experts of load / copies) to score plan_eplb
// against. Not used by the planner: upstream allows two copies of one expert on one GPU, our Placement does not.
#pragma once

#include <vector>

namespace prophet::testing {

struct DeepSeekEplb {
    int num_layers = 0, num_replicas = 0, num_logical = 0;
    std::vector<int> phy2log;  // [L][num_replicas] logical expert of each physical slot; slot / (R / gpus) = GPU
    std::vector<int> logcnt;   // [L][num_logical] physical copies of each logical expert
};

// weight: [L][E] loads. Hierarchical when num_groups % num_nodes == 0, else the global policy (1 group, 1 node).
DeepSeekEplb deepseek_rebalance_experts(const std::vector<double>& weight, int num_layers, int num_logical,
                                        int num_replicas, int num_groups, int num_nodes, int num_gpus);

// [num_gpus] load of each GPU in layer l: sum over its slots of weight[log] / logcnt[log]
std::vector<double> deepseek_gpu_loads(const DeepSeekEplb& plan, const std::vector<double>& weight, int layer,
                                       int num_gpus);

}  // namespace prophet::testing
