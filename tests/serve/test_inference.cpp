// The inference loop on 4 in-process ranks (LocalGroup threads):
//  - its outputs equal the training forward pass's: the loss of step 0 equals the trainer's (same model, same
//    batch), and every rank's output probabilities equal a one-process forward with the local executor;
//  - the ILP placements (moetuner, moetuner-joint) and the other policies' are valid, and every token goes
//    where the placement says: the rows each rank computed equal compute_flow's H_i for the placement used;
//  - transitions counted by hand, bad serve.* keys rejected with the key named.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <thread>

#include "balance/placement.h"
#include "balance/token_path.h"
#include "comm/comm.h"
#include "core/error.h"
#include "serve/inference.h"
#include "serve/serve_config.h"
#include "serve/serve_loop.h"
#include "serve/token_path_exchange.h"
#include "train/trainer.h"

using namespace prophet;
using namespace prophet::serve;

namespace {

constexpr int kRanks = 4;

Config serve_config(const std::vector<std::string>& sets) {
    Config c(serve_schema());
    c.merge_toml_file(std::string(PROPHET_SOURCE_DIR) + "/experiments/train/skewed-4rank.toml");
    c.apply_set(std::string("balance.cluster=\"") + PROPHET_SOURCE_DIR + "/experiments/clusters/cpu-local.toml\"");
    c.apply_set("store.path=\"/nonexistent/never-opened.db\"");
    for (const std::string& s : sets) c.apply_set(s);
    return c;
}

// fn(rank, comm) on kRanks threads; rethrows the first failure
void on_ranks(const std::function<void(int, Communicator&)>& fn) {
    auto group = make_local_group(kRanks);
    std::vector<std::exception_ptr> errors(kRanks);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r)
        threads.emplace_back([&, r] {
            try {
                fn(r, *group[r]);
            } catch (...) {
                errors[r] = std::current_exception();
            }
        });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

// a placement far from static: owners reversed, expert 0 replicated on every rank
Placement unusual_placement(int D, int E) {
    std::vector<int> owner(E);
    for (int e = 0; e < E; ++e) owner[e] = D - 1 - e / (E / D);
    Placement p = Placement::make_owners(D, owner);
    for (int d = 0; d < D; ++d) p.add_replica(0, d);
    return p;
}

}  // namespace

