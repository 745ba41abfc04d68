#include "serve/serve_loop.h"

#include <algorithm>

#include "core/error.h"
#include "model/checkpoint.h"

namespace prophet::serve {

void load_parameters(Model<float>& model, const std::string& checkpoint) {
    CheckpointExpect expect;
    expect.optimizer = false;
    for (int i = 0; i < model.num_tensors(); ++i) {
        const ParamTensor& t = model.tensor(i);
        expect.tensors.emplace_back(t.name, std::vector<int64_t>(t.shape.begin(), t.shape.end()));
    }
    const Checkpoint ckpt = load_checkpoint(checkpoint, expect);
    for (int i = 0; i < model.num_tensors(); ++i) {
        const ParamTensor& t = model.tensor(i);
        const Tensor& src = ckpt.tensors.at(t.name);
        std::copy(src.data.begin(), src.data.end(), model.params.begin() + static_cast<long>(t.offset));
    }
}

ServeRun run_serving(Communicator& comm, const ServeSettings& settings, const BatchCallback& on_batch) {
    const TrainSettings& s = settings.base;
    const ModelConfig& m = s.model;
    const int D = comm.size();
    Model<float> model(m);
    if (!settings.checkpoint.empty()) load_parameters(model, settings.checkpoint);
    const std::unique_ptr<DataSource> data_a = make_data_source(s.data, m.T, m.B);
    const std::unique_ptr<DataSource> eval =
        settings.out_of_sample ? make_data_source(settings.eval_data, m.T, m.B) : nullptr;
    const DataSource& eval_data = eval ? *eval : *data_a;
    InferenceEngine engine(comm, model, s.balance.route_rule);
    auto report = [&](const char* phase, int index, const BatchResult& b) {
        if (on_batch) on_batch(phase, index, b);
    };

    ServeRun run;
    RoutingProfile& p = run.profile;
    p.L = m.L;
    p.D = D;
    p.E = m.E;
    p.counts.assign(static_cast<size_t>(m.L) * D * m.E, 0);
    p.transitions.assign(static_cast<size_t>(std::max(0, m.L - 1)) * m.E * m.E, 0);
    for (int i = 0; i < settings.profile_iterations; ++i) {
        const BatchResult b = engine.forward(*data_a, i, true);
        for (size_t k = 0; k < b.counts.size(); ++k) p.counts[k] += b.counts[k];
        for (size_t k = 0; k < b.transitions.size(); ++k) p.transitions[k] += b.transitions[k];
        p.last_counts = b.counts;
        ++p.iterations;
        report("profile", i, b);
    }

    const int num_nodes = std::max(1, D / std::max(1, s.cost.cluster.devices_per_node));
    RootBroadcast root;  // an external policy: one process, on rank 0
    if (D > 1) root = {comm.rank(), [&comm](void* data, size_t bytes) { comm.broadcast(data, bytes, 0); }};
    ServingPlanner planner(s.policy, p, s.cost, s.balance, num_nodes, root);
    run.offline_plan_s = planner.offline_plan_s();
    run.ilp = planner.ilp_report();
    run.offline = planner.offline();
    engine.set_placement_provider([&planner](int layer, const int64_t* counts) { return planner.plan(layer, counts); });

    const int64_t first = settings.eval_first_step();
    // the simulated clusters replay the layer-to-layer token path from each measured batch's transitions
    const bool record = effective_token_path(s.policy, s.balance) == TokenPath::kLayerToLayer;
    engine.set_exchange_token_path(record);  // and the real ranks move what that path would move
    for (int i = 0; i < settings.warmup + settings.iterations; ++i) {
        BatchResult b = engine.forward(eval_data, first + i, record);
        planner.end_iteration(b.counts);
        const bool measured = i >= settings.warmup;
        report(measured ? "measure" : "warmup", measured ? i - settings.warmup : i, b);
        if (measured) run.measured.push_back(std::move(b));
    }
    return run;
}

}  // namespace prophet::serve
