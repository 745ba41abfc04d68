#include "train/resume_check.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>

#include "core/error.h"

namespace prophet {
namespace {

constexpr const char* kResaveFix =
    "resume from a checkpoint this prophet wrote for this config (prophet ckpt show DIR), or start the run afresh";

// every value finite; `.v` tensors (AdamW second moments) also >= 0
void check_values(const TensorMap& tensors, const std::string& file) {
    for (const auto& [name, tensor] : tensors) {
        const bool second_moment = name.size() > 2 && name.compare(name.size() - 2, 2, ".v") == 0;
        for (size_t i = 0; i < tensor.data.size(); ++i) {
            const float x = tensor.data[i];
            if (!std::isfinite(x) || (second_moment && x < 0.0f))
                throw_input_error(file,
                                  "tensor " + name + " holds " + std::to_string(x) + " at element " +
                                      std::to_string(i) + (second_moment ? " (must be finite and >= 0)" : " (must be finite)"),
                                  kResaveFix);
        }
    }
}

}  // namespace

int64_t checkpoint_int_field(const std::string& file, const std::string& field, const std::string& text, int64_t min,
                             int64_t max) {
    int64_t value = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end || value < min || value > max)
        throw_input_error(file,
                          field + " = \"" + text + "\" is not an integer in [" + std::to_string(min) + ", " +
                              std::to_string(max) + "]",
                          kResaveFix);
    return value;
}

ResumeFields check_resume_fields(const Checkpoint& checkpoint, int world_size) {
    const std::string state = (std::filesystem::path(checkpoint.dir) / "state.json").string();
    const auto ranks = checkpoint.meta.extra.find("world_size");
    if (ranks != checkpoint.meta.extra.end()) {
        const int64_t saved = checkpoint_int_field(state, "extra.world_size", ranks->second, 1,
                                                   std::numeric_limits<int>::max());
        if (saved != world_size)
            throw Error(kExitConfig, "checkpoint error: " + checkpoint.dir + " was written by a run on " +
                                         ranks->second + " ranks, this run has " + std::to_string(world_size) +
                                         "; fix: resume with mpirun -np " + ranks->second);
    }
    const auto next = checkpoint.meta.data_position.find("next_step");
    if (next == checkpoint.meta.data_position.end())
        throw_input_error(state, "data_position.next_step is missing", kResaveFix);
    ResumeFields fields;
    // a checkpoint of step s is saved after step s, so the run goes on with s + 1
    fields.next_step = checkpoint_int_field(state, "data_position.next_step", next->second, checkpoint.step + 1,
                                            checkpoint.step + 1);
    // AdamW counts one step per training step; the bias correction needs 0 <= count
    fields.optimizer_step = checkpoint.meta.optimizer_step;
    if (fields.optimizer_step < 0 || fields.optimizer_step > fields.next_step)
        throw_input_error(state,
                          "optimizer_step = " + std::to_string(fields.optimizer_step) + " is outside [0, " +
                              std::to_string(fields.next_step) + "] (the steps trained so far)",
                          kResaveFix);
    check_values(checkpoint.tensors, (std::filesystem::path(checkpoint.dir) / "model.safetensors").string());
    check_values(checkpoint.optimizer, (std::filesystem::path(checkpoint.dir) / "optimizer.safetensors").string());
    return fields;
}

}  // namespace prophet
