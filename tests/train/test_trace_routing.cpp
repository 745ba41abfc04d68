// Recorded routing in real runs (routing.source = "trace", train/trace_routing.h): a trace's per-device,
// per-expert counts replace the gate's choices, scaled to each rank's tokens, devices folded onto ranks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <numeric>
#include <set>

#include "core/error.h"
#include "train/trace_routing.h"
#include "train_fixtures.h"

using namespace prophet;

namespace {

// A trace of I iterations, L layers, Dt devices, E experts with the given counts for every (iteration, layer),
// varied by iteration so that the step -> iteration mapping shows.
Trace make_trace(int I, int L, int Dt, int E, int K, int64_t tokens_per_device) {
    Trace t;
    t.meta.num_iterations = I;
    t.meta.num_layers = L;
    t.meta.num_devices = Dt;
    t.meta.num_experts = E;
    t.meta.top_k = K;
    t.meta.tokens_per_iteration = tokens_per_device * Dt;
    t.meta.d_model = 8;
    t.meta.d_ffn = 16;
    t.meta.seq_len = 4;
    t.meta.source = "test";
    t.counts.assign((size_t)I * L * Dt * E, 0);
    for (int i = 0; i < I; i++)
        for (int l = 0; l < L; l++)
            for (int d = 0; d < Dt; d++) {
                int64_t* row = t.layer_counts(i, l) + (size_t)d * E;
                // hot expert (i + l + d) mod E takes half the device's assignments, the rest spread evenly
                const int64_t total = tokens_per_device * K, hot = total / 2;
                row[(i + l + d) % E] += hot;
                for (int64_t a = 0; a < total - hot; a++) row[a % E]++;
            }
    return t;
}

// One iteration, one layer, 4 trace devices, 4 experts, K = 2, rows {8, 4, 2, 2}, {0, 0, 8, 8}, {4, 4, 4, 4},
// {16, 0, 0, 0}.
Trace four_device_trace() {
    Trace t = make_trace(1, 1, 4, 4, 2, 8);
    int64_t* m = t.layer_counts(0, 0);
    const int64_t rows[4][4] = {{8, 4, 2, 2}, {0, 0, 8, 8}, {4, 4, 4, 4}, {16, 0, 0, 0}};
    for (int d = 0; d < 4; d++)
        for (int e = 0; e < 4; e++) m[d * 4 + e] = rows[d][e];
    return t;
}

}  // namespace

TEST(TraceRouting, CountsFoldDevicesOntoRanks) {
    // 4 trace devices onto 2 ranks: rank 0 = devices 0 + 2, rank 1 = devices 1 + 3
    const Trace t = four_device_trace();
    // rank 0: 12 8 6 6 (S = 32) -> N K = 16: 6 4 3 3
    EXPECT_EQ(trace_rank_counts(t, 0, 0, 0, 2, 8, 2), (std::vector<int64_t>{6, 4, 3, 3}));
    // rank 1: 16 0 8 8 -> 8 0 4 4
    EXPECT_EQ(trace_rank_counts(t, 0, 0, 1, 2, 8, 2), (std::vector<int64_t>{8, 0, 4, 4}));
    // fewer trace devices than ranks: rank r takes device r mod Dt
    EXPECT_EQ(trace_rank_counts(t, 0, 0, 5, 8, 8, 2), trace_rank_counts(t, 0, 0, 1, 4, 8, 2));
}

TEST(TraceRouting, CountsScaleExactlyByLargestRemainder) {
    const Trace t = four_device_trace();
    // largest remainder: N K = 10 from 12 8 6 6: 3.75 2.5 1.875 1.875 -> 3 2 1 1 + 3 by remainder (.875 .875 .75)
    EXPECT_EQ(trace_rank_counts(t, 0, 0, 0, 2, 5, 2), (std::vector<int64_t>{4, 2, 2, 2}));
}

