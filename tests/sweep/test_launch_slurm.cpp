// The Slurm launcher's pieces that need no Slurm (lib/sweep/launch_slurm.h): [sweep.slurm] parsing and its
// errors, the batch script (resources, array, chunks, one shard per task), and which points count as done from
// the store and the shards together. The end-to-end run through a real Slurm: tests/cluster/slurm_sweep_test.sh.
#include "sweep/launch_slurm.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "../temp_dir_test.h"
#include "core/error.h"
#include "core/process.h"
#include "sweep/sweep.h"

namespace fs = std::filesystem;
using namespace prophet;
using namespace prophet::sweep;

namespace {

class LaunchSlurm : public prophet::testing::TempDirTest {
  protected:
    void SetUp() override {
        fs::current_path(PROPHET_SOURCE_DIR);
        TempDirTest::SetUp();
    }
    // a 4-point model sweep (2 clusters x 2 policies) with the given [sweep.slurm] body
    std::string write(const std::string& slurm) {
        const std::string path = (dir_ / "sweep.toml").string();
        std::ofstream(path) << "[sweep]\nname = \"s\"\nengine = \"model\"\n"
                               "clusters = [\"experiments/clusters/hpwnv-16.toml\", "
                               "\"experiments/clusters/moetuner-h100-ep4.toml\"]\n"
                               "traces = [\"experiments/traces/tiny-e4-d4.toml\"]\n"
                               "policies = [\"static\", \"prophet\"]\nseeds = [1]\n[sweep.slurm]\n"
                            << slurm;
        return path;
    }
};

std::string slurm_error(const std::string& path) {
    try {
        parse_slurm_spec(path);
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitConfig) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "no error";
    return "";
}

}  // namespace

TEST_F(LaunchSlurm, BatchJobCarriesTheSlurmTableWithOneShardPerTask) {
    const std::string file = write(
        "nodes = 2\ntasks_per_node = 3\ntime = \"00:10:00\"\npartition = \"cpu\"\naccount = \"proj\"\n"
        "points_per_task = 2\nmax_parallel = 1\n");
    const SweepSpec spec = parse_sweep_file(file);  // [sweep.slurm] is a known key
    const SlurmSpec slurm = parse_slurm_spec(file);
    const BatchJob job = make_batch_job(spec, slurm, expand_points(spec), {1, 2, 4}, file, "/opt/prophet", "/work",
                                        "/shared/shards");
    ASSERT_EQ(job.tasks.size(), 2u);
    EXPECT_EQ(job.tasks[0], (std::vector<int>{1, 2}));
    EXPECT_EQ(job.tasks[1], (std::vector<int>{4}));
    for (const char* line : {"#SBATCH --job-name=\"prophet-s\"\n", "#SBATCH --array=0-1%1\n", "#SBATCH --nodes=2\n",
                             "#SBATCH --ntasks-per-node=3\n", "#SBATCH --time=00:10:00\n", "#SBATCH --partition=cpu\n",
                             "#SBATCH --account=proj\n", "#SBATCH --chdir=\"/work\"\n",
                             "#SBATCH --output=\"/shared/shards/slurm-%A_%a.out\"\n", "POINTS=( 1,2 4 )\n",
                             "shard='/shared/shards'/shard-\"${points%%,*}\".db\n",
                             "--points \"$points\" --no-report --set store.path=\"$shard\"\n"})
        EXPECT_NE(job.script.find(line), std::string::npos) << line << "\nin\n" << job.script;
}

TEST_F(LaunchSlurm, EmptyTableTakesTheDefaults) {
    const SlurmSpec d = parse_slurm_spec(write(""));
    EXPECT_EQ(d.nodes, 1);
    EXPECT_EQ(d.points_per_task, 1);
    EXPECT_EQ(shard_directory(d, "/r/x.db"), "/r/x.db.shards");
}

TEST_F(LaunchSlurm, BadKeysNameThemselves) {
    EXPECT_NE(slurm_error(write("gpus = 2\n")).find("sweep.slurm.gpus"), std::string::npos);
    EXPECT_NE(slurm_error(write("nodes = 0\n")).find("sweep.slurm.nodes"), std::string::npos);
    EXPECT_NE(slurm_error(write("partition = \"a b\"\n")).find("sweep.slurm.partition"), std::string::npos);
    // a point larger than the allocation
    const std::string file = write("tasks_per_node = 1\n");
    const SweepSpec spec = parse_sweep_file(file);
    std::vector<SweepPoint> points = expand_points(spec);
    points[0].ranks = 4;
    try {
        make_batch_job(spec, parse_slurm_spec(file), points, {1}, file, "/p", "/w", "/s");
        FAIL() << "a 4-rank point fit 1 task";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("sweep.slurm.tasks_per_node"), std::string::npos) << e.what();
    }
}

