// eplb_deepseek_reference.cpp: see the header. Steps per layer (upstream's rebalance_experts_hierarchical):
//   1. sum the loads of each group of E/groups consecutive experts and pack groups onto nodes (balanced packing);
//      number the experts node by node ("mlog": node-major logical order);
//   2. per node, replicate its E/nodes experts into R/nodes physical experts: every expert once, then each extra
//      slot to the expert with the largest load / copies (first of ties);
//   3. per node, pack its physical experts (weight load / copies) onto its GPUs with balanced packing; a GPU's
//      slots are filled in the order its physical experts were packed.
// Balanced packing: items by descending weight (stable: equal weights keep index order) each to the lightest
// pack (first of ties) that holds fewer than items / packs; with one item per pack, item i goes to pack i.
#include "eplb_deepseek_reference.h"

#include <algorithm>
#include <numeric>

namespace prophet::testing {
namespace {

struct Packing {
    std::vector<int> pack, rank;  // [n] pack of each item and its position in that pack
};

Packing balanced_packing(const std::vector<double>& w, int num_packs) {
    const int n = static_cast<int>(w.size());
    const int per_pack = n / num_packs;
    Packing out;
    out.pack.assign(n, -1);
    out.rank.assign(n, 0);
    if (per_pack == 1) {
        std::iota(out.pack.begin(), out.pack.end(), 0);
        return out;
    }
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return w[a] > w[b]; });
    std::vector<double> load(num_packs, 0.0);
    std::vector<int> items(num_packs, 0);
    for (int i : order) {
        int best = -1;
        for (int p = 0; p < num_packs; ++p)
            if (items[p] < per_pack && (best < 0 || load[p] < load[best])) best = p;
        out.pack[i] = best;
        out.rank[i] = items[best]++;
        load[best] += w[i];
    }
    return out;
}

}  // namespace

DeepSeekEplb deepseek_rebalance_experts(const std::vector<double>& weight, int L, int E, int R, int groups,
                                        int nodes, int gpus) {
    if (groups % nodes != 0) groups = nodes = 1;  // upstream's global policy
    const int group_size = E / groups, groups_per_node = groups / nodes;
    const int log_per_node = E / nodes, phy_per_node = R / nodes, gpus_per_node = gpus / nodes;
    const int phy_per_gpu = R / gpus;
    DeepSeekEplb out;
    out.num_layers = L;
    out.num_replicas = R;
    out.num_logical = E;
    out.phy2log.assign(static_cast<size_t>(L) * R, -1);
    out.logcnt.assign(static_cast<size_t>(L) * E, 0);
    for (int l = 0; l < L; ++l) {
        const double* w = weight.data() + static_cast<size_t>(l) * E;
        // step 1: groups to nodes; mlog2log[m] = logical expert at node-major position m
        std::vector<double> group_load(groups, 0.0);
        for (int e = 0; e < E; ++e) group_load[e / group_size] += w[e];
        const Packing gp = balanced_packing(group_load, nodes);
        std::vector<int> mlog2log(E);
        for (int e = 0; e < E; ++e) {
            const int g = e / group_size;
            mlog2log[(gp.pack[g] * groups_per_node + gp.rank[g]) * group_size + e % group_size] = e;
        }
        for (int n = 0; n < nodes; ++n) {
            // step 2: replicate the node's experts
            std::vector<double> wn(log_per_node);
            for (int i = 0; i < log_per_node; ++i) wn[i] = w[mlog2log[n * log_per_node + i]];
            std::vector<int> phy2mlog(phy_per_node), cnt(log_per_node, 1);
            std::iota(phy2mlog.begin(), phy2mlog.begin() + log_per_node, 0);
            for (int j = log_per_node; j < phy_per_node; ++j) {
                int best = 0;
                for (int i = 1; i < log_per_node; ++i)
                    if (wn[i] / cnt[i] > wn[best] / cnt[best]) best = i;
                phy2mlog[j] = best;
                ++cnt[best];
            }
            // step 3: physical experts to the node's GPUs
            std::vector<double> wp(phy_per_node);
            for (int j = 0; j < phy_per_node; ++j) wp[j] = wn[phy2mlog[j]] / cnt[phy2mlog[j]];
            const Packing pp = balanced_packing(wp, gpus_per_node);
            for (int j = 0; j < phy_per_node; ++j) {
                const int slot = n * phy_per_node + pp.pack[j] * phy_per_gpu + pp.rank[j];
                out.phy2log[static_cast<size_t>(l) * R + slot] = mlog2log[n * log_per_node + phy2mlog[j]];
            }
            for (int i = 0; i < log_per_node; ++i)
                out.logcnt[static_cast<size_t>(l) * E + mlog2log[n * log_per_node + i]] = cnt[i];
        }
    }
    return out;
}

std::vector<double> deepseek_gpu_loads(const DeepSeekEplb& plan, const std::vector<double>& weight, int layer,
                                       int num_gpus) {
    const int R = plan.num_replicas, E = plan.num_logical;
    std::vector<double> gpu(num_gpus, 0.0);
    for (int slot = 0; slot < R; ++slot) {
        const int e = plan.phy2log[static_cast<size_t>(layer) * R + slot];
        gpu[slot / (R / num_gpus)] += weight[static_cast<size_t>(layer) * E + e] /
                                      plan.logcnt[static_cast<size_t>(layer) * E + e];
    }
    return gpu;
}

}  // namespace prophet::testing
