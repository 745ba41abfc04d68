// lp_clp.cpp: LpModel -> ClpSimplex (Debian coinor-libclp-dev, linked through CBC's pkg-config), logging off.
#include "balance/lp_clp.h"

#include <coin/ClpSimplex.hpp>
#include <coin/ClpSolve.hpp>
#include <coin/CoinFinite.hpp>

#include "core/error.h"
#include "core/fnv.h"
#include "core/timer.h"

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
    // so dual simplex repairs it; cold: primal simplex, measured about a third faster than dual on flow's routing LPs
    // (docs/policies.md, hot-set family), entered through initialSolve without presolve (Clp picks its start: on
    // those LPs about as many pivots as primal() from the loaded problem in 0.7-0.8x its time). Where the LP has
    // several optima, which one is returned depends on the start: callers that need one answer on every rank compute
    // it once (ep_executor.h).
    if (r.warm_started) {
        clp.dual();
    } else {
        ClpSolve cold;
        cold.setSolveType(ClpSolve::usePrimal);
        cold.setPresolveType(ClpSolve::presolveOff);
        cold.setSpecialOption(2, 1);  // no SIGINT handler: solves run on several threads (prophet plan)
        clp.initialSolve(cold);
    }
    if (clp.status() != 0) clp.primal();  // a stale warm basis can leave dual simplex stuck: finish with primal
    r.optimal = clp.status() == 0;
    r.objective = clp.objectiveValue();
    const double* x = clp.primalColumnSolution();
    r.x.assign(x, x + m.num_cols());
    if (basis) basis->assign(clp.statusArray(), clp.statusArray() + statuses);
    return r;
}

uint64_t structure_key(const LpModel& m) {
    Fnv1a f;
    f.word(static_cast<uint64_t>(m.num_rows));
    for (int v : m.col_start) f.word(static_cast<uint64_t>(v));
    for (int v : m.row_index) f.word(static_cast<uint64_t>(v));
    return f.h;
}

uint64_t content_key(const LpModel& m) {
    Fnv1a f;
    for (const std::vector<double>* part : {&m.value, &m.col_lb, &m.col_ub, &m.cost, &m.row_lb, &m.row_ub}) {
        f.word(static_cast<uint64_t>(part->size()));
        for (double v : *part) f.word(v);
    }
    return f.h;
}

LpResult solve_lp_cached(const LpModel& m, BasisCache& cache) {
    const uint64_t shape = structure_key(m), content = content_key(m);
    LpResult r;
    const StoredOptimum& last = cache.optimum(shape);
    if (last.present && last.content == content) {
        r.optimal = r.reused = true;
        r.objective = last.objective;
        r.solve_s = last.solve_s;
        r.x.assign(static_cast<size_t>(m.num_cols()), 0.0);
        for (size_t i = 0; i < last.index.size(); ++i) r.x[last.index[i]] = last.value[i];
        return r;
    }
    const int64_t started = now_ns();
    r = solve_lp(m, &cache.basis(shape));
    r.solve_s = static_cast<double>(now_ns() - started) * 1e-9;
    StoredOptimum& slot = cache.optimum(shape);
    slot = StoredOptimum{};
    if (r.optimal) {
        slot.present = true;
        slot.content = content;
        slot.objective = r.objective;
        slot.solve_s = r.solve_s;
        for (int j = 0; j < m.num_cols(); ++j)
            if (r.x[j] != 0.0) slot.index.push_back(j), slot.value.push_back(r.x[j]);
    }
    cache.stored(shape);
    return r;
}

BasisCache::Entry& BasisCache::entry(uint64_t key) {
    const auto found = by_key_.find(key);
    if (found != by_key_.end()) {
        entries_.splice(entries_.begin(), entries_, found->second);
        return entries_.front();
    }
    entries_.push_front(Entry{key, {}, {}, kEntryOverheadBytes});
    bytes_ += kEntryOverheadBytes;
    by_key_[key] = entries_.begin();
    return entries_.front();
}

std::vector<unsigned char>& BasisCache::basis(uint64_t key) { return entry(key).basis; }

StoredOptimum& BasisCache::optimum(uint64_t key) { return entry(key).optimum; }

void BasisCache::stored(uint64_t key) {
    const auto found = by_key_.find(key);
    PROPHET_ASSERT(found != by_key_.end());
    Entry& e = *found->second;
    const size_t now = e.basis.size() + e.optimum.bytes() + kEntryOverheadBytes;
    bytes_ = bytes_ - e.counted + now;
    e.counted = now;
    while (bytes_ > max_bytes_ && entries_.size() > 1 && entries_.back().key != key) {
        bytes_ -= entries_.back().counted;
        by_key_.erase(entries_.back().key);
        entries_.pop_back();
    }
}

}  // namespace prophet::lp
