// FasterMoE's own schedule in the trainer (schedule.mode = fastermoe, docs/scheduler.md): planned in order on the
// step's counts, Trans(l) whole on the communication thread beside the dispatch all-to-all, Agg(l) whole beside the
// backward combine all-to-all. It must not change a bit of the run, and the overlap must really happen.
// In-process ranks (threads of a LocalGroup), as test_scheduler.cpp.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "train_fixtures.h"

using namespace prophet;

namespace {

// every rank's whole parameter arena after the run ([rank][param]; non-home expert copies hold the last Trans)
struct RecordedRunResult {
    std::vector<std::vector<StepStats>> stats;
    std::vector<std::vector<float>> params;
};

RecordedRunResult run_with_params(const Config& config, int ranks, int steps,
                    const std::function<void(Trainer&, int)>& before = nullptr) {
    RecordedRunResult run;
    run.params.resize(ranks);
    run.stats = run_local_stats(config, ranks, steps, before,
                                [&](Trainer& t, int r) { run.params[r] = t.model().params; });
    return run;
}

struct TimelineSpan {
    std::string kind, lane;
    int block = 0;
    double start_us = 0, end_us = 0;
};

// one rank's ops of one step, by (kind, lane, block); a kind that occurs several times per block keeps the first
// (the packs, which the checks below do not use)
std::map<std::tuple<std::string, std::string, int>, TimelineSpan> spans_of(const std::string& timeline_json) {
    std::map<std::tuple<std::string, std::string, int>, TimelineSpan> out;
    for (const auto& op : nlohmann::json::parse(timeline_json)) {
        TimelineSpan s{op[0].get<std::string>(), op[1].get<std::string>(), op[2].get<int>(), op[4].get<double>(),
               op[5].get<double>()};
        out.emplace(std::make_tuple(s.kind, s.lane, s.block), s);
    }
    return out;
}

}  // namespace

// The same transfers with the same sums, only on another thread at other times: losses and every rank's
// parameters (home experts, replicas' copies, dense) bitwise equal to the blocking order's, for fastermoe's own
// shadowing and for top2 (replicas every step), on 2 and 4 ranks, and over an emulated link (the paced
// communicator carries the Trans beside the all-to-all's messages on the same egress queue).
TEST(FasterMoESchedule, TrainingIsBitwiseTheBlockingSchedule) {
    const int steps = 5;
    struct Case {
        int ranks;
        const char* policy;
        const char* link;
    };
    for (const Case& c : {Case{2, "fastermoe", "0"}, Case{2, "top2", "0"}, Case{4, "fastermoe", "0"},
                          Case{4, "top2", "0"}, Case{4, "top2", "8"}}) {
        auto config = [&](const char* mode) {
            return skewed_config({std::string("balance.policy=") + c.policy, std::string("schedule.mode=") + mode,
                                  std::string("comm.link_gbps=") + c.link});
        };
        const std::string where = std::string(c.policy) + " on " + std::to_string(c.ranks) + " ranks, link " + c.link;
        const RecordedRunResult blocking = run_with_params(config("none"), c.ranks, steps);
        const RecordedRunResult overlapped = run_with_params(config("fastermoe"), c.ranks, steps);
        double moved_ms = 0;  // the runs must really move experts, or there is nothing to compare
        for (int step = 0; step < steps; ++step) {
            EXPECT_EQ(overlapped.stats[0][step].loss, blocking.stats[0][step].loss) << where << " step " << step;
            const auto &a = overlapped.stats[0][step].placements, &b = blocking.stats[0][step].placements;
            ASSERT_EQ(a.size(), b.size());
            for (size_t l = 0; l < a.size(); ++l)
                EXPECT_TRUE(a[l].owner == b[l].owner && a[l].replica == b[l].replica)
                    << where << " step " << step << " layer " << l << ": another placement";
            moved_ms += overlapped.stats[0][step].trans_ms + overlapped.stats[0][step].agg_ms;
        }
        EXPECT_GT(moved_ms, 0.0) << where << ": no Trans/Agg ran";
        for (int r = 0; r < c.ranks; ++r)
            EXPECT_TRUE(overlapped.params[r] == blocking.params[r]) << where << ": rank " << r << "'s parameters differ";
    }
}

