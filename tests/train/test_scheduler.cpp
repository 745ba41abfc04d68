// The block-wise scheduler (docs/scheduler.md): it must not change the numbers, and it must really overlap.
// In-process ranks (threads of a LocalGroup); the transfers cross an emulated link (comm.link_gbps) so that they
// take known wall time without CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "train_fixtures.h"

using namespace prophet;

namespace {

struct OpSpan {
    std::string kind, lane;
    int block = 0;
    double start_us = 0, end_us = 0;
};

std::vector<OpSpan> parse_timeline(const std::string& text) {
    std::vector<OpSpan> out;
    for (const auto& op : nlohmann::json::parse(text))
        out.push_back({op[0].get<std::string>(), op[1].get<std::string>(), op[2].get<int>(), op[4].get<double>(),
                       op[5].get<double>()});
    return out;
}

bool is_compute(const std::string& kind) {
    return kind == "attn" || kind == "gate" || kind == "fec" || kind == "gate_bwd" || kind == "attn_bwd" ||
           kind == "bec";
}

}  // namespace

// Same seeds, same losses: for prophet the scheduler plans the same placements (from the previous iteration's
// counts, on the planner thread) and moves the same bytes with the same sums, only at other times, so the
// losses are bitwise equal; both split rules. The objective is pinned to Eq 8 (by default it follows the
// schedule: Eq 6 blocking, Eq 8 scheduled, and other placements give other losses in the last bits).
TEST(Scheduler, LossesAreUnchangedBitwise) {
    const auto blocking = run_local(skewed_config({"balance.policy=prophet", "balance.cost_eq=8"}), 4, 12);
    for (const char* split : {"time", "half"}) {
        const auto scheduled = run_local(skewed_config({"balance.policy=prophet", "balance.cost_eq=8",
                                                        "schedule.mode=blockwise", std::string("schedule.split=") + split}),
                                         4, 12);
        EXPECT_EQ(scheduled, blocking) << "split " << split;
    }
    // over an emulated link too (the paced communicator must deliver the same bytes)
    const auto paced =
        run_local(skewed_config({"balance.policy=prophet", "balance.cost_eq=8", "schedule.mode=blockwise",
                                 "comm.link_gbps=20"}),
                  4, 6);
    EXPECT_EQ(paced, std::vector<double>(blocking.begin(), blocking.begin() + 6));
}

// Policies that plan on the current counts become predictive under the scheduler (other placements), which
// changes only the order of float sums: within the placement-invariance tolerance of the static losses.
TEST(Scheduler, PredictivePoliciesKeepTheStaticLosses) {
    const auto reference = run_local(skewed_config({}), 4, 12);
    for (const char* policy : {"fastermoe", "top2"}) {
        const auto scheduled =
            run_local(skewed_config({std::string("balance.policy=") + policy, "schedule.mode=blockwise"}), 4, 12);
        expect_close(scheduled, reference, 1e-5, std::string(policy) + " blockwise");
    }
}

// Where transfers take known, non-trivial time (an emulated 8 Gbit/s link: one expert of C = 128, F = 256 is
// 256 KiB, about 0.26 ms per receiver) the timeline must show Trans/Agg running beside computation, and the time
// they held up the computation must be well below their own duration. The blocking run of the same config is the
// contrast: there every transfer is exposed in full and none runs beside computation.
// This is a check of the mechanism, not a measurement: 4 in-process ranks with their transfer and wire threads on
// the suite's 2 cores are oversubscribed, so how a transfer's time divides between compute and the all-to-all
// waits is the OS scheduler's. Under ctest (one BLAS thread), alone on an idle machine, 34-54% of the transfer time
// ran beside compute (8 runs, 2026-12-06) and 29.7% in two clean CI runs that failed the old 30% threshold; the
// exposed share was 15-30%. So: beside compute more than a tenth, exposed less than 70%. What the scheduler hides,
// measured pinned and repeated, is `prophet ablate`'s (docs/scheduler.md).
TEST(Scheduler, ExpertTransfersOverlapComputation) {
    const std::vector<std::string> sets = {"balance.policy=top2", "model.C=128", "model.F=256", "model.T=64",
                                           "comm.link_gbps=8",    "train.steps=6"};
    auto with = [&](const std::string& mode) {
        std::vector<std::string> s = sets;
        s.push_back("schedule.mode=" + mode);
        return skewed_config(s);
    };
    const int steps = 6, ranks = 4;
    auto timeline_on = [](Trainer& t, int) { t.set_timeline(true); };
    const auto scheduled = run_local_stats(with("blockwise"), ranks, steps, timeline_on);
    const auto blocking = run_local_stats(with("none"), ranks, steps, timeline_on);

    auto totals = [&](const std::vector<std::vector<StepStats>>& stats, double* busy, double* exposed,
                      double* overlapped) {
        *busy = *exposed = *overlapped = 0;
        for (int step = 2; step < steps; ++step) {  // steps 0-1: warm-up, and step 0 plans nothing
            const StepStats& s = stats[0][step];     // rank 0 holds every rank's timeline
            ASSERT_EQ((int)s.timelines.size(), ranks);
            for (int r = 0; r < ranks; ++r) {
                const std::vector<OpSpan> ops = parse_timeline(s.timelines[r]);
                for (const OpSpan& t : ops) {
                    const double d = t.end_us - t.start_us;
                    if (t.kind == "trans" || t.kind == "agg") {
                        *busy += d;
                        if (t.lane == "compute") *exposed += d;
                        // how much of this transfer ran while this rank's main thread computed
                        for (const OpSpan& c : ops)
                            if (c.lane == "compute" && is_compute(c.kind))
                                *overlapped += std::max(0.0, std::min(t.end_us, c.end_us) - std::max(t.start_us, c.start_us));
                    }
                    if (t.kind == "trans_wait" || t.kind == "agg_wait") *exposed += d;
                }
            }
        }
    };
    double busy = 0, exposed = 0, overlapped = 0;
    totals(scheduled, &busy, &exposed, &overlapped);
    std::printf("blockwise: transfers %.1f ms, exposed %.1f ms, beside compute %.1f ms\n", busy / 1e3, exposed / 1e3,
                overlapped / 1e3);
    ASSERT_GT(busy, 0) << "top2 must move experts every step";
    EXPECT_GT(overlapped, 0.1 * busy) << "Trans/Agg hardly ran beside computation";
    EXPECT_LT(exposed, 0.7 * busy) << "the scheduler hid less than 30% of the transfer time";

    double busy0 = 0, exposed0 = 0, overlapped0 = 0;
    totals(blocking, &busy0, &exposed0, &overlapped0);
    std::printf("blocking:  transfers %.1f ms, exposed %.1f ms, beside compute %.1f ms\n", busy0 / 1e3,
                exposed0 / 1e3, overlapped0 / 1e3);
    EXPECT_GT(busy0, 0);
    EXPECT_NEAR(exposed0, busy0, 1e-6 * busy0) << "blocking transfers are exposed in full";
    EXPECT_EQ(overlapped0, 0.0) << "blocking transfers cannot overlap the main thread's compute";

    // the per-step statistics say the same as the timeline
    double stat_exposed = 0, stat_busy = 0;
    for (int step = 2; step < steps; ++step) {
        stat_exposed += scheduled[0][step].trans_exposed_ms + scheduled[0][step].agg_exposed_ms;
        stat_busy += scheduled[0][step].trans_ms + scheduled[0][step].agg_ms;
    }
    EXPECT_LT(stat_exposed, stat_busy);
}
