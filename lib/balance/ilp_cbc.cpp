// ilp_cbc.cpp: MipModel -> OsiClpSolverInterface + CbcModel (COIN-OR CBC 2.10, Debian coinor-libcbc-dev).
//
// Plain branch and bound with the usual Cgl cuts (probing, Gomory, knapsack cover, clique, MIR, flow cover)
// and CBC's rounding / local-search heuristics; Clp and CBC print nothing. The time limit is wall clock
// (setUseElapsedTime): CBC checks it between nodes and cut passes; a Clp deadline at 1.5 x limit + 1 s stops a
// runaway LP (see solve_mip).
#include "balance/ilp_cbc.h"

#include <algorithm>
#include <cmath>

#include <coin/CbcHeuristic.hpp>
#include <coin/CbcHeuristicLocal.hpp>
#include <coin/CbcModel.hpp>
#include <coin/CglClique.hpp>
#include <coin/CglFlowCover.hpp>
#include <coin/CglGomory.hpp>
#include <coin/CglKnapsackCover.hpp>
#include <coin/CglMixedIntegerRounding2.hpp>
#include <coin/CglProbing.hpp>
#include <coin/CoinError.hpp>
#include <coin/CoinPackedMatrix.hpp>
#include <coin/OsiClpSolverInterface.hpp>

#include "core/error.h"
#include "core/timer.h"

namespace prophet::ilp {

double infinity() { return COIN_DBL_MAX; }

int MipModel::add_col(double lb, double ub, double objective_cost, bool is_integer) {
    col_lb.push_back(lb);
    col_ub.push_back(ub);
    cost.push_back(objective_cost);
    integer.push_back(is_integer ? 1 : 0);
    return num_cols() - 1;
}

void MipModel::add_row(const std::vector<int>& cols, const std::vector<double>& coefs, double lb, double ub) {
    PROPHET_ASSERT(cols.size() == coefs.size());
    for (size_t i = 0; i < cols.size(); ++i) {
        PROPHET_ASSERT(cols[i] >= 0 && cols[i] < num_cols());
        row_index.push_back(cols[i]);
        row_value.push_back(coefs[i]);
    }
    row_lb.push_back(lb);
    row_ub.push_back(ub);
    row_start.push_back(static_cast<int>(row_index.size()));
}

double MipModel::objective_of(const std::vector<double>& values) const {
    double total = 0;
    for (int j = 0; j < num_cols(); ++j) total += cost[j] * values[j];
    return total;
}

double MipModel::max_violation(const std::vector<double>& values) const {
    double worst = 0;
    for (int j = 0; j < num_cols(); ++j) {
        worst = std::max(worst, col_lb[j] - values[j]);
        worst = std::max(worst, values[j] - col_ub[j]);
    }
    for (int r = 0; r < num_rows(); ++r) {
        double activity = 0;
        for (int k = row_start[r]; k < row_start[r + 1]; ++k) activity += row_value[k] * values[row_index[k]];
        if (row_lb[r] > -infinity()) worst = std::max(worst, row_lb[r] - activity);
        if (row_ub[r] < infinity()) worst = std::max(worst, activity - row_ub[r]);
    }
    return worst;
}

// largest integrality violation of the integer columns
double integrality_violation(const MipModel& model, const std::vector<double>& values) {
    double worst = 0;
    for (int j = 0; j < model.num_cols(); ++j)
        if (model.integer[j]) worst = std::max(worst, std::fabs(values[j] - std::round(values[j])));
    return worst;
}

namespace {

// the model loaded into Clp: row-ordered sparse rows, bounds, costs, integer columns, and Clp's wall-clock
// deadline (seconds from now)
void load_model(OsiClpSolverInterface& solver, const MipModel& model, double deadline_s) {
    static_assert(sizeof(CoinBigIndex) == sizeof(int), "CoinBigIndex must be int for the row starts");
    const int n = model.num_cols();
    // row-ordered sparse matrix (colOrdered = false)
    CoinPackedMatrix matrix(false, n, model.num_rows(), static_cast<CoinBigIndex>(model.row_index.size()),
                            model.row_value.data(), model.row_index.data(),
                            reinterpret_cast<const CoinBigIndex*>(model.row_start.data()), nullptr);
    solver.messageHandler()->setLogLevel(0);
    solver.setHintParam(OsiDoReducePrint, true, OsiHintTry);
    solver.loadProblem(matrix, model.col_lb.data(), model.col_ub.data(), model.cost.data(), model.row_lb.data(),
                       model.row_ub.data());
    for (int j = 0; j < n; ++j) {
        if (model.integer[j]) solver.setInteger(j);
    }
    solver.getModelPtr()->setMaximumWallSeconds(deadline_s);
}

// logging off, the time limit (seconds, elapsed time), the gaps, and strong branching off unless asked for
void configure_cbc(CbcModel& cbc, const MipSettings& settings, double limit_s) {
    cbc.setLogLevel(0);
    cbc.messageHandler()->setLogLevel(0);
    cbc.solver()->messageHandler()->setLogLevel(0);
    cbc.setUseElapsedTime(true);
    cbc.setMaximumSeconds(limit_s);
    cbc.setAllowableFractionGap(std::max(0.0, settings.relative_gap));
    cbc.setAllowableGap(1e-9);
    cbc.setPrintFrequency(0);
    if (!settings.strong_branching) {
        // on degenerate LPs (ILP 2) every strong-branching probe is a slow hot-started dual simplex
        cbc.setNumberStrong(0);
        cbc.setNumberBeforeTrust(0);
    }
}

// the standard cut generators with their settings; they live as long as the solve that uses them
struct CutGenerators {
    CglProbing probing;
    CglGomory gomory;
    CglKnapsackCover knapsack;
    CglClique clique;
    CglMixedIntegerRounding2 mir;
    CglFlowCover flow;

