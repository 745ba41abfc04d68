// test_anchors.cpp: the cost model's all-to-all on the modern cluster files against the published measurements
// those files were parameterised from (../shared/papers/gpu-anchors.md). Each row gives the anchor's exact
// setting (bytes, tokens, ranks), the published number and its source; the model's prediction goes through
// predict_layer's topology-aware Eq 1 (a token flow on a static placement, one expert per rank) and must be
// within 15%. The constants in the files come from NCCL's and DeepEP's stated link rates and XLA's small-message
// latency (see the files' comments), never from these rows' times.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "balance/cluster.h"
#include "balance/cost_model.h"

namespace prophet {
namespace {

ClusterSpec shipped(const std::string& name, int num_devices = 0) {
    ClusterSpec c = load_cluster_file(std::string(PROPHET_SOURCE_DIR) + "/experiments/clusters/" + name);
    // more nodes of the same kind (DeepEP's EP32-128 rows): only the device count changes
    if (num_devices > 0) c.num_devices = num_devices;
    return c;
}

// C(n, k) / C(m, k) for n <= m: the chance that none of k distinct picks out of m lands in the m - n others
double none_of(int n, int m, int k) {
    double p = 1.0;
    for (int i = 0; i < k; ++i) p *= double(n - i) / double(m - i);
    return p;
}

// The model's time (seconds) for one all-to-all in which rank s sends units(s, d) units of unit_bytes to rank d,
// through predict_layer: E = D experts, expert d on rank d, one unit = one token of d_model = unit_bytes bytes.
double model_a2a_s(const ClusterSpec& cluster, double unit_bytes,
                   const std::function<int64_t(int, int)>& units) {
    const int D = cluster.num_devices;
    CostModel m;
    m.cluster = cluster;
    m.topology_aware = cluster.topology;
    EXPECT_TRUE(m.topology_aware);
    m.model = {static_cast<int>(unit_bytes), 1, 1, 1, 1};
    std::vector<int64_t> counts(static_cast<size_t>(D) * D);
    for (int s = 0; s < D; ++s)
        for (int d = 0; d < D; ++d) counts[static_cast<size_t>(s) * D + d] = units(s, d);
    const Placement p = Placement::make_static(D, D);
    return predict_layer(m, compute_flow(counts.data(), D, D, p, RouteRule::kOwner), p).a2a_s;
}

struct Check {
    std::string what;  // the anchor, with its source
    double published, predicted;
};

void expect_within(const std::vector<Check>& checks, double tolerance) {
    for (const Check& c : checks) {
        const double error = c.predicted / c.published - 1.0;
        std::printf("  %-72s published %9.3f  model %9.3f  %+6.1f%%\n", c.what.c_str(), c.published, c.predicted,
                    100 * error);
        EXPECT_LE(std::abs(error), tolerance) << c.what << ": published " << c.published << ", model "
                                              << c.predicted;
    }
}

TEST(Anchors, XlaH100AllToAllWithin15Percent) {
    // openxla/xla collective_interpolator_data.h (H100, one node), all-to-all: algBw = bytes per GPU / time.
    // Group of 8: 384.0 GB/s at 1 GiB (2.80 ms), 388.1 GB/s at 2 GiB; group of 4: 450.5 GB/s at 1 GiB.
    const ClusterSpec h = shipped("h100-8.toml");
    std::vector<Check> checks;
    struct Row {
        int group;
        double gib, algbw_gb_s;
    };
    for (const Row& r : {Row{8, 1, 384.0}, Row{8, 2, 388.1}, Row{4, 1, 450.5}}) {
        const double bytes = r.gib * 1073741824.0;  // per GPU, 1/group to each member (itself included)
        const int64_t share = static_cast<int64_t>(bytes / r.group);
        const double t = model_a2a_s(h, 1.0, [&](int s, int d) { return s < r.group && d < r.group ? share : 0; });
        checks.push_back({"XLA all-to-all, " + std::to_string(r.group) + " x H100, " + std::to_string(int(r.gib)) +
                              " GiB per GPU (algBw, GB/s)",
                          r.algbw_gb_s, bytes / t / 1e9});
    }
    expect_within(checks, 0.15);
}

TEST(Anchors, DeepEpLowLatencyAllToAllsWithin15Percent) {
    // deepseek-ai/DeepEP docs/legacy.md, low-latency kernels, H800: 128 tokens per rank, hidden 7168, top-8; every
    // (token, selected expert) pair is sent on its own: FP8 dispatch 7,408 B, BF16 combine 14,336 B per pair.
    // Experts spread evenly, so each rank sends 128 * 8 / EP pairs to every rank (itself included).
    struct Row {
        int ep;
        double dispatch_us, combine_us;
    };
    std::vector<Check> checks;
    for (const Row& r : {Row{8, 77, 114}, Row{16, 118, 195}, Row{32, 155, 273}, Row{64, 173, 314},
                         Row{128, 192, 369}}) {
        const ClusterSpec h = r.ep == 8 ? shipped("h800-8.toml") : shipped("h800-16.toml", r.ep);
        const auto per_pair = [&](int, int) { return int64_t{128 * 8 / r.ep}; };
        checks.push_back({"DeepEP LL dispatch EP" + std::to_string(r.ep) + " (us)", r.dispatch_us,
                          model_a2a_s(h, 7408, per_pair) * 1e6});
        checks.push_back({"DeepEP LL combine EP" + std::to_string(r.ep) + " (us)", r.combine_us,
                          model_a2a_s(h, 14336, per_pair) * 1e6});
    }
    expect_within(checks, 0.15);
}

TEST(Anchors, DeepEpNormalAllToAllsWithin15Percent) {
    // deepseek-ai/DeepEP docs/legacy.md, normal kernels, H800: 4096 tokens per rank, hidden 7168, top-8 of 256
    // experts, FP8 dispatch (7,168 + 7,168 / 128 * 4 = 7,392 B per token), BF16 combine (14,336 B); bandwidth =
    // bytes received per rank, deduplicated per destination rank / time. Expert choices are taken uniform.
    const double fp8 = 7392, bf16 = 14336, tokens = 4096;
    std::vector<Check> checks;
    {
        // intranode EP8, NVLink: 153 GB/s dispatch, 158 GB/s combine. A token reaches rank d when one of its 8
        // experts is among d's 32: p = 1 - C(224, 8) / C(256, 8). Counted: what every rank receives, own share
        // included (it is in DeepEP's received tensor).
        const ClusterSpec h = shipped("h800-8.toml");
        const double p = 1.0 - none_of(224, 256, 8);
        const auto units = [&](int, int) { return std::llround(tokens * p); };
        for (const auto& [name, bpt, published] : {std::tuple{"dispatch", fp8, 153.0}, {"combine", bf16, 158.0}}) {
            const double counted = 8 * double(units(0, 0)) * bpt;
            checks.push_back({std::string("DeepEP normal intranode EP8 ") + name + " (GB/s)", published,
                              counted / model_a2a_s(h, bpt, units) / 1e9});
        }
    }
    // internode, RDMA: EP16 43 / 43 GB/s, EP64 51 / 50 GB/s. DeepEP sends a token once per destination node, to
    // the GPU of the same rail, and forwards it over NVLink there; the RDMA stage is the bound it reports and the
    // flow here. A token reaches another node when one of its experts is there: p = 1 - C(256 - 256/nodes, 8) /
    // C(256, 8). EP32's 58 / 57 GB/s is not reproduced (the model gives ~48): it exceeds the ~50 GB/s one CX7 can
    // carry, so DeepEP's RDMA count there includes bytes that do not cross that NIC.
    struct Row {
        int ep;
        double dispatch, combine;
    };
    for (const Row& r : {Row{16, 43, 43}, Row{64, 51, 50}}) {
        const ClusterSpec h = shipped("h800-16.toml", r.ep);
        const int nodes = r.ep / 8;
        const double p = 1.0 - none_of(256 - 256 / nodes, 256, 8);
        const auto units = [&](int s, int d) {
            return s / 8 != d / 8 && s % 8 == d % 8 ? std::llround(tokens * p) : int64_t{0};
        };
        for (const auto& [name, bpt, published] : {std::tuple{"dispatch", fp8, r.dispatch}, {"combine", bf16, r.combine}}) {
            const double counted = (nodes - 1) * double(units(0, 8)) * bpt;
            checks.push_back({"DeepEP normal internode EP" + std::to_string(r.ep) + " " + name + " (GB/s)", published,
                              counted / model_a2a_s(h, bpt, units) / 1e9});
        }
    }
    expect_within(checks, 0.15);
}

}  // namespace
}  // namespace prophet
