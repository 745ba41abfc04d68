// schedule.cpp: the `none`, `blockwise` and `fastermoe` op lists of one iteration.
#include "sim/schedule.h"

#include <algorithm>
#include <sstream>

#include "core/enum_table.h"
#include "core/error.h"

namespace prophet::sim {

namespace {
constexpr EnumName<OpKind> kOpKindNames[] = {{OpKind::kGate, "gate"},
                                             {OpKind::kPlan, "plan"},
                                             {OpKind::kTrans, "trans"},
                                             {OpKind::kDispatchA2a, "dispatch_a2a"},
                                             {OpKind::kFec, "fec"},
                                             {OpKind::kCombineA2a, "combine_a2a"},
                                             {OpKind::kFnec, "fnec"},
                                             {OpKind::kBnec, "bnec"},
                                             {OpKind::kCombineA2aBwd, "combine_a2a_bwd"},
                                             {OpKind::kBec, "bec"},
                                             {OpKind::kDispatchA2aBwd, "dispatch_a2a_bwd"},
                                             {OpKind::kAgg, "agg"},
                                             {OpKind::kOptimizer, "optimizer"},
                                             {OpKind::kEmbedFwd, "embed_fwd"},
                                             {OpKind::kAttnFwd, "attn_fwd"},
                                             {OpKind::kHeadFwd, "head_fwd"},
                                             {OpKind::kHeadBwd, "head_bwd"},
                                             {OpKind::kAttnBwd, "attn_bwd"},
                                             {OpKind::kEmbedBwd, "embed_bwd"},
                                             {OpKind::kAllReduce, "all_reduce"}};
constexpr EnumName<OpPart> kOpPartNames[] = {
    {OpPart::kWhole, "whole"}, {OpPart::kUnderNec, "under_nec"}, {OpPart::kUnderExpert, "under_expert"}};
constexpr EnumName<ScheduleKind> kScheduleKindNames[] = {
    {ScheduleKind::kNone, "none"}, {ScheduleKind::kBlockwise, "blockwise"}, {ScheduleKind::kFasterMoE, "fastermoe"}};
constexpr EnumName<AllReduceMode> kAllReduceModeNames[] = {{AllReduceMode::kBlocking, "blocking"},
                                                           {AllReduceMode::kBucketed, "bucketed"}};
}  // namespace

const char* op_kind_name(OpKind kind) { return enum_name(kOpKindNames, kind); }

bool is_comm_kind(OpKind kind) {
    return kind == OpKind::kTrans || kind == OpKind::kDispatchA2a || kind == OpKind::kCombineA2a ||
           kind == OpKind::kCombineA2aBwd || kind == OpKind::kDispatchA2aBwd || kind == OpKind::kAgg ||
           kind == OpKind::kAllReduce;
}

namespace {
// ops that belong to no block (layer -1)
bool is_blockless_kind(OpKind kind) {
    return kind == OpKind::kOptimizer || kind == OpKind::kEmbedFwd || kind == OpKind::kHeadFwd ||
           kind == OpKind::kHeadBwd || kind == OpKind::kEmbedBwd || kind == OpKind::kAllReduce;
}
}  // namespace

const char* op_part_name(OpPart part) { return enum_name(kOpPartNames, part); }

ScheduleKind parse_schedule_kind(const std::string& name) {
    return parse_enum(kScheduleKindNames, "sim.schedule", name, "--set sim.schedule=blockwise");
}

const char* schedule_kind_name(ScheduleKind kind) { return enum_name(kScheduleKindNames, kind); }

AllReduceMode parse_all_reduce_mode(const std::string& name) {
    return parse_enum(kAllReduceModeNames, "sim.allreduce", name, "--set sim.allreduce=bucketed");
}

int Schedule::find(OpKind kind, int layer, OpPart part) const {
    for (size_t i = 0; i < ops.size(); ++i)
        if (ops[i].kind == kind && ops[i].layer == layer && ops[i].part == part) return static_cast<int>(i);
    return -1;
}

namespace {

class Builder {
  public:
    explicit Builder(Schedule* s) : s_(s) {}
    int add(OpKind kind, int layer, OpPart part, std::vector<int> deps, bool next_iteration = false) {
        ScheduleOp op;
        op.kind = kind;
        op.layer = layer;
        op.part = part;
        op.resource = kind == OpKind::kAllReduce ? Resource::kDenseComm
                      : is_comm_kind(kind)        ? Resource::kComm
                                                  : Resource::kCompute;
        op.collective = is_comm_kind(kind);
        op.next_iteration = next_iteration;
        for (int d : deps)
            if (d >= 0 && std::find(op.deps.begin(), op.deps.end(), d) == op.deps.end()) op.deps.push_back(d);
        s_->ops.push_back(std::move(op));
        return static_cast<int>(s_->ops.size()) - 1;
    }
    ScheduleOp& op(int index) { return s_->ops[static_cast<size_t>(index)]; }
    // a Trans/Agg on the shadow stream (fastermoe), beside the comm stream's all-to-alls
    int add_shadow(OpKind kind, int layer, std::vector<int> deps) {
        const int index = add(kind, layer, OpPart::kWhole, std::move(deps));
        op(index).resource = Resource::kShadowComm;
        return index;
    }