    CutGenerators() {
        probing.setUsingObjective(true);
        probing.setMaxPass(1);
        probing.setMaxPassRoot(3);
        probing.setMaxProbe(10);
        probing.setMaxProbeRoot(50);
        probing.setMaxLook(10);
        probing.setMaxLookRoot(50);
        probing.setRowCuts(3);
        gomory.setLimit(300);
        clique.setStarCliqueReport(false);
        clique.setRowCliqueReport(false);
    }

    void add_to(CbcModel& cbc) {
        cbc.addCutGenerator(&probing, -1, "Probing");
        cbc.addCutGenerator(&gomory, -1, "Gomory");
        cbc.addCutGenerator(&knapsack, -1, "Knapsack");
        cbc.addCutGenerator(&clique, -1, "Clique");
        cbc.addCutGenerator(&mir, -1, "MIR2");
        cbc.addCutGenerator(&flow, -1, "FlowCover");
    }
};

// The root LP's outcome: its value is a valid bound whatever happens later.
struct RootLp {
    bool solved = false;
    double bound = 0;
};

// CBC's answer as it stands: root LP, warm start, branch and bound, then what CBC claims (deadline_hit: Clp may
// have stopped LPs unsolved, so neither CBC's bound nor its optimality is trusted)
void run_cbc(CbcModel& cbc, const MipModel& model, const MipSettings& settings, bool warm_ok, int64_t start_ns,
             double deadline_s, RootLp& root, MipResult& result) {
    const int n = model.num_cols();
    cbc.initialSolve();
    root.solved = cbc.solver()->isProvenOptimal();
    if (root.solved) root.bound = cbc.solver()->getObjValue();
    if (warm_ok) {
        const double objective = model.objective_of(*settings.initial);
        cbc.setBestSolution(settings.initial->data(), n, objective, true);
    }
    if (cbc.solver()->isProvenPrimalInfeasible()) {
        result.infeasible = !warm_ok;
    } else {
        cbc.branchAndBound();
    }
    const double elapsed = static_cast<double>(now_ns() - start_ns) * 1e-9;
    const bool deadline_hit = elapsed >= deadline_s || !root.solved;
    result.nodes = cbc.getNodeCount();
    result.time_limited = cbc.isSecondsLimitReached() || deadline_hit;
    if (!deadline_hit) result.infeasible = result.infeasible || (cbc.isProvenInfeasible() && !warm_ok);
    if (cbc.bestSolution() != nullptr) {
        result.has_solution = true;
        result.values.assign(cbc.bestSolution(), cbc.bestSolution() + n);
        result.objective = model.objective_of(result.values);
        result.optimal = cbc.isProvenOptimal() && !result.time_limited;
        result.bound = deadline_hit ? root.bound : std::max(root.bound, cbc.getBestPossibleObjValue());
    }
}

// CBC's answer must satisfy the rows and integrality (its tolerances are 1e-7 on scaled data); otherwise, or when
// it found nothing, the warm start (when usable) is the answer. Integer columns rounded; bound <= objective.
void settle_result(MipResult& result, const MipModel& model, const MipSettings& settings, bool warm_ok,
                   const RootLp& root) {
    if (result.has_solution &&
        (model.max_violation(result.values) > 1e-5 || integrality_violation(model, result.values) > 1e-5))
        result.has_solution = false;
    if (result.has_solution) {
        // round the integer columns (CBC leaves them within its integer tolerance)
        for (int j = 0; j < model.num_cols(); ++j)
            if (model.integer[j]) result.values[j] = std::round(result.values[j]);
        result.objective = model.objective_of(result.values);
    }
    if (!result.has_solution && warm_ok) {
        result.has_solution = true;
        result.values = *settings.initial;
        result.objective = model.objective_of(result.values);
        result.optimal = false;
        result.bound = root.solved ? root.bound : 0.0;
    }
    if (result.has_solution) {
        result.bound = std::min(result.bound, result.objective);
    } else {
        result.bound = 0;
    }
}

}  // namespace

MipResult solve_mip(const MipModel& model, const MipSettings& settings) {
    MipResult result;
    const int64_t start_ns = now_ns();
    const int n = model.num_cols();
    const double limit_s = std::max(0.01, settings.time_limit_s);
    // Clp's wall-clock deadline (absolute, from now): CBC checks its own limit only between nodes and cut
    // passes, so this bounds a single runaway LP. Past it Clp stops LPs unsolved, which CBC may read as pruned
    // nodes: then neither its bound nor a claim of optimality is trusted (see run_cbc's deadline_hit).
    // (the slack is a second for limits of a second and more, the limit itself below: a budget split into many short
    // solves stays a budget)
    const double deadline_s = 1.5 * limit_s + std::min(1.0, limit_s);
    // a usable warm start, checked here too: CBC silently drops an infeasible one, and the caller wants to
    // know that the fallback (result = warm start) is valid
    const bool warm_ok = settings.initial != nullptr && static_cast<int>(settings.initial->size()) == n &&
                         model.max_violation(*settings.initial) <= 1e-7 &&
                         integrality_violation(model, *settings.initial) <= 1e-9;
    RootLp root;
    try {
        OsiClpSolverInterface solver;
        load_model(solver, model, deadline_s);
        CbcModel cbc(solver);  // clones the solver (and its deadline)
        configure_cbc(cbc, settings, limit_s);
        CutGenerators cuts;
        if (settings.cuts) cuts.add_to(cbc);
        CbcRounding rounding(cbc);
        cbc.addHeuristic(&rounding);
        CbcHeuristicLocal local(cbc);
        cbc.addHeuristic(&local);
        run_cbc(cbc, model, settings, warm_ok, start_ns, deadline_s, root, result);
    } catch (const CoinError& error) {
        throw Error(kExitRunFailed,
                    "CBC failed: " + error.className() + "::" + error.methodName() + ": " + error.message());
    }
    settle_result(result, model, settings, warm_ok, root);
    result.seconds = static_cast<double>(now_ns() - start_ns) * 1e-9;
    return result;
}

}  // namespace prophet::ilp
