// trace_slice_test.cpp: leading_slice (trace.h), a sweep's smaller slice of a file trace: every kept count and
// transition equals the original's cell, the shape follows, and a count outside [1, the trace's] is refused.
#include <gtest/gtest.h>

#include <string>

#include "trace/trace.h"
#include "trace_test_util.h"

namespace prophet {
namespace {

// 3 iterations, 3 layers, D = 2, E = 3, transitions recorded
Trace source_trace() {
    return generate_trace_from_toml_string(
        "[trace]\ngenerator = \"zipf\"\nseed = 5\nnum_experts = 3\nnum_devices = 2\ntop_k = 2\n"
        "tokens_per_iteration = 64\nnum_iterations = 3\nnum_layers = 3\nzipf_s = 1.1\nrecord_transitions = true\nd_model = 8\n"
        "d_ffn = 16\nseq_len = 4\n",
        "slice source");
}

struct SliceCase {
    int iterations, layers;
};

class LeadingSlice : public ::testing::TestWithParam<SliceCase> {};

TEST_P(LeadingSlice, KeepsTheLeadingCellsExactly) {
    const SliceCase c = GetParam();
    const Trace t = source_trace();
    ASSERT_TRUE(t.has_transitions());
    const Trace s = leading_slice(t, c.iterations, c.layers, "it", "ly");
    EXPECT_EQ(s.meta.num_iterations, c.iterations);
    EXPECT_EQ(s.meta.num_layers, c.layers);
    EXPECT_EQ(s.meta.tokens_per_iteration, t.meta.tokens_per_iteration);
    validate_trace(s, "slice");
    const int D = t.meta.num_devices, E = t.meta.num_experts;
    ASSERT_EQ(s.counts.size(), static_cast<size_t>(c.iterations) * c.layers * D * E);
    ASSERT_EQ(s.transitions.size(), static_cast<size_t>(c.iterations) * (c.layers - 1) * E * E);
    for (int it = 0; it < c.iterations; ++it)
        for (int l = 0; l < c.layers; ++l) {
            for (int k = 0; k < D * E; ++k)
                EXPECT_EQ(s.layer_counts(it, l)[k], t.layer_counts(it, l)[k]) << it << " " << l << " " << k;
            if (l + 1 < c.layers) {
                for (int k = 0; k < E * E; ++k)
                    EXPECT_EQ(s.layer_transitions(it, l)[k], t.layer_transitions(it, l)[k]) << it << " " << l;
            }
        }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LeadingSlice,
                         ::testing::Values(SliceCase{3, 3}, SliceCase{1, 3}, SliceCase{2, 1}, SliceCase{2, 2}));

struct BadSlice {
    int iterations, layers;
    const char* field;
};

class LeadingSliceRefuses : public ::testing::TestWithParam<BadSlice> {};

TEST_P(LeadingSliceRefuses, CountOutsideTheTrace) {
    const BadSlice c = GetParam();
    const Trace t = source_trace();
    testing::expect_input_error([&] { leading_slice(t, c.iterations, c.layers, "grid.iterations", "grid.layers"); },
                                {c.field});
}

INSTANTIATE_TEST_SUITE_P(Bounds, LeadingSliceRefuses,
                         ::testing::Values(BadSlice{4, 3, "grid.iterations"}, BadSlice{0, 3, "grid.iterations"},
                                           BadSlice{3, 4, "grid.layers"}, BadSlice{3, 0, "grid.layers"}));

}  // namespace
}  // namespace prophet
