// relabel.h: which physical device takes which packed bin so that the fewest expert weights move.
//
// A packing decides what each of D bins holds, not where the bins go. moves[b*D + d] = experts bin b holds that
// device d does not hold now; the relabelling is the assignment bin -> device of least total moves (Hungarian
// algorithm, O(D^3)), each device taking one bin.
#pragma once

#include <cstdint>
#include <vector>

namespace prophet {

// Minimum-cost perfect assignment of an n x n cost matrix (cost[row*n + col]); returns col_of_row [n].
// Exact (shortest augmenting paths with potentials); costs are integers so ties are exact.
std::vector<int> min_cost_assignment(const std::vector<int64_t>& cost, int n);

// The end of one row's shortest augmenting path, shared by both solvers (1-based; column 0 the virtual start,
// match[col] = row): every reached column in `visited` takes the deltas from its own step on (settled - the path
// length settled_at[c] when it was reached), then the path from `col` back to column 0 is augmented.
void settle_and_augment(const std::vector<int>& visited, const std::vector<int64_t>& settled_at, int64_t settled,
                        std::vector<int64_t>& u, std::vector<int64_t>& v, std::vector<int>& match,
                        const std::vector<int>& previous, int col);

// Brute force over all n! assignments (tests only; n <= 8): the least total cost.
int64_t min_cost_assignment_brute_force(const std::vector<int64_t>& cost, int n);

}  // namespace prophet
