// checkpoint.cpp: reading a checkpoint back: state.json and the safetensors headers checked against each other
// and against the resuming run's expected config and parameters, then the tensors; `ckpt show`'s summary.
#include "model/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include "core/error.h"
#include "model/checkpoint_internal.h"

namespace prophet {

namespace fs = std::filesystem;
using namespace checkpoint_detail;

CheckpointInfo inspect_checkpoint(const std::string& path) {
    CheckpointInfo info;
    info.dir = resolve_checkpoint(path);
    const std::string state_path = (fs::path(info.dir) / kStateFile).string();
    read_state_json(state_path, info);

    const std::string model_path = (fs::path(info.dir) / kModelFile).string();
    const std::string optimizer_path = (fs::path(info.dir) / kOptimizerFile).string();
    info.model = read_safetensors_header(model_path);
    info.optimizer = read_safetensors_header(optimizer_path);
    auto check_meta = [&](const SafetensorsHeader& header, const std::string& file, const std::string& key,
                          const std::string& expected) {
        const auto found = header.metadata.find(key);
        if (found == header.metadata.end() || found->second != expected)
            throw_input_error(file,
                              "inconsistent checkpoint: __metadata__ " + key + " = \"" +
                                  (found == header.metadata.end() ? std::string("(missing)") : found->second) +
                                  "\" but state.json says \"" + expected + "\"",
                              kCorruptFix);
    };
    check_meta(info.model, model_path, "step", std::to_string(info.step));
    check_meta(info.model, model_path, "config_hash", info.meta.config_hash);
    check_meta(info.optimizer, optimizer_path, "step", std::to_string(info.meta.optimizer_step));
    check_meta(info.optimizer, optimizer_path, "config_hash", info.meta.config_hash);
    return info;
}

namespace {

using ShapeMap = std::map<std::string, std::vector<int64_t>>;  // tensor name -> shape

ShapeMap shapes_of(const SafetensorsHeader& header) {
    ShapeMap shapes;
    for (const TensorInfo& tensor : header.tensors) shapes[tensor.name] = tensor.shape;
    return shapes;
}

// The paths and the fix that every mismatch with the expected model names.
struct ExpectContext {
    const CheckpointExpect& expect;
    const ShapeMap& model_shapes;
    const ShapeMap& optimizer_shapes;
    std::string model_path;
    std::string optimizer_path;
    std::string config_fix;
};

// A checkpoint saved under another config hash: the error names the first expected tensor that differs.
void check_config_hash(const CheckpointInfo& info, const ExpectContext& c) {
    if (c.expect.config_hash.empty() || c.expect.config_hash == info.meta.config_hash) return;
    std::string difference;
    for (const auto& [name, shape] : c.expect.tensors) {
        const auto found = c.model_shapes.find(name);
        if (found == c.model_shapes.end()) {
            difference = "; first difference: tensor " + name + " " + shape_text(shape) + " is not in the checkpoint";
            break;
        }
        if (found->second != shape) {
            difference = "; first difference: tensor " + name + " is " + shape_text(found->second) +
                         " in the checkpoint, " + shape_text(shape) + " expected";
            break;
        }
    }
    throw_input_error(info.dir,
                      "checkpoint from another config (hash " + info.meta.config_hash + ", expected " +
                          c.expect.config_hash + ")" + difference,
                      c.config_fix);
}

// Parameter `name` of `shape` is in the model file, and (with the optimizer) its moments `name.m`, `name.v` too.
void check_expected_tensor(const std::string& name, const std::vector<int64_t>& shape, const ExpectContext& c) {
    const auto found = c.model_shapes.find(name);
    if (found == c.model_shapes.end())
        throw_input_error(c.model_path, "tensor " + name + " " + shape_text(shape) + " is missing", c.config_fix);
    if (found->second != shape)
        throw_input_error(
            c.model_path,
            "tensor " + name + " is " + shape_text(found->second) + ", the model expects " + shape_text(shape),
            c.config_fix);
    if (!c.expect.optimizer) return;
    for (const char* suffix : {".m", ".v"}) {
        const std::string state_name = name + suffix;
        const auto state = c.optimizer_shapes.find(state_name);
        if (state == c.optimizer_shapes.end())
            throw_input_error(c.optimizer_path, "optimizer tensor " + state_name + " is missing", c.config_fix);
        if (state->second != shape)
            throw_input_error(c.optimizer_path,
                              "optimizer tensor " + state_name + " is " + shape_text(state->second) + ", expected " +
                                  shape_text(shape),
                              c.config_fix);
    }
}

// The files hold exactly the expected parameters (and their moments): none missing, none of another shape, none
// extra.
void check_expected_tensors(const ExpectContext& c) {
    if (c.expect.tensors.empty()) return;
    std::set<std::string> expected_names;
    for (const auto& [name, shape] : c.expect.tensors) {
        expected_names.insert(name);
        check_expected_tensor(name, shape, c);
    }
    for (const auto& [name, shape] : c.model_shapes)
        if (!expected_names.count(name))
            throw_input_error(c.model_path,
                              "tensor " + name + " " + shape_text(shape) + " is not a parameter of this model",
                              c.config_fix);
    if (!c.expect.optimizer) return;
    for (const auto& [name, shape] : c.optimizer_shapes) {
        const bool moment = name.size() > 2 && (name.ends_with(".m") || name.ends_with(".v"));
        if (!moment || !expected_names.count(name.substr(0, name.size() - 2)))
            throw_input_error(
                c.optimizer_path,
                "optimizer tensor " + name + " " + shape_text(shape) + " is not the state of a parameter of this model",
                c.config_fix);
    }
}

// The tensors of the file whose header was read before: still the same size, then read and verified.
TensorMap read_tensors_again(const std::string& path, const SafetensorsHeader& header) {
    FileIn in(path);
    if (in.size() != header.file_size) throw_input_error(path, "truncated or replaced while being read", kCorruptFix);
    return read_tensors(in, path, header);
}

}  // namespace

Checkpoint load_checkpoint(const std::string& path, const CheckpointExpect& expect) {
    CheckpointInfo info = inspect_checkpoint(path);
    const ShapeMap model_shapes = shapes_of(info.model);
    const ShapeMap optimizer_shapes = shapes_of(info.optimizer);
    const ExpectContext context{expect,
                                model_shapes,
                                optimizer_shapes,
                                (fs::path(info.dir) / kModelFile).string(),
                                (fs::path(info.dir) / kOptimizerFile).string(),
                                "resume with the config this checkpoint was saved with (prophet ckpt show " + info.dir +
                                    "), or give the new run another checkpoint directory"};
    check_config_hash(info, context);
    check_expected_tensors(context);

    Checkpoint checkpoint;
    checkpoint.dir = info.dir;
    checkpoint.step = info.step;
    checkpoint.tensors = read_tensors_again(context.model_path, info.model);
    checkpoint.optimizer = read_tensors_again(context.optimizer_path, info.optimizer);
    checkpoint.rng_states = std::move(info.rng_states);
    checkpoint.meta = std::move(info.meta);
    return checkpoint;
}

std::string format_checkpoint_info(const CheckpointInfo& info) {
    std::ostringstream out;
    out << "checkpoint " << info.dir << "\n";
    out << "  step " << info.step << ", optimizer step " << info.meta.optimizer_step << ", prophet "
        << (info.meta.prophet_version.empty() ? "?" : info.meta.prophet_version) << "\n";
    out << "  config_hash " << info.meta.config_hash << "\n";
    for (const auto& [name, state] : info.rng_states) out << "  rng " << name << " " << rng_state_hex(state) << "\n";
    for (const auto& [key, value] : info.meta.data_position) out << "  data." << key << " = " << value << "\n";
    for (const auto& [key, value] : info.meta.extra) out << "  extra." << key << " = " << value << "\n";
    auto table = [&](const char* file, const SafetensorsHeader& header) {
        uint64_t elements = 0;
        size_t width = 4;
        for (const TensorInfo& tensor : header.tensors) {
            elements += (tensor.end - tensor.begin) / std::max<uint64_t>(1, dtype_size(tensor.dtype));
            width = std::max(width, tensor.name.size());
        }
        out << "  " << file << ": " << header.tensors.size() << " tensors, " << elements << " elements, "
            << header.file_size << " bytes\n";
        std::vector<const TensorInfo*> sorted;
        for (const TensorInfo& tensor : header.tensors) sorted.push_back(&tensor);
        std::sort(sorted.begin(), sorted.end(),
                  [](const TensorInfo* a, const TensorInfo* b) { return a->name < b->name; });
        for (const TensorInfo* tensor : sorted)
            out << "    " << tensor->name << std::string(width - tensor->name.size() + 2, ' ') << tensor->dtype << " "
                << shape_text(tensor->shape) << "\n";
    };
    table(kModelFile, info.model);
    table(kOptimizerFile, info.optimizer);
    return out.str();
}

}  // namespace prophet
