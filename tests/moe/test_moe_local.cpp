// The expert-parallel executor on LocalGroup threads (1, 2, 4 ranks): the layout stage on a hand-worked example,
// exact data movement and the LocalMoeExecutor oracle of moe_checks.h for every placement case, placement
// checks, the optimizer masks, and a whole MoE-GPT step (model_forward/backward) against the one-rank model.
//   ./build/tests/test_moe --gtest_filter='-Mpi*'
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <thread>

#include "comm/comm.h"
#include "comm/comm_forward.h"
#include "core/error.h"
#include "kernels/blas.h"
#include "model/moe_gpt.h"
#include "moe/dispatch.h"
#include "moe/ep_executor.h"
#include "moe/layout.h"
#include "moe_checks.h"

using namespace prophet;
using namespace prophet::moe_test;

namespace {

// Runs body(comm) on num_ranks threads of one LocalGroup; returns each rank's exception (null if none).
std::vector<std::exception_ptr> run_local(int num_ranks, const std::function<void(Communicator&)>& body) {
    // NOTE: every rank thread calls sgemm; one BLAS thread each keeps OpenBLAS in the caller's thread.
    blas_set_num_threads(1);
    auto comms = make_local_group(num_ranks);
    std::vector<std::exception_ptr> errors(num_ranks);
    std::vector<std::thread> threads;
    for (int r = 0; r < num_ranks; ++r) {
        comms[r]->set_timeout_s(60.0);  // a rank that failed and left a collective fails the others, not hangs
        threads.emplace_back([&, r] {
            try {
                body(*comms[r]);
            } catch (...) {
                errors[r] = std::current_exception();
            }
        });
    }
    for (auto& t : threads) t.join();
    return errors;
}

std::string what(const std::exception_ptr& error) {
    try {
        std::rethrow_exception(error);
    } catch (const std::exception& e) {
        return e.what();
    }
}

void expect_no_errors(const std::vector<std::exception_ptr>& errors) {
    for (size_t r = 0; r < errors.size(); ++r)
        if (errors[r]) ADD_FAILURE() << "rank " << r << " threw: " << what(errors[r]);
}

}  // namespace

// ---- layout ------------------------------------------------------------------------------------------------

TEST(MoeLayout, CountSkipsDropped) {
    const int expert_idx[] = {0, 2, -1, 2, 3, -1};  // N=3, K=2
    int64_t counts[4];
    moe_layout_count(3, 2, 4, expert_idx, counts);
    EXPECT_EQ(counts[0], 1);
    EXPECT_EQ(counts[1], 0);
    EXPECT_EQ(counts[2], 2);
    EXPECT_EQ(counts[3], 1);
    const int bad[] = {0, 4};
    EXPECT_THROW(moe_layout_count(1, 2, 4, bad, counts), Error);
}

