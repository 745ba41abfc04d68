// The training core end to end: any placement gives the same losses as the static one, 1 rank and 4 ranks give
// the same losses, a resumed run repeats the uninterrupted one exactly, and bad configs fail before any
// communication. In-process ranks (threads of a LocalGroup) here; the Mpi* tests repeat it under mpirun -np 4.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <thread>

#include "comm/comm.h"
#include "core/error.h"
#include "train/trainer.h"
#include "train_fixtures.h"

using namespace prophet;

// Tolerance 1e-5 relative: placements change which rank computes a token's expert and therefore the order in
// which expert gradients are summed (Agg adds replica partial sums); in fp32 that moves losses by ~1e-7 per step,
// compounding over the AdamW steps; a split routing (even_split, flow) changes it the same way, splitting a token
// group's rows, and so its expert's gradient sum, over more ranks. 10 steps (the preset's 20 would double the
// test's time, 15 runs of 2 or 4 ranks):
// every policy places from its plan from the second step on (the offline ones after balance.profile_iterations,
// 1 by default), so at least 9 of the 10 steps run on the policy's placements, and an update a placement changes
// shows in the next step's loss.
TEST(Trainer, EveryPlacementGivesTheStaticLosses) {
    constexpr int kSteps = 10;
    // ranks, policy, routing rule (balance.route_to; auto = the policy's own: eplb even_split, flow flow, the
    // others owner). The split rules send a (device, expert) group's tokens to several holders.
    struct Row {
        int ranks;
        const char* policy;
        const char* route_to;
    };
    const Row rows[] = {
        {4, "fastermoe", "auto"},  {4, "prophet", "auto"}, {4, "prophet-oracle", "auto"}, {4, "eplb", "auto"},
        {4, "moetuner", "auto"},   {4, "top2", "auto"},    {4, "flow", "auto"},           {4, "flow", "flow"},
        {4, "flow", "owner"},      {4, "eplb", "flow"},    {4, "top2", "even_split"},     {2, "flow", "flow"},
        {2, "eplb", "even_split"},
    };
    std::map<int, std::vector<double>> reference;  // static's losses per rank count
    for (int ranks : {2, 4}) {
        reference[ranks] = run_local(skewed_config({}), ranks, kSteps);
        EXPECT_LT(reference[ranks].back(), reference[ranks].front()) << "the model must learn";
    }
    for (const Row& row : rows) {
        // Eq 8 objective: under the default Eq 6 (no scheduler here) few replicas pay, and this test wants them
        const auto losses = run_local(skewed_config({std::string("balance.policy=") + row.policy, "balance.cost_eq=8",
                                                     std::string("balance.route_to=") + row.route_to}),
                                      row.ranks, kSteps);
        expect_close(
            losses, reference[row.ranks], 1e-5,
            std::string(row.policy) + " route_to=" + row.route_to + " on " + std::to_string(row.ranks) + " ranks");
    }
}