// Outputs: inference under an unusual placement on 4 ranks == the trainer's step-0 loss == one process's forward.
// Tolerance: 1e-5 relative on the loss and 1e-6 absolute on probabilities (float32; the expert GEMMs see other
// row batches on other ranks, so sums may round differently; the test prints the measured differences).
TEST(ServeInference, OutputsEqualTheTrainingForward) {
    const Config config = serve_config({"balance.policy=\"static\""});
    const ServeSettings s = serve_settings_from(config, kRanks);
    const ModelConfig& m = s.base.model;

    // the training forward: Trainer::step() returns the loss of its forward, before the update
    std::vector<double> train_loss(kRanks);
    on_ranks([&](int r, Communicator& comm) {
        Trainer trainer(comm, s.base, checkpoint_config_hash(config));
        train_loss[r] = trainer.step().loss;
    });

    // the inference forward of the same batch (step 0 of data A) under an unusual placement
    std::vector<double> infer_loss(kRanks);
    std::vector<std::vector<float>> probs(kRanks);
    std::vector<std::vector<int64_t>> rows(kRanks);
    std::vector<int64_t> counts;
    on_ranks([&](int r, Communicator& comm) {
        Model<float> model(m);
        const auto data = make_data_source(s.base.data, m.T, m.B);
        InferenceEngine engine(comm, model, RouteRule::kOwner);
        engine.set_placement_provider([&](int, const int64_t*) { return unusual_placement(kRanks, m.E); });
        const BatchResult b = engine.forward(*data, 0, false);
        infer_loss[r] = b.loss;
        const size_t n = static_cast<size_t>(m.B / kRanks) * m.T * m.V;
        probs[r].assign(model.acts.probs, model.acts.probs + n);
        rows[r] = b.rows_computed;
        if (r == 0) counts = b.counts;
    });

    // one process, the local executor: the reference probabilities of the whole batch
    Model<float> ref(m);
    const auto data = make_data_source(s.base.data, m.T, m.B);
    std::vector<int32_t> in(static_cast<size_t>(m.B) * m.T), tg(in.size());
    data->batch(0, 0, m.B, in.data(), tg.data());
    const double ref_loss = model_forward(ref, in.data(), tg.data(), m.B, static_cast<double>(m.B) * m.T);

    double worst_loss = 0, worst_prob = 0;
    for (int r = 0; r < kRanks; ++r) {
        EXPECT_EQ(infer_loss[r], infer_loss[0]) << "ranks disagree";
        worst_loss = std::max(worst_loss, std::fabs(infer_loss[r] - train_loss[r]) / train_loss[r]);
        EXPECT_LE(std::fabs(infer_loss[r] - train_loss[r]) / train_loss[r], 1e-5)
            << "inference " << infer_loss[r] << " vs training forward " << train_loss[r];
        EXPECT_LE(std::fabs(infer_loss[r] - ref_loss) / ref_loss, 1e-5);
        const size_t per_rank = probs[r].size();
        double worst = 0;
        for (size_t i = 0; i < per_rank; ++i)
            worst = std::max(worst, std::fabs(static_cast<double>(probs[r][i]) - ref.acts.probs[r * per_rank + i]));
        EXPECT_LE(worst, 1e-6) << "rank " << r << " probabilities differ from the one-process forward";
        worst_prob = std::max(worst_prob, worst);
    }
    std::printf("inference vs training forward: loss relative difference %.3g; probabilities vs one process: %.3g\n",
                worst_loss, worst_prob);
    // every token went where the placement says
    for (int l = 0; l < m.L; ++l) {
        const LayerFlow flow = compute_flow(counts.data() + static_cast<size_t>(l) * kRanks * m.E, kRanks, m.E,
                                            unusual_placement(kRanks, m.E), RouteRule::kOwner);
        for (int d = 0; d < kRanks; ++d) EXPECT_EQ(rows[0][static_cast<size_t>(l) * kRanks + d], flow.computed[d]);
    }
}

