#include "serve/ilp_gap.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/rng.h"
#include "core/timer.h"

namespace prophet::serve {

namespace {

// cumulative Zipf weights over experts in a random order: cdf[k] for the k-th expert of `order`
struct Zipf {
    std::vector<int> order;   // [E]
    std::vector<double> cdf;  // [E]
    int draw(Rng& rng) const {
        const double u = rng.uniform();
        const size_t k = std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
        return order[std::min(k, order.size() - 1)];
    }
};

Zipf make_zipf(int E, double skew, Rng& rng) {
    Zipf z;
    z.order.resize(E);
    std::iota(z.order.begin(), z.order.end(), 0);
    for (int i = E - 1; i > 0; --i) std::swap(z.order[i], z.order[rng.below(static_cast<uint64_t>(i) + 1)]);
    double total = 0;
    for (int k = 0; k < E; ++k) total += 1.0 / std::pow(k + 1.0, skew);
    double acc = 0;
    for (int k = 0; k < E; ++k) z.cdf.push_back(acc += 1.0 / std::pow(k + 1.0, skew) / total);
    return z;
}

}  // namespace

IlpInstance make_ilp_instance(int E, int D, int L, uint64_t seed, int64_t tokens, double skew, double affinity) {
    PROPHET_ASSERT(E >= D && D >= 1 && L >= 1 && tokens > 0);
    IlpInstance in;
    in.E = E;
    in.D = D;
    in.L = L;
    in.seed = seed;
    Rng rng(seed);
    std::vector<Zipf> zipf;
    for (int l = 0; l < L; ++l) zipf.push_back(make_zipf(E, skew, rng));
    std::vector<int> successor(static_cast<size_t>(L) * E);  // [L][E] preferred next expert
    for (int& s : successor) s = static_cast<int>(rng.below(E));
    in.loads.assign(static_cast<size_t>(L) * E, 0.0);
    in.transitions.assign(static_cast<size_t>(std::max(0, L - 1)) * E * E, 0.0);
    for (int64_t t = 0; t < tokens; ++t) {
        int e = zipf[0].draw(rng);
        in.loads[e] += 1;
        for (int l = 1; l < L; ++l) {
            const int next =
                rng.uniform() < affinity ? successor[static_cast<size_t>(l - 1) * E + e] : zipf[l].draw(rng);
            in.loads[static_cast<size_t>(l) * E + next] += 1;
            in.transitions[(static_cast<size_t>(l - 1) * E + e) * E + next] += 1;
            e = next;
        }
    }
    in.link_cost.assign(static_cast<size_t>(D) * D, 1.0);
    for (int d = 0; d < D; ++d) in.link_cost[static_cast<size_t>(d) * D + d] = 0.0;
    return in;
}

IlpGapResult compare_ilps(const IlpInstance& in, const BalanceOptions& options) {
    IlpGapResult r;
    int64_t t0 = now_ns();
    const std::vector<Placement> two = plan_moetuner(in.loads, in.transitions, in.L, in.D, in.E, in.link_cost, options);
    r.two_stage_s = static_cast<double>(now_ns() - t0) * 1e-9;
    r.two_stage = moetuner_joint_objective(two, in.loads, in.transitions, in.link_cost, options);
    r.has_joint = in.D <= kJointMaxDevices && in.E <= kJointMaxExperts && in.L <= kJointMaxLayers;
    if (!r.has_joint) return r;
    IlpReport report;
    t0 = now_ns();
    const std::vector<Placement> joint =
        plan_moetuner_joint(in.loads, in.transitions, in.L, in.D, in.E, in.link_cost, options, &report);
    r.joint_s = static_cast<double>(now_ns() - t0) * 1e-9;
    r.joint = moetuner_joint_objective(joint, in.loads, in.transitions, in.link_cost, options);
    r.joint_bound = report.ilp1_bound;
    r.joint_proven = report.ilp2_exact;
    return r;
}

}  // namespace prophet::serve
