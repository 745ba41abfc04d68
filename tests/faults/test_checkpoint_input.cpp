// A checkpoint edited by hand, by a bug or by a disk is input like any other: every field the trainer reads from
// state.json and the tensor files is checked against the resuming run's config before it is used, and a defect
// ends the run with exit 3 naming the file and the field, recorded `failed` in the store (issue 14, items 1-2).
// Any exception a run meets, not only prophet::Error, is recorded with the rank and the step and ends an MPI job
// (std::bad_alloc: exit 4), injected with the test-only debug.fail_mode=bad_alloc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../cli/cli_util.h"
#include "../temp_dir_test.h"
#include "core/error.h"
#include "store/store.h"

namespace fs = std::filesystem;
using nlohmann::json;
using prophet::testing::CliResult;

namespace {

std::string slurp(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
}

class CheckpointInput : public prophet::testing::TempDirTest {
  protected:
    // one rank, balance.policy=prophet, so a resumed run plans from the saved `previous` counts
    std::string train(const std::string& extra) const {
        return "train --config experiments/train/skewed-4rank.toml --json --set balance.policy=prophet "
               "--set train.steps=2 --set store.path=" + db_ + " " + extra;
    }
    CliResult prophet(const std::string& args) const { return prophet::testing::run_prophet("", args, dir_); }

    // trains 2 steps with a checkpoint; returns the step directory holding state.json
    fs::path save() {
        ckpt_ = (dir_ / "ckpt").string();
        const CliResult r = prophet(train("--save --set train.checkpoint_dir=" + ckpt_));
        EXPECT_EQ(r.exit_code, 0) << r.err;
        const std::string latest = slurp(fs::path(ckpt_) / "latest");
        return fs::path(ckpt_) / latest.substr(0, latest.find_first_of("\r\n"));
    }

    // the refused resume: exit 3, every fragment in the message, and the run recorded failed with no step
    void expect_refused(const CliResult& r, const std::vector<std::string>& fragments, const std::string& what) {
        EXPECT_EQ(r.exit_code, prophet::kExitConfig) << what << ": " << r.err;
        for (const std::string& fragment : fragments)
            EXPECT_NE(r.err.find(fragment), std::string::npos) << what << ": no \"" << fragment << "\" in " << r.err;
        prophet::Store store = prophet::Store::open(db_);
        const auto runs = store.list_runs();
        ASSERT_GE(runs.size(), 2u) << what;
        EXPECT_EQ(runs[0].status, "failed") << what;  // newest first: the refused resume
        EXPECT_EQ(runs[0].exit_code.value_or(-1), prophet::kExitConfig) << what;
        EXPECT_TRUE(store.get_metrics(runs[0].run_id).empty()) << what << ": a step of the refused resume ran";
    }

    std::string ckpt_;
};

// state.json's "extra" holds strings; policy_state is itself JSON text
json policy_state(const json& state) { return json::parse(state["extra"]["policy_state"].get<std::string>()); }
void set_policy_state(json& state, const json& policy) { state["extra"]["policy_state"] = policy.dump(); }

// exactly one `failure` event, by `rank` at `step`
void expect_one_failure_event(prophet::Store& store, const std::string& run_id, int rank, int64_t step) {
    int failures = 0;
    for (const prophet::EventRow& e : store.get_events(run_id))
        if (e.kind == "failure") {
            ++failures;
            EXPECT_EQ(e.rank, rank);
            EXPECT_EQ(e.step, step);
        }
    EXPECT_EQ(failures, 1);
}

}  // namespace

// Issue 14 item 1: a too-short `previous` was accepted and plan_prophet read past its end (valgrind: invalid
// read in routing_destination); the run was recorded finished.
TEST_F(CheckpointInput, ShortPolicyStatePreviousIsRefusedNamingFileAndField) {
    const fs::path step = save();
    json state = json::parse(slurp(step / "state.json"));
    json policy = policy_state(state);
    ASSERT_GT(policy["previous"].size(), 2u) << "the saved run must have planned from counts";
    policy["previous"] = std::vector<int64_t>{1, 2};
    set_policy_state(state, policy);
    write(step / "state.json", state.dump());
    expect_refused(prophet(train("--resume " + ckpt_)), {"state.json", "extra.policy_state.previous", "has 2 entries"},
                   "short previous");
}

