// lp_clp.h: a plain-array linear program and a silent COIN-OR CLP dual-simplex solve with an optional warm
// start (the previous solve's basis), so policy code never includes a COIN header.
#pragma once

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

}  // namespace prophet::lp
