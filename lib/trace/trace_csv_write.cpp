// trace_csv_write.cpp: the CSV trace's writer (docs/trace-format.md, section 6): the version and metadata lines,
// one row per non-zero count and transition, written atomically (temp file + rename) in chunks.
#include <charconv>
#include <string>

#include "core/atomic_file.h"
#include "trace/trace.h"
#include "trace/trace_csv_format.h"

namespace prophet {
namespace {

using trace_csv::escape_source;
using trace_csv::kCountsColumns;
using trace_csv::kTransitionsColumns;
using trace_csv::kTransitionsMarker;
using trace_csv::kVersionLine;

constexpr size_t kWriteChunkBytes = 1 << 20;

void append_int(std::string& out, int64_t value) {
    char digits[24];
    const auto [end, error] = std::to_chars(digits, digits + sizeof(digits), value);
    out.append(digits, end);
}

void append_row(std::string& out, int64_t a, int64_t b, int64_t c, int64_t d, int64_t value) {
    for (int64_t index : {a, b, c, d}) {
        append_int(out, index);
        out += ',';
    }
    append_int(out, value);
    out += '\n';
}

}  // namespace

void write_trace_csv(const Trace& trace, const std::string& path) {
    validate_trace(trace, path);
    const TraceMeta& m = trace.meta;
    AtomicFile out(path);  // a unique temporary, renamed over `path` by commit()

    std::string buffer;
    buffer += kVersionLine;
    buffer += "\n# num_iterations=" + std::to_string(m.num_iterations) + " num_layers=" + std::to_string(m.num_layers) +
              " num_devices=" + std::to_string(m.num_devices) + " num_experts=" + std::to_string(m.num_experts) +
              " top_k=" + std::to_string(m.top_k) + " tokens_per_iteration=" + std::to_string(m.tokens_per_iteration) +
              " d_model=" + std::to_string(m.d_model) + " d_ffn=" + std::to_string(m.d_ffn) +
              " seq_len=" + std::to_string(m.seq_len) + " source=" + escape_source(m.source) + "\n";
    buffer += kCountsColumns;
    buffer += '\n';
    auto flush_if_full = [&] {
        if (buffer.size() < kWriteChunkBytes) return;
        out.write(buffer);
        buffer.clear();
    };
    // one row "i,l,a,b,value" per nonzero entry of a [rows x cols] matrix, flushed after each of its rows
    auto append_nonzero = [&](int i, int l, const int64_t* matrix, int rows, int cols) {
        for (int a = 0; a < rows; ++a) {
            for (int b = 0; b < cols; ++b) {
                const int64_t value = matrix[static_cast<size_t>(a) * cols + b];
                if (value != 0) append_row(buffer, i, l, a, b, value);
            }
            flush_if_full();
        }
    };
    for (int i = 0; i < m.num_iterations; ++i)
        for (int l = 0; l < m.num_layers; ++l)
            append_nonzero(i, l, trace.layer_counts(i, l), m.num_devices, m.num_experts);
    if (trace.has_transitions()) {
        buffer += "# ";
        buffer += kTransitionsMarker;
        buffer += '\n';
        buffer += kTransitionsColumns;
        buffer += '\n';
        for (int i = 0; i < m.num_iterations; ++i)
            for (int l = 0; l + 1 < m.num_layers; ++l)
                append_nonzero(i, l, trace.layer_transitions(i, l), m.num_experts, m.num_experts);
    }
    out.write(buffer);
    out.commit();
}

}  // namespace prophet