// Every field the trainer reads, each broken alone: exit 3 naming state.json and the field. Issue 14 item 2's
// `extra.world_size = "one"` escaped as std::invalid_argument from stoi ("run failed: stoi", exit 1, the run left
// `running`).
TEST_F(CheckpointInput, EveryTrainerFieldOfStateJsonIsCheckedAgainstTheConfig) {
    const fs::path step = save();
    const std::string original = slurp(step / "state.json");
    struct Case {
        const char* field;  // named in the message
        std::function<void(json&)> edit;
    };
    const std::vector<Case> cases = {
        {"extra.world_size", [](json& s) { s["extra"]["world_size"] = "one"; }},
        {"extra.world_size", [](json& s) { s["extra"]["world_size"] = "1x"; }},
        {"extra.world_size", [](json& s) { s["extra"]["world_size"] = "99999999999999999999"; }},
        {"data_position.next_step", [](json& s) { s["data_position"]["next_step"] = "two"; }},
        {"data_position.next_step", [](json& s) { s["data_position"]["next_step"] = "-1"; }},
        {"data_position.next_step", [](json& s) { s["data_position"].erase("next_step"); }},
        {"extra.policy_state", [](json& s) { s["extra"]["policy_state"] = "{not json"; }},
        {"extra.policy_state.previous",
         [](json& s) { json p = policy_state(s); p["previous"][0] = -5; set_policy_state(s, p); }},
        {"extra.policy_state.previous",
         [](json& s) { json p = policy_state(s); p["previous"][0] = "many"; set_policy_state(s, p); }},
        {"extra.policy_state.window",
         [](json& s) { json p = policy_state(s); p["window"] = json::array({0}); set_policy_state(s, p); }},
        {"extra.policy_state.window_iterations",
         [](json& s) { json p = policy_state(s); p["window_iterations"] = -1; set_policy_state(s, p); }},
        {"extra.policy_state.offline",
         [](json& s) { json p = policy_state(s); p["offline"] = json::array({1, 2, 3}); set_policy_state(s, p); }},
        {"extra.policy_state.policy",
         [](json& s) { json p = policy_state(s); p.erase("policy"); set_policy_state(s, p); }},
    };
    for (const Case& c : cases) {
        json state = json::parse(original);
        c.edit(state);
        write(step / "state.json", state.dump());
        expect_refused(prophet(train("--resume " + ckpt_)), {"state.json", c.field}, c.field);
    }
}

// The saved offline placement of an offline policy (eplb): an owner outside the run's devices is refused.
TEST_F(CheckpointInput, OfflinePlacementOwnerOutsideTheDevicesIsRefused) {
    ckpt_ = (dir_ / "ckpt").string();
    // one rank: eplb with no redundant slots (a second copy of an expert needs a second device)
    const std::string eplb = "--set balance.policy=eplb --set balance.profile_iterations=1 "
                             "--set balance.eplb_redundant_slots=0 ";
    const CliResult saved = prophet(train(eplb + "--save --set train.checkpoint_dir=" + ckpt_));
    ASSERT_EQ(saved.exit_code, 0) << saved.err;
    const std::string latest = slurp(fs::path(ckpt_) / "latest");
    const fs::path step = fs::path(ckpt_) / latest.substr(0, latest.find_first_of("\r\n"));
    json state = json::parse(slurp(step / "state.json"));
    json policy = policy_state(state);
    ASSERT_FALSE(policy["offline"].empty()) << "eplb must have planned after one profiling iteration";
    policy["offline"][0]["owner"][0] = 7;  // one rank: device 0 only
    set_policy_state(state, policy);
    write(step / "state.json", state.dump());
    expect_refused(prophet(train(eplb + "--resume " + ckpt_)),
                   {"state.json", "extra.policy_state.offline[0].owner", "holds 7"}, "offline owner");
}

// flow under balance.flow_predict = ewma resumes from its saved load forecast: each of its fields broken alone is
// refused naming it (a missing one too: a checkpoint without it would plan other placements than the run it
// continues).
TEST_F(CheckpointInput, FlowLoadForecastIsCheckedNamingTheField) {
    ckpt_ = (dir_ / "ckpt").string();
    const std::string flow = "--set balance.policy=flow --set balance.flow_predict=ewma ";
    const CliResult saved = prophet(train(flow + "--save --set train.checkpoint_dir=" + ckpt_));
    ASSERT_EQ(saved.exit_code, 0) << saved.err;
    const std::string latest = slurp(fs::path(ckpt_) / "latest");
    const fs::path step = fs::path(ckpt_) / latest.substr(0, latest.find_first_of("\r\n"));
    const std::string original = slurp(step / "state.json");
    ASSERT_FALSE(policy_state(json::parse(original))["forecast"].empty()) << "flow's forecast must be saved";
    struct Case {
        const char* field;  // named in the message
        std::function<void(json&)> edit;
    };
    auto edit_forecast = [](std::function<void(json&)> change) {
        return [change](json& s) {
            json p = policy_state(s);
            change(p["forecast"]);
            set_policy_state(s, p);
        };
    };
    const std::vector<Case> cases = {
        {"extra.policy_state.forecast", edit_forecast([](json& f) { f = json::array(); })},
        {"extra.policy_state.forecast[0].observed", edit_forecast([](json& f) { f[0]["observed"] = "two"; })},
        {"extra.policy_state.forecast[0].observed", edit_forecast([](json& f) { f[0]["observed"] = 0; })},
        {"extra.policy_state.forecast[0]", edit_forecast([](json& f) { f[0]["mean"] = json::array({1}); })},
        {"extra.policy_state.forecast[0]", edit_forecast([](json& f) { f[0]["mean"][0] = -3.5; })},
        {"extra.policy_state.forecast[0]", edit_forecast([](json& f) { f[0]["var"][0] = "wide"; })},
        {"extra.policy_state.forecast[0]", edit_forecast([](json& f) { f[0].erase("var"); })},
    };
    for (const Case& c : cases) {
        json state = json::parse(original);
        c.edit(state);
        write(step / "state.json", state.dump());
        expect_refused(prophet(train(flow + "--resume " + ckpt_)), {"state.json", c.field}, c.field);
    }
}

