// resume_check.h: the trainer's fields of a checkpoint, each checked against the resuming run before any is used.
//
// load_checkpoint (model/checkpoint.h) checks the files' format, the config hash and every tensor's shape; what
// the trainer reads on top of that is checked here: state.json's extra.world_size and data_position.next_step
// (strict decimal integers, no "one", no "2x"), optimizer_step (AdamW bias correction), and every tensor value
// (finite; the AdamW second moments `.v` >= 0, their square root is taken). A defect is a prophet::Error, exit 3,
// naming the file and the field. (extra.policy_state is checked by PolicyRunner::load_state.)
#pragma once

#include <cstdint>
#include <string>

#include "model/checkpoint.h"

namespace prophet {

struct ResumeFields {
    int64_t next_step = 0;       // the first step the resumed run trains
    int64_t optimizer_step = 0;  // AdamW's step count
};

// `world_size`: ranks of the resuming run (extra.world_size must equal it when present).
ResumeFields check_resume_fields(const Checkpoint& checkpoint, int world_size);

// `text` as a decimal integer in [min, max]; anything else (empty, a sign alone, letters, trailing characters,
// out of range) throws exit 3 naming `file` and `field`.
int64_t checkpoint_int_field(const std::string& file, const std::string& field, const std::string& text, int64_t min,
                             int64_t max);

}  // namespace prophet
