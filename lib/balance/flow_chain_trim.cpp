// flow_chain_trim.cpp: the trims of flow_chain_trim.h, with chain counts kept per removal.
#include "balance/flow_chain_trim.h"

#include <limits>
#include <utility>

#include "core/error.h"

namespace prophet {
namespace {

struct Removal {
    int expert = -1, device = -1;  // the replica of expert on device (-1: none chosen)
};

// Removes copies from one placement, keeping its chain counts (cost_model.h ChainLoads) and copies per expert.
class Trimmer {
  public:
    Trimmer(const CostModel& model, const std::vector<double>& load, Placement& placement)
        : model_(model), load_(load), p_(placement), counts_(chain_loads(model, placement)),
          copies_(static_cast<size_t>(placement.num_experts)) {
        for (int e = 0; e < placement.num_experts; ++e) copies_[e] = 1 + placement.num_replicas_of(e);
    }
    // the first device forwarding or receiving more than `level` copies (-1: none)
    int over(int level) const {
        for (int d = 0; d < p_.num_devices; ++d)
            if (counts_.sent[d] > level || counts_.received[d] > level) return d;
        return -1;
    }
    Removal choose(int device, int level);
    void remove(const Removal& r) {
        PROPHET_ASSERT(r.expert >= 0 && p_.owner[r.expert] != r.device);
        count_chain(r.expert, -1);
        p_.replica[static_cast<size_t>(r.expert) * p_.num_devices + r.device] = 0;
        --copies_[r.expert];
        count_chain(r.expert, +1);
    }

  private:
    const CostModel& model_;
    const std::vector<double>& load_;
    Placement& p_;
    ChainLoads counts_;
    std::vector<int> copies_;                 // [E] holders of each expert (owner + replicas)
    std::vector<std::pair<int, int>> pairs_;  // one expert's chain, (sender, receiver) in order

    void count_chain(int e, int sign) {
        expert_copies(model_, p_, e, pairs_);
        for (const auto& [s, d] : pairs_) counts_.sent[s] += sign, counts_.received[d] += sign;
    }
    // a is the better removal than b: the expert of less load / copies, then the lower expert, then device
    bool lighter(const Removal& a, const Removal& b) const {
        if (b.expert < 0) return true;
        const double wa = load_[a.expert] / copies_[a.expert], wb = load_[b.expert] / copies_[b.expert];
        if (wa != wb) return wa < wb;
        return a.expert != b.expert ? a.expert < b.expert : a.device < b.device;
    }
};

// The removal for a device over `level` (flow_chain_trim.h): the lightest of those lowering its count where it is
// over, else the lightest last receiver of a chain it forwards.
Removal Trimmer::choose(int device, int level) {
    const bool sends_over = counts_.sent[device] > level, receives_over = counts_.received[device] > level;
    Removal useful, fallback;
    for (int e = 0; e < p_.num_experts; ++e) {
        if (copies_[e] < 2 || !p_.holds(e, device)) continue;
        expert_copies(model_, p_, e, pairs_);
        int next = -1;  // the device it forwards e to
        for (const auto& [s, d] : pairs_)
            if (s == device) next = d;
        if (p_.owner[e] != device && (receives_over || (sends_over && next >= 0)) && lighter({e, device}, useful))
            useful = {e, device};
        if (next < 0) continue;
        const Removal end{e, pairs_.back().second};
        if (next == end.device && sends_over && lighter(end, useful)) useful = end;
        if (lighter(end, fallback)) fallback = end;
    }
    return useful.expert >= 0 ? useful : fallback;
}

}  // namespace

Placement trim_chain_copies(const CostModel& model, const std::vector<double>& load, const Placement& start,
                            int level) {
    PROPHET_ASSERT(level >= 0 && model.trans_broadcast == TransBroadcast::kChain);
    Placement p = start;
    Trimmer trimmer(model, load, p);
    for (int device = trimmer.over(level); device >= 0; device = trimmer.over(level))
        trimmer.remove(trimmer.choose(device, level));
    return p;
}

void walk_chain_trims(const CostModel& model, const std::vector<double>& load, const Placement& start,
                      const std::function<double(const Placement&)>& consider) {
    if (model.trans_broadcast != TransBroadcast::kChain || start.num_replicas() == 0) return;
    Placement at = start;
    double previous = std::numeric_limits<double>::infinity();
    int rises = 0;
    for (int level = chain_loads(model, start).busiest() - 1; level >= 1 && rises < 2; --level) {
        at = trim_chain_copies(model, load, at, level);
        const double s = consider(at);
        rises = s >= previous ? rises + 1 : 0;
        previous = s;
    }
}

}  // namespace prophet
