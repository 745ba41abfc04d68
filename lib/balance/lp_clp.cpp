// lp_clp.cpp: LpModel -> ClpSimplex (Debian coinor-libclp-dev, linked through CBC's pkg-config), logging off.
#include "balance/lp_clp.h"

#include <coin/ClpSimplex.hpp>
#include <coin/CoinFinite.hpp>

#include "core/error.h"

namespace prophet::lp {

double infinity() { return COIN_DBL_MAX; }

int LpModel::add_col(double lb, double ub, double objective_cost, const int* rows, const double* coefs, int n) {
    for (int i = 0; i < n; ++i) {
        PROPHET_ASSERT(rows[i] >= 0 && rows[i] < num_rows);
        row_index.push_back(rows[i]);
        value.push_back(coefs[i]);
    }
    col_lb.push_back(lb);
    col_ub.push_back(ub);
    cost.push_back(objective_cost);
    col_start.push_back(static_cast<int>(row_index.size()));
    return num_cols() - 1;
}

LpResult solve_lp(const LpModel& m, std::vector<unsigned char>* basis) {
    PROPHET_ASSERT(static_cast<int>(m.row_lb.size()) == m.num_rows && m.row_ub.size() == m.row_lb.size());
    ClpSimplex clp;
    clp.setLogLevel(0);
    std::vector<CoinBigIndex> start(m.col_start.begin(), m.col_start.end());
    clp.loadProblem(m.num_cols(), m.num_rows, start.data(), m.row_index.data(), m.value.data(), m.col_lb.data(),
                    m.col_ub.data(), m.cost.data(), m.row_lb.data(), m.row_ub.data());
    LpResult r;
    const size_t statuses = static_cast<size_t>(m.num_cols()) + m.num_rows;
    if (basis && basis->size() == statuses) {
        clp.copyinStatus(basis->data());
        r.warm_started = true;
    }
    // warm: the basis of the same structure stays dual feasible when only the bounds change (the routing LPs' counts),
    // so dual simplex repairs it; cold: primal simplex from Clp's start measured about a third faster than dual on
    // flow's routing LPs (docs/policies.md, hot-set family). Where the LP has several optima, which one is returned
    // depends on the start: callers that need one answer on every rank compute it once (ep_executor.h).
    if (r.warm_started)
        clp.dual();
    else
        clp.primal();
    if (clp.status() != 0) clp.primal();  // a stale warm basis can leave dual simplex stuck: finish with primal
    r.optimal = clp.status() == 0;
    r.objective = clp.objectiveValue();
    const double* x = clp.primalColumnSolution();
    r.x.assign(x, x + m.num_cols());
    if (basis) basis->assign(clp.statusArray(), clp.statusArray() + statuses);
    return r;
}

std::vector<unsigned char>& BasisCache::basis(uint64_t key) {
    const auto found = by_key_.find(key);
    if (found != by_key_.end()) {
        entries_.splice(entries_.begin(), entries_, found->second);
        return entries_.front().basis;
    }
    entries_.push_front(Entry{key, {}, kEntryOverheadBytes});
    bytes_ += kEntryOverheadBytes;
    by_key_[key] = entries_.begin();
    return entries_.front().basis;
}

void BasisCache::stored(uint64_t key) {
    const auto found = by_key_.find(key);
    PROPHET_ASSERT(found != by_key_.end());
    Entry& e = *found->second;
    const size_t now = e.basis.size() + kEntryOverheadBytes;
    bytes_ = bytes_ - e.counted + now;
    e.counted = now;
    while (bytes_ > max_bytes_ && entries_.size() > 1 && entries_.back().key != key) {
        bytes_ -= entries_.back().counted;
        by_key_.erase(entries_.back().key);
        entries_.pop_back();
    }
}

}  // namespace prophet::lp
