// The relabelling's sparse Hungarian (balance/relabel_sparse.h) against the dense one (relabel.h) on the same
// matrices: the same assignment, ties included (flow's plans depend on which optimum is taken), hence the same
// least cost; against brute force where n <= 8.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "balance/relabel.h"
#include "balance/relabel_sparse.h"
#include "core/rng.h"

namespace prophet {
namespace {

enum class Shape {
    kRandom,       // each cell listed with probability density_pct%, savings in [0, range)
    kNoSavings,    // nothing listed: every row constant
    kPermutation,  // one saving per row, on a random permutation
    kSameRows,     // every row the same listed savings
    kFullRows,     // every cell listed
    kRepackLike,   // flow's repack: base 3 * items, saving 3 on the owner device of each item, 1 on other holders
};

struct SparseCase {
    const char* name;
    Shape shape;
    int max_n;
    int density_pct;
    int64_t range;  // savings (and bases) small: ties
};

SavingsMatrix make_matrix(const SparseCase& c, int n, Rng& rng) {
    SavingsMatrix m;
    m.n = n;
    m.row_start.assign(1, 0);
    std::vector<int> perm(n), same;
    std::iota(perm.begin(), perm.end(), 0);
    rng.shuffle(perm.data(), n);
    for (int col = 0; col < n; ++col)
        if (rng.below(100) < static_cast<uint64_t>(c.density_pct)) same.push_back(col);
    std::vector<int64_t> row_saving(n);
    for (int r = 0; r < n; ++r) {
        std::fill(row_saving.begin(), row_saving.end(), -1);
        int64_t items = 1 + static_cast<int64_t>(rng.below(c.range));
        for (int col = 0; col < n; ++col) {
            const bool listed = c.shape == Shape::kRandom     ? rng.below(100) < static_cast<uint64_t>(c.density_pct)
                                : c.shape == Shape::kFullRows ? true
                                : c.shape == Shape::kSameRows ? std::count(same.begin(), same.end(), col) > 0
                                                              : false;
            if (listed) row_saving[col] = static_cast<int64_t>(rng.below(c.range));
        }
        if (c.shape == Shape::kPermutation) row_saving[perm[r]] = 1 + static_cast<int64_t>(rng.below(c.range));
        if (c.shape == Shape::kSameRows)
            for (int col : same) row_saving[col] = static_cast<int64_t>(col % c.range);
        if (c.shape == Shape::kRepackLike)
            for (int64_t i = 0; i < items; ++i) {
                const int owner = static_cast<int>(rng.below(n)), other = static_cast<int>(rng.below(n));
                row_saving[owner] = std::max<int64_t>(row_saving[owner], 0) + 3;
                if (other != owner && rng.below(2)) row_saving[other] = std::max<int64_t>(row_saving[other], 0) + 1;
            }
        m.base.push_back(c.shape == Shape::kRepackLike ? 3 * items + 3 * items
                                                       : static_cast<int64_t>(rng.below(c.range)) + 2 * c.range);
        for (int col = 0; col < n; ++col)
            if (row_saving[col] >= 0) m.col.push_back(col), m.saving.push_back(row_saving[col]);
        m.row_start.push_back(static_cast<int>(m.col.size()));
    }
    return m;
}

class SparseHungarian : public ::testing::TestWithParam<SparseCase> {};

TEST_P(SparseHungarian, SameAssignmentAsTheDense) {
    const SparseCase c = GetParam();
    Rng rng(static_cast<uint64_t>(c.max_n * 7919 + c.density_pct * 31 + c.range + static_cast<int>(c.shape)));
    SparseAssignment sparse(0);  // the sparse solver at every n; one object for every trial, as a plan reuses it
    for (int trial = 0; trial < 80; ++trial) {
        const int n = 1 + static_cast<int>(rng.below(c.max_n));
        const SavingsMatrix m = make_matrix(c, n, rng);
        const std::vector<int64_t> cost = dense_costs(m);
        const std::vector<int> dense = min_cost_assignment(cost, n);
        const std::vector<int>& fast = sparse.solve(m);
        ASSERT_EQ(fast, dense) << "n = " << n << " trial " << trial;
        if (n <= 8) {
            int64_t total = 0;
            for (int r = 0; r < n; ++r) total += cost[static_cast<size_t>(r) * n + fast[r]];
            EXPECT_EQ(total, min_cost_assignment_brute_force(cost, n)) << "n = " << n << " trial " << trial;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Table, SparseHungarian,
                         ::testing::Values(SparseCase{"random_sparse_ties", Shape::kRandom, 70, 8, 3},
                                           SparseCase{"random_dense_ties", Shape::kRandom, 40, 60, 2},
                                           SparseCase{"random_spread", Shape::kRandom, 70, 20, 1000},
                                           SparseCase{"random_tiny", Shape::kRandom, 6, 40, 3},
                                           SparseCase{"no_savings", Shape::kNoSavings, 40, 0, 5},
                                           SparseCase{"permutation", Shape::kPermutation, 70, 0, 3},
                                           SparseCase{"same_rows", Shape::kSameRows, 50, 30, 3},
                                           SparseCase{"full_rows", Shape::kFullRows, 30, 100, 4},
                                           SparseCase{"full_rows_tiny", Shape::kFullRows, 5, 100, 3},
                                           SparseCase{"repack_like", Shape::kRepackLike, 70, 0, 6},
                                           SparseCase{"repack_like_small", Shape::kRepackLike, 8, 0, 3}),
                         [](const ::testing::TestParamInfo<SparseCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace prophet
