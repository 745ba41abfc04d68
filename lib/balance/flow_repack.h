// flow_repack.h: the repacked family of flow's candidates (policy_flow.h): every copy of every expert packed
// largest first into D bins, no duplicates in a bin, and the bins relabelled to the devices of fewest weight moves.
//
// Given copies[e] >= 1 (the owner plus extra copies; extra = sum_e copies[e] - E):
//   items     copies[e] items of weight load[e] / copies[e], heaviest first (ties: lower expert first)
//   packing   each item to the lightest bin (ties: lower index) with fewer than ceil((E + extra) / D) items and no
//             copy of the expert yet; an item every bin with room already holds is dropped. The bins wait in a
//             min-heap by (weight, index), so an item costs O(log D) plus the bins it passes that hold its
//             expert, instead of a scan of all D bins: the same bin as the scan, ties included.
//   relabel   moves[b*D + d] = experts of bin b that device d does not hold in `current`, plus
//             kTrainingStateCopies per expert whose owner d is not now (training moves its AdamW state), kept as
//             the bin's most (every item moved, owner state too) less the savings of the devices that hold some of
//             its experts now, counted from the current holders of each packed expert (O(items * holders)); the
//             assignment of least total moves (relabel_sparse.h, the same as relabel.h's on the dense matrix) maps
//             bins to devices.
//   owners    e's owner: its current owner if that device keeps a copy, else the device of its heaviest bin.
#pragma once

#include <cstdint>
#include <vector>

#include "balance/placement.h"
#include "balance/relabel_sparse.h"

namespace prophet {

// Packs one layer's copies against the placement the weights are in now; one object serves every candidate of a
// plan (the current holders and the scratch buffers are built once).
class Repacker {
  public:
    // load [E] tokens per expert; current: where the weights are now. Both must outlive the repacker.
    Repacker(const std::vector<double>& load, const Placement& current);
    // The repacked placement for copies [E] (each >= 1).
    Placement pack(const std::vector<int>& copies);
    // after pack(): the most replicas (copies that are not the owner) on one device
    int most_replicas() const { return most_replicas_; }

  private:
    const std::vector<double>& load_;
    const Placement& current_;
    int D_, E_;
    std::vector<int> holder_start_, holders_;  // current holders of expert e: holders_[holder_start_[e] ..)
    std::vector<int> by_load_;                 // [E] experts by (load descending, index)
    std::vector<int> replicated_, single_;     // pack scratch: experts with more than one copy; with one
    std::vector<int> experts_, bin_start_, bin_items_, device_of_bin_, owner_, used_;
    std::vector<double> weight_, item_weight_;  // [D] per bin; [E] load / copies
    std::vector<std::pair<double, int>> heap_;  // (weight, bin) of the bins with room
    std::vector<uint8_t> in_bin_;               // [bin*E + e]
    SavingsMatrix moves_;                       // D x D: bin -> device
    SparseAssignment assignment_;
    std::vector<int64_t> saved_;  // [D] one bin's savings per device (zero between bins)
    std::vector<int> touched_;    // the devices with a saving for the bin
    int most_replicas_ = 0;
    void pack_items(const std::vector<int>& copies, int slots);
};

}  // namespace prophet
