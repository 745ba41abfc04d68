// cmd_ckpt.cpp: `prophet ckpt show DIR [--json]` over inspect_checkpoint (lib/model/checkpoint.h), which checks
// state.json against both safetensors headers and reads no tensor data.
#include "cmd_ckpt.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "model/checkpoint.h"

namespace prophet::cli {

namespace {

namespace fs = std::filesystem;

struct StepDir {
    std::string name;
    int64_t step = 0;
    bool complete = false;  // has state.json (a save renames a finished .tmp-step-N into place)
};

// The step-N directories of the checkpoint directory `path` resolves into, by step.
std::vector<StepDir> list_steps(const std::string& path, const std::string& resolved) {
    fs::path root(path);
    std::error_code ec;
    if (fs::exists(root / "state.json", ec)) root = fs::path(resolved).parent_path();  // a step directory was given
    std::vector<StepDir> steps;
    for (const auto& entry : fs::directory_iterator(root, ec)) {
        const std::string name = entry.path().filename().string();
        if (!entry.is_directory(ec) || name.rfind("step-", 0) != 0 || name.size() <= 5) continue;
        if (!std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
        steps.push_back({name, std::stoll(name.substr(5)), fs::exists(entry.path() / "state.json", ec)});
    }
    std::sort(steps.begin(), steps.end(), [](const StepDir& a, const StepDir& b) { return a.step < b.step; });
    return steps;
}

std::string shape_string(const std::vector<int64_t>& shape) {
    std::string text = "[";
    for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + "]";
}

nlohmann::json tensors_json(const SafetensorsHeader& header) {
    nlohmann::json out = nlohmann::json::array();
    for (const TensorInfo& t : header.tensors)
        out.push_back({{"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}, {"bytes", t.end - t.begin}});
    return out;
}

// The balancing policy's state is JSON (PolicyRunner::save_state); anything else is shown as text.
nlohmann::json policy_state_json(const CheckpointInfo& info) {
    const auto it = info.meta.extra.find("policy_state");
    if (it == info.meta.extra.end()) return nullptr;
    const nlohmann::json parsed = nlohmann::json::parse(it->second, nullptr, false);
    return parsed.is_discarded() ? nlohmann::json(it->second) : parsed;
}

// One line per field of the state: scalars as they are, arrays by length (they hold [L][E]... counts).
std::string policy_state_text(const nlohmann::json& state) {
    if (!state.is_object()) return state.is_null() ? "none" : state.dump();
    std::string text;
    for (const auto& [key, value] : state.items()) {
        text += (text.empty() ? "" : ", ") + key + " ";
        text += value.is_array() ? std::to_string(value.size()) + " values" : value.dump();
    }
    return text;
}

void print_tensor_table(const char* file, const SafetensorsHeader& header) {
    uint64_t bytes = 0;
    size_t width = 4;
    for (const TensorInfo& t : header.tensors) {
        bytes += t.end - t.begin;
        width = std::max(width, t.name.size());
    }
    std::printf("%s: %zu tensors, %s of data, file %s\n", file, header.tensors.size(),
                fmt_bytes(static_cast<double>(bytes)).c_str(), fmt_bytes(static_cast<double>(header.file_size)).c_str());
    std::vector<const TensorInfo*> sorted;
    for (const TensorInfo& t : header.tensors) sorted.push_back(&t);
    std::sort(sorted.begin(), sorted.end(), [](const TensorInfo* a, const TensorInfo* b) { return a->name < b->name; });
    for (const TensorInfo* t : sorted)
        std::printf("  %-*s  %-4s  %-16s  %s\n", static_cast<int>(width), t->name.c_str(), t->dtype.c_str(),
                    shape_string(t->shape).c_str(), fmt_bytes(static_cast<double>(t->end - t->begin)).c_str());
}

}  // namespace

CLI::App* add_ckpt_command(CLI::App& app, CkptArgs& args) {
    CLI::App* ckpt = app.add_subcommand("ckpt", "inspect training checkpoints");
    ckpt->require_subcommand(1, 1);
    CLI::App* show = ckpt->add_subcommand(
        "show", "what a checkpoint holds: steps, config hash, tensors with shapes and sizes, policy and RNG state");
    show->add_option("dir", args.path, "a checkpoint directory (its newest complete step) or one step-N directory")
        ->required();
    show->add_flag("--json", args.json, "one JSON object on stdout (the full policy state included)");
    show->footer(
        "Reads state.json and the two safetensors headers, checks that they agree, and reads no tensor data.\n"
        "A checkpoint that is truncated, corrupted or not a prophet checkpoint is exit 3 naming the file.\n"
        "`prophet train --resume DIR` needs the config whose hash it shows. docs/data-and-checkpoints.md.\n"
        "Examples:\n"
        "  prophet ckpt show results/ckpt/<run_id>\n"
        "  prophet ckpt show results/ckpt/<run_id>/step-00000006 --json");
    return show;
}

int run_ckpt_show(const CkptArgs& args) {
    std::error_code ec;
    if (!fs::exists(args.path, ec))
        throw Error(kExitConfig, "checkpoint error: " + args.path + ": no such directory; fix: pass a directory "
                                 "written by prophet train --save (default results/ckpt/<run_id>)");
    const CheckpointInfo info = inspect_checkpoint(args.path);  // exit 3 naming the file on any defect
    const std::vector<StepDir> steps = list_steps(args.path, info.dir);
    const nlohmann::json policy_state = policy_state_json(info);
    if (args.json) {
        nlohmann::json out = {{"dir", info.dir},
                              {"step", info.step},
                              {"optimizer_step", info.meta.optimizer_step},
                              {"config_hash", info.meta.config_hash},
                              {"prophet_version", info.meta.prophet_version},
                              {"data_position", info.meta.data_position},
                              {"policy_state", policy_state}};
        out["steps"] = nlohmann::json::array();
        for (const StepDir& s : steps)
            out["steps"].push_back({{"name", s.name}, {"step", s.step}, {"complete", s.complete}});
        out["extra"] = nlohmann::json::object();
        for (const auto& [key, value] : info.meta.extra)
            if (key != "policy_state") out["extra"][key] = value;
        out["rng"] = nlohmann::json::object();
        for (const auto& [name, state] : info.rng_states) out["rng"][name] = rng_state_hex(state);
        out["model"] = {{"file_bytes", info.model.file_size}, {"tensors", tensors_json(info.model)}};
        out["optimizer"] = {{"file_bytes", info.optimizer.file_size}, {"tensors", tensors_json(info.optimizer)}};
        std::printf("%s\n", out.dump(2).c_str());
        return kExitOk;
    }
    std::printf("checkpoint %s\n", info.dir.c_str());
    std::string list;
    for (const StepDir& s : steps) list += " " + s.name + (s.complete ? "" : " (incomplete)");
    std::printf("steps:%s\n", list.empty() ? " (none besides this one)" : list.c_str());
    std::printf("step %lld, optimizer step %lld, prophet %s\n", static_cast<long long>(info.step),
                static_cast<long long>(info.meta.optimizer_step),
                info.meta.prophet_version.empty() ? "?" : info.meta.prophet_version.c_str());
    std::printf("config_hash %s\n", info.meta.config_hash.c_str());
    for (const auto& [key, value] : info.meta.data_position) std::printf("data.%s = %s\n", key.c_str(), value.c_str());
    std::printf("policy state: %s\n", policy_state_text(policy_state).c_str());
    for (const auto& [key, value] : info.meta.extra)
        if (key != "policy_state") std::printf("extra.%s = %s\n", key.c_str(), value.c_str());
    for (const auto& [name, state] : info.rng_states)
        std::printf("rng %s %s\n", name.c_str(), rng_state_hex(state).c_str());
    print_tensor_table("model.safetensors", info.model);
    print_tensor_table("optimizer.safetensors", info.optimizer);
    return kExitOk;
}

}  // namespace prophet::cli
