// ilp_cbc.h: a small mixed-integer model builder and a silent, time-limited CBC solve (MoETuner's ILPs).
//
// The model is kept in plain arrays (columns with bounds, costs and integrality; rows as a compressed sparse
// row matrix with lower/upper bounds) so policy code never includes a COIN header. solve_mip() hands it to
// OsiClpSolverInterface + CbcModel with the standard cut generators and heuristics, an optional warm start
// (checked for feasibility by CBC), a relative MIP gap and a wall-clock limit, all logging off.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace prophet::ilp {

// +infinity for bounds (COIN's value)
double infinity();

struct MipModel {
    // columns
    std::vector<double> col_lb;
    std::vector<double> col_ub;
    std::vector<double> cost;       // minimised
    std::vector<uint8_t> integer;   // 1: integer (binaries: integer with bounds [0,1])
    // rows: row r has entries row_index/row_value[row_start[r] .. row_start[r+1])
    std::vector<double> row_lb;
    std::vector<double> row_ub;
    std::vector<int> row_start = {0};
    std::vector<int> row_index;
    std::vector<double> row_value;

    int num_cols() const { return static_cast<int>(cost.size()); }
    int num_rows() const { return static_cast<int>(row_lb.size()); }
    int add_col(double lb, double ub, double objective_cost, bool is_integer);
    int add_binary(double objective_cost = 0.0) { return add_col(0.0, 1.0, objective_cost, true); }
    // row lb <= sum_i coefs[i] * x[cols[i]] <= ub (duplicate columns are summed by CBC's matrix; avoid them)
    void add_row(const std::vector<int>& cols, const std::vector<double>& coefs, double lb, double ub);
    // objective of a full column vector
    double objective_of(const std::vector<double>& values) const;
    // largest bound or row violation of a full column vector (0 = feasible); integrality is not checked
    double max_violation(const std::vector<double>& values) const;
};

struct MipSettings {
    double relative_gap = 0.0;     // CBC allowable fraction gap
    double time_limit_s = 10.0;    // wall clock, checked by CBC between nodes and cut passes
    const std::vector<double>* initial = nullptr;  // warm start (all columns), used when feasible
    bool cuts = true;              // Cgl cut generators (off: each pass costs seconds on big degenerate LPs)
    bool strong_branching = true;  // CBC's default strong branching (off: pseudo-costs from the start)
};

struct MipResult {
    bool has_solution = false;  // values hold an integer-feasible solution (CBC's or the warm start)
    bool optimal = false;       // proven optimal within relative_gap
    bool time_limited = false;
    bool infeasible = false;
    double objective = 0;       // of values
    double bound = 0;           // a proven lower bound (CBC's, or the root LP's after a deadline; <= objective)
    std::vector<double> values; // [num_cols]
    double seconds = 0;         // wall clock of the solve
    int64_t nodes = 0;
};

MipResult solve_mip(const MipModel& model, const MipSettings& settings);

}  // namespace prophet::ilp
