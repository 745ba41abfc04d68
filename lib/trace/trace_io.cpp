// trace_io.cpp: the binary trace file (magic, JSON header, little-endian int64 arrays; docs/trace-format.md),
// semantic validation of a Trace, and load_trace, which tells a binary trace from a generator TOML by content.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "trace/capped_product.h"
#include "trace/escaped_bytes.h"
#include "trace/trace.h"
#include "trace/trace_gzip.h"

namespace prophet {
namespace {

constexpr char kMagic[8] = {'P', 'R', 'T', 'R', 'A', 'C', 'E', '1'};
constexpr size_t kPreambleBytes = 16;                   // magic + uint64 header length
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;      // a header is a few hundred bytes; this is corruption
constexpr uint64_t kMaxArrayElements = kMaxTraceArrayElements;  // per array (counts, transitions)
constexpr int64_t kMaxTokensPerIteration = kMaxTraceTokensPerIteration;
constexpr uint64_t kMaxGeneratorTomlBytes = 1ull << 20;
constexpr const char* kRewriteFix =
    "the file is corrupt or was cut short; write it again (prophet profile or write_trace_file)";

uint64_t load_u64_le(const unsigned char* bytes) {
    uint64_t value = 0;
    for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
    return value;
}

void store_u64_le(uint64_t value, unsigned char* bytes) {
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(value >> (8 * i));
}

void swap_bytes_if_big_endian(int64_t* data, size_t n) {
    if constexpr (std::endian::native == std::endian::big) {
        for (size_t i = 0; i < n; ++i) {
            unsigned char bytes[8];
            std::memcpy(bytes, &data[i], 8);
            std::reverse(bytes, bytes + 8);
            std::memcpy(&data[i], bytes, 8);
        }
    }
}

void write_int64_le(AtomicFile& out, const std::vector<int64_t>& values) {
    if constexpr (std::endian::native == std::endian::little) {
        out.write(values.data(), values.size() * 8);
    } else {
        std::vector<int64_t> chunk;  // [<= 65536] byte-swapped copy
        for (size_t begin = 0; begin < values.size(); begin += 65536) {
            const size_t n = std::min<size_t>(65536, values.size() - begin);
            chunk.assign(values.begin() + begin, values.begin() + begin + n);
            swap_bytes_if_big_endian(chunk.data(), n);
            out.write(chunk.data(), n * 8);
        }
    }
}

// Reads one required integer field of the header, in [min, max].
int64_t header_int(const nlohmann::json& header, const std::string& path, const char* name, int64_t min, int64_t max) {
    auto it = header.find(name);
    if (it == header.end())
        throw_input_error(path, std::string("header field \"") + name + "\" is missing",
                          "write the file with write_trace_file (docs/trace-format.md lists the header fields)");
    if (!it->is_number_integer())
        throw_input_error(path, std::string("header field \"") + name + "\" must be an integer, found " + it->dump(),
                          "write the file with write_trace_file (docs/trace-format.md)");
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(max))
        throw_input_error(path, std::string("header field \"") + name + "\" = " + it->dump() +
                                    " is out of range: must be in [" + std::to_string(min) + ", " +
                                    std::to_string(max) + "]",
                          kRewriteFix);
    const int64_t value = it->get<int64_t>();
    if (value < min || value > max)
        throw_input_error(path, std::string("header field \"") + name + "\" = " + std::to_string(value) +
                                    " is out of range: must be in [" + std::to_string(min) + ", " +
                                    std::to_string(max) + "]",
                          kRewriteFix);
    return value;
}

TraceMeta parse_header(const std::string& text, const std::string& path, bool& has_transitions) {
    nlohmann::json header;
    try {
        header = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw_input_error(path, std::string("header is not valid JSON: ") + e.what(), kRewriteFix);
    }
    if (!header.is_object())
        throw_input_error(path, "header JSON must be an object, found " + std::string(header.type_name()), kRewriteFix);

    const int64_t version = header_int(header, path, "format_version", 0, std::numeric_limits<int64_t>::max());
    if (version != 1)
        throw_input_error(path, "unsupported format_version " + std::to_string(version) + " (this build reads 1)",
                          "use a prophet build that writes and reads format_version " + std::to_string(version));
    constexpr int64_t kIntMax = std::numeric_limits<int>::max();
    TraceMeta meta;
    meta.num_iterations = static_cast<int>(header_int(header, path, "num_iterations", 1, kIntMax));
    meta.num_layers = static_cast<int>(header_int(header, path, "num_layers", 1, kIntMax));
    meta.num_devices = static_cast<int>(header_int(header, path, "num_devices", 1, kIntMax));
    meta.num_experts = static_cast<int>(header_int(header, path, "num_experts", 1, kIntMax));
    meta.top_k = static_cast<int>(header_int(header, path, "top_k", 1, meta.num_experts));
    meta.tokens_per_iteration = header_int(header, path, "tokens_per_iteration", 1, kMaxTokensPerIteration);
    meta.d_model = static_cast<int>(header_int(header, path, "d_model", 0, kIntMax));
    meta.d_ffn = static_cast<int>(header_int(header, path, "d_ffn", 0, kIntMax));
    meta.seq_len = static_cast<int>(header_int(header, path, "seq_len", 0, kIntMax));

    auto source = header.find("source");
    if (source == header.end() || !source->is_string())
        throw_input_error(path,
                          source == header.end() ? "header field \"source\" is missing"
                                                 : "header field \"source\" must be a string, found " + source->dump(),
                          "write the file with write_trace_file (docs/trace-format.md)");
    meta.source = source->get<std::string>();

    auto flag = header.find("has_transitions");
    if (flag == header.end() || !flag->is_boolean())
        throw_input_error(path,
                          flag == header.end() ? "header field \"has_transitions\" is missing"
                                               : "header field \"has_transitions\" must be true or false, found " +
                                                     flag->dump(),
                          "write the file with write_trace_file (docs/trace-format.md)");
    has_transitions = flag->get<bool>();
    return meta;
}

std::string size_product_text(const TraceMeta& meta, bool transitions) {
    if (transitions)
        return "num_iterations x (num_layers - 1) x num_experts^2 = " + std::to_string(meta.num_iterations) + " x " +
               std::to_string(meta.num_layers - 1) + " x " + std::to_string(meta.num_experts) + "^2";
    return "num_iterations x num_layers x num_devices x num_experts = " + std::to_string(meta.num_iterations) + " x " +
           std::to_string(meta.num_layers) + " x " + std::to_string(meta.num_devices) + " x " +
           std::to_string(meta.num_experts);
}

void check_array_sizes(const TraceMeta& meta, bool has_transitions, const std::string& origin) {
    if (capped_product({meta.num_iterations, meta.num_layers, meta.num_devices, meta.num_experts}) > kMaxArrayElements)
        throw_input_error(origin, "sizes too large: " + size_product_text(meta, false) + " exceeds 2^31 counts",
                          "split the trace into fewer iterations or layers");
    if (has_transitions && meta.num_layers > 1 &&
        capped_product({meta.num_iterations, meta.num_layers - 1, meta.num_experts, meta.num_experts}) >
            kMaxArrayElements)
        throw_input_error(origin, "sizes too large: " + size_product_text(meta, true) + " exceeds 2^31 transitions",
                          "record without transitions or split the trace into fewer iterations");
}

// The header values on their own: positive sizes, top_k <= num_experts, sums that fit int64, array sizes in range.
void check_meta_values(const TraceMeta& m, bool has_transitions, const std::string& origin) {
    auto positive = [&](const char* name, int64_t value) {
        if (value < 1)
            throw_input_error(origin, std::string(name) + " = " + std::to_string(value) + " must be >= 1",
                              "fix the trace metadata");
    };
    positive("num_iterations", m.num_iterations);
    positive("num_layers", m.num_layers);
    positive("num_devices", m.num_devices);
    positive("num_experts", m.num_experts);
    positive("top_k", m.top_k);
    positive("tokens_per_iteration", m.tokens_per_iteration);
    if (m.top_k > m.num_experts)
        throw_input_error(origin,
                          "top_k = " + std::to_string(m.top_k) +
                              " exceeds num_experts = " + std::to_string(m.num_experts),
                          "fix the trace metadata");
    int64_t tokens_k2 = 0;
    if (m.tokens_per_iteration > kMaxTokensPerIteration ||
        __builtin_mul_overflow(m.tokens_per_iteration, static_cast<int64_t>(m.top_k) * m.top_k, &tokens_k2))
        throw_input_error(origin,
                          "tokens_per_iteration x top_k^2 = " + std::to_string(m.tokens_per_iteration) + " x " +
                              std::to_string(m.top_k) + "^2 is too large (limit 2^48 tokens, int64 sums)",
                          "fix the trace metadata");
    if (m.d_model < 0 || m.d_ffn < 0 || m.seq_len < 0)
        throw_input_error(origin, "d_model, d_ffn and seq_len must be >= 0 (0 = unknown)", "fix the trace metadata");
    check_array_sizes(m, has_transitions, origin);
}

// counts and transitions hold exactly the elements the header's sizes call for.
void check_array_lengths(const Trace& trace, const std::string& origin) {
    const TraceMeta& m = trace.meta;
    const size_t matrix = static_cast<size_t>(m.num_devices) * m.num_experts;
    const size_t expected_counts = static_cast<size_t>(m.num_iterations) * m.num_layers * matrix;
    if (trace.counts.size() != expected_counts)
        throw_input_error(origin,
                          "counts has " + std::to_string(trace.counts.size()) + " elements, expected " +
                              size_product_text(m, false) + " = " + std::to_string(expected_counts),
                          "fill counts as [num_iterations][num_layers][num_devices][num_experts]");
    const size_t pairs = static_cast<size_t>(m.num_experts) * m.num_experts;
    const size_t expected_transitions = static_cast<size_t>(m.num_iterations) * (m.num_layers - 1) * pairs;
    if (trace.has_transitions() && trace.transitions.size() != expected_transitions)
        throw_input_error(origin,
                          "transitions has " + std::to_string(trace.transitions.size()) + " elements, expected " +
                              size_product_text(m, true) + " = " + std::to_string(expected_transitions),
                          "fill transitions as [num_iterations][num_layers - 1][num_experts][num_experts] or leave "
                          "it empty");
}

// One (iteration, layer) count matrix: no negative count, summing to tokens_per_iteration x top_k. Fills
// layer_loads [E] with the per-expert column sums (the layer's loads).
void check_layer_counts(const Trace& trace, int i, int l, std::vector<int64_t>& layer_loads,
                        const std::string& origin) {
    const TraceMeta& m = trace.meta;
    const int num_experts = m.num_experts;
    const int64_t expected_sum = m.tokens_per_iteration * m.top_k;
    const int64_t* c = trace.layer_counts(i, l);
    std::fill(layer_loads.begin(), layer_loads.end(), 0);
    int64_t sum = 0;
    bool overflow = false;
    for (int d = 0; d < m.num_devices; ++d) {
        for (int e = 0; e < num_experts; ++e) {
            const int64_t value = c[static_cast<size_t>(d) * num_experts + e];
            if (value < 0)
                throw_input_error(origin,
                                  "negative count " + std::to_string(value) + " at iteration " + std::to_string(i) +
                                      ", layer " + std::to_string(l) + ", device " + std::to_string(d) + ", expert " +
                                      std::to_string(e),
                                  "counts are token numbers and must be >= 0; re-record the trace");
            overflow |= __builtin_add_overflow(sum, value, &sum);
            overflow |= __builtin_add_overflow(layer_loads[e], value, &layer_loads[e]);
        }
    }
    if (overflow || sum != expected_sum)
        throw_input_error(origin,
                          "counts of iteration " + std::to_string(i) + ", layer " + std::to_string(l) + " sum to " +
                              (overflow ? std::string("more than 2^63") : std::to_string(sum)) +
                              ", expected tokens_per_iteration x top_k = " + std::to_string(m.tokens_per_iteration) +
                              " x " + std::to_string(m.top_k) + " = " + std::to_string(expected_sum),
                          "every token's top_k assignments must be counted once; check tokens_per_iteration "
                          "and top_k in the header, or re-record the trace");
}

// One (iteration, layers l -> l+1) transition matrix: each token with sets S_l, S_{l+1} adds 1 per pair, so row e1
// sums to top_k x loads_l[e1] and column e2 to top_k x loads_{l+1}[e2]. column_sums [E] is scratch.
void check_layer_transitions(const Trace& trace, int i, int l, const std::vector<int64_t>& loads_l,
                             const std::vector<int64_t>& loads_next, std::vector<int64_t>& column_sums,
                             const std::string& origin) {
    const TraceMeta& m = trace.meta;
    const int num_experts = m.num_experts;
    const int64_t* t = trace.layer_transitions(i, l);
    std::fill(column_sums.begin(), column_sums.end(), 0);
    const std::string where =
        "iteration " + std::to_string(i) + ", layers " + std::to_string(l) + "->" + std::to_string(l + 1);
    for (int e1 = 0; e1 < num_experts; ++e1) {
        int64_t row_sum = 0;
        for (int e2 = 0; e2 < num_experts; ++e2) {
            const int64_t value = t[static_cast<size_t>(e1) * num_experts + e2];
            if (value < 0)
                throw_input_error(origin,
                                  "negative transition count " + std::to_string(value) + " at " + where + ", experts " +
                                      std::to_string(e1) + "->" + std::to_string(e2),
                                  "transitions are token numbers and must be >= 0; re-record the trace");
            if (__builtin_add_overflow(row_sum, value, &row_sum) ||
                __builtin_add_overflow(column_sums[e2], value, &column_sums[e2]))
                throw_input_error(origin, "transition counts at " + where + " overflow int64", "re-record the trace");
        }
        if (row_sum != m.top_k * loads_l[e1])
            throw_input_error(origin,
                              "transitions at " + where + " from expert " + std::to_string(e1) + " sum to " +
                                  std::to_string(row_sum) + ", expected top_k x load of expert " + std::to_string(e1) +
                                  " at layer " + std::to_string(l) + " = " + std::to_string(m.top_k) + " x " +
                                  std::to_string(loads_l[e1]),
                              "transitions and counts disagree; re-record the trace");
    }
    for (int e2 = 0; e2 < num_experts; ++e2)
        if (column_sums[e2] != m.top_k * loads_next[e2])
            throw_input_error(origin,
                              "transitions at " + where + " into expert " + std::to_string(e2) + " sum to " +
                                  std::to_string(column_sums[e2]) + ", expected top_k x load of expert " +
                                  std::to_string(e2) + " at layer " + std::to_string(l + 1) + " = " +
                                  std::to_string(m.top_k) + " x " + std::to_string(loads_next[e2]),
                              "transitions and counts disagree; re-record the trace");
}

}  // namespace

