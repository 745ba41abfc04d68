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
    bool reused = false;  // solve_lp_cached: the stored optimum of this very model, no solve
    // seconds of the CLP solve that produced x (wall clock): this call's, or when reused the stored optimum's own
    // solve, so that a caller timing its work can count what the solve cost where it ran (0 from solve_lp)
    double solve_s = 0;
};

double infinity();

// basis (in/out, may be null): the status array of a previous solve; used when its size matches this model
// (columns + rows), replaced by this solve's.
LpResult solve_lp(const LpModel& model, std::vector<unsigned char>* basis);

// A model's structure (row and column counts, nonzero pattern) and the rest of it (bounds, costs, coefficients),
// hashed separately: LPs of one structure share a basis; two models agree on both 64-bit keys only when equal (bar a
// collision of about 2^-128).
uint64_t structure_key(const LpModel& model);
uint64_t content_key(const LpModel& model);

// An optimum kept sparse: the model's content key, objective and nonzero x.
struct StoredOptimum {
    bool present = false;
    uint64_t content = 0;
    double objective = 0;
    double solve_s = 0;  // the solve's seconds (LpResult::solve_s)
    std::vector<int> index;
    std::vector<double> value;
    size_t bytes() const { return index.size() * sizeof(int) + value.size() * sizeof(double); }
};

// The bases of recent LPs, each under a key naming its structure (structure_key), least recently used dropped first
// past max_bytes: a caller that solves LPs of several structures in turn (a trace's layers, column after column)
// warm-starts each from the last solve of its own structure, not only from the solve just before. Beside each basis,
// the optimum of the last model solved under that structure (solve_lp_cached returns it when that model comes again).
class BasisCache {
  public:
    // counted beside each basis for its list node and index entry, so that many small bases are bounded too
    static constexpr size_t kEntryOverheadBytes = 96;
    explicit BasisCache(size_t max_bytes) : max_bytes_(max_bytes) {}
    // the basis last stored under key (empty: none); valid until the next call
    std::vector<unsigned char>& basis(uint64_t key);
    // the optimum last stored under key (present false: none); valid until the next call
    StoredOptimum& optimum(uint64_t key);
    // the basis or optimum under key has been written (its size may have changed): drop the oldest past max_bytes
    void stored(uint64_t key);

  private:
    struct Entry {
        uint64_t key = 0;
        std::vector<unsigned char> basis;
        StoredOptimum optimum;
        size_t counted = 0;  // what bytes_ counts for it: its basis, its optimum and kEntryOverheadBytes
    };
    Entry& entry(uint64_t key);  // found or made, now the most recently used

    size_t max_bytes_, bytes_ = 0;
    std::list<Entry> entries_;  // most recently used first
    std::unordered_map<uint64_t, std::list<Entry>::iterator> by_key_;
};

// solve_lp warm from cache's basis of the model's structure, unless the last model solved under that structure is
// this one (equal content key): then its stored optimum (reused = true), the answer a warm solve would start and end
// at without a pivot. Stores this solve's basis and, when optimal, its optimum.
LpResult solve_lp_cached(const LpModel& model, BasisCache& cache);

}  // namespace prophet::lp