TEST_F(LaunchSlurm, ProgressGathersPointsFromEveryDatabase) {
    const std::string file = write("");
    const SweepSpec spec = parse_sweep_file(file);
    const std::vector<SweepPoint> points = expand_points(spec);
    const std::string shards = (dir_ / "shards").string();
    fs::create_directories(shards);
    // point 4 into the store, points 1 (fails: 16-device cluster, 4-device trace) and 3 into two shards
    auto run = [&](const std::string& store, std::vector<int> only) {
        SweepOptions o;
        o.store_path = store;
        o.only_points = std::move(only);
        return run_sweep(spec, o);
    };
    EXPECT_EQ(run(db_, {4}).ran, 1);
    EXPECT_EQ(run(shards + "/shard-1.db", {1}).failed, 1);
    const SweepSummary third = run(shards + "/shard-3.db", {3});
    EXPECT_EQ(third.ran, 1);
    EXPECT_EQ(third.points, 4);
    const SweepProgress p = read_progress(spec, points, db_, shards);
    EXPECT_EQ(p.shards.size(), 2u);
    EXPECT_EQ(p.state.at(1), "failed");
    EXPECT_EQ(p.state.at(2), "missing");
    EXPECT_EQ(p.state.at(3), "finished");
    EXPECT_EQ(p.state.at(4), "finished");
    EXPECT_EQ(p.finished, 2);
    EXPECT_EQ(p.failed, 1);
    EXPECT_EQ(p.missing, 1);
}

// ---- hostile names (issue 26 items 1 and 4) ----------------------------------------------------------------------

namespace {

// `s` as a TOML basic string: \ and " escaped, every control character as \uXXXX
std::string toml_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned char>(c));
            out += escaped;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

// a 1-point model sweep named `name` (written as a TOML string, so any byte can be in it)
std::string sweep_text(const std::string& name) {
    return "[sweep]\nname = " + toml_string(name) +
           "\nengine = \"model\"\nclusters = [\"experiments/clusters/moetuner-h100-ep4.toml\"]\n"
           "traces = [\"experiments/traces/tiny-e4-d4.toml\"]\npolicies = [\"static\"]\nseeds = [1]\n";
}

int config_error_naming(const std::function<void()>& body, const std::string& field, std::string* message) {
    try {
        body();
    } catch (const Error& e) {
        *message = e.what();
        EXPECT_NE(message->find(field), std::string::npos) << *message;
        EXPECT_EQ(message->find('\n'), std::string::npos) << "a multi-line message: " << *message;
        return e.exit_code();
    }
    return 0;
}

struct HostileName {
    const char* label;
    std::string name;
};

// accepted: the script quotes them
const HostileName kQuotedNames[] = {
    {"space", "exp v2"},
    {"comma", "exp,v2"},
    {"command_substitution", "x$(touch PWNED)`touch PWNED2`"},
    {"quotes", "it's \"q\" \\ #not a comment"},
    {"all", "exp v2,$(touch PWNED)'\"%x"},
};

class SlurmHostileName : public LaunchSlurm, public ::testing::WithParamInterface<HostileName> {};

}  // namespace

// The script run by bash (the batch part, as a Slurm task runs it) with /bin/echo as the prophet binary: the
// arguments arrive whole and nothing in the name, the working directory or the shard directory runs.
TEST_P(SlurmHostileName, ScriptQuotesEveryHostileString) {
    const std::string name = GetParam().name;
    const SweepSpec spec = parse_sweep_string(sweep_text(name), "hostile.toml", PROPHET_SOURCE_DIR);
    const std::string workdir = (dir_ / ("work \\ " + name)).string();  // a backslash too
    const std::string shards = (dir_ / ("shards " + name)).string();
    const std::string file = (dir_ / ("sweep " + name + ".toml")).string();
    fs::create_directories(workdir);
    const BatchJob job =
        make_batch_job(spec, parse_slurm_spec(write("")), expand_points(spec), {1}, file, "/bin/echo", workdir, shards);
    // sbatch's reading of a directive: double quotes, \ escapes " and \; --output's pattern: %% is a literal %
    auto sbatch_quoted = [](const std::string& text) {
        std::string q = "\"";
        for (char c : text) {
            if (c == '"' || c == '\\') q += '\\';
            q += c;
        }
        return q + "\"";
    };
    std::string output = shards;
    for (size_t at = output.find('%'); at != std::string::npos; at = output.find('%', at + 2)) output.insert(at, "%");
    for (const std::string& line :
         {"#SBATCH --job-name=" + sbatch_quoted("prophet-" + name), "#SBATCH --chdir=" + sbatch_quoted(workdir),
          "#SBATCH --output=" + sbatch_quoted(output + "/slurm-%A_%a.out")})
        EXPECT_NE(job.script.find(line + "\n"), std::string::npos) << line << "\nin\n" << job.script;
    const std::string script = (dir_ / "job.sbatch").string();
    std::ofstream(script) << job.script;
    ChildResult r = run_child({"env", "SLURM_ARRAY_TASK_ID=0", "bash", "-c", "cd \"$0\" && . \"$1\"", workdir, script});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "sweep " + file + " --points 1 --no-report --set store.path=" + shards + "/shard-1.db\n");
    for (const char* planted : {"PWNED", "PWNED2"}) {
        EXPECT_FALSE(fs::exists(fs::path(workdir) / planted)) << planted;
        EXPECT_FALSE(fs::exists(fs::path(PROPHET_SOURCE_DIR) / planted)) << planted;
    }
}

