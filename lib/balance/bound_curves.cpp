#include "balance/bound_curves.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "balance/count_sort.h"

namespace prophet::bound_detail {

void receive_curve(const int64_t* counts, int D, int E, int64_t max_extra, std::vector<double>& curve) {
    // rest[e] = w_e minus e's h_e largest rows. An expert's rows are gathered into a max-heap ([E][D], e's at e * D)
    // only when it first takes a second holder (most experts never do), and each further holder pops its next
    // largest: O(D) to gather and O(log D) per holder, where sorting every expert's column cost O(E D log D).
    thread_local std::vector<int64_t> rest, largest, rows;
    thread_local std::vector<int> left;  // [E] rows still in e's heap; -1: not gathered yet
    rest.assign(E, 0);
    largest.assign(E, 0);
    left.assign(E, -1);
    rows.resize(static_cast<size_t>(E) * D);
    for (int d = 0; d < D; ++d) {  // row-major: w_e and e's largest row
        const int64_t* c = counts + static_cast<size_t>(d) * E;
        for (int e = 0; e < E; ++e) rest[e] += c[e], largest[e] = std::max(largest[e], c[e]);
    }
    for (int e = 0; e < E; ++e) rest[e] -= largest[e];
    auto next_row = [&](int e) {  // e's largest row not yet taken (its heap holds the rest)
        int64_t* heap = &rows[static_cast<size_t>(e) * D];
        if (left[e] < 0) {
            for (int d = 0; d < D; ++d) heap[d] = counts[static_cast<size_t>(d) * E + e];
            std::make_heap(heap, heap + D);
            std::pop_heap(heap, heap + D);  // the largest row: the first holder's, in rest already
            left[e] = D - 1;
        }
        std::pop_heap(heap, heap + left[e]);
        return heap[--left[e]];
    };
    struct Item {
        int64_t rest, h;  // w_e - top_h(e) over h: ordered by the ratio
        int e;
    };
    auto lighter = [](const Item& a, const Item& b) { return a.rest * b.h < b.rest * a.h; };
    std::priority_queue<Item, std::vector<Item>, decltype(lighter)> heap(lighter);
    for (int e = 0; e < E; ++e) heap.push({rest[e], 1, e});
    auto share = [&] { return static_cast<double>(heap.top().rest) / static_cast<double>(heap.top().h); };
    curve.assign(1, share());
    // beyond kReceiveSteps holders the curve is cut (the caller then uses 0): the term binds with few replicas
    for (int64_t x = 1; x <= std::min(max_extra, kReceiveSteps); ++x) {
        const Item top = heap.top();
        if (top.h >= D || top.rest <= 0) break;  // the hottest has every device, or nothing moves
        heap.pop();
        heap.push({top.rest - next_row(top.e), top.h + 1, top.e});
        curve.push_back(share());
    }
}

void compute_curve(const std::vector<int64_t>& w, int D, int64_t total, int64_t max_extra,
                   std::vector<int64_t>& curve) {
    const int64_t floor_tokens = (total + D - 1) / D;
    using Item = std::pair<int64_t, int64_t>;  // (w_e, h_e), ordered by w / h
    auto lighter = [](const Item& a, const Item& b) { return a.first * b.second < b.first * a.second; };
    std::priority_queue<Item, std::vector<Item>, decltype(lighter)> heap(lighter);
    for (int64_t v : w) heap.push({v, 1});
    auto current = [&] {
        const Item& top = heap.top();
        return std::max(floor_tokens, (top.first + top.second - 1) / top.second);
    };
    curve.assign(1, current());
    for (int64_t x = 1; x <= max_extra; ++x) {
        Item top = heap.top();
        if (top.second >= D || curve.back() == floor_tokens) break;  // the hottest has every device, or at the mean
        heap.pop();
        heap.push({top.first, top.second + 1});
        curve.push_back(current());
    }
}

void gain_beyond_best(const int64_t* counts, int rows, int E, int64_t* best_local, std::vector<int64_t>& prefix,
                      int per_expert) {
    thread_local std::vector<int64_t> other, scratch;
    other.clear();
    *best_local = 0;
    for (int e = 0; e < E; ++e) {
        int best = 0;
        for (int r = 1; r < rows; ++r)
            if (counts[static_cast<size_t>(r) * E + e] > counts[static_cast<size_t>(best) * E + e]) best = r;
        *best_local += counts[static_cast<size_t>(best) * E + e];
        const size_t first = other.size();
        for (int r = 0; r < rows; ++r) {
            const int64_t c = counts[static_cast<size_t>(r) * E + e];
            if (r != best && c > 0) other.push_back(c);
        }
        if (other.size() - first > static_cast<size_t>(per_expert)) {  // keep e's per_expert largest
            std::nth_element(other.begin() + first, other.begin() + first + per_expert, other.end(),
                             std::greater<int64_t>());
            other.resize(first + per_expert);
        }
    }
    sort_counts_descending(other, scratch);
    prefix.resize(other.size() + 1);
    prefix[0] = 0;
    for (size_t k = 0; k < other.size(); ++k) prefix[k + 1] = prefix[k] + other[k];
}

void mixed_gain_curve(const int64_t* counts, const ClusterSpec& cl, int E, double a, double b, MixedGain& out) {
    const int D = cl.num_devices, per_node = std::max(1, cl.devices_per_node);
    thread_local std::vector<double> items, rows;  // items: every expert's items but its largest; rows: one node's
    items.clear();
    out.forced = 0;
    for (int e = 0; e < E; ++e) {
        double largest = 0;
        const size_t first = items.size();
        for (int start = 0; start < D; start += per_node) {
            rows.clear();
            double node_row = 0;
            for (int d = start; d < std::min(D, start + per_node); ++d) {
                const double c = static_cast<double>(counts[static_cast<size_t>(d) * E + e]);
                node_row += c;
                if (c > 0) rows.push_back(c);
            }
            if (rows.empty()) continue;
            std::sort(rows.begin(), rows.end(), std::greater<double>());
            items.push_back(a * rows[0] + b * node_row);  // the node's first holder
            for (size_t j = 1; j < rows.size(); ++j) items.push_back(a * rows[j]);
        }
        for (size_t i = first; i < items.size(); ++i) largest = std::max(largest, items[i]);
        if (items.size() == first) continue;
        out.forced += largest;  // the owner's item leaves the pool (one of equal largest ones)
        *std::find(items.begin() + static_cast<std::ptrdiff_t>(first), items.end(), largest) = items.back();
        items.pop_back();
    }
    const size_t keep = std::min<size_t>(items.size(), kMixedSteps);
    std::nth_element(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(keep == 0 ? 0 : keep - 1), items.end(),
                     std::greater<double>());
    std::sort(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(keep), std::greater<double>());
    out.prefix.resize(keep + 1);
    out.prefix[0] = 0;
    for (size_t k = 0; k < keep; ++k) out.prefix[k + 1] = out.prefix[k] + items[k];
    out.tail = keep == kMixedSteps ? items[keep - 1] : 0.0;
}

std::vector<int64_t> node_counts(const int64_t* counts, const ClusterSpec& cl, int E, int* nodes_out) {
    const int D = cl.num_devices, nodes = std::max(1, D / cl.devices_per_node);
    std::vector<int64_t> per_node(static_cast<size_t>(nodes) * E, 0);  // [nodes][E]
    for (int d = 0; d < D; ++d) {
        const int node = std::min(cl.node_of(d), nodes - 1);
        for (int e = 0; e < E; ++e)
            per_node[static_cast<size_t>(node) * E + e] += counts[static_cast<size_t>(d) * E + e];
    }
    *nodes_out = nodes;
    return per_node;
}

}  // namespace prophet::bound_detail
