// trace.h: routing traces, the input every planner and the simulator consume.
//
// A trace holds, per iteration and MoE layer, the D x E matrix of tokens each device routes to each expert
// (each of a token's top-k assignments counted once), and optionally the E x E transition counts between
// consecutive layers (tokens routed to e1 at layer l and to e2 at layer l+1; under top-k every (e1, e2) pair
// of a token's k x k choices counts once). File format: docs/trace-format.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace prophet {

class Config;
class Schema;

struct TraceMeta {
    int num_iterations = 0;
    int num_layers = 0;   // L: MoE layers
    int num_devices = 0;  // D
    int num_experts = 0;  // E (experts per MoE layer)
    int top_k = 1;        // K
    int64_t tokens_per_iteration = 0;  // global tokens per iteration (before top-k), all devices together
    // model dimensions the cost model needs (bytes and FLOPs); 0 = unknown
    int d_model = 0;  // C
    int d_ffn = 0;    // F (expert hidden size)
    int seq_len = 0;  // T
    std::string source;  // "synthetic:<generator>", "profile:<run_id>", "file:<path>"
};

struct Trace {
    TraceMeta meta;
    std::vector<int64_t> counts;       // [I][L][D][E] tokens device d routes to expert e
    std::vector<int64_t> transitions;  // [I][L-1][E][E], or empty when not recorded

    bool has_transitions() const { return !transitions.empty(); }
    // the D x E matrix of one iteration and layer, row-major by device
    const int64_t* layer_counts(int iteration, int layer) const {
        return counts.data() + (static_cast<size_t>(iteration) * meta.num_layers + layer) *
                                   static_cast<size_t>(meta.num_devices) * meta.num_experts;
    }
    int64_t* layer_counts(int iteration, int layer) {
        return counts.data() + (static_cast<size_t>(iteration) * meta.num_layers + layer) *
                                   static_cast<size_t>(meta.num_devices) * meta.num_experts;
    }
    // the E x E transitions from layer l to l+1 (l in [0, L-2]) of one iteration
    const int64_t* layer_transitions(int iteration, int layer) const {
        return transitions.data() + (static_cast<size_t>(iteration) * (meta.num_layers - 1) + layer) *
                                        static_cast<size_t>(meta.num_experts) * meta.num_experts;
    }
};

// Checks shapes, non-negative counts and that each (iteration, layer) sums to tokens_per_iteration * top_k;
// throws prophet::Error (exit 3) naming `origin` and the first problem found.
void validate_trace(const Trace& trace, const std::string& origin);

// Binary trace file (docs/trace-format.md): magic, JSON header, little-endian int64 arrays.
void write_trace_file(const Trace& trace, const std::string& path);  // atomic: temp file + rename
Trace read_trace_file(const std::string& path);                       // validates; throws on any defect

// Human-readable CSV trace (docs/trace-format.md, CSV format): a version line, a metadata comment line and
// the non-zero counts (and transitions) as rows. Rows may come in any order; cells not given are 0.
Trace read_trace_csv(const std::string& path);                       // validates; names the line of any defect
Trace read_trace_csv_text(const std::string& text, const std::string& origin);  // the same, from memory
void write_trace_csv(const Trace& trace, const std::string& path);  // atomic: temp file + rename

// Synthetic generator described by a small TOML file (docs/trace-format.md lists the keys). `threads`: devices drawn
// side by side (the trace is the same for any count; one thread when it records transitions).
Trace generate_trace_from_toml(const std::string& toml_path, int threads = 1);
Trace generate_trace_from_toml_string(const std::string& toml_text, const std::string& origin, int threads = 1);
// The [trace] keys a generator TOML accepts (types, defaults, bounds, help with units), e.g. for --help-config.
const Schema& trace_generator_schema();
// Generates from a Config built on trace_generator_schema() (files merged, --set applied); checks the
// cross-key rules (top_k <= num_experts, tokens divisible by devices, size caps) and names `origin` in errors.
Trace generate_trace(const Config& config, const std::string& origin, int threads = 1);

// Loads a trace from a generator .toml, a binary trace file or a CSV trace (by content, not extension); a CSV
// trace may be gzip-compressed (trace_gzip.h). `threads`: a generator's devices drawn side by side.
Trace load_trace(const std::string& path, int threads);
inline Trace load_trace(const std::string& path) { return load_trace(path, 1); }

// The first `iterations` iterations and first `layers` layers of a trace (counts and transitions copied, meta
// updated; every other field kept): e.g. a sweep's smaller slice of a long file trace. Throws a config error (exit 3)
// naming `field_iterations` or `field_layers` when a count is below 1 or above the trace's own.
Trace leading_slice(const Trace& trace, int iterations, int layers, const std::string& field_iterations,
                    const std::string& field_layers);

// Jensen-Shannon divergence (natural log, in [0, ln 2]) between the expert-load distributions of
// consecutive iterations: result[i-1][l] for i in [1, I), l in [0, L) as a flat [(I-1)*L] vector.
std::vector<double> consecutive_js_divergence(const Trace& trace);
double js_divergence(const double* p, const double* q, int n);  // p, q: non-negative, normalised inside

// Expert loads of one iteration and layer summed over devices: [E]
std::vector<int64_t> expert_loads(const Trace& trace, int iteration, int layer);

}  // namespace prophet
