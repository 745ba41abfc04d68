// The training core end to end: any placement gives the same losses as the static one, 1 rank and 4 ranks give
// the same losses, a resumed run repeats the uninterrupted one exactly, and bad configs fail before any
// communication. In-process ranks (threads of a LocalGroup) here; the Mpi* tests repeat it under mpirun -np 4.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <thread>

#include "comm/comm.h"
#include "core/error.h"
#include "train/trainer.h"
#include "train_fixtures.h"

using namespace prophet;

// Tolerance 1e-5 relative: placements change which rank computes a token's expert and therefore the order in
// which expert gradients are summed (Agg adds replica partial sums); in fp32 that moves losses by ~1e-7 per step,
// compounding over the AdamW steps. 10 steps (the preset's 20 would double the test's time, 8 runs of 4 ranks):
// every policy places from its plan from the second step on (the offline ones after balance.profile_iterations,
// 1 by default), so at least 9 of the 10 steps run on the policy's placements, and an update a placement changes
// shows in the next step's loss.
TEST(Trainer, EveryPlacementGivesTheStaticLosses) {
    constexpr int kSteps = 10;
    const auto reference = run_local(skewed_config({}), 4, kSteps);
    EXPECT_LT(reference.back(), reference.front()) << "the model must learn";
    for (const char* policy : {"fastermoe", "prophet", "prophet-oracle", "eplb", "moetuner", "top2", "flow"}) {
        // Eq 8 objective: under the default Eq 6 (no scheduler here) few replicas pay, and this test wants them
        const auto losses =
            run_local(skewed_config({std::string("balance.policy=") + policy, "balance.cost_eq=8"}), 4, kSteps);
        expect_close(losses, reference, 1e-5, policy);
    }
}

TEST(Trainer, RankCountLeavesTheLossesUnchanged) {
    const auto one = run_local(skewed_config({}), 1, 20);
    const auto four = run_local(skewed_config({}), 4, 20);
    expect_close(four, one, 1e-5, "4 ranks vs 1");
    const auto two = run_local(skewed_config({"balance.policy=prophet"}), 2, 20);
    expect_close(two, one, 1e-5, "2 ranks (prophet) vs 1");
}

TEST(Trainer, PlacementsActuallyReplicate) {
    // the invariance above means little if no policy ever moved an expert: the skewed preset must make the
    // planners replicate (with the Eq 8 objective: blocking transfers, the default without the scheduler, rarely pay)
    for (const char* policy : {"prophet-oracle", "flow"}) {
        const Config config = skewed_config({std::string("balance.policy=") + policy, "balance.cost_eq=8"});
        const TrainSettings settings = train_settings_from(config, 4);
        auto group = make_local_group(4);
        std::vector<int> replicas(4, 0);
        std::vector<std::thread> threads;
        for (int r = 0; r < 4; ++r)
            threads.emplace_back([&, r] {
                Trainer trainer(*group[r], settings, checkpoint_config_hash(config));
                for (int i = 0; i < 5; ++i) replicas[r] += trainer.step().replicas;
            });
        for (auto& t : threads) t.join();
        EXPECT_GT(replicas[0], 0) << policy << ": no replica in 5 steps of the skewed preset";
    }
}

TEST(Trainer, ResumeRepeatsTheUninterruptedRunExactly) {
    const std::string dir = (std::filesystem::temp_directory_path() /
                             ("prophet-resume-" + std::to_string(::getpid())))
                                .string();
    std::filesystem::remove_all(dir);
    for (const char* policy : {"static", "prophet"}) {
        const Config config = skewed_config({std::string("balance.policy=") + policy, "train.steps=12"});
        const auto full = run_local(config, 4, 12);
        // 6 steps, save, then a fresh set of trainers resumes and runs the last 6
        const auto first = run_local(config, 4, 6, nullptr, [&](Trainer& t, int) { t.save(dir); });
        const auto second = run_local(config, 4, 6, [&](Trainer& t, int) { t.resume(dir); });
        std::vector<double> joined = first;
        joined.insert(joined.end(), second.begin(), second.end());
        EXPECT_EQ(joined, full) << policy << ": a resumed run must repeat the losses bit for bit";
        std::filesystem::remove_all(dir);
    }
}

TEST(Trainer, ResumeRefusesAnotherConfig) {
    const std::string dir = (std::filesystem::temp_directory_path() /
                             ("prophet-resume-other-" + std::to_string(::getpid())))
                                .string();
    std::filesystem::remove_all(dir);
    run_local(skewed_config({}), 2, 2, nullptr, [&](Trainer& t, int) { t.save(dir); });
    try {
        run_local(skewed_config({"model.C=32"}), 2, 1, [&](Trainer& t, int) { t.resume(dir); });
        FAIL() << "resumed a checkpoint of another config";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig);
        EXPECT_NE(std::string(e.what()).find("another config"), std::string::npos) << e.what();
    }
    std::filesystem::remove_all(dir);
}

TEST(Trainer, BadConfigsFailBeforeCommunication) {
    auto expect_error = [](const std::vector<std::string>& sets, int ranks, const std::string& needle) {
        try {
            train_settings_from(skewed_config(sets), ranks);
            ADD_FAILURE() << "accepted " << needle;
        } catch (const Error& e) {
            EXPECT_EQ(e.exit_code(), kExitConfig);
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    expect_error({"model.E=6"}, 4, "model.E = 6");           // E not divisible by D
    expect_error({"model.K=9"}, 4, "model.K");                // K > E
    expect_error({"model.B=6"}, 4, "model.B = 6");           // B not divisible by D
    expect_error({"data.source=\"file\"", "data.path=\"/nonexistent/corpus.txt\""}, 4, "data.path");
    expect_error({"model.C=66"}, 4, "model");                 // C % NH != 0
    expect_error({"balance.route_to=even_split"}, 4, "balance.route_to");  // plan/sim only
    // fastermoe's Trans/Agg run on a communication thread, as blockwise's: the same refusals
    expect_error({"device.kind=cuda", "schedule.mode=fastermoe"}, 1, "schedule.mode = fastermoe");
    expect_error({"device.kind=cuda", "comm.backend=nccl", "schedule.mode=fastermoe"}, 4, "schedule.mode = fastermoe");
    expect_error({"schedule.mode=fasterMoE"}, 4, "schedule.mode");
}

TEST(Trainer, PlannerObjectiveFollowsTheSchedule) {
    // balance.cost_eq = 0 (default): Eq 6 without the scheduler (transfers block), Eq 8 with it
    EXPECT_EQ(train_settings_from(skewed_config({}), 4).balance.cost_eq, 6);
    EXPECT_EQ(train_settings_from(skewed_config({"schedule.mode=blockwise"}), 4).balance.cost_eq, 8);
    // FasterMoE's overlap hides transfers behind an all-to-all, not behind compute: the blocking equation
    EXPECT_EQ(train_settings_from(skewed_config({"schedule.mode=fastermoe"}), 4).balance.cost_eq, 6);
    EXPECT_EQ(train_settings_from(skewed_config({"balance.cost_eq=8"}), 4).balance.cost_eq, 8);  // set explicitly
    EXPECT_EQ(train_settings_from(skewed_config({"balance.cost_eq=6", "schedule.mode=blockwise"}), 4).balance.cost_eq,
              6);
    EXPECT_EQ(train_settings_from(skewed_config({}), 4).balance.route_rule, RouteRule::kOwner);  // auto in training
}