void validate_trace(const Trace& trace, const std::string& origin) {
    const TraceMeta& m = trace.meta;
    check_meta_values(m, trace.has_transitions(), origin);
    check_array_lengths(trace, origin);
    std::vector<std::vector<int64_t>> loads(m.num_layers, std::vector<int64_t>(m.num_experts));  // [L][E]
    std::vector<int64_t> column_sums(m.num_experts);                                             // [E]
    for (int i = 0; i < m.num_iterations; ++i) {
        for (int l = 0; l < m.num_layers; ++l) check_layer_counts(trace, i, l, loads[l], origin);
        if (!trace.has_transitions()) continue;
        for (int l = 0; l + 1 < m.num_layers; ++l)
            check_layer_transitions(trace, i, l, loads[l], loads[l + 1], column_sums, origin);
    }
}

void write_trace_file(const Trace& trace, const std::string& path) {
    validate_trace(trace, path);
    const bool has_transitions = trace.has_transitions();
    nlohmann::ordered_json header;
    header["format_version"] = 1;
    header["num_iterations"] = trace.meta.num_iterations;
    header["num_layers"] = trace.meta.num_layers;
    header["num_devices"] = trace.meta.num_devices;
    header["num_experts"] = trace.meta.num_experts;
    header["top_k"] = trace.meta.top_k;
    header["tokens_per_iteration"] = trace.meta.tokens_per_iteration;
    header["d_model"] = trace.meta.d_model;
    header["d_ffn"] = trace.meta.d_ffn;
    header["seq_len"] = trace.meta.seq_len;
    header["source"] = trace.meta.source;
    header["has_transitions"] = has_transitions;
    std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    // pad with spaces (valid JSON whitespace) so the data starts 8-byte aligned
    text.append((8 - (kPreambleBytes + text.size()) % 8) % 8, ' ');

    AtomicFile out(path);  // a unique temporary, renamed over `path` by commit()
    unsigned char length[8];
    store_u64_le(text.size(), length);
    out.write(kMagic, sizeof(kMagic));
    out.write(length, sizeof(length));
    out.write(text);
    write_int64_le(out, trace.counts);
    if (has_transitions) write_int64_le(out, trace.transitions);
    out.commit();
}