// Over an emulated 1 Gbit/s link (each all-to-all's share and each expert's 64 KiB take a fraction of a ms to a
// few ms) the timeline shows the schedule's structure on every rank, block and step: Trans(l) starts after the
// plan, on the comm lane, and ends before the expert compute (the wait sits right before it); Agg(l) starts after
// the expert backward and ends by the end of the block's backward. And the overlap happened: Trans(l) started
// before the dispatch all-to-all of layer l ended in at least half the cases (the communication thread wakes up
// in microseconds, the exchange takes milliseconds; only a machine loaded past that could delay it), Agg(l)
// before the backward combine all-to-all ended at least once. No time ratio is asserted.
TEST(FasterMoESchedule, TransRunsBesideTheDispatchAllToAll) {
    const int ranks = 4, steps = 4;
    const Config config = skewed_config({"balance.policy=top2", "schedule.mode=fastermoe", "comm.link_gbps=1"});
    const auto stats = run_local_stats(config, ranks, steps, [](Trainer& t, int) { t.set_timeline(true); });
    const int L = 2;
    int trans_cases = 0, trans_overlapped = 0, agg_cases = 0, agg_overlapped = 0;
    for (int step = 1; step < steps; ++step) {  // step 0: warm-up
        const StepStats& s = stats[0][step];
        ASSERT_EQ((int)s.timelines.size(), ranks);
        for (int r = 0; r < ranks; ++r) {
            const auto ops = spans_of(s.timelines[r]);
            auto get = [&](const char* kind, const char* lane, int block) -> const TimelineSpan* {
                const auto it = ops.find({kind, lane, block});
                return it == ops.end() ? nullptr : &it->second;
            };
            for (int l = 0; l < L; ++l) {
                const std::string where = "step " + std::to_string(step) + " rank " + std::to_string(r) + " layer " +
                                          std::to_string(l);
                EXPECT_EQ(get("trans", "compute", l), nullptr) << where << ": Trans ran on the main thread";
                EXPECT_EQ(get("agg", "compute", l), nullptr) << where << ": Agg ran on the main thread";
                const TimelineSpan* trans = get("trans", "comm", l);
                const TimelineSpan* agg = get("agg", "comm", l);
                ASSERT_NE(trans, nullptr) << where << ": top2 moves experts every step";
                ASSERT_NE(agg, nullptr) << where;
                const TimelineSpan *plan = get("plan", "compute", l), *dispatch = get("dispatch", "compute", l),
                           *fec = get("fec", "compute", l), *bec = get("bec", "compute", l),
                           *combine_bwd = get("combine_bwd", "compute", l), *agg_wait = get("agg_wait", "compute", l);
                ASSERT_TRUE(plan && dispatch && fec && bec && combine_bwd && agg_wait) << where;
                EXPECT_GE(trans->start_us, plan->end_us) << where << ": Trans before its plan";
                EXPECT_LE(trans->end_us, fec->start_us) << where << ": the experts ran before Trans ended";
                EXPECT_GE(agg->start_us, bec->end_us) << where << ": Agg before the expert backward";
                EXPECT_LE(agg->end_us, agg_wait->end_us) << where << ": backward(l) returned before Agg ended";
                ++trans_cases;
                trans_overlapped += trans->start_us < dispatch->end_us;
                ++agg_cases;
                agg_overlapped += agg->start_us < combine_bwd->end_us;
            }
        }
        // the exposed part is the main thread's waits, never more than the transfers' own time plus wake-ups
        EXPECT_GT(s.trans_ms, 0.0);
        EXPECT_GE(s.trans_exposed_ms, 0.0);
    }
    std::printf("Trans started before the dispatch all-to-all ended in %d of %d cases; Agg before the backward "
                "combine ended in %d of %d\n", trans_overlapped, trans_cases, agg_overlapped, agg_cases);
    EXPECT_GE(2 * trans_overlapped, trans_cases) << "Trans hardly ran beside the dispatch all-to-all";
    EXPECT_GT(agg_overlapped, 0) << "Agg never ran beside the backward combine all-to-all";
}