// The split rules send tokens to replicas from other devices, and the run records how many: flow's own routing
// (route_to = auto) must split some group in 5 steps of the skewed preset (or the losses above prove nothing about
// the split), and the owner rule never sends a token to a replica (a replica computes its own device's tokens).
TEST(Trainer, RecordsTokensSentToReplicas) {
    struct Row {
        const char* route_to;
        bool sends;  // tokens_sent_to_replicas > 0 over the steps
    };
    for (const Row row : {Row{"auto", true}, Row{"even_split", true}, Row{"owner", false}}) {
        const auto stats = run_local_stats(skewed_config({"balance.policy=flow", "balance.cost_eq=8",
                                                          std::string("balance.route_to=") + row.route_to}),
                                           4, 5);
        int64_t sent = 0, replicas = 0;
        for (const StepStats& s : stats[0]) {
            sent += s.tokens_sent_to_replicas;
            replicas += s.replicas;
            // every token-expert assignment is computed once, by the owner or by a replica
            int64_t assignments = 0;
            for (int64_t n : s.counts) assignments += n;
            EXPECT_EQ(s.tokens_to_owner + s.tokens_to_replicas, assignments) << "step " << s.step;
            EXPECT_LE(s.tokens_sent_to_replicas, s.tokens_to_replicas);
        }
        ASSERT_GT(replicas, 0) << row.route_to << ": flow placed no replica in 5 steps";
        if (row.sends)
            EXPECT_GT(sent, 0) << row.route_to << ": no token was sent to a replica";
        else
            EXPECT_EQ(sent, 0) << row.route_to << ": a token was sent to a replica";
        for (size_t r = 1; r < stats.size(); ++r)
            for (size_t i = 0; i < stats[r].size(); ++i)
                EXPECT_EQ(stats[r][i].tokens_sent_to_replicas, stats[0][i].tokens_sent_to_replicas)
                    << "rank " << r << " recorded another routing";
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

// Losses and placements: flow under balance.flow_predict = ewma plans for the load forecast of every step so far,
// which the checkpoint must carry (a resumed run that restarted it planned other placements); Eq 8 so that flow
// replicates here at all.
TEST(Trainer, ResumeRepeatsTheUninterruptedRunExactly) {
    const std::string dir = (std::filesystem::temp_directory_path() /
                             ("prophet-resume-" + std::to_string(::getpid())))
                                .string();
    std::filesystem::remove_all(dir);
    const std::vector<std::vector<std::string>> runs = {
        {"balance.policy=static"},
        {"balance.policy=prophet"},
        {"balance.policy=flow", "balance.flow_predict=ewma", "balance.cost_eq=8"},
    };
    for (const std::vector<std::string>& sets : runs) {
        std::vector<std::string> all = sets;
        all.push_back("train.steps=12");
        const Config config = skewed_config(all);
        const auto full = run_local_stats(config, 4, 12)[0];
        // 6 steps, save, then a fresh set of trainers resumes and runs the last 6
        auto joined = run_local_stats(config, 4, 6, nullptr, [&](Trainer& t, int) { t.save(dir); })[0];
        const auto second = run_local_stats(config, 4, 6, [&](Trainer& t, int) { t.resume(dir); })[0];
        joined.insert(joined.end(), second.begin(), second.end());
        ASSERT_EQ(joined.size(), full.size());
        int replicas = 0;
        for (size_t i = 0; i < full.size(); ++i) {
            EXPECT_EQ(joined[i].loss, full[i].loss)
                << sets[0] << " step " << i << ": the losses must repeat bit for bit";
            ASSERT_EQ(joined[i].placements.size(), full[i].placements.size());
            for (size_t l = 0; l < full[i].placements.size(); ++l) {
                EXPECT_EQ(joined[i].placements[l].owner, full[i].placements[l].owner) << sets[0] << " step " << i;
                EXPECT_EQ(joined[i].placements[l].replica, full[i].placements[l].replica) << sets[0] << " step " << i;
            }
            replicas += i >= 6 ? full[i].replicas : 0;
        }
        if (sets[0] == "balance.policy=flow") {
            EXPECT_GT(replicas, 0) << "flow must replicate after the resume";
        }
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
    expect_error({"model.C=66"}, 4, "model");  // C % NH != 0
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
}

TEST(Trainer, AutoRoutingIsThePolicysOwnRule) {
    // balance.route_to = auto: each policy's paper rule, as plan and sim; a rule set explicitly wins
    struct Row {
        std::vector<std::string> sets;
        RouteRule rule;
    };
    const Row rows[] = {
        {{}, RouteRule::kOwner},
        {{"balance.policy=prophet"}, RouteRule::kOwner},
        {{"balance.policy=eplb"}, RouteRule::kEvenSplit},
        {{"balance.policy=flow"}, RouteRule::kFlow},
        {{"balance.policy=flow", "balance.route_to=owner"}, RouteRule::kOwner},
        {{"balance.policy=eplb", "balance.route_to=flow"}, RouteRule::kFlow},
        {{"balance.policy=flow", "balance.route_to=max_flow"}, RouteRule::kMaxFlow},
    };
    for (const Row& row : rows)
        EXPECT_EQ(train_settings_from(skewed_config(row.sets), 4).balance.route_rule, row.rule)
            << (row.sets.empty() ? "static" : row.sets.back());
}
