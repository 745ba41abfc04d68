// max_flow.h: Dinic's maximum flow on a small directed graph with real capacities, resumable: capacities may be
// raised after a solve and solve() called again, augmenting from the flow already there (flow_split.h raises the
// device capacities of its parametric search this way, so the whole search costs about one max-flow).
#pragma once

#include <vector>

namespace prophet {

class MaxFlow {
  public:
    explicit MaxFlow(int num_nodes);
    // an empty graph of num_nodes nodes again, keeping the buffers (a caller solving many small networks in a row
    // allocates once)
    void reset(int num_nodes);
    // an arc from -> to of capacity cap >= 0; returns its index (for flow_on / raise_capacity)
    int add_arc(int from, int to, double cap);
    // sets the flow on an arc (0 <= flow <= cap) and the matching excess nowhere else: only for building an
    // initial flow that the caller keeps conserved (every unit put on a path source -> ... -> sink)
    void set_flow(int arc, double flow);
    void raise_capacity(int arc, double cap);  // cap >= its current capacity
    // augments until no source -> sink path has residual above `eps`; returns the total flow out of the source
    double solve(int source, int sink, double eps);
    double flow_on(int arc) const { return flow_[arc]; }
    // after solve: nodes reachable from the source in the residual graph (the source side of a minimum cut)
    std::vector<char> source_side(int source, double eps) const;

  private:
    struct Arc {
        int to, next;
    };
    int n_ = 0;
    std::vector<int> head_, level_, iter_, queue_;
    std::vector<Arc> arcs_;  // arc 2i forward, 2i + 1 its reverse
    std::vector<double> cap_, flow_;
    double residual(int a) const { return cap_[a] - flow_[a]; }
    bool levels(int source, int sink, double eps);
    double push(int node, int sink, double limit, double eps);
};

}  // namespace prophet
