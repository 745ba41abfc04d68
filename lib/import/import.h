// import.h: expert-load files written by inference and training engines, read into prophet traces.
//
// `prophet trace import --format F FILE...` (docs/trace-format.md, section 7). Formats:
//   sglang    JSON {"logical_count": [L][E] or [S][L][E]} (what SGLang's --init-expert-location accepts)
//   vllm      JSON {"load_history": [{"logical_expert_load": [L][E]}, ...]} (one entry per forward step)
//   megatron  tokens_per_expert/rank{R}.jsonl from Megatron-LM's --save-tokens-per-expert-interval
//   trtllm    meta_info.json + rank{r}.safetensors from TensorRT-LLM's EXPERT_STATISTIC_PATH
//   eplb      a [layers, experts] weight matrix as CSV (one row per layer) or JSON (DeepSeek EPLB's `weight`)
// Only trtllm records which device routed the tokens; for the others the counts of an expert are spread over the
// trace's devices by one documented rule (uniform, see build_imported_trace) and the trace's source says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/trace.h"

namespace prophet {

struct ImportOptions {
    std::string format;              // one of import_formats()
    std::vector<std::string> files;  // the engine's files; megatron and trtllm also take their directory
    int devices = 0;                 // D of the trace; 0 = from the file (trtllm: ranks; megatron: ep_size)
    int top_k = 0;                   // K; 0 = from the file (trtllm's meta_info.json records it)
    int64_t rescale_tokens = 0;      // 0 = exact; N = every (step, layer) rescaled to N x K assignments
    // megatron only: the expert-parallel grid Megatron's rank order (tp-cp-ep-dp-pp) lays over the rank files
    int ep_size = 0;   // expert-parallel size (required for megatron)
    int etp_size = 1;  // expert tensor-parallel size (its ranks see the same tokens: only etp rank 0 is read)
    int pp_size = 1;   // pipeline stages (each file's layer numbers are local to its stage)
};

struct ImportResult {
    Trace trace;
    std::vector<std::string> notes;  // what the importer left out or assumed, one sentence each (for stderr)
};

// The format names, in the order --help lists them.
const std::vector<std::string>& import_formats();

// Reads the files and returns a validated trace. Bad input throws prophet::Error exit 3 naming the file and the
// field; a missing option the format needs is exit 2; an input over the size limits is exit 3 (cells) or 4 (a
// file over 1 GiB).
ImportResult import_engine_trace(const ImportOptions& options);

}  // namespace prophet