namespace {

// Opens `path` as a binary stream after checking it names a readable regular file; returns its size in bytes.
uint64_t open_trace_file(const std::string& path, std::ifstream& in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
        throw_input_error(path, "no such file", "check the path; traces are written by prophet profile or are "
                                                "generator .toml files (experiments/traces/)");
    if (std::filesystem::is_directory(path, ec))
        throw_input_error(path, "is a directory, not a trace file", "pass a file");
    in.open(path, std::ios::binary);
    if (!in) throw_input_error(path, "cannot open file", "check its permissions");
    const uint64_t file_size = std::filesystem::file_size(path, ec);
    if (ec) throw_input_error(path, "cannot read the file size: " + ec.message(), "check the file");
    return file_size;
}

// The 16-byte preamble (magic "PRTRACE1", u64 LE header length) and the JSON header text after it.
std::string read_header_text(std::ifstream& in, uint64_t file_size, const std::string& path) {
    char magic[8] = {};
    in.read(magic, static_cast<std::streamsize>(std::min<uint64_t>(8, file_size)));
    if (file_size < 8 || std::memcmp(magic, kMagic, 8) != 0)
        throw_input_error(
            path,
            "not a prophet trace file (bad magic: expected \"PRTRACE1\", found \"" +
                escaped_bytes(std::string_view(magic, static_cast<size_t>(std::min<uint64_t>(8, file_size)))) + "\")",
            "pass a trace written by prophet profile or write_trace_file; load_trace also accepts a "
            "generator .toml");
    if (file_size < kPreambleBytes)
        throw_input_error(path, "truncated: expected 8 bytes of header length after the magic, found " +
                                    std::to_string(file_size - 8),
                          kRewriteFix);
    unsigned char length_bytes[8];
    in.read(reinterpret_cast<char*>(length_bytes), 8);
    const uint64_t header_length = load_u64_le(length_bytes);
    if (header_length > file_size - kPreambleBytes)
        throw_input_error(path,
                          "header length " + std::to_string(header_length) + " exceeds the file size (" +
                              std::to_string(file_size - kPreambleBytes) + " bytes after the 16-byte preamble)",
                          kRewriteFix);
    if (header_length > kMaxHeaderBytes)
        throw_input_error(path, "header length " + std::to_string(header_length) + " exceeds the 100 MiB limit",
                          kRewriteFix);
    std::string header_text(header_length, '\0');
    in.read(header_text.data(), static_cast<std::streamsize>(header_length));
    if (!in) throw_input_error(path, "cannot read the header", "check the file");
    return header_text;
}

// The bytes after the preamble and header hold exactly num_counts, then num_transitions, int64 values.
void check_data_size(const TraceMeta& m, bool has_transitions, uint64_t num_counts, uint64_t num_transitions,
                     uint64_t file_size, uint64_t header_length, const std::string& path) {
    const uint64_t data_bytes = file_size - kPreambleBytes - header_length;
    if (data_bytes < num_counts * 8)
        throw_input_error(path, "truncated: expected " + std::to_string(num_counts * 8) + " bytes of counts (" +
                                    size_product_text(m, false) + " int64), found " + std::to_string(data_bytes),
                          kRewriteFix);
    if (data_bytes - num_counts * 8 < num_transitions * 8)
        throw_input_error(path, "truncated: expected " + std::to_string(num_transitions * 8) +
                                    " bytes of transitions (" + size_product_text(m, true) + " int64), found " +
                                    std::to_string(data_bytes - num_counts * 8),
                          kRewriteFix);
    const uint64_t expected_size = kPreambleBytes + header_length + (num_counts + num_transitions) * 8;
    if (file_size != expected_size)
        throw_input_error(path,
                          "trailing bytes: " + std::to_string(file_size - expected_size) +
                              " bytes after the data (expected file size " + std::to_string(expected_size) +
                              ", found " + std::to_string(file_size) + ")",
                          std::string("the file is corrupt or two files were concatenated") +
                              (has_transitions ? "" : " (has_transitions is false: was it meant to be true?)") +
                              "; write it again");
}

}  // namespace