// D=2, E=4, rank 1 with N=3, K=2. destination: rank 1 keeps experts 1 and 3, sends 0 and 2 to rank 0; rank 0
// sends expert 1 to rank 1 and keeps the rest.
TEST(MoeLayout, HandWorkedTwoRanks) {
    const int expert_idx[] = {2, 1, 0, 2, 3, -1};  // [N*K] rank 1's routing
    const int64_t counts[] = {1, 2, 0, 3,          // rank 0
                              1, 1, 2, 1};         // rank 1
    const int destination[] = {0, 1, 0, 0,         // rank 0
                               0, 1, 0, 1};        // rank 1
    MoeDispatchLayout lo;
    moe_layout_build(1, 2, 4, 3, 2, expert_idx, counts, destination, &lo);
    // send: to rank 0 expert 0 (token 1), expert 2 (tokens 0, 1); to rank 1 expert 1 (token 0), expert 3 (token 2)
    EXPECT_EQ(lo.num_send_rows, 5);
    EXPECT_EQ(lo.send_rows, (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(lo.send_offsets, (std::vector<int64_t>{0, 3, 5}));
    EXPECT_EQ(lo.slot_token, (std::vector<int>{1, 0, 1, 0, 2}));
    EXPECT_EQ(lo.assignment_slot, (std::vector<int>{1, 3, 0, 2, 4, -1}));
    // receive: from rank 0 expert 1 (2 rows); from rank 1 experts 1 and 3 (1 row each)
    EXPECT_EQ(lo.recv_rows, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(lo.num_recv_rows, 4);
    EXPECT_EQ(lo.expert_offsets, (std::vector<int64_t>{0, 0, 3, 3, 4}));
    ASSERT_EQ(lo.segments.size(), 3u);
    EXPECT_EQ(lo.segments[0].src, 0);
    EXPECT_EQ(lo.segments[0].expert, 1);
    EXPECT_EQ(lo.segments[0].recv_begin, 0);
    EXPECT_EQ(lo.segments[0].sorted_begin, 0);
    EXPECT_EQ(lo.segments[0].rows, 2);
    EXPECT_EQ(lo.segments[1].src, 1);
    EXPECT_EQ(lo.segments[1].expert, 1);
    EXPECT_EQ(lo.segments[1].recv_begin, 2);
    EXPECT_EQ(lo.segments[1].sorted_begin, 2);
    EXPECT_EQ(lo.segments[2].expert, 3);
    EXPECT_EQ(lo.segments[2].recv_begin, 3);
    EXPECT_EQ(lo.segments[2].sorted_begin, 3);

    // the counts row must match expert_idx
    const int64_t wrong[] = {1, 2, 0, 3, 1, 1, 1, 1};
    EXPECT_THROW(moe_layout_build(1, 2, 4, 3, 2, expert_idx, wrong, destination, &lo), Error);
}

// D=2, E=2, rank 0 with N=4, K=1 routing experts {0, 1, 0, 0}. The split: rank 0's expert-0 group (3 tokens) 1 to
// rank 0 and 2 to rank 1, its expert-1 group to rank 1; rank 1's expert-0 group (2 tokens) 1 to each rank.
TEST(MoeLayout, HandWorkedSplitGroups) {
    const int expert_idx[] = {0, 1, 0, 0};  // [N*K] rank 0's routing
    const int64_t counts[] = {3, 1,         // rank 0
                              2, 0};        // rank 1
    RouteSplit split;
    split.num_devices = 2;
    split.num_experts = 2;
    split.group_start = {0, 2, 3, 5, 5};  // groups (0,0) (0,1) (1,0) (1,1)
    split.part_device = {0, 1, 1, 0, 1};
    split.part_tokens = {1, 2, 1, 1, 1};
    MoeDispatchLayout lo;
    moe_layout_build_split(0, 2, 2, 4, 1, expert_idx, counts, split, &lo);
    // send: to rank 0 expert 0's first assignment (token 0); to rank 1 expert 0's other two (tokens 2, 3), then
    // expert 1 (token 1)
    EXPECT_EQ(lo.send_rows, (std::vector<int64_t>{1, 3}));
    EXPECT_EQ(lo.slot_token, (std::vector<int>{0, 2, 3, 1}));
    EXPECT_EQ(lo.assignment_slot, (std::vector<int>{0, 3, 1, 2}));
    // receive: expert 0 from both ranks, one row each
    EXPECT_EQ(lo.recv_rows, (std::vector<int64_t>{1, 1}));
    EXPECT_EQ(lo.expert_offsets, (std::vector<int64_t>{0, 2, 2}));
    ASSERT_EQ(lo.segments.size(), 2u);
    EXPECT_EQ(lo.segments[1].src, 1);
    EXPECT_EQ(lo.segments[1].recv_begin, 1);
    EXPECT_EQ(lo.segments[1].sorted_begin, 1);
    // a split whose parts do not sum to the rank's count is refused
    split.part_tokens = {1, 1, 1, 1, 1};
    EXPECT_THROW(moe_layout_build_split(0, 2, 2, 4, 1, expert_idx, counts, split, &lo), Error);
}

// combine_reduce and its backward against the formula, in k order, with drops
TEST(MoeLayout, CombineReduceAndBackward) {
    const int expert_idx[] = {0, 1, -1, 1};  // N=2, K=2, one rank
    const int64_t counts[] = {1, 2};
    const int destination[] = {0, 0};
    MoeDispatchLayout lo;
    moe_layout_build(0, 1, 2, 2, 2, expert_idx, counts, destination, &lo);
    const float gate_w[] = {0.5f, 0.25f, 0.75f, 1.0f};
    const float rows[] = {1, 2, 3, 4, 5, 6};  // [3,C=2] slots: (t0,e0), (t0,e1), (t1,e1)
    float out[4];
    moe_combine_reduce(lo, 2, gate_w, rows, out);
    EXPECT_EQ(out[0], 0.5f * 1 + 0.25f * 3);
    EXPECT_EQ(out[1], 0.5f * 2 + 0.25f * 4);
    EXPECT_EQ(out[2], 1.0f * 5);
    EXPECT_EQ(out[3], 1.0f * 6);
    const float dout[] = {1, -1, 2, 3};
    float dgate_w[4], drows[6], dh[4];
    moe_combine_reduce_backward(lo, 2, gate_w, dout, rows, dgate_w, drows);
    EXPECT_EQ(dgate_w[0], 1 * 1 - 1 * 2);
    EXPECT_EQ(dgate_w[1], 1 * 3 - 1 * 4);
    EXPECT_EQ(dgate_w[2], 0.0f);
    EXPECT_EQ(dgate_w[3], 2 * 5 + 3 * 6);
    EXPECT_EQ(drows[2], 0.25f * 1);
    EXPECT_EQ(drows[5], 1.0f * 3);
    moe_dispatch_pack_backward(lo, 2, drows, dh);
    EXPECT_EQ(dh[0], 0.5f * 1 + 0.25f * 1);
    EXPECT_EQ(dh[3], 3.0f);
}

// ---- exact movement and oracle on 1, 2, 4 ranks for every placement case ------------------------------------

struct EpCase {
    int ranks;
    PlacementCase placement;
    RouteRule rule;
};

void PrintTo(const EpCase& c, std::ostream* os) {
    *os << case_name(c.placement) << " " << route_rule_name(c.rule) << " " << c.ranks << " ranks";
}

std::string ep_case_name(const ::testing::TestParamInfo<EpCase>& info) {
    return std::string(case_name(info.param.placement)) + "_" + route_rule_name(info.param.rule) + "_" +
           std::to_string(info.param.ranks);
}

std::vector<EpCase> all_cases() {
    std::vector<EpCase> cases;
    for (int D : {1, 2, 4}) {
        cases.push_back({D, PlacementCase::kStatic, RouteRule::kOwner});
        cases.push_back({D, PlacementCase::kReplicated, RouteRule::kOwner});
        cases.push_back({D, PlacementCase::kMovedOwners, RouteRule::kOwner});
        cases.push_back({D, PlacementCase::kMovedOwnersReplicated, RouteRule::kOwner});
        cases.push_back({D, PlacementCase::kReplicated, RouteRule::kLeastLoaded});
        cases.push_back({D, PlacementCase::kMovedOwnersReplicated, RouteRule::kLeastLoaded});
        // the split rules: a (device, expert) group's rows go to several holders
        for (RouteRule split : {RouteRule::kEvenSplit, RouteRule::kFlow, RouteRule::kMaxFlow}) {
            cases.push_back({D, PlacementCase::kReplicated, split});
            cases.push_back({D, PlacementCase::kMovedOwnersReplicated, split});
        }
    }
    return cases;
}

class MoeEpLocal : public ::testing::TestWithParam<EpCase> {};

TEST_P(MoeEpLocal, ExactMovement) {
    const EpCase c = GetParam();
    for (uint64_t seed : {1u, 2u, 3u})
        expect_no_errors(
            run_local(c.ranks, [&](Communicator& comm) { check_exact_movement(comm, c.placement, c.rule, seed); }));
}

TEST_P(MoeEpLocal, MatchesLocalExecutor) {
    const EpCase c = GetParam();
    for (uint64_t seed : {11u, 12u})
        expect_no_errors(
            run_local(c.ranks, [&](Communicator& comm) { check_oracle(comm, c.placement, c.rule, seed); }));
}

// Host staging (the GPU path's, model/expert_compute.h): the experts compute on an arena of their own and the
// executor copies the moving experts to and from its storage around Trans and Agg; the results and the own arena's
// home gradients must match the oracle as the plain executor's do.
TEST_P(MoeEpLocal, HostStagedComputeMatchesLocalExecutor) {
    const EpCase c = GetParam();
    for (uint64_t seed : {11u, 12u})
        expect_no_errors(run_local(c.ranks, [&](Communicator& comm) {
            check_oracle(comm, c.placement, c.rule, seed, /*resident=*/false, /*placement_changes=*/true,
                         /*staged=*/true);
        }));
}

// The same under the block-wise schedule: the staging calls run inside the split Trans / Agg tasks on the
// communication thread, and must still move exactly the experts each part carries.
TEST_P(MoeEpLocal, HostStagedComputeMatchesLocalExecutorBlockwise) {
    const EpCase c = GetParam();
    for (uint64_t seed : {11u, 12u})
        expect_no_errors(run_local(c.ranks, [&](Communicator& comm) {
            check_oracle(comm, c.placement, c.rule, seed, /*resident=*/false, /*placement_changes=*/true,
                         /*staged=*/true, EpScheduleMode::kBlockwise);
        }));
}

INSTANTIATE_TEST_SUITE_P(Cases, MoeEpLocal, ::testing::ValuesIn(all_cases()), ep_case_name);

// Serving keeps replicas resident: the second step skips Trans (same placement, unchanged parameters) and must
// still match the oracle; the non-home copies start as NaN, so a replica that never arrived would show.
TEST(MoeEpChecks, ResidentReplicasStayCurrent) {
    for (PlacementCase pc : {PlacementCase::kReplicated, PlacementCase::kMovedOwnersReplicated})
        expect_no_errors(run_local(4, [&](Communicator& comm) {
            check_oracle(comm, pc, RouteRule::kOwner, 21, /*resident=*/true);
        }));
}

// ... and when the placement changes between steps, the second step's Trans reaches every new holder (their copies
// start as NaN too).
TEST(MoeEpChecks, ResidentReplicasFollowAChangedPlacement) {
    for (PlacementCase pc : {PlacementCase::kReplicated, PlacementCase::kMovedOwnersReplicated})
        expect_no_errors(run_local(4, [&](Communicator& comm) {
            check_oracle(comm, pc, RouteRule::kOwner, 22, /*resident=*/true, /*placement_changes=*/true);
        }));
}

// A real communicator whose expert broadcasts (Trans) start `delay` late on every rank: the bytes and sums are
// untouched, only the time a replica's parameters arrive moves, far past the dispatch all-to-all.
class LateTrans final : public ForwardingCommunicator {
  public:
    LateTrans(Communicator* inner, std::chrono::milliseconds delay) : ForwardingCommunicator(inner), delay_(delay) {}
    CommHandle broadcast_subset_async(void* data, size_t bytes, int root, const std::vector<int>& ranks,
                                      int tag) override {
        std::this_thread::sleep_for(delay_);
        return inner_->broadcast_subset_async(data, bytes, root, ranks, tag);
    }

  private:
    std::chrono::milliseconds delay_;
};

// FasterMoE's schedule: Trans(l) whole on the communication thread beside the dispatch all-to-all, Agg(l) beside
// the backward combine all-to-all. With every Trans 20 ms late (per expert) the expert compute must still wait
// for it: the replicas' copies start as NaN, so a compute that ran before its Trans completed shows in out. Both
// the plain executor and the host-staged compute (its staging runs inside the tasks); 2 and 4 ranks.
TEST(MoeEpChecks, FasterMoEScheduleWaitsForTransBeforeTheExperts) {
    for (int ranks : {2, 4})
        for (PlacementCase pc : {PlacementCase::kReplicated, PlacementCase::kMovedOwnersReplicated})
            for (bool staged : {false, true})
                expect_no_errors(run_local(ranks, [&](Communicator& comm) {
                    LateTrans late(&comm, std::chrono::milliseconds(20));
                    check_oracle(late, pc, RouteRule::kOwner, 31, /*resident=*/false, /*placement_changes=*/true,
                                 staged, EpScheduleMode::kFasterMoE);
                }));
}

// Trans against a resident placement sends to the new holders only: a copy marked as resident (a value home does
// not have) must keep its mark, a new holder must get home's values, and a rank holding nothing keeps NaN.
TEST(MoeTrans, ResidentHoldersAreNotSentAgain) {
    const int D = 4, E = 8;
    const size_t numel = 5;
    Placement before = Placement::make_static(D, E), now = Placement::make_static(D, E);
    before.add_replica(1, 2);  // expert 1 (home 0) already on rank 2
    now.add_replica(1, 2);
    now.add_replica(1, 3);     // ... and now also on rank 3
    now.add_replica(6, 0);     // expert 6 (home 3) newly on rank 0
    before.add_replica(4, 1);  // expert 4 (home 2) was on rank 1, is no longer
    expect_no_errors(run_local(D, [&](Communicator& comm) {
        const int r = comm.rank();
        const float nan = std::numeric_limits<float>::quiet_NaN();
        std::vector<std::vector<float>> params(E);
        std::vector<float*> pointers(E);
        for (int e = 0; e < E; e++) {
            const bool home = moe_home_rank(e, E, D) == r;
            params[e].assign(numel, home ? 100.0f + e : before.holds(e, r) ? -1.0f : nan);
            pointers[e] = params[e].data();
        }
        moe_trans(&comm, now, pointers.data(), numel, 300, nullptr, &before);
        for (int e = 0; e < E; e++)
            for (size_t j = 0; j < numel; j++) {
                const float v = params[e][j];
                const std::string where = "rank " + std::to_string(r) + " expert " + std::to_string(e);
                if (moe_home_rank(e, E, D) == r)
                    EXPECT_EQ(v, 100.0f + e) << where;
                else if (before.holds(e, r))
                    EXPECT_EQ(v, -1.0f) << where << ": resident copy sent again";
                else if (now.holds(e, r))
                    EXPECT_EQ(v, 100.0f + e) << where << ": new holder not sent";
                else
                    EXPECT_TRUE(std::isnan(v)) << where << ": sent to a rank that does not hold it";
            }
        // unchanged placement: nothing moves
        std::vector<std::vector<float>> again = params;
        for (int e = 0; e < E; e++) pointers[e] = params[e].data();
        moe_trans(&comm, now, pointers.data(), numel, 300, nullptr, &now);
        for (int e = 0; e < E; e++)
            for (size_t j = 0; j < numel; j++)
                if (!std::isnan(again[e][j])) {
                    EXPECT_EQ(params[e][j], again[e][j]);
                }
    }));
}

// ---- placement checks --------------------------------------------------------------------------------------

// A provider that plans differently on different ranks is caught on every rank (exit 6), not silently wrong.
TEST(MoeEpChecks, InconsistentProviderThrowsOnEveryRank) {
    const auto errors = run_local(2, [](Communicator& comm) {
        std::vector<float> w(2 * 8 * 4, 0.0f), g(2 * 8 * 4, 0.0f);  // [2*C*F] shared dummy (identity experts)
        ExpertStorage storage;
        for (int e = 0; e < 2; e++) {
            storage.params.push_back(w.data());
            storage.grads.push_back(g.data());
        }
        ExpertParallelExecutor ep(&comm, 1, 2, 1, 8, 4, RouteRule::kOwner, storage);
        ep.set_identity_experts(true);
        ep.set_placement_provider([&](int, const int64_t*) {
            return Placement::make_owners(2, comm.rank() == 0 ? std::vector<int>{0, 1} : std::vector<int>{1, 0});
        });
        const int idx[] = {0, 1};
        std::vector<float> h(2 * 8, 1.0f), out(2 * 8);
        const float gw[] = {1.0f, 1.0f};
        ep.forward(0, 2, h.data(), idx, gw, out.data());
    });
    for (int r = 0; r < 2; r++) {
        ASSERT_TRUE(errors[r]) << "rank " << r << " did not notice";
        EXPECT_NE(what(errors[r]).find("different placements"), std::string::npos) << what(errors[r]);
    }
}

TEST(MoeEpChecks, WrongShapedPlacementThrows) {
    const auto errors = run_local(1, [](Communicator& comm) {
        std::vector<float> w(2 * 8 * 4, 0.0f), g(2 * 8 * 4, 0.0f);
        ExpertStorage storage{{w.data(), w.data()}, {g.data(), g.data()}};
        ExpertParallelExecutor ep(&comm, 1, 2, 1, 8, 4, RouteRule::kOwner, storage);
        ep.set_placement_provider([](int, const int64_t*) { return Placement::make_static(2, 2); });
        const int idx[] = {0};
        std::vector<float> h(8, 1.0f), out(8);
        const float gw[] = {1.0f};
        ep.forward(0, 1, h.data(), idx, gw, out.data());
    });
    ASSERT_TRUE(errors[0]);
    EXPECT_NE(what(errors[0]).find("placement is for 2 devices"), std::string::npos) << what(errors[0]);
}

TEST(MoeEpChecks, HomeAndOptimizerMasks) {
    ModelConfig cfg;
    cfg.V = 32;
    cfg.T = 4;
    cfg.C = 8;
    cfg.NH = 2;
    cfg.L = 2;
    cfg.E = 4;
    cfg.K = 2;
    cfg.B = 2;
    expect_no_errors(run_local(2, [&](Communicator& comm) {
        Model<float> model(cfg);
        ExpertParallelExecutor ep(&comm, model, RouteRule::kOwner);
        EXPECT_EQ(ep.home_of(0), 0);
        EXPECT_EQ(ep.home_of(1), 0);
        EXPECT_EQ(ep.home_of(2), 1);
        const std::vector<char> home = ep.home_expert_mask();  // [L*E]
        ASSERT_EQ(home.size(), 8u);
        for (int l = 0; l < 2; l++)
            for (int e = 0; e < 4; e++) EXPECT_EQ(home[l * 4 + e], (e / 2 == comm.rank()) ? 1 : 0);
        const std::vector<char> skip = ep.optimizer_skip_mask(model.layout);
        const std::vector<char> include = ep.home_expert_tensor_mask(model.layout);
        int num_skipped = 0, num_included = 0;
        for (int i = 0; i < model.num_tensors(); i++) {
            const ParamTensor& t = model.tensor(i);
            EXPECT_EQ(skip[i], t.is_expert && t.expert / 2 != comm.rank() ? 1 : 0) << t.name;
            EXPECT_EQ(include[i], t.is_expert && t.expert / 2 == comm.rank() ? 1 : 0) << t.name;
            num_skipped += skip[i];
            num_included += include[i];
        }
        EXPECT_EQ(num_skipped, 2 * 2 * 2);  // L * (E/D) foreign experts * {w1, w2}
        EXPECT_EQ(num_included, 2 * 2 * 2);
    }));
}

// ---- a whole MoE-GPT step: D ranks with the expert-parallel executor = one rank with the local one ----------

namespace {

ModelConfig model_config() {
    ModelConfig cfg;
    cfg.V = 64;
    cfg.T = 8;
    cfg.C = 16;
    cfg.NH = 2;
    cfg.L = 2;
    cfg.E = 4;
    cfg.K = 2;
    cfg.B = 4;
    cfg.seed = 4242;
    return cfg;
}

std::vector<int> model_tokens(const ModelConfig& cfg, uint64_t seed) {
    Rng rng(seed);
    std::vector<int> t((size_t)cfg.B * cfg.T);  // [B,T]
    for (auto& v : t) v = (int)rng.below(cfg.V);
    return t;
}

}  // namespace

// Two train steps (forward, backward, dense all-reduce, grad norm over dense + home experts, AdamW with the skip
// mask) under a replicated, moved-owner placement with NaN in every non-home expert copy: losses and every
// parameter match the one-rank model. NOTE: tolerances: the first loss within kOracleRtol, the second within 1e-4
// (the first step's rounding differences pass through AdamW); parameters within 1e-4 of each tensor's largest
// magnitude plus 0.01 * lr absolute, because gradients that are zero in exact arithmetic (the key part of the qkv
// bias: softmax ignores a per-query constant) are pure rounding noise, which AdamW's m / sqrt(v) turns into
// updates of up to lr with either sign. A lost or doubled gradient moves a parameter by about lr, 100x more.
TEST(MoeEpModel, TwoStepsMatchOneRank) {
    const ModelConfig cfg = model_config();
    const std::vector<std::vector<int>> inputs = {model_tokens(cfg, 1), model_tokens(cfg, 3)};
    const std::vector<std::vector<int>> targets = {model_tokens(cfg, 2), model_tokens(cfg, 4)};
    AdamWConfig adamw;
    const double lr = 1e-2, max_norm = 1.0;
    const double denom = double(cfg.B) * cfg.T;

    blas_set_num_threads(1);
    Model<float> single(cfg);
    std::vector<double> single_loss;
    for (int step = 0; step < 2; step++) {
        model_zero_grad(single);
        single_loss.push_back(
            model_forward(single, inputs[step].data(), targets[step].data(), cfg.B, denom));
        model_backward(single);
        adamw_step(single, lr, adamw, grad_clip_scale(std::sqrt(grad_norm_sq(single)), max_norm));
    }

    for (int D : {2, 4}) {
        expect_no_errors(run_local(D, [&](Communicator& comm) {
            const int r = comm.rank(), B_local = cfg.B / D;
            Model<float> model(cfg);
            for (int l = 0; l < cfg.L; l++)
                for (int e = 0; e < cfg.E; e++)
                    if (e / (cfg.E / D) != r) {
                        Span<float> p = model_expert_params(model, l, e);
                        std::fill_n(p.data, p.size, std::numeric_limits<float>::quiet_NaN());
                    }
            ExpertParallelExecutor ep(&comm, model, RouteRule::kOwner);
            ep.set_placement_provider([&](int layer, const int64_t*) {
                return make_case_placement(PlacementCase::kMovedOwnersReplicated, D, cfg.E, 99 + layer);
            });
            model_set_executor(model, &ep);
            const std::vector<char> skip = ep.optimizer_skip_mask(model.layout);
            const std::vector<char> home = ep.home_expert_tensor_mask(model.layout);
            std::vector<char> dense(model.num_tensors(), 0);
            for (int i = 0; i < model.num_tensors(); i++) dense[i] = model.tensor(i).is_expert ? 0 : 1;
            for (int step = 0; step < 2; step++) {
                model_zero_grad(model);
                const size_t first = (size_t)r * B_local * cfg.T;
                double loss = model_forward(model, inputs[step].data() + first, targets[step].data() + first,
                                            B_local, denom);
                model_backward(model);
                comm.all_reduce_sum(&loss, 1);
                const Span<float> dg = model_dense_grads(model);
                comm.all_reduce_sum(dg.data, dg.size);
                double expert_sq = grad_norm_sq(model, &home);
                comm.all_reduce_sum(&expert_sq, 1);
                const double norm = std::sqrt(grad_norm_sq(model, &dense) + expert_sq);
                adamw_step(model, lr, adamw, grad_clip_scale(norm, max_norm), &skip);
                const double rtol = step == 0 ? kOracleRtol : 1e-4;
                EXPECT_NEAR(loss, single_loss[step], rtol * std::fabs(single_loss[step])) << "step " << step;
            }
            for (int i = 0; i < model.num_tensors(); i++) {
                const ParamTensor& t = model.tensor(i);
                if (skip[i]) continue;
                expect_close("rank " + std::to_string(r) + " " + t.name, model.params.data() + t.offset,
                             single.params.data() + t.offset, t.size, 1e-4, 0.01 * lr);
            }
        }));
    }
}
