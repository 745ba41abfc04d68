// fuzz_checkpoint_dir.cpp: libFuzzer target for a whole checkpoint directory as `prophet train --resume` reads it:
// load_checkpoint (state.json, both safetensors files, against a tiny model's expected tensors), then every
// field the trainer reads (check_resume_fields) and the balancing state (PolicyRunner::load_state), then the
// placements a resumed run plans from it. A checkpoint is three files, so the input is split at
// fuzz::kFileSeparator (fuzz_file.h, shown as sep):
//   <state.json> [sep <model.safetensors> [sep <optimizer.safetensors>]]
// A part not given keeps the valid file written at start-up (the tiny model's save_checkpoint). Every malformed
// input must end in a prophet::Error (issue 14: a short policy_state.previous once read past its end, and a
// non-numeric extra.world_size escaped as std::invalid_argument).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "balance/policies.h"
#include "core/error.h"
#include "fuzz_file.h"
#include "model/checkpoint.h"
#include "train/policy_runner.h"
#include "train/resume_check.h"

namespace fs = std::filesystem;

namespace {

// the tiny model the directory belongs to: L layers, D ranks, E experts
constexpr int L = 2, D = 2, E = 4;

// a small cluster and model for the planners (the numbers matter little; they must be valid)
prophet::CostModel cost_model() {
    prophet::CostModel cost;
    cost.cluster.name = "fuzz";
    cost.cluster.num_devices = D;
    cost.cluster.devices_per_node = D;
    cost.cluster.compute_flops = 1e12;
    cost.cluster.a2a_bandwidth = {{1e300, 1e10}};
    cost.cluster.trans_bytes_per_s = cost.cluster.agg_bytes_per_s = 1e10;
    cost.cluster.intra_node_bytes_per_s = cost.cluster.inter_node_bytes_per_s = 1e10;
    cost.model = {64, 128, 32, 4, 256};
    return cost;
}

std::string slurp(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A valid checkpoint of the tiny model, written once into a scratch directory; its state.json is what the seed
// corpus starts from.
struct Dir {
    fuzz::ScratchDir scratch{"prophet-fuzz-ckpt"};  // holds step-00000001/, removed at exit
    std::string root = scratch.path().string();
    std::string step;  // the step directory the inputs overwrite
    std::vector<std::pair<std::string, std::vector<int64_t>>> tensors = {{"w", {2, 3}}, {"b", {3}}};
    std::string model_bytes, optimizer_bytes;

    Dir() {
        static const float values[9] = {0.5f, -1.0f, 2.0f, 0.25f, 0.0f, 1.5f, 3.0f, 0.75f, 1.0f};  // >= 6 + 3
        std::vector<prophet::TensorView> model, optimizer;
        for (const auto& [name, shape] : tensors) {
            model.push_back({name, shape, values});
            optimizer.push_back({name + ".m", shape, values});
            optimizer.push_back({name + ".v", shape, values + 3});  // >= 0 (a .v must be)
        }
        prophet::CheckpointMeta meta;
        meta.config_hash = "fuzz";
        meta.optimizer_step = 2;
        meta.data_position["next_step"] = "2";
        prophet::PolicyRunner runner("prophet", L, D, E, cost_model(), prophet::BalanceOptions{}, 1, 1);
        runner.end_iteration(1, std::vector<int64_t>(static_cast<size_t>(L) * D * E, 3));
        meta.extra["policy_state"] = runner.save_state();
        meta.extra["world_size"] = std::to_string(D);
        step = prophet::save_checkpoint(root, 1, model, optimizer, {{"init", {1, 2, 3, 4}}}, meta);
        model_bytes = slurp(fs::path(step) / "model.safetensors");
        optimizer_bytes = slurp(fs::path(step) / "optimizer.safetensors");
    }
};

const Dir& directory() {
    static const Dir dir;
    return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const Dir& dir = directory();
    const std::vector<std::string_view> parts =
        fuzz::split_files(std::string_view(reinterpret_cast<const char*>(data), size), 3);
    fuzz::put(fs::path(dir.step) / "state.json", parts[0]);
    fuzz::put(fs::path(dir.step) / "model.safetensors",
              parts.size() > 1 ? parts[1] : std::string_view(dir.model_bytes));
    fuzz::put(fs::path(dir.step) / "optimizer.safetensors",
              parts.size() > 2 ? parts[2] : std::string_view(dir.optimizer_bytes));
    try {
        prophet::CheckpointExpect expect;
        expect.tensors = dir.tensors;
        const prophet::Checkpoint ckpt = prophet::load_checkpoint(dir.root, expect);
        (void)prophet::check_resume_fields(ckpt, D);
        const auto state = ckpt.meta.extra.find("policy_state");
        if (state == ckpt.meta.extra.end()) return 0;
        // the runner of the policy the state names (a state for another policy is refused before any field)
        std::string policy = "prophet";
        try {
            const nlohmann::json j = nlohmann::json::parse(state->second);
            if (j.is_object() && j.contains("policy") && j["policy"].is_string()) {
                const std::string name = j["policy"].get<std::string>();
                for (const std::string& known : prophet::policy_names())
                    if (known == name && name != "exhaustive") policy = name;  // exhaustive: exponential in D x E
            }
        } catch (const nlohmann::json::exception&) {
        }
        prophet::PolicyRunner runner(policy, L, D, E, cost_model(), prophet::BalanceOptions{}, 1, 1);
        runner.load_state(state->second, dir.step + "/state.json");
        const std::vector<int64_t> counts(static_cast<size_t>(D) * E, 5);  // [D][E]
        for (int l = 0; l < L; ++l) {
            (void)runner.plan_from_previous(l);
            (void)runner.plan(2, l, counts.data());
        }
    } catch (const prophet::Error&) {
    }
    return 0;
}