Trace read_trace_file(const std::string& path) {
    std::ifstream in;
    const uint64_t file_size = open_trace_file(path, in);
    const std::string header_text = read_header_text(in, file_size, path);

    bool has_transitions = false;
    Trace trace;
    trace.meta = parse_header(header_text, path, has_transitions);
    const TraceMeta& m = trace.meta;
    check_array_sizes(m, has_transitions, path);

    const uint64_t num_counts = capped_product({m.num_iterations, m.num_layers, m.num_devices, m.num_experts});
    const uint64_t num_transitions =
        has_transitions ? capped_product({m.num_iterations, m.num_layers - 1, m.num_experts, m.num_experts}) : 0;
    check_data_size(m, has_transitions, num_counts, num_transitions, file_size, header_text.size(), path);

    trace.counts.resize(num_counts);
    in.read(reinterpret_cast<char*>(trace.counts.data()), static_cast<std::streamsize>(num_counts * 8));
    trace.transitions.resize(num_transitions);
    in.read(reinterpret_cast<char*>(trace.transitions.data()), static_cast<std::streamsize>(num_transitions * 8));
    if (!in) throw_input_error(path, "read error while reading the data", "check the file and the disk");
    swap_bytes_if_big_endian(trace.counts.data(), trace.counts.size());
    swap_bytes_if_big_endian(trace.transitions.data(), trace.transitions.size());
    validate_trace(trace, path);
    return trace;
}