// A NaN in the parameters would only show as a NaN loss steps later: refused on load, naming the tensor file.
TEST_F(CheckpointInput, NonFiniteParameterIsRefusedNamingTheTensorFile) {
    const fs::path step = save();
    const fs::path model = step / "model.safetensors";
    std::string bytes = slurp(model);
    const float nan = std::nanf("");
    std::memcpy(bytes.data() + bytes.size() - sizeof nan, &nan, sizeof nan);  // the last element of the last tensor
    write(model, bytes);
    expect_refused(prophet(train("--resume " + ckpt_)), {"model.safetensors", "must be finite"}, "NaN parameter");
}

// Issue 14 item 2: an exception that is not a prophet::Error (here std::bad_alloc, injected at step 1) is
// recorded with the rank and the step and ends the run with exit 4.
TEST_F(CheckpointInput, BadAllocInARunIsRecordedWithRankAndStepExitFour) {
    const CliResult r =
        prophet(train("--set debug.fail_rank=0 --set debug.fail_step=1 --set debug.fail_mode=bad_alloc"));
    EXPECT_EQ(r.exit_code, prophet::kExitResource) << r.err;
    EXPECT_NE(r.err.find("out of memory"), std::string::npos) << r.err;
    prophet::Store store = prophet::Store::open(db_);
    const auto runs = store.list_runs();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, "failed");
    EXPECT_EQ(runs[0].exit_code.value_or(-1), prophet::kExitResource);
    expect_one_failure_event(store, runs[0].run_id, 0, 1);
    int64_t last_step = -1;
    for (const prophet::MetricRow& m : store.get_metrics(runs[0].run_id)) last_step = std::max(last_step, m.step);
    EXPECT_EQ(last_step, 0) << "step 0 ran, step 1 failed at its start";
}

// The same on rank 1 of 2 under mpirun: the rank records its failure and aborts the job (before: the exception
// escaped to main, which neither recorded it nor called MPI_Abort, and the run stayed `running`).
TEST_F(CheckpointInput, BadAllocOnOneRankIsRecordedAndEndsTheMpiJob) {
    if (!prophet::testing::have_mpirun()) GTEST_SKIP() << "mpirun not installed";
    const CliResult r = prophet::testing::run_prophet(
        "timeout -s KILL 120 mpirun --allow-run-as-root --oversubscribe -np 2",
        train("--set train.steps=4 --set debug.fail_rank=1 --set debug.fail_step=2 --set debug.fail_mode=bad_alloc"),
        dir_);
    EXPECT_EQ(r.exit_code, prophet::kExitResource) << r.err;
    prophet::Store store = prophet::Store::open(db_);
    EXPECT_EQ(store.integrity_check(), "ok");
    const auto runs = store.list_runs();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, "failed") << r.err;
    EXPECT_EQ(runs[0].exit_code.value_or(-1), prophet::kExitResource) << runs[0].error;
    EXPECT_NE(runs[0].error.find("out of memory"), std::string::npos) << runs[0].error;
    expect_one_failure_event(store, runs[0].run_id, 1, 2);
}

// `prophet profile` (training with a routing trace) and `prophet profile --inference` record the same way.
TEST_F(CheckpointInput, BadAllocInProfileAndInferenceIsRecordedExitFour) {
    const std::string common = " --config experiments/train/skewed-4rank.toml --json --set store.path=" + db_ +
                               " --set debug.fail_rank=0 --set debug.fail_step=1 --set debug.fail_mode=bad_alloc";
    const std::vector<std::string> commands = {
        "profile --set train.steps=3" + common,
        "profile --inference --set serve.profile_iterations=2 --set serve.warmup=1 --set serve.iterations=2" + common};
    for (size_t i = 0; i < commands.size(); ++i) {
        const CliResult r = prophet(commands[i]);
        EXPECT_EQ(r.exit_code, prophet::kExitResource) << commands[i] << ": " << r.err;
        prophet::Store store = prophet::Store::open(db_);
        const auto runs = store.list_runs();
        ASSERT_EQ(runs.size(), i + 1) << commands[i];
        EXPECT_EQ(runs[0].status, "failed") << commands[i];  // newest first
        EXPECT_EQ(runs[0].exit_code.value_or(-1), prophet::kExitResource) << commands[i];
        expect_one_failure_event(store, runs[0].run_id, 0, 1);
    }
}
