// A validating real sweep calibrated on a held-out corpus (tests/fixtures/calibrated-sweep.toml): where the
// calibration runs, what it is fitted on, and the per-op replay validation of every child. The sweep (a 2-rank
// calibration, 4 points, the report: about 20 s on both cores) runs once for the three cases: under ctest the
// fixture calibrated_sweep_fixture runs it and names its directory in PROPHET_CALIBRATED_SWEEP_DIR
// (tests/CMakeLists.txt); run directly, the binary runs it once into a temporary directory of its own.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "sim/op_model.h"
#include "sim/replay.h"
#include "store/store.h"
#include "store_queries.h"

namespace fs = std::filesystem;
using prophet::testing::metric;
using prophet::testing::param;
using prophet::testing::read_file;

namespace {

// What tests/cli/calibrated_sweep_fixture.sh left in `dir`: the store, clusters/, REPORT.md, the sweep's --json
// stdout and its stderr.
struct SweepOutput {
    fs::path dir;
    std::string db;
    nlohmann::json out;
    std::string err;
};

class SweepCalibrated : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        if (!prophet::testing::have_mpirun()) return;
        fs::path dir;
        if (const char* given = std::getenv("PROPHET_CALIBRATED_SWEEP_DIR"); given && *given) {
            dir = given;
        } else {  // not under ctest: run the fixture here, once for the cases of this process
            owned_dir_ = fs::temp_directory_path() / ("prophet-" + std::to_string(getpid()) + "-calibrated-sweep");
            fs::remove_all(owned_dir_);
            fs::create_directories(owned_dir_);  // the runner's stderr.txt; the script makes dir itself
            dir = owned_dir_ / "sweep";
            const std::string script = std::string(PROPHET_SOURCE_DIR) + "/tests/cli/calibrated_sweep_fixture.sh";
            setup_exit_ = prophet::testing::run_command(
                              "'" + script + "' '" + PROPHET_BINARY + "' '" + dir.string() + "'", owned_dir_)
                              .exit_code;
        }
        output_ = std::make_unique<SweepOutput>();
        output_->dir = dir;
        output_->db = (dir / "store.db").string();
        output_->err = read_file(dir / "err.txt");
        const std::string out = read_file(dir / "out.json");
        output_->out = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
    }
    static void TearDownTestSuite() {
        if (!owned_dir_.empty()) fs::remove_all(owned_dir_);
        output_.reset();
    }
    void SetUp() override {
        if (!prophet::testing::have_mpirun()) GTEST_SKIP() << "mpirun not installed";
        ASSERT_EQ(setup_exit_, 0) << "calibrated_sweep_fixture.sh failed:\n" << output_->err;
        ASSERT_TRUE(output_->out.is_object())
            << "no --json summary in " << (output_->dir / "out.json") << "; the sweep's stderr:\n"
            << output_->err;
    }
    static const SweepOutput& sweep() { return *output_; }

  private:
    static inline std::unique_ptr<SweepOutput> output_;
    static inline fs::path owned_dir_;  // the temporary directory this process made (not ctest's)
    static inline int setup_exit_ = 0;
};

}  // namespace

// [sweep.calibrate_set]: one calibration per rank count, run on the held-out config (data.dominance = 0.0 here),
// never on a validated point's (each of the 2 model.K values would otherwise calibrate its own); each point names it
// in validate_calibrated_on.
TEST_F(SweepCalibrated, CalibrateSetCalibratesOnAHeldOutConfig) {
    const SweepOutput& s = sweep();
    ASSERT_EQ(s.out["run_ids"].size(), 4u) << "2 policies x 2 model.K values";
    size_t files = 0;
    for (const auto& entry : fs::directory_iterator(s.dir / "clusters")) {
        ++files;
        EXPECT_EQ(prophet::sim::load_op_tables(entry.path().string()).gemm.passes, 1)
            << "calibrate_grid_passes reaches the calibration's --grid-passes";
    }
    EXPECT_EQ(files, 1u) << "one calibration for both model.K values";
    prophet::Store store = prophet::Store::open(s.db);
    for (const auto& id : s.out["run_ids"]) {
        EXPECT_EQ(nlohmann::json::parse(param(store, id, "validate_calibrated_on")).get<std::string>(),
                  "2 ranks, held out: data.dominance=0.0");
        EXPECT_GT(metric(store, id, "sim_step_ms"), 0);
    }
    int profiles = 0;
    for (const auto& row : store.list_runs("real-test")) {
        if (row.info.command != "profile") continue;
        ++profiles;
        EXPECT_EQ(param(store, row.run_id, "data.dominance"), "0.0") << "the calibration ran the held-out config";
    }
    EXPECT_EQ(profiles, 1);
}

