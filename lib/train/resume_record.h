// resume_record.h: `prophet train --resume` closes the run it continues, so that no run stays `running` after its
// process died and another one took over its checkpoint (docs/reliability.md).
#pragma once

#include <cstdint>
#include <string>

#include "store/store.h"

namespace prophet {

// The run whose checkpoint `checkpoint_path` is: state.json's extra.run_id (Trainer::save writes it), else, for an
// older checkpoint in the default layout results/ckpt/<run_id>/step-N, that directory's run. Empty when that run
// is not in the store.
std::string checkpoint_source_run(Store& store, const std::string& checkpoint_path);

// Links `new_run` (resumed at `from_step`) to the run the checkpoint came from (Store::link_resume): that run gets
// resumed_by = new_run and, if still `running` and its process is not alive on this host, status `resumed` with
// ended_ms = its last heartbeat. A run whose process lives is linked but left running (two processes on one
// checkpoint is the user's choice; closing a live run is never right). Logs one line on stderr; returns the old
// run id (empty when unknown). Never throws for an unknown source: the resume itself already succeeded.
std::string close_resumed_run(Store& store, const std::string& checkpoint_path, const std::string& new_run,
                              int64_t from_step);

}  // namespace prophet
