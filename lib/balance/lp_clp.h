// lp_clp.h: a plain-array linear program and a silent COIN-OR CLP dual-simplex solve with an optional warm
// start (the previous solve's basis), so policy code never includes a COIN header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace prophet::lp {

// minimise cost . x  subject to  row_lb <= A x <= row_ub,  col_lb <= x <= col_ub.
// A column-major: column j has entries row_index/value[col_start[j] .. col_start[j+1]).
struct LpModel {
    int num_rows = 0;
    std::vector<int> col_start = {0};
    std::vector<int> row_index;
    std::vector<double> value;
    std::vector<double> col_lb, col_ub, cost;
    std::vector<double> row_lb, row_ub;
    int num_cols() const { return static_cast<int>(cost.size()); }
    // appends a column; entries (rows[i], coefs[i]) with rows in [0, num_rows)
    int add_col(double lb, double ub, double objective_cost, const int* rows, const double* coefs, int n);
};

struct LpResult {
    bool optimal = false;
    double objective = 0;
    std::vector<double> x;  // [num_cols]
    bool warm_started = false;
};

double infinity();

// basis (in/out, may be null): the status array of a previous solve; used when its size matches this model
// (columns + rows), replaced by this solve's.
LpResult solve_lp(const LpModel& model, std::vector<unsigned char>* basis);

// The bases of recent LPs, each under a key naming its structure (columns and nonzero pattern), least recently used
// dropped first past max_bytes: a caller that solves LPs of several structures in turn (a trace's layers, column
// after column) warm-starts each from the last solve of its own structure, not only from the solve just before.
class BasisCache {
  public:
    // counted beside each basis for its list node and index entry, so that many small bases are bounded too
    static constexpr size_t kEntryOverheadBytes = 96;
    explicit BasisCache(size_t max_bytes) : max_bytes_(max_bytes) {}
    // the basis last stored under key (empty: none); valid until the next call
    std::vector<unsigned char>& basis(uint64_t key);
    // the basis under key has been written (its size may have changed): drop the oldest past max_bytes
    void stored(uint64_t key);

  private:
    struct Entry {
        uint64_t key = 0;
        std::vector<unsigned char> basis;
        size_t counted = 0;  // what bytes_ counts for it: its basis and kEntryOverheadBytes
    };

    size_t max_bytes_, bytes_ = 0;
    std::list<Entry> entries_;  // most recently used first
    std::unordered_map<uint64_t, std::list<Entry>::iterator> by_key_;
};

}  // namespace prophet::lp