Trace load_trace(const std::string& path, int threads) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
        throw_input_error(path, "no such file", "pass a binary trace (prophet profile) or a generator .toml "
                                                "(experiments/traces/)");
    if (std::filesystem::is_directory(path, ec)) throw_input_error(path, "is a directory, not a trace", "pass a file");
    constexpr std::string_view kCsvVersionLine = "# prophet trace csv v1";
    if (is_gzip_file(path)) {
        const uint64_t packed_bytes = std::filesystem::file_size(path, ec);
        if (ec) throw_input_error(path, "cannot read the file size: " + ec.message(), "check the file");
        const std::string text = gunzip_file(path, gunzip_limit_bytes(packed_bytes));
        if (!std::string_view(text).starts_with(kCsvVersionLine))
            throw_input_error(path, "gzip-compressed, but not a CSV trace (no '" + std::string(kCsvVersionLine) +
                                        "' first line)",
                              "compress CSV traces only; pass binary traces and generator TOML uncompressed");
        return read_trace_csv_gzip_text(text, path, packed_bytes);
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) throw_input_error(path, "cannot open file", "check its permissions");
    char magic[8] = {};
    in.read(magic, 8);
    if (in.gcount() == 8 && std::memcmp(magic, kMagic, 8) == 0) return read_trace_file(path);
    char head[kCsvVersionLine.size() + 2] = {};  // the line and "\n" or "\r\n"
    in.clear();
    in.seekg(0);
    in.read(head, sizeof(head));
    const std::string_view first(head, static_cast<size_t>(in.gcount()));
    if (first.starts_with(kCsvVersionLine)) {
        const std::string_view rest = first.substr(kCsvVersionLine.size());
        if (rest.empty() || rest.starts_with('\n') || rest == "\r" || rest.starts_with("\r\n"))
            return read_trace_csv(path);
    }

    const uint64_t file_size = std::filesystem::file_size(path, ec);
    if (!ec && file_size == 0)
        throw_input_error(path, "empty file", "pass a binary trace written by prophet profile or a generator .toml");
    if (!ec && file_size > kMaxGeneratorTomlBytes)
        throw_input_error(path, "not a prophet trace file (bad magic) and too large (" + std::to_string(file_size) +
                                    " bytes) for a generator TOML",
                          "pass a binary trace starting with PRTRACE1 or a generator .toml");
    in.clear();
    in.seekg(0);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find('\0') != std::string::npos)
        throw_input_error(path, "neither a prophet trace file (bad magic: no PRTRACE1) nor a generator TOML "
                                "(binary content)",
                          "pass a binary trace written by prophet profile or a generator .toml");
    return generate_trace_from_toml_string(text, path, threads);
}

}  // namespace prophet
