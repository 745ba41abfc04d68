// flow_repack.cpp: flow's repacked candidates (flow_repack.h): heap packing, move counts, relabelling, owners.
#include "balance/flow_repack.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "balance/moves.h"
#include "core/error.h"

namespace prophet {

Repacker::Repacker(const std::vector<double>& load, const Placement& current)
    : load_(load), current_(current), D_(current.num_devices), E_(current.num_experts), holder_start_(E_ + 1, 0),
      in_bin_(static_cast<size_t>(current.num_devices) * current.num_experts, 0) {
    PROPHET_ASSERT(static_cast<int>(load.size()) == E_);
    for (int e = 0; e < E_; ++e) {
        const uint8_t* replica = current.replica.data() + static_cast<size_t>(e) * D_;
        for (int d = 0; d < D_; ++d)
            if (replica[d] || d == current.owner[e]) holders_.push_back(d);  // current.holds(e, d)
        holder_start_[e + 1] = static_cast<int>(holders_.size());
    }
    by_load_.resize(E_);
    std::iota(by_load_.begin(), by_load_.end(), 0);
    std::sort(by_load_.begin(), by_load_.end(),
              [&](int a, int b) { return load[a] > load[b] || (load[a] == load[b] && a < b); });
}

// The items heaviest first into the lightest bin with room that lacks their expert: bin_items_[b*slots ..
// b*slots + used_[b]) in the order they arrived.
void Repacker::pack_items(const std::vector<int>& copies, int slots) {
    const int D = D_, E = E_;
    // an expert's copies are equal items, so sorting experts by (item weight descending, index) orders the items
    // as a stable sort of them (expert-major) would. The order is total, so the experts with one copy (item weight
    // = load, in by_load_'s order) merged with the few with more, sorted alone, are that sort.
    item_weight_.resize(E);
    replicated_.clear(), single_.clear();
    for (int e = 0; e < E; ++e) {
        item_weight_[e] = load_[e] / copies[e];
        if (copies[e] > 1) replicated_.push_back(e);
    }
    auto heavier = [&](int a, int b) {
        const double wa = item_weight_[a], wb = item_weight_[b];
        return wa > wb || (wa == wb && a < b);
    };
    std::sort(replicated_.begin(), replicated_.end(), heavier);
    for (int e : by_load_)
        if (copies[e] == 1) single_.push_back(e);
    experts_.resize(E);
    std::merge(replicated_.begin(), replicated_.end(), single_.begin(), single_.end(), experts_.begin(), heavier);
    weight_.assign(D, 0.0);
    used_.assign(D, 0);
    bin_items_.assign(static_cast<size_t>(D) * slots, -1);
    heap_.clear();
    for (int b = 0; b < D; ++b) heap_.emplace_back(0.0, b);  // ascending: already a min-heap
    const auto lighter_first = std::greater<std::pair<double, int>>();
    std::vector<std::pair<double, int>> aside;
    for (int e : experts_) {
        const double w = item_weight_[e];
        for (int c = 0; c < copies[e]; ++c) {
            int best = -1;
            aside.clear();
            while (best < 0 && !heap_.empty()) {  // the lightest bin with room that lacks e
                std::pop_heap(heap_.begin(), heap_.end(), lighter_first);
                const std::pair<double, int> top = heap_.back();
                heap_.pop_back();
                if (in_bin_[static_cast<size_t>(top.second) * E + e])
                    aside.push_back(top);
                else
                    best = top.second;
            }
            for (const auto& bin : aside)
                heap_.push_back(bin), std::push_heap(heap_.begin(), heap_.end(), lighter_first);
            if (best < 0) continue;  // every bin with room holds e: the copy is dropped
            weight_[best] += w;
            in_bin_[static_cast<size_t>(best) * E + e] = 1;
            bin_items_[static_cast<size_t>(best) * slots + used_[best]++] = e;
            if (used_[best] < slots)
                heap_.emplace_back(weight_[best], best), std::push_heap(heap_.begin(), heap_.end(), lighter_first);
        }
    }
}

Placement Repacker::pack(const std::vector<int>& copies) {
    const int D = D_, E = E_;
    PROPHET_ASSERT(static_cast<int>(copies.size()) == E);
    const int items = std::accumulate(copies.begin(), copies.end(), 0);
    const int slots = (items + D - 1) / D;
    pack_items(copies, slots);
    auto bin = [&](int b) { return bin_items_.data() + static_cast<size_t>(b) * slots; };
    // bytes moved, in expert_bytes: a copy d does not hold yet (its weights), plus training's owner move (weights
    // and AdamW state, kTrainingStateCopies) where d is not e's owner now; as the row's most less what d saves
    const auto owner_move = static_cast<int64_t>(kTrainingStateCopies);
    moves_.n = D;
    moves_.base.resize(D), moves_.row_start.assign(1, 0), moves_.col.clear(), moves_.saving.clear();
    saved_.resize(D);  // zero between bins: each device a bin touches is written back to zero below
    for (int b = 0; b < D; ++b) {
        moves_.base[b] = used_[b] * (1 + owner_move);
        touched_.clear();
        auto save = [&](int d, int64_t n) {
            if (saved_[d] == 0) touched_.push_back(d);
            saved_[d] += n;
        };
        for (int i = 0; i < used_[b]; ++i) {
            const int e = bin(b)[i];
            save(current_.owner[e], owner_move);
            for (int h = holder_start_[e]; h < holder_start_[e + 1]; ++h) save(holders_[h], 1);
            in_bin_[static_cast<size_t>(b) * E + e] = 0;  // cleared for the next pack
        }
        for (int d : touched_) moves_.col.push_back(d), moves_.saving.push_back(saved_[d]), saved_[d] = 0;
        moves_.row_start.push_back(static_cast<int>(moves_.col.size()));
    }
    device_of_bin_ = assignment_.solve(moves_);
    owner_.assign(E, -1);
    for (int b = 0; b < D; ++b)
        for (int i = 0; i < used_[b]; ++i) {
            const int e = bin(b)[i];
            if (owner_[e] < 0 || device_of_bin_[b] == current_.owner[e]) owner_[e] = device_of_bin_[b];
        }
    Placement p = Placement::make_owners(D, owner_);
    most_replicas_ = 0;
    for (int b = 0; b < D; ++b) {
        int replicas = 0;
        for (int i = 0; i < used_[b]; ++i) {
            p.add_replica(bin(b)[i], device_of_bin_[b]);
            replicas += owner_[bin(b)[i]] != device_of_bin_[b];
        }
        most_replicas_ = std::max(most_replicas_, replicas);
    }
    return p;
}

}  // namespace prophet
