// relabel_sparse.h: the relabelling's assignment (relabel.h) on a cost matrix given as row constants less a few
// savings, as flow's repacked candidates produce it: cost[r][c] = base[r] - saving(r, c), saving >= 0 and listed
// for the few (bin, device) pairs where the device already holds some of the bin's experts.
//
// The result is min_cost_assignment's on the dense matrix, ties included (the same starting potentials, greedy
// zero-cost matching and shortest augmenting paths, ties to the lower column): a row's offers to the columns it
// lists no saving for are one value less v[c], so the least of them is kept per search (the column of largest v,
// from one sort per row) and only listed savings are relaxed one by one (a heap). Work per row of the search:
// O(n log n + steps * (listed savings * log n)) instead of O(steps * n); the seed is O(n log n + savings) instead
// of O(n^2).
#pragma once

#include <cstdint>
#include <vector>

namespace prophet {

// cost[r][c] = base[r] - saving(r, c) for r, c in [0, n); the listed savings of row r are
// (col[i], saving[i]) for i in [row_start[r], row_start[r+1]), distinct columns, saving >= 0; unlisted ones are 0.
struct SavingsMatrix {
    int n = 0;
    std::vector<int64_t> base;    // [n]
    std::vector<int> row_start;   // [n + 1]
    std::vector<int> col;         // [listed]
    std::vector<int64_t> saving;  // [listed]
};

// The dense matrix (tests, and the slow oracle's input)
std::vector<int64_t> dense_costs(const SavingsMatrix& m);

// min_cost_assignment(dense_costs(m), m.n) without the dense matrix; scratch kept across calls.
class SparseAssignment {
  public:
    // n <= dense_up_to: the dense solver itself (its tight O(n^2) passes cost fewer instructions at small n: 24 k
    // fewer per flow plan at D = 16, 1.9 M more at D = 64, callgrind); 0 (tests): always the sparse one
    explicit SparseAssignment(int dense_up_to = 16) : dense_up_to_(dense_up_to) {}
    // col_of_row [n]; valid until the next call
    const std::vector<int>& solve(const SavingsMatrix& m);

  private:
    int dense_up_to_;
    int n_ = 0;
    // 1-based over rows and columns as relabel.cpp's (column 0: the virtual start of a row's path)
    std::vector<int64_t> u_, v_, max_saving_;  // potentials; a row's largest saving (0 if none)
    std::vector<int> match_, previous_, col_of_row_;
    std::vector<uint8_t> row_done_, listed_;           // listed_[(r-1)*n + (c-1)]: row r lists a saving for column c
    std::vector<int> rows_, order_, skip_, position_;  // seed: rows by max_saving_; columns by (v, index)
    // one row's search
    std::vector<int64_t> sparse_reach_, settled_at_;
    std::vector<int> sparse_from_, step_of_, visited_, dense_order_;  // dense_order_: columns by (v desc, index)
    std::vector<uint8_t> used_;
    std::vector<std::pair<int64_t, int>> heap_;  // (sparse offer, column), stale entries skipped
    void seed(const SavingsMatrix& m);
    void augment_row(const SavingsMatrix& m, int row);
    int unmatched_at(int position);
};

}  // namespace prophet