// The serving loop under each policy: valid placements, the offline ones used unchanged on every measured batch,
// and every rank computed exactly the rows the placement sends it.
TEST(ServeInference, ServingFollowsValidPlacements) {
    for (const std::string policy : {"moetuner", "moetuner-joint", "eplb", "prophet", "static"}) {
        SCOPED_TRACE(policy);
        const Config config = serve_config({"balance.policy=\"" + policy + "\"", "serve.iterations=3",
                                            "serve.warmup=0", "serve.profile_iterations=2",
                                            "balance.ilp_time_limit_s=2"});  // a valid answer, not a proof
        const ServeSettings s = serve_settings_from(config, kRanks);
        std::vector<ServeRun> runs(kRanks);
        on_ranks([&](int r, Communicator& comm) { runs[r] = run_serving(comm, s); });
        const ServeRun& run = runs[0];
        const int L = s.base.model.L, E = s.base.model.E;
        ASSERT_EQ(run.measured.size(), 3u);
        EXPECT_EQ(run.profile.iterations, 2);
        if (policy == "moetuner" || policy == "moetuner-joint" || policy == "eplb") {
            ASSERT_EQ(static_cast<int>(run.offline.size()), L);
            for (const Placement& p : run.offline) EXPECT_EQ(check_placement(p, 0), "");
        }
        if (policy == "moetuner" || policy == "moetuner-joint")
            for (const Placement& p : run.offline) {
                EXPECT_EQ(p.num_replicas(), 0) << "MoETuner places each expert exactly once";
                for (int d = 0; d < kRanks; ++d) EXPECT_GE(p.experts_per_device()[d], 1) << "ILP 1: no empty GPU";
            }
        // MoETuner's layer-to-layer token path (balance.token_path = auto) needs each measured batch's transitions
        const bool layer_to_layer = policy == "moetuner" || policy == "moetuner-joint";
        for (const BatchResult& b : run.measured) {
            EXPECT_EQ(b.transitions.size(), layer_to_layer ? static_cast<size_t>(L - 1) * E * E : 0u);
            // and the real ranks moved exactly what the cost model's layer-to-layer flow says (owner-only
            // placements: the model is exact), d_model floats per pair
            if (layer_to_layer) {
                const size_t DD = static_cast<size_t>(kRanks) * kRanks;
                ASSERT_EQ(b.token_path_route.size(), static_cast<size_t>(L - 1) * DD);
                ASSERT_EQ(b.token_path_ms.size(), static_cast<size_t>(L - 1));
                const TokenPathFlow f =
                    layer_to_layer_flow(b.counts.data(), b.transitions.data(), b.placements, s.base.balance.route_rule);
                for (int l = 0; l + 1 < L; ++l) {
                    for (size_t k = 0; k < DD; ++k)
                        EXPECT_DOUBLE_EQ(static_cast<double>(b.token_path_route[l * DD + k]), f.into(l + 1)[k]);
                    EXPECT_DOUBLE_EQ(static_cast<double>(b.token_path_bytes[l]),
                                     moved_tokens(f.into(l + 1), kRanks) * s.base.model.C * 4.0);
                    EXPECT_GE(b.token_path_ms[l], 0.0);
                }
            } else {
                EXPECT_TRUE(b.token_path_route.empty());
            }
            for (int r = 1; r < kRanks; ++r) EXPECT_EQ(runs[r].measured.size(), run.measured.size());
            for (int l = 0; l < L; ++l) {
                const Placement& p = b.placements[l];
                EXPECT_EQ(check_placement(p, 0), "");
                if (!run.offline.empty()) {
                    EXPECT_EQ(p.owner, run.offline[l].owner);
                    EXPECT_EQ(p.replica, run.offline[l].replica);
                }
                const LayerFlow flow = compute_flow(b.counts.data() + static_cast<size_t>(l) * kRanks * E, kRanks, E,
                                                    p, s.base.balance.route_rule);
                for (int d = 0; d < kRanks; ++d)
                    EXPECT_EQ(b.rows_computed[static_cast<size_t>(l) * kRanks + d], flow.computed[d]);
            }
        }
    }
}

// Data B (another topic mixture of the same corpus) routes differently from data A, and in-sample evaluation
// continues after the profiled batches.
TEST(ServeInference, OutOfSampleDataDiffersFromTheProfile) {
    const ServeSettings in = serve_settings_from(serve_config({}), kRanks);
    EXPECT_FALSE(in.out_of_sample);
    EXPECT_EQ(in.eval_first_step(), in.profile_iterations);
    const ServeSettings out = serve_settings_from(
        serve_config({"serve.eval_mixture=[0.05, 0.05, 0.85, 0.05]", "serve.iterations=2", "serve.warmup=0",
                      "serve.profile_iterations=2"}),
        kRanks);
    EXPECT_TRUE(out.out_of_sample);
    EXPECT_EQ(out.eval_first_step(), 0);
    std::vector<ServeRun> runs(kRanks);
    on_ranks([&](int r, Communicator& comm) { runs[r] = run_serving(comm, out); });
    // the last profiled batch is data A's step 1, the first measured batch data B's step 0: other routing
    EXPECT_NE(runs[0].measured[0].counts, runs[0].profile.last_counts);
}