// The calibration's [ops] scale and in_step_us are fitted on three recordings of the calibration config pooled
// (the profile's own run and two `prophet train --timeline` runs of "<sweep>-calibration", lib/sweep/
// calibrate_pooled.cpp): the file holds what fit_op_scales and fit_in_step_overheads give on the three runs of the
// store, to the 6 significant digits the file keeps, and the recordings are not among the validated children.
TEST_F(SweepCalibrated, CalibrationIsFittedOnThreeRecordingsPooled) {
    const SweepOutput& s = sweep();
    prophet::Store store = prophet::Store::open(s.db);
    std::vector<std::string> ids;
    for (const auto& row : store.list_runs("real-test"))
        if (row.info.command == "profile") ids.push_back(row.run_id);
    ASSERT_EQ(ids.size(), 1u);
    for (const auto& row : store.list_runs("real-test-calibration")) {
        EXPECT_EQ(row.info.command, "train");
        EXPECT_EQ(param(store, row.run_id, "data.dominance"), "0.0") << "the held-out calibration config";
        ids.push_back(row.run_id);
    }
    ASSERT_EQ(ids.size(), 3u);
    std::vector<prophet::sim::RecordedRun> runs;
    for (const std::string& id : ids) runs.push_back(prophet::sim::load_recorded_run(store, id));
    std::vector<const prophet::sim::RecordedRun*> pooled;
    for (const auto& run : runs) pooled.push_back(&run);
    std::string cluster;
    for (const auto& entry : fs::directory_iterator(s.dir / "clusters")) cluster = entry.path().string();
    const prophet::sim::OpTables file = prophet::sim::load_op_tables(cluster);
    const prophet::sim::OpTables oracle =
        prophet::sim::fit_in_step_overheads(prophet::sim::fit_op_scales(file, pooled), pooled);
    ASSERT_EQ(file.scale.size(), oracle.scale.size());
    for (const auto& [kind, factor] : oracle.scale) EXPECT_NEAR(file.scale.at(kind), factor, 1e-5 * factor) << kind;
    for (const auto& [kind, sec] : oracle.in_step_s)
        EXPECT_NEAR(file.in_step_s.at(kind), sec, 1e-5 * sec + 1e-9) << kind;
    ASSERT_EQ(s.out["run_ids"].size(), 4u) << "the 4 points only: the recordings are not points";
    for (const auto& id : s.out["run_ids"]) {
        const std::string child = nlohmann::json::parse(param(store, id, "child_run_id")).get<std::string>();
        EXPECT_EQ(std::count(ids.begin(), ids.end(), child), 0) << child << " is a calibration recording";
    }
}

// A validating sweep's children record --timeline, and after the last point the sweep replays every child with the
// per-op model of its calibrated cluster file ([ops]) and records one validation run (prophet validate's library)
// whose report has a point per child, all held out: [sweep.calibrate_set] calibrated another corpus (the model's
// shape is the same, as in experiments/sweeps/main-real.toml, so only the sweep knows they are held out); the
// report draws it (fig_validation_replay) and its summary gives the held-out error.
TEST_F(SweepCalibrated, RecordsAPerOpReplayValidationOfEveryChild) {
    const SweepOutput& s = sweep();
    ASSERT_EQ(s.out["run_ids"].size(), 4u);
    ASSERT_TRUE(s.out.contains("validation_run")) << s.err;
    // the report draws it, and its summary states the held-out error of the replay
    const std::string report_md = read_file(s.dir / "REPORT.md");
    EXPECT_NE(report_md.find("figures/fig_validation_replay.png"), std::string::npos) << report_md;
    EXPECT_NE(report_md.find("4 held-out runs of real-test came out"), std::string::npos) << report_md;
    prophet::Store store = prophet::Store::open(s.db);
    std::set<std::string> children;
    for (const auto& id : s.out["run_ids"])
        children.insert(nlohmann::json::parse(param(store, id, "child_run_id")).get<std::string>());
    ASSERT_EQ(children.size(), 4u);
    const auto events_of = [&](const std::string& run_id, const std::string& kind) {
        std::vector<prophet::EventRow> out;
        for (const auto& e : store.get_events(run_id))
            if (e.kind == kind) out.push_back(e);
        return out;
    };
    for (const std::string& child : children)
        EXPECT_FALSE(events_of(child, "timeline").empty()) << child << " recorded no timeline";
    const std::string validation = s.out["validation_run"];
    EXPECT_EQ(store.get_run(validation).info.command, "validate");
    const auto events = events_of(validation, "validation");
    ASSERT_EQ(events.size(), 1u);
    const auto report = nlohmann::json::parse(events[0].data_json);
    EXPECT_EQ(report["replay"], "model");
    ASSERT_EQ(report["points"].size(), 4u) << report.dump();
    for (const auto& p : report["points"]) {
        EXPECT_TRUE(children.count(p["run_id"].get<std::string>())) << p.dump();
        EXPECT_TRUE(p["held_out"].get<bool>()) << p.dump();
        EXPECT_GT(p["sim_median_ms"].get<double>(), 0) << p.dump();
        EXPECT_GT(p["measured_median_ms"].get<double>(), 0) << p.dump();
    }
    EXPECT_EQ(report["total"]["heldout_points"], 4);
    EXPECT_NE(report["calibrated_on"].get<std::string>().find("held out: data.dominance="), std::string::npos)
        << report.dump();
    EXPECT_NE(s.err.find("per-op replay validation of 4 child run(s)"), std::string::npos) << s.err;
}