INSTANTIATE_TEST_SUITE_P(HostileNames, SlurmHostileName, ::testing::ValuesIn(kQuotedNames),
                         [](const auto& info) { return std::string(info.param.label); });

// Names refused where the sweep file is read (exit 3, naming sweep.name): a control character would start a script
// line of its own; a separator or leading dot would put <name>-<stamp>.sbatch or clusters/<name>-<D>rank.toml
// outside their directory.
TEST_F(LaunchSlurm, NamesThatAreNoFileNamesAreRefused) {
    for (const std::string& name :
         {std::string("nightly\ntouch PWNED\n#"), std::string("a\rb"), std::string("../../../x"), std::string("a/b"),
          std::string(".."), std::string(".hidden")}) {
        std::string message;
        EXPECT_EQ(config_error_naming([&] { parse_sweep_string(sweep_text(name), "bad.toml", PROPHET_SOURCE_DIR); },
                                      "sweep.name", &message),
                  kExitConfig)
            << name;
    }
}

// A path with a control character never reaches the script: exit 3 naming the field and the value, escaped.
TEST_F(LaunchSlurm, PathsWithANewlineAreRefused) {
    const std::string file = write("");
    const SweepSpec spec = parse_sweep_file(file);
    const SlurmSpec slurm = parse_slurm_spec(file);
    struct Case {
        const char* field;
        std::string sweep_file, binary, workdir, shards;
    };
    const Case cases[] = {
        {"sweep.slurm.shard_dir", file, "/p", "/w", "/s\ntouch PWNED"},
        {"working directory", file, "/p", "/w\ntouch PWNED", "/s"},
        {"prophet binary", file, "/p\ntouch PWNED", "/w", "/s"},
        {"sweep file", "/f\ntouch PWNED", "/p", "/w", "/s"},
    };
    for (const Case& c : cases) {
        std::string message;
        EXPECT_EQ(config_error_naming(
                      [&] {
                          make_batch_job(spec, slurm, expand_points(spec), {1}, c.sweep_file, c.binary, c.workdir,
                                         c.shards);
                      },
                      c.field, &message),
                  kExitConfig);
        EXPECT_NE(message.find("\\ntouch PWNED"), std::string::npos) << message;
    }
    std::string message;
    EXPECT_EQ(config_error_naming([&] { parse_slurm_spec(write("shard_dir = \"/s\\ntouch PWNED\"\n")); },
                                  "sweep.slurm.shard_dir", &message),
              kExitConfig);
}

// `squeue --name=prophet-exp,v2` would list the jobs of "prophet-exp" and "v2": the names are compared here.
TEST(SlurmQueue, JobsAreMatchedByTheirWholeName) {
    const std::string squeue =
        "12 PENDING prophet-exp,v2\n13 RUNNING prophet-exp\n14 PENDING v2\n"
        "15 RUNNING prophet-exp v2\n16 PENDING prophet-exp,v2 \n17 RUNNING prophet-exp,v2\n";
    EXPECT_EQ(jobs_named(squeue, "prophet-exp,v2"), (std::vector<std::string>{"12 PENDING", "17 RUNNING"}));
    EXPECT_EQ(jobs_named(squeue, "prophet-exp v2"), (std::vector<std::string>{"15 RUNNING"}));
    EXPECT_TRUE(jobs_named(squeue, "prophet-none").empty());
    EXPECT_TRUE(jobs_named("", "prophet-exp").empty());
}