TEST(ServeInference, TransitionsCountedByHand) {
    // L = 3, N = 2 tokens, K = 2, E = 3; token 1's second choice at layer 1 was dropped (-1)
    const int idx[] = {0, 1, 2, 0,    // layer 0: token 0 -> {0,1}, token 1 -> {2,0}
                       1, 2, 0, -1,   // layer 1: token 0 -> {1,2}, token 1 -> {0}
                       2, 0, 1, 2};   // layer 2
    std::vector<int64_t> t(2 * 3 * 3, 0);
    count_transitions(idx, 3, 2, 2, 3, t.data());
    // layer 0 -> 1: token 0: (0,1) (0,2) (1,1) (1,2); token 1: (2,0) (0,0)
    const std::vector<int64_t> l01 = {1, 1, 1, 0, 1, 1, 1, 0, 0};
    // layer 1 -> 2: token 0: (1,2) (1,0) (2,2) (2,0); token 1: (0,1) (0,2)
    const std::vector<int64_t> l12 = {0, 1, 1, 1, 0, 1, 1, 0, 1};
    EXPECT_EQ(std::vector<int64_t>(t.begin(), t.begin() + 9), l01);
    EXPECT_EQ(std::vector<int64_t>(t.begin() + 9, t.end()), l12);
}

TEST(ServeConfig, BadKeysAreNamed) {
    auto message = [](const std::vector<std::string>& sets) -> std::string {
        try {
            serve_settings_from(serve_config(sets), kRanks);
        } catch (const Error& e) {
            EXPECT_EQ(e.exit_code(), kExitConfig);
            return e.what();
        }
        return "";
    };
    EXPECT_NE(message({"serve.eval_mixture=[1.0, 2.0]"}).find("serve.eval_mixture"), std::string::npos);
    EXPECT_NE(message({"serve.eval_mixture=[0.0, 0.0, 0.0, 0.0]"}).find("positive"), std::string::npos);
    EXPECT_NE(message({"serve.checkpoint=\"/nonexistent/ckpt\""}).find("serve.checkpoint"), std::string::npos);
    EXPECT_NE(message({"model.capacity_factor=1.25"}).find("model.capacity_factor"), std::string::npos);
    const std::string devices = message({"serve.sim_clusters=[\"experiments/clusters/hpwnv-16.toml\"]"});
    EXPECT_NE(devices.find("serve.sim_clusters"), std::string::npos) << devices;
    EXPECT_NE(devices.find("num_devices = 16"), std::string::npos) << devices;
    EXPECT_EQ(message({"serve.sim_clusters=[\"experiments/clusters/moetuner-h200-ep4.toml\"]"}), "");
    EXPECT_THROW(serve_config({"serve.iterations=0"}), Error);
}

// One rank's boundary routes by hand: home 0 of 2 ranks, 3 tokens, top-1, L = 2; expert 0 on rank 0, expert 1 on
// rank 1 at layer 0; swapped at layer 1. Tokens: 0 -> 0 (rank 0 to rank 1), 1 -> 0 (rank 1 to 1), 1 -> 1 (1 to 0).
TEST(ServeTokenPath, LocalBoundaryRoutesByHand) {
    const int idx[] = {0, 1, 1,   // layer 0: expert of each token
                       0, 0, 1};  // layer 1
    const std::vector<int64_t> counts = {1, 2, 0, 0,   // layer 0 [D][E]: rank 0 sends 1 to e0, 2 to e1
                                         2, 1, 0, 0};  // layer 1
    const std::vector<Placement> p = {Placement::make_owners(2, {0, 1}), Placement::make_owners(2, {1, 0})};
    EXPECT_EQ(local_boundary_routes(idx, 3, 1, 0, counts, p, RouteRule::kOwner),
              (std::vector<int64_t>{0, 1,     // from rank 0: one pair to rank 1
                                    1, 1}));  // from rank 1: one to rank 0, one stays
    const int dropped[] = {0, -1, 1, 0, 0, -1};  // a dropped choice adds no pair
    EXPECT_EQ(local_boundary_routes(dropped, 3, 1, 0, counts, p, RouteRule::kOwner),
              (std::vector<int64_t>{0, 1, 0, 0}));
}