  private:
    Schedule* s_;
};

// The dense-gradient all-reduces: backward finishes gradient units (IterationOps::grad_bytes order); blocking
// issues one all-reduce after the last unit, bucketed one per bucket as soon as the bucket is full.
class AllReduces {
  public:
    AllReduces(Builder& b, const IterationOps& x) : b_(b), x_(x) {}
    // unit `unit` of grad_bytes is complete when op `ready` ends
    void finished(int unit, int ready) {
        const bool last = unit + 1 == static_cast<int>(x_.grad_bytes.size());
        pending_ += x_.grad_bytes[static_cast<size_t>(unit)];
        if (last || (x_.all_reduce == AllReduceMode::kBucketed && pending_ >= x_.bucket_bytes)) {
            const int op = b_.add(OpKind::kAllReduce, -1, OpPart::kWhole, {ready});
            b_.op(op).bytes = pending_;
            ops_.push_back(op);
            pending_ = 0;
        }
    }
    const std::vector<int>& ops() const { return ops_; }

  private:
    Builder& b_;
    const IterationOps& x_;
    double pending_ = 0;
    std::vector<int> ops_;
};

// embed_fwd (dense), the first op of the forward; -1 without dense ops
int open_forward(Builder& b, const IterationOps& x) {
    return x.dense ? b.add(OpKind::kEmbedFwd, -1, OpPart::kWhole, {}) : -1;
}

// head_fwd, head_bwd between forward and backward (dense); returns the op backward waits for
int head(Builder& b, const IterationOps& x, AllReduces& ar, int prev) {
    if (!x.dense) return prev;
    const int fwd = b.add(OpKind::kHeadFwd, -1, OpPart::kWhole, {prev});
    const int bwd = b.add(OpKind::kHeadBwd, -1, OpPart::kWhole, {fwd});
    ar.finished(0, bwd);
    return bwd;
}

// attn_bwd(l) after the block's last backward ops `after` (dense), its gradients then complete; returns what the
// next backward op waits for: {attn_bwd(l)}, or `after` without dense ops
std::vector<int> attention_backward(Builder& b, const IterationOps& x, AllReduces& ar, int L, int l,
                                    std::vector<int> after) {
    if (!x.dense) return after;
    const int bwd = b.add(OpKind::kAttnBwd, l, OpPart::kWhole, std::move(after));
    ar.finished(1 + (L - 1 - l), bwd);
    return {bwd};
}
int attention_backward(Builder& b, const IterationOps& x, AllReduces& ar, int L, int l, int prev) {
    return attention_backward(b, x, ar, L, l, std::vector<int>{prev}).front();
}

// embed_bwd closes the backward (dense)
int close_backward(Builder& b, const IterationOps& x, AllReduces& ar, int L, int prev) {
    if (!x.dense) return prev;
    const int bwd = b.add(OpKind::kEmbedBwd, -1, OpPart::kWhole, {prev});
    ar.finished(L + 1, bwd);
    return bwd;
}

// attn_fwd(l) before the block's gate (dense)
int attention_forward(Builder& b, const IterationOps& x, int l, int prev) {
    return x.dense ? b.add(OpKind::kAttnFwd, l, OpPart::kWhole, {prev}) : prev;
}

void build_none(Builder& b, int L, const IterationOps& x, AllReduces& ar, std::vector<int>* aggs, int* last) {
    int prev = open_forward(b, x);  // the op the next block waits for
    for (int l = 0; l < L; ++l) {
        prev = attention_forward(b, x, l, prev);
        const int gate = b.add(OpKind::kGate, l, OpPart::kWhole, {prev});
        const int plan = b.add(OpKind::kPlan, l, OpPart::kWhole, {gate});
        const int trans = b.add(OpKind::kTrans, l, OpPart::kWhole, {plan});
        const int disp = b.add(OpKind::kDispatchA2a, l, OpPart::kWhole, {gate, trans});
        const int fec = b.add(OpKind::kFec, l, OpPart::kWhole, {disp, trans});
        const int comb = b.add(OpKind::kCombineA2a, l, OpPart::kWhole, {fec});
        prev = b.add(OpKind::kFnec, l, OpPart::kWhole, {comb});
    }
    prev = head(b, x, ar, prev);
    for (int l = L - 1; l >= 0; --l) {
        const int bnec = b.add(OpKind::kBnec, l, OpPart::kWhole, {prev});
        const int cb = b.add(OpKind::kCombineA2aBwd, l, OpPart::kWhole, {bnec});
        const int bec = b.add(OpKind::kBec, l, OpPart::kWhole, {cb});
        const int db = b.add(OpKind::kDispatchA2aBwd, l, OpPart::kWhole, {bec});
        prev = b.add(OpKind::kAgg, l, OpPart::kWhole, {db});
        aggs->push_back(prev);
        prev = attention_backward(b, x, ar, L, l, prev);
    }
    *last = close_backward(b, x, ar, L, prev);
}

void build_blockwise(Builder& b, int L, const IterationOps& x, AllReduces& ar, std::vector<int>* aggs, int* last) {
    // Trans sub-ops of each block: block 0's whole Trans opens the iteration (its placement was planned in the
    // previous iteration); block l+1's two parts run beside block l's expert and non-expert compute.
    std::vector<std::vector<int>> trans(L);
    trans[0].push_back(b.add(OpKind::kTrans, 0, OpPart::kWhole, {}));
    int prev = open_forward(b, x);
    for (int l = 0; l < L; ++l) {
        prev = attention_forward(b, x, l, prev);
        const int gate = b.add(OpKind::kGate, l, OpPart::kWhole, {prev});
        b.add(OpKind::kPlan, l, OpPart::kWhole, {gate}, /*next_iteration=*/true);
        const int disp = b.add(OpKind::kDispatchA2a, l, OpPart::kWhole, {gate});
        if (l + 1 < L) trans[l + 1].push_back(b.add(OpKind::kTrans, l + 1, OpPart::kUnderExpert, {}));
        std::vector<int> fec_deps = {disp};
        fec_deps.insert(fec_deps.end(), trans[l].begin(), trans[l].end());
        const int fec = b.add(OpKind::kFec, l, OpPart::kWhole, fec_deps);
        const int comb = b.add(OpKind::kCombineA2a, l, OpPart::kWhole, {fec});
        if (l + 1 < L) trans[l + 1].push_back(b.add(OpKind::kTrans, l + 1, OpPart::kUnderNec, {}));
        prev = b.add(OpKind::kFnec, l, OpPart::kWhole, {comb});
    }
    prev = head(b, x, ar, prev);
    int bec_above = -1;  // BEC of block l+1: the gradients its Agg sends
    for (int l = L - 1; l >= 0; --l) {
        if (l + 1 < L) aggs->push_back(b.add(OpKind::kAgg, l + 1, OpPart::kUnderNec, {bec_above}));
        const int bnec = b.add(OpKind::kBnec, l, OpPart::kWhole, {prev});
        const int cb = b.add(OpKind::kCombineA2aBwd, l, OpPart::kWhole, {bnec});
        if (l + 1 < L) aggs->push_back(b.add(OpKind::kAgg, l + 1, OpPart::kUnderExpert, {bec_above}));
        const int bec = b.add(OpKind::kBec, l, OpPart::kWhole, {cb});
        prev = b.add(OpKind::kDispatchA2aBwd, l, OpPart::kWhole, {bec});
        prev = attention_backward(b, x, ar, L, l, prev);
        bec_above = bec;
    }
    aggs->push_back(b.add(OpKind::kAgg, 0, OpPart::kWhole, {bec_above}));
    *last = close_backward(b, x, ar, L, prev);
}

// FasterMoE's shadowing (pro-prophet.md §7): the policy plans on the current counts right after the gate; the
// shadowed experts' broadcast runs on its own stream beside the dispatch all-to-all's sends, their compute after
// both; backward computes them first (BEC), then reduces their gradients to the owners beside the dispatch
// gradient's all-to-all, and the block's backward ends when both have.
void build_fastermoe(Builder& b, int L, const IterationOps& x, AllReduces& ar, std::vector<int>* aggs, int* last) {
    int prev = open_forward(b, x);
    for (int l = 0; l < L; ++l) {
        prev = attention_forward(b, x, l, prev);
        const int gate = b.add(OpKind::kGate, l, OpPart::kWhole, {prev});
        const int plan = b.add(OpKind::kPlan, l, OpPart::kWhole, {gate});
        const int trans = b.add_shadow(OpKind::kTrans, l, {plan});
        const int disp = b.add(OpKind::kDispatchA2a, l, OpPart::kWhole, {plan});
        const int fec = b.add(OpKind::kFec, l, OpPart::kWhole, {disp, trans});
        const int comb = b.add(OpKind::kCombineA2a, l, OpPart::kWhole, {fec});
        prev = b.add(OpKind::kFnec, l, OpPart::kWhole, {comb});
    }
    std::vector<int> after = {head(b, x, ar, prev)};  // what the next backward op waits for
    for (int l = L - 1; l >= 0; --l) {
        const int bnec = b.add(OpKind::kBnec, l, OpPart::kWhole, after);
        const int cb = b.add(OpKind::kCombineA2aBwd, l, OpPart::kWhole, {bnec});
        const int bec = b.add(OpKind::kBec, l, OpPart::kWhole, {cb});
        const int db = b.add(OpKind::kDispatchA2aBwd, l, OpPart::kWhole, {bec});
        const int agg = b.add_shadow(OpKind::kAgg, l, {bec});
        aggs->push_back(agg);
        after = attention_backward(b, x, ar, L, l, {db, agg});
    }
    // without dense ops `after` is {dispatch_bwd(0), agg(0)}: the optimizer waits for every agg anyway
    *last = close_backward(b, x, ar, L, after.front());
}

}  // namespace

Schedule build_schedule(ScheduleKind kind, int num_layers, bool include_optimizer) {
    IterationOps x;
    x.optimizer = include_optimizer;
    return build_schedule(kind, num_layers, x);
}

Schedule build_schedule(ScheduleKind kind, int num_layers, const IterationOps& x) {
    PROPHET_ASSERT_MSG(num_layers >= 1, "a schedule needs at least one block");
    PROPHET_ASSERT_MSG(!x.dense || x.grad_bytes.size() == static_cast<size_t>(num_layers) + 2,
                       "IterationOps::grad_bytes must be [L + 2]");
    Schedule s;
    s.kind = kind;
    s.num_layers = num_layers;
    s.include_optimizer = x.optimizer;
    s.dense = x.dense;
    s.all_reduce = x.all_reduce;
    Builder b(&s);
    AllReduces ar(b, x);
    std::vector<int> aggs;
    int last = -1;
    switch (kind) {
        case ScheduleKind::kNone: build_none(b, num_layers, x, ar, &aggs, &last); break;
        case ScheduleKind::kBlockwise: build_blockwise(b, num_layers, x, ar, &aggs, &last); break;
        case ScheduleKind::kFasterMoE: build_fastermoe(b, num_layers, x, ar, &aggs, &last); break;
    }
    if (x.optimizer) {
        std::vector<int> deps = aggs;
        deps.insert(deps.end(), ar.ops().begin(), ar.ops().end());
        deps.push_back(last);
        b.add(OpKind::kOptimizer, -1, OpPart::kWhole, deps);
    }
    PROPHET_ASSERT_MSG(check_schedule(s).empty(), check_schedule(s));
    return s;
}

std::string check_schedule(const Schedule& s) {
    for (size_t i = 0; i < s.ops.size(); ++i) {
        const ScheduleOp& op = s.ops[i];
        const std::string where = "op " + std::to_string(i) + " (" + op_kind_name(op.kind) + ")";
        for (int d : op.deps)
            if (d < 0 || static_cast<size_t>(d) >= i)
                return where + " depends on op " + std::to_string(d) + ", not an earlier one";
        const Resource stream = op.kind == OpKind::kAllReduce ? Resource::kDenseComm
                                : is_comm_kind(op.kind)        ? Resource::kComm
                                                               : Resource::kCompute;
        // a comm op may run on the shadow stream (fastermoe's Trans/Agg), a compute op never
        const bool shadow = op.resource == Resource::kShadowComm && is_comm_kind(op.kind);
        if (op.resource != stream && !shadow) return where + " is on the wrong stream";
        if (op.collective != (op.resource != Resource::kCompute))
            return where + ": collective ops are exactly the comm ops";
        if (is_blockless_kind(op.kind) ? op.layer != -1 : (op.layer < 0 || op.layer >= s.num_layers))
            return where + " has layer " + std::to_string(op.layer) + " out of range";
        if (op.part != OpPart::kWhole && op.kind != OpKind::kTrans && op.kind != OpKind::kAgg)
            return where + " is split but only Trans and Agg split";
    }
    return "";
}

std::string schedule_to_text(const Schedule& s) {
    std::ostringstream out;
    for (size_t i = 0; i < s.ops.size(); ++i) {
        const ScheduleOp& op = s.ops[i];
        const char* stream = op.resource == Resource::kCompute ? "compute"
                             : op.resource == Resource::kComm  ? "comm   "
                             : op.resource == Resource::kDenseComm ? "dense  "
                                                                   : "shadow ";
        out << i << " " << stream << " " << op_kind_name(op.kind);
        if (op.layer >= 0) out << "[" << op.layer << "]";
        if (op.part != OpPart::kWhole) out << "." << op_part_name(op.part);
        if (op.next_iteration) out << " (for j+1)";
        if (op.kind == OpKind::kAllReduce) out << " (" << op.bytes << " B)";
        if (!op.deps.empty()) {
            out << " <-";
            for (int d : op.deps) out << " " << d;
        }
        out << "\n";
    }
    return out.str();
}

}  // namespace prophet::sim
