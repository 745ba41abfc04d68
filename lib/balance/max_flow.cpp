// max_flow.cpp: Dinic's algorithm (BFS levels, DFS blocking flow with current-arc pointers).
#include "balance/max_flow.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace prophet {

MaxFlow::MaxFlow(int num_nodes) { reset(num_nodes); }

void MaxFlow::reset(int num_nodes) {
    n_ = num_nodes;
    head_.assign(num_nodes, -1);
    level_.assign(num_nodes, 0);
    iter_.assign(num_nodes, 0);
    arcs_.clear(), cap_.clear(), flow_.clear();
}

int MaxFlow::add_arc(int from, int to, double cap) {
    PROPHET_ASSERT(from >= 0 && from < n_ && to >= 0 && to < n_ && cap >= 0);
    const int a = static_cast<int>(arcs_.size());
    arcs_.push_back({to, head_[from]});
    head_[from] = a;
    arcs_.push_back({from, head_[to]});
    head_[to] = a + 1;
    cap_.push_back(cap), flow_.push_back(0.0);
    cap_.push_back(0.0), flow_.push_back(0.0);
    return a;
}

void MaxFlow::set_flow(int arc, double flow) {
    PROPHET_ASSERT(arc % 2 == 0 && flow >= 0 && flow <= cap_[arc]);
    flow_[arc] = flow;
    flow_[arc + 1] = -flow;
}

void MaxFlow::raise_capacity(int arc, double cap) {
    PROPHET_ASSERT(arc % 2 == 0 && cap >= cap_[arc]);
    cap_[arc] = cap;
}

bool MaxFlow::levels(int source, int sink, double eps) {
    std::fill(level_.begin(), level_.end(), -1);
    queue_.assign(1, source);
    level_[source] = 0;
    for (size_t i = 0; i < queue_.size(); ++i) {
        const int v = queue_[i];
        for (int a = head_[v]; a >= 0; a = arcs_[a].next)
            if (level_[arcs_[a].to] < 0 && residual(a) > eps) {
                level_[arcs_[a].to] = level_[v] + 1;
                queue_.push_back(arcs_[a].to);
            }
    }
    return level_[sink] >= 0;
}

double MaxFlow::push(int v, int sink, double limit, double eps) {
    if (v == sink) return limit;
    for (int& a = iter_[v]; a >= 0; a = arcs_[a].next) {
        const int w = arcs_[a].to;
        if (level_[w] != level_[v] + 1 || residual(a) <= eps) continue;
        const double pushed = push(w, sink, std::min(limit, residual(a)), eps);
        if (pushed > 0) {
            flow_[a] += pushed;
            flow_[a ^ 1] -= pushed;
            return pushed;
        }
    }
    return 0.0;
}

double MaxFlow::solve(int source, int sink, double eps) {
    while (levels(source, sink, eps)) {
        iter_ = head_;
        while (push(source, sink, std::numeric_limits<double>::infinity(), eps) > 0) {
        }
    }
    double total = 0;
    for (int a = head_[source]; a >= 0; a = arcs_[a].next) total += flow_[a];
    return total;
}

std::vector<char> MaxFlow::source_side(int source, double eps) const {
    std::vector<char> seen(n_, 0);
    std::vector<int> stack{source};
    seen[source] = 1;
    while (!stack.empty()) {
        const int v = stack.back();
        stack.pop_back();
        for (int a = head_[v]; a >= 0; a = arcs_[a].next)
            if (!seen[arcs_[a].to] && residual(a) > eps) seen[arcs_[a].to] = 1, stack.push_back(arcs_[a].to);
    }
    return seen;
}

}  // namespace prophet
