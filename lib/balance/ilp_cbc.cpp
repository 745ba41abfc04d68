// ilp_cbc.cpp: MipModel -> OsiClpSolverInterface + CbcModel (COIN-OR CBC 2.10, Debian coinor-libcbc-dev).
//
// Plain branch and bound with the usual Cgl cuts (probing, Gomory, knapsack cover, clique, MIR, flow cover)
// and CBC's rounding / local-search heuristics; Clp and CBC print nothing. The time limit is wall clock
// (setUseElapsedTime): CBC checks it between nodes and cut passes, so a solve can overrun by one node's LP.
#include "balance/ilp_cbc.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

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

MipResult solve_mip(const MipModel& model, const MipSettings& settings) {
    MipResult result;
    const int64_t start_ns = now_ns();
    const int n = model.num_cols();
    const int m = model.num_rows();
    // a usable warm start, checked here too: CBC silently drops an infeasible one, and the caller wants to
    // know that the fallback (result = warm start) is valid
    const bool warm_ok = settings.initial != nullptr && static_cast<int>(settings.initial->size()) == n &&
                         model.max_violation(*settings.initial) <= 1e-7;
    try {
        // row-ordered sparse matrix (colOrdered = false)
        CoinPackedMatrix matrix(false, n, m, static_cast<CoinBigIndex>(model.row_index.size()),
                                model.row_value.data(), model.row_index.data(),
                                reinterpret_cast<const CoinBigIndex*>(model.row_start.data()), nullptr);
        static_assert(sizeof(CoinBigIndex) == sizeof(int), "CoinBigIndex must be int for the row starts");
        OsiClpSolverInterface solver;
        solver.messageHandler()->setLogLevel(0);
        solver.setHintParam(OsiDoReducePrint, true, OsiHintTry);
        solver.loadProblem(matrix, model.col_lb.data(), model.col_ub.data(), model.cost.data(), model.row_lb.data(),
                           model.row_ub.data());
        for (int j = 0; j < n; ++j) {
            if (model.integer[j]) solver.setInteger(j);
        }
        if (const char* dump = getenv("PROPHET_ILP_DUMP")) {
            static int counter = 0;
            solver.writeMps((std::string(dump) + std::to_string(counter++)).c_str());
        }
        if (const char* pert = getenv("PROPHET_ILP_PERT")) solver.getModelPtr()->setPerturbation(atoi(pert));
        if (getenv("PROPHET_ILP_PRIMAL")) solver.setHintParam(OsiDoDualInInitial, false, OsiHintDo);

        CbcModel cbc(solver);  // clones the solver
        cbc.setLogLevel(0);
        cbc.messageHandler()->setLogLevel(0);
        cbc.solver()->messageHandler()->setLogLevel(0);
        cbc.setUseElapsedTime(true);
        cbc.setMaximumSeconds(std::max(0.01, settings.time_limit_s));
        cbc.setAllowableFractionGap(std::max(0.0, settings.relative_gap));
        cbc.setAllowableGap(1e-9);
        cbc.setPrintFrequency(0);
        if (const char* ns = getenv("PROPHET_ILP_STRONG")) cbc.setNumberStrong(atoi(ns));
        if (const char* nt = getenv("PROPHET_ILP_TRUST")) cbc.setNumberBeforeTrust(atoi(nt));

        CglProbing probing;
        probing.setUsingObjective(true);
        probing.setMaxPass(1);
        probing.setMaxPassRoot(3);
        probing.setMaxProbe(10);
        probing.setMaxProbeRoot(50);
        probing.setMaxLook(10);
        probing.setMaxLookRoot(50);
        probing.setRowCuts(3);
        CglGomory gomory;
        gomory.setLimit(300);
        CglKnapsackCover knapsack;
        CglClique clique;
        clique.setStarCliqueReport(false);
        clique.setRowCliqueReport(false);
        CglMixedIntegerRounding2 mir;
        CglFlowCover flow;
        const char* dbg_cuts = getenv("PROPHET_ILP_CUTS");
        const std::string cut_set = dbg_cuts ? dbg_cuts : "pgkcmfrl";
        if (cut_set.find('p') != std::string::npos) cbc.addCutGenerator(&probing, -1, "Probing");
        if (cut_set.find('g') != std::string::npos) cbc.addCutGenerator(&gomory, -1, "Gomory");
        if (cut_set.find('k') != std::string::npos) cbc.addCutGenerator(&knapsack, -1, "Knapsack");
        if (cut_set.find('c') != std::string::npos) cbc.addCutGenerator(&clique, -1, "Clique");
        if (cut_set.find('m') != std::string::npos) cbc.addCutGenerator(&mir, -1, "MIR2");
        if (cut_set.find('f') != std::string::npos) cbc.addCutGenerator(&flow, -1, "FlowCover");
        CbcRounding rounding(cbc);
        if (cut_set.find('r') != std::string::npos) cbc.addHeuristic(&rounding);
        CbcHeuristicLocal local(cbc);
        if (cut_set.find('l') != std::string::npos) cbc.addHeuristic(&local);

        if (warm_ok) {
            const double objective = model.objective_of(*settings.initial);
            cbc.setBestSolution(settings.initial->data(), n, objective, true);
        }
        if (getenv("PROPHET_ILP_DEBUG")) {
            cbc.initialSolve();
            fprintf(stderr, "[ilp] cols=%d rows=%d lp=%g t=%.3f\n", n, m, cbc.solver()->getObjValue(),
                    (now_ns() - start_ns) * 1e-9);
        }
        cbc.branchAndBound();
        if (getenv("PROPHET_ILP_DEBUG"))
            fprintf(stderr, "[ilp] obj=%g bound=%g nodes=%d status=%d/%d\n", cbc.getObjValue(),
                    cbc.getBestPossibleObjValue(), cbc.getNodeCount(), cbc.status(), cbc.secondaryStatus());

        result.nodes = cbc.getNodeCount();
        result.time_limited = cbc.isSecondsLimitReached();
        result.infeasible = cbc.isProvenInfeasible();
        if (cbc.bestSolution() != nullptr) {
            result.has_solution = true;
            result.values.assign(cbc.bestSolution(), cbc.bestSolution() + n);
            result.objective = model.objective_of(result.values);
            result.optimal = cbc.isProvenOptimal() && !result.time_limited;
            result.bound = std::min(cbc.getBestPossibleObjValue(), result.objective);
        }
    } catch (const CoinError& error) {
        throw Error(kExitRunFailed, "CBC failed: " + error.className() + "::" + error.methodName() + ": " +
                                        error.message());
    }
    // CBC's answer must satisfy the rows (its tolerances are 1e-7 on scaled data); otherwise use the warm start
    if (result.has_solution && model.max_violation(result.values) > 1e-5) result.has_solution = false;
    if (!result.has_solution && warm_ok) {
        result.has_solution = true;
        result.values = *settings.initial;
        result.objective = model.objective_of(result.values);
        result.optimal = false;
        result.bound = std::min(result.bound, result.objective);
    }
    if (!result.has_solution) result.bound = 0;
    result.seconds = static_cast<double>(now_ns() - start_ns) * 1e-9;
    return result;
}

}  // namespace prophet::ilp