TEST(TraceRouting, CountsCapAtOneChoicePerToken) {
    const Trace t = four_device_trace();
    // cap: device 3 alone (4 ranks: rank 3) puts all 16 on expert 0, but N = 8 tokens take it at most 8 times;
    // the excess goes to the others in order of traffic (all 0: lowest e first) up to N each
    EXPECT_EQ(trace_rank_counts(t, 0, 0, 3, 4, 8, 2), (std::vector<int64_t>{8, 8, 0, 0}));
}

TEST(TraceRouting, CountsOfAnEmptyRowAreUniform) {
    Trace t = four_device_trace();
    int64_t* m = t.layer_counts(0, 0);
    // an empty row: uniform
    for (int e = 0; e < 4; e++) m[e] = m[8 + e] = 0;
    EXPECT_EQ(trace_rank_counts(t, 0, 0, 0, 2, 8, 2), (std::vector<int64_t>{4, 4, 4, 4}));
}

TEST(TraceRouting, AssignmentsAreAValidTopKRoutingOfTheCounts) {
    const int N = 7, K = 3;
    const std::vector<int64_t> counts = {7, 0, 5, 4, 3, 2};  // sum 21 = N K, each <= N
    std::vector<int> idx(N * K, -1);
    assign_from_counts(counts, N, K, idx.data());
    std::vector<int64_t> seen(counts.size(), 0);
    for (int n = 0; n < N; n++) {
        std::set<int> mine;
        for (int k = 0; k < K; k++) {
            const int e = idx[n * K + k];
            ASSERT_GE(e, 0);
            seen[e]++;
            mine.insert(e);
        }
        EXPECT_EQ((int)mine.size(), K) << "token " << n << " takes an expert twice";
    }
    EXPECT_EQ(seen, counts);
}

// A real (in-process, 2-rank) run routed by a 4-device trace records, every step, exactly the counts the trace
// prescribes for each rank (iteration = step mod I), whatever the gate would have chosen.
TEST(TraceRouting, TrainerRecordsTheTraceCounts) {
    const int ranks = 2, steps = 3;
    const Config probe = skewed_config({});
    const int L = (int)probe.get_int("model.L"), E = (int)probe.get_int("model.E"), K = (int)probe.get_int("model.K");
    const int N = (int)(probe.get_int("model.B") / ranks * probe.get_int("model.T"));  // tokens per rank
    const Trace trace = make_trace(2, L, 4, E, K, N / 2);
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("prophet-trace-routing-" + std::to_string(getpid()) + ".ptrace")).string();
    write_trace_file(trace, path);
    const auto stats =
        run_local_stats(skewed_config({"routing.source=\"trace\"", "routing.trace=\"" + path + "\""}), ranks, steps);
    std::filesystem::remove(path);
    for (int step = 0; step < steps; step++) {
        const StepStats& s = stats[0][step];
        ASSERT_EQ(s.counts.size(), (size_t)L * ranks * E);
        for (int l = 0; l < L; l++)
            for (int r = 0; r < ranks; r++) {
                const std::vector<int64_t> want = trace_rank_counts(trace, step % 2, l, r, ranks, N, K);
                const std::vector<int64_t> got(s.counts.begin() + ((size_t)l * ranks + r) * E,
                                               s.counts.begin() + ((size_t)l * ranks + r + 1) * E);
                EXPECT_EQ(got, want) << "step " << step << " layer " << l << " rank " << r;
            }
    }
    // the trace must fit the model
    Trace wrong = trace;
    wrong.meta.num_experts = E * 2;
    EXPECT_THROW(TraceRouter(wrong, L, E, 0, ranks), Error);
    // and routing.source = "trace" needs a readable file, named in the error
    try {
        train_settings_from(skewed_config({"routing.source=\"trace\"", "routing.trace=\"/no/such.ptrace\""}), ranks);
        FAIL() << "a missing routing.trace was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("routing.trace"), std::string::npos) << e.what();
    }
}
