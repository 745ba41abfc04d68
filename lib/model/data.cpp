// data.cpp: the file token stream, the generated topic corpus, DataConfig validation and the data.* schema keys.
#include "model/data.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <new>
#include <sstream>

#include "core/config.h"
#include "core/enum_table.h"
#include "core/error.h"
#include "core/key_spec.h"
#include "core/rng.h"

namespace prophet {

namespace {

constexpr int64_t kMaxVocab = 2147483647;        // token ids are int32
constexpr int64_t kMaxGeneratedVocab = 1 << 20;  // topic tables are O(V) per topic
constexpr size_t kReadChunk = size_t{1} << 20;   // bytes per read() of a token file

std::string quote(const std::string& s) { return "\"" + s + "\""; }

std::string number(double x) {
    std::ostringstream out;
    out << x;
    return out.str();
}

std::string list_text(const std::vector<double>& values) { return value_to_toml(Value{values}); }
std::string list_text(const std::vector<int64_t>& values) { return value_to_toml(Value{values}); }

KeySpec list_key(const std::string& key, ValueType type, Value default_value, double min, const std::string& help) {
    KeySpec spec = bounded_key(key, type, min, std::nullopt, false, help);
    spec.default_value = std::move(default_value);
    return spec;
}

// data.file_format -> bytes per token
constexpr EnumName<int64_t> kTokenWidths[] = {{1, "bytes"}, {2, "uint16"}, {4, "int32"}};

int64_t token_width(const std::string& file_format) { return find_enum(kTokenWidths, file_format).value_or(1); }

// weights [n] -> normalised copy (sum > 0 checked by validate())
std::vector<double> normalised(std::vector<double> weights) {
    double sum = 0.0;
    for (double w : weights) sum += w;
    for (double& w : weights) w /= sum;
    return weights;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// DataConfig

namespace {

// data.source = "file": a path, a known file format, and a vocabulary that holds a byte.
void validate_file_source(const DataConfig& c) {
    if (c.path.empty())
        throw_config_error("data.path", "\"\"", "must name a file when data.source = \"file\"",
                           "set data.path = \"path/to/corpus.txt\" or use data.source = \"generated\"");
    if (!find_enum(kTokenWidths, c.file_format).has_value())
        throw_config_error("data.file_format", quote(c.file_format), "must be \"bytes\", \"uint16\" or \"int32\"",
                           "use \"bytes\" for any file read byte by byte (vocab 256), \"uint16\" or \"int32\" for "
                           "little-endian token files");
    if (c.file_format == "bytes" && c.vocab_size < 256)
        throw_config_error("data.vocab_size", std::to_string(c.vocab_size),
                           "must be >= 256 when data.file_format = \"bytes\" (one token per byte)",
                           "set data.vocab_size = 256");
}

// data.mixture (not empty): one finite, non-negative weight per topic, not all 0.
void validate_mixture(const DataConfig& c) {
    if (static_cast<int64_t>(c.mixture.size()) != c.num_topics)
        throw_config_error("data.mixture", list_text(c.mixture),
                           "must have data.num_topics = " + std::to_string(c.num_topics) + " weights (has " +
                               std::to_string(c.mixture.size()) + ")",
                           "give one weight per topic, or leave data.mixture empty for a uniform mixture");
    double sum = 0.0;
    for (double w : c.mixture) {
        if (!std::isfinite(w) || w < 0.0)
            throw_config_error("data.mixture", list_text(c.mixture), "every weight must be finite and >= 0",
                               "use non-negative weights, e.g. [0.4, 0.3, 0.2, 0.1]");
        sum += w;
    }
    if (!(sum > 0.0))
        throw_config_error("data.mixture", list_text(c.mixture), "weights must not all be 0",
                           "give at least one topic a positive weight");
}

// data.shift_steps strictly increasing, and data.shift_mixtures (when given) one valid mixture per shift.
void validate_shifts(const DataConfig& c) {
    for (size_t k = 0; k < c.shift_steps.size(); ++k) {
        if (c.shift_steps[k] < 1 || (k > 0 && c.shift_steps[k] <= c.shift_steps[k - 1]))
            throw_config_error("data.shift_steps", list_text(c.shift_steps), "must be strictly increasing steps >= 1",
                               "list the steps in increasing order, e.g. [1000, 2000]");
    }
    if (!c.shift_mixtures.empty()) {
        const size_t expected = c.shift_steps.size() * static_cast<size_t>(c.num_topics);
        if (c.shift_mixtures.size() != expected)
            throw_config_error(
                "data.shift_mixtures", list_text(c.shift_mixtures),
                "must hold len(data.shift_steps) x data.num_topics = " + std::to_string(c.shift_steps.size()) + " x " +
                    std::to_string(c.num_topics) + " = " + std::to_string(expected) + " weights (has " +
                    std::to_string(c.shift_mixtures.size()) + ")",
                "give one mixture per shift step, concatenated, or leave it empty to rotate the "
                "mixture by one topic at each shift");
        for (size_t k = 0; k < c.shift_steps.size(); ++k) {
            double sum = 0.0;
            for (int64_t t = 0; t < c.num_topics; ++t) {
                const double w = c.shift_mixtures[k * static_cast<size_t>(c.num_topics) + static_cast<size_t>(t)];
                if (!std::isfinite(w) || w < 0.0)
                    throw_config_error("data.shift_mixtures", list_text(c.shift_mixtures),
                                       "every weight must be finite and >= 0", "use non-negative weights");
                sum += w;
            }
            if (!(sum > 0.0))
                throw_config_error("data.shift_mixtures", list_text(c.shift_mixtures),
                                   "the mixture of shift " + std::to_string(k) + " (step " +
                                       std::to_string(c.shift_steps[k]) + ") is all zeros",
                                   "give at least one topic a positive weight in every shift");
        }
    }
}

}  // namespace

void DataConfig::validate() const {
    if (source != "generated" && source != "file")
        throw_config_error("data.source", quote(source), "must be \"generated\" or \"file\"",
                           "set data.source = \"generated\" (built-in topic corpus) or \"file\" with data.path");
    if (vocab_size < 2 || vocab_size > kMaxVocab)
        throw_config_error("data.vocab_size", std::to_string(vocab_size), "must be in [2, 2147483647]",
                           "set data.vocab_size = 256 for byte-level data");
    if (source == "file") {
        validate_file_source(*this);
        return;
    }
    if (vocab_size > kMaxGeneratedVocab)
        throw_config_error("data.vocab_size", std::to_string(vocab_size), "must be <= 1048576 for the generated corpus",
                           "set data.vocab_size = 256");
    if (num_topics < 1 || num_topics > vocab_size)
        throw_config_error("data.num_topics", std::to_string(num_topics),
                           "must be in [1, data.vocab_size = " + std::to_string(vocab_size) + "]",
                           "set data.num_topics = 4 (or at most the vocabulary size)");
    if (doc_len < 1)
        throw_config_error("data.doc_len", std::to_string(doc_len), "must be >= 1 (mean document length in tokens)",
                           "set data.doc_len = 256");
    if (!mixture.empty()) validate_mixture(*this);
    if (!std::isfinite(drift_rate) || drift_rate < 0.0)
        throw_config_error("data.drift_rate", number(drift_rate), "must be finite and >= 0 (0 = no drift)",
                           "set data.drift_rate = 0.01 for a slow drift, or 0");
    validate_shifts(*this);
    if (dominant_topic < -1 || dominant_topic >= num_topics)
        throw_config_error("data.dominant_topic", std::to_string(dominant_topic),
                           "must be -1 (none) or a topic in [0, " + std::to_string(num_topics - 1) + "]",
                           "set data.dominant_topic = 0, or -1 for no dominant topic");
    if (!std::isfinite(dominance) || dominance < 0.0 || dominance > 1.0)
        throw_config_error("data.dominance", number(dominance), "must be in [0, 1] (fraction of documents)",
                           "set data.dominance = 0.8 with data.dominant_topic = 0");
    if (dominant_topic < 0 && dominance != 0.0)
        throw_config_error("data.dominance", number(dominance), "needs data.dominant_topic >= 0",
                           "set data.dominant_topic = 0 (the topic that gets this share), or data.dominance = 0");
}

void add_data_keys(Schema& schema) {
    schema.add_string("data.source", "generated", {"generated", "file"},
                      "training data: the built-in generated topic corpus, or a file (data.path)");
    schema.add_string("data.path", "", {}, "file source: file read as a token stream (bytes by default)");
    schema.add_string("data.file_format", "bytes", {"bytes", "uint16", "int32"},
                      "file source: one token per byte, or little-endian uint16 / int32 tokens");
    schema.add_int("data.seed", 1234, 0, std::nullopt, "generated corpus: seed of topics, drift and sequences");
    schema.add_int("data.vocab_size", 256, 2, static_cast<double>(kMaxVocab), "token ids are in [0, vocab_size)");
    schema.add_int("data.num_topics", 4, 1, std::nullopt, "generated corpus: number of topics");
    schema.add_int("data.doc_len", 256, 1, std::nullopt, "generated corpus: mean document length (tokens)");
    schema.add(list_key("data.mixture", ValueType::kFloatList, std::vector<double>{}, 0.0,
                        "generated corpus: topic weights, one per topic (empty = uniform)"));
    schema.add_float("data.drift_rate", 0.0, 0.0, std::nullopt,
                     "generated corpus: sd of each topic's log-weight random walk per step (0 = fixed)");
    schema.add(list_key("data.shift_steps", ValueType::kIntList, std::vector<int64_t>{}, 1.0,
                        "generated corpus: steps at which the mixture changes abruptly"));
    schema.add(list_key("data.shift_mixtures", ValueType::kFloatList, std::vector<double>{}, 0.0,
                        "generated corpus: mixture from each shift step on, concatenated (empty = rotate by one "
                        "topic per shift)"));
    schema.add_int("data.dominant_topic", -1, -1, std::nullopt,
                   "generated corpus: topic that gets data.dominance of the documents (-1 = none)");
    schema.add_float("data.dominance", 0.0, 0.0, 1.0, "generated corpus: share of documents from dominant_topic");
}

DataConfig data_config_from(const Config& config) {
    DataConfig data;
    data.source = config.get_string("data.source");
    data.path = config.get_string("data.path");
    data.file_format = config.get_string("data.file_format");
    data.seed = static_cast<uint64_t>(config.get_int("data.seed"));
    data.vocab_size = config.get_int("data.vocab_size");
    data.num_topics = config.get_int("data.num_topics");
    data.doc_len = config.get_int("data.doc_len");
    data.mixture = config.get_float_list("data.mixture");
    data.drift_rate = config.get_float("data.drift_rate");
    data.shift_steps = config.get_int_list("data.shift_steps");
    data.shift_mixtures = config.get_float_list("data.shift_mixtures");
    data.dominant_topic = config.get_int("data.dominant_topic");
    data.dominance = config.get_float("data.dominance");
    data.validate();
    return data;
}

std::pair<int64_t, int64_t> rank_sequences(int64_t batch_size, int64_t rank, int64_t num_ranks) {
    PROPHET_ASSERT(batch_size >= 0 && num_ranks >= 1 && rank >= 0 && rank < num_ranks);
    return {rank * batch_size / num_ranks, (rank + 1) * batch_size / num_ranks};
}

// ---------------------------------------------------------------------------------------------------------
// DataSource

DataSource::DataSource(int64_t seq_len, int64_t batch_size, int64_t vocab_size)
    : seq_len_(seq_len), batch_size_(batch_size), vocab_size_(vocab_size) {
    PROPHET_ASSERT(seq_len >= 1 && batch_size >= 1 && vocab_size >= 2 && vocab_size <= kMaxVocab);
}

void DataSource::batch(int64_t step, int64_t seq_begin, int64_t seq_end, int32_t* inputs, int32_t* targets,
                       int32_t* topics) const {
    PROPHET_ASSERT_MSG(step >= 0 && 0 <= seq_begin && seq_begin <= seq_end && seq_end <= batch_size_,
                       "batch(step " + std::to_string(step) + ", sequences [" + std::to_string(seq_begin) + ", " +
                           std::to_string(seq_end) + ")) outside the global batch of " + std::to_string(batch_size_));
    const int64_t n = seq_end - seq_begin;
    if (n == 0) return;
    PROPHET_ASSERT(inputs != nullptr && targets != nullptr);
    const int64_t T = seq_len_;
    std::vector<int32_t> run_tokens(static_cast<size_t>(n * (T + 1)));  // [n, T+1]
    std::vector<int32_t> run_topics(static_cast<size_t>(n * (T + 1)));  // [n, T+1]
    sequences(step, seq_begin, seq_end, run_tokens.data(), run_topics.data());
    for (int64_t s = 0; s < n; ++s) {
        const int32_t* tokens = run_tokens.data() + s * (T + 1);
        std::copy(tokens, tokens + T, inputs + s * T);
        std::copy(tokens + 1, tokens + T + 1, targets + s * T);
        if (topics != nullptr) {
            const int32_t* run = run_topics.data() + s * (T + 1);
            std::copy(run, run + T, topics + s * T);
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// TokenStreamSource

namespace {

// Opens the token file `path` (data.path) for reading and sets `size` to its bytes; `need` and `fix` finish the
// messages. The caller closes the descriptor.
int open_token_file(const std::string& path, const std::string& need, const std::string& fix, int64_t& size) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) {
        const int err = errno;
        throw_input_error(
            path, std::string(err == ENOENT ? "file not found" : std::strerror(err)) + " (data.path); " + need, fix);
    }
    if (S_ISDIR(info.st_mode)) throw_input_error(path, "is a directory, not a file (data.path); " + need, fix);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw_input_error(path, std::string("cannot open: ") + std::strerror(errno) + "; " + need, fix);
    size = static_cast<int64_t>(info.st_size);
    return fd;
}

// Reads `size` bytes of `width`-byte little-endian tokens from fd in kReadChunk pieces, checks each is in
// [0, vocab_size) and hands it on as store(position, token).
template <typename Store>
void read_token_stream(int fd, const std::string& path, int64_t size, int64_t width, int64_t vocab_size, Store store) {
    std::vector<unsigned char> chunk(kReadChunk);  // [kReadChunk] bytes, a whole number of tokens
    int64_t token_idx = 0;
    int64_t bytes_left = size;
    while (bytes_left > 0) {
        const size_t want = static_cast<size_t>(std::min<int64_t>(bytes_left, static_cast<int64_t>(kReadChunk)));
        size_t got = 0;
        while (got < want) {
            const ssize_t r = ::read(fd, chunk.data() + got, want - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0)
                throw_input_error(path, r == 0 ? "file shrank while being read" : std::strerror(errno),
                                  "make sure nothing else writes data.path during training");
            got += static_cast<size_t>(r);
        }
        for (size_t b = 0; b < want; b += static_cast<size_t>(width), ++token_idx) {
            const unsigned char* p = chunk.data() + b;
            int64_t value = p[0];
            if (width >= 2) value |= static_cast<int64_t>(p[1]) << 8;
            if (width == 4)
                value = static_cast<int32_t>(static_cast<uint32_t>(value) | (static_cast<uint32_t>(p[2]) << 16) |
                                             (static_cast<uint32_t>(p[3]) << 24));
            if (value < 0 || value >= vocab_size)
                throw_input_error(path,
                                  "token " + std::to_string(value) + " at position " + std::to_string(token_idx) +
                                      " is outside [0, data.vocab_size = " + std::to_string(vocab_size) + ")",
                                  "raise data.vocab_size above the largest token id, or check data.file_format");
            store(token_idx, value);
        }
        bytes_left -= static_cast<int64_t>(want);
    }
}

}  // namespace

TokenStreamSource::TokenStreamSource(const std::string& path, const std::string& file_format, int64_t seq_len,
                                     int64_t batch_size, int64_t vocab_size)
    : DataSource(seq_len, batch_size, vocab_size), wide_(vocab_size > 65536), origin_(path) {
    const int64_t width = token_width(file_format);
    const std::string need = "a training stream needs at least T+2 = " + std::to_string(seq_len + 2) +
                             " tokens (sequence length T = " + std::to_string(seq_len) + ")";
    const std::string fix = "set data.path to a file of at least " + std::to_string((seq_len + 2) * width) +
                            " bytes, or use data.source = \"generated\"";
    int64_t size = 0;
    const int fd = open_token_file(path, need, fix, size);
    struct FdCloser {
        int fd;
        ~FdCloser() { ::close(fd); }
    } closer{fd};
    if (size == 0) throw_input_error(path, "file is empty (data.path); " + need, fix);
    if (size % width != 0)
        throw_input_error(path,
                          "size " + std::to_string(size) + " bytes is not a whole number of " + std::to_string(width) +
                              "-byte tokens (data.file_format = " + quote(file_format) + ")",
                          "check data.file_format, or use \"bytes\"");
    num_tokens_ = size / width;
    if (num_tokens_ < seq_len + 2)
        throw_input_error(path, "holds " + std::to_string(num_tokens_) + " tokens; " + need, fix);
    try {
        if (wide_)
            tokens32_.resize(static_cast<size_t>(num_tokens_));
        else
            tokens16_.resize(static_cast<size_t>(num_tokens_));
    } catch (const std::bad_alloc&) {
        throw Error(kExitResource, "resource error: " + path + ": " + std::to_string(num_tokens_) +
                                       " tokens do not fit in memory; fix: use a smaller data.path file");
    }
    read_token_stream(fd, path, size, width, vocab_size, [&](int64_t position, int64_t value) {
        if (wide_)
            tokens32_[static_cast<size_t>(position)] = static_cast<int32_t>(value);
        else
            tokens16_[static_cast<size_t>(position)] = static_cast<uint16_t>(value);
    });
}

TokenStreamSource::TokenStreamSource(std::vector<int32_t> tokens, int64_t seq_len, int64_t batch_size,
                                     int64_t vocab_size)
    : DataSource(seq_len, batch_size, vocab_size), wide_(vocab_size > 65536), origin_("memory") {
    num_tokens_ = static_cast<int64_t>(tokens.size());
    if (num_tokens_ < seq_len + 2)
        throw_input_error("memory",
                          "holds " + std::to_string(num_tokens_) +
                              " tokens; a training stream needs at least T+2 = " + std::to_string(seq_len + 2),
                          "pass a longer token vector");
    for (int64_t i = 0; i < num_tokens_; ++i) {
        if (tokens[static_cast<size_t>(i)] < 0 || tokens[static_cast<size_t>(i)] >= vocab_size)
            throw_input_error("memory",
                              "token " + std::to_string(tokens[static_cast<size_t>(i)]) + " at position " +
                                  std::to_string(i) + " is outside [0, " + std::to_string(vocab_size) + ")",
                              "raise vocab_size above the largest token id");
    }
    if (wide_) {
        tokens32_ = std::move(tokens);
    } else {
        tokens16_.assign(tokens.begin(), tokens.end());
    }
}

int64_t TokenStreamSource::offset(int64_t step, int64_t seq_idx) const {
    PROPHET_ASSERT(step >= 0 && seq_idx >= 0);
    using u128 = unsigned __int128;
    const u128 modulus = static_cast<u128>(num_tokens_ - seq_len() - 1);
    const u128 position = (static_cast<u128>(step) * static_cast<u128>(batch_size()) + static_cast<u128>(seq_idx)) *
                          static_cast<u128>(seq_len());
    return static_cast<int64_t>(position % modulus);
}

std::string TokenStreamSource::describe() const {
    return "file " + origin_ + " (" + std::to_string(num_tokens_) + " tokens, vocab " + std::to_string(vocab_size()) +
           ")";
}

void TokenStreamSource::sequences(int64_t step, int64_t seq_begin, int64_t seq_end, int32_t* tokens,
                                  int32_t* topics) const {
    const int64_t T = seq_len();
    for (int64_t i = seq_begin; i < seq_end; ++i) {
        const int64_t start = offset(step, i);
        int32_t* run = tokens + (i - seq_begin) * (T + 1);
        for (int64_t k = 0; k <= T; ++k) run[k] = token(start + k);
        std::fill(topics + (i - seq_begin) * (T + 1), topics + (i - seq_begin + 1) * (T + 1), -1);
    }
}

// ---------------------------------------------------------------------------------------------------------
// GeneratedCorpus

uint64_t GeneratedCorpus::mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t GeneratedCorpus::sequence_seed(uint64_t seed, uint64_t step, uint64_t seq_idx) {
    return mix64(mix64(mix64(seed ^ kSequenceTag) ^ step) ^ seq_idx);
}

namespace {

// [K] cumulative successor probabilities proportional to 1/(k+1)^2, normalised (the last exactly 1).
std::vector<double> peaked_cumulative(int64_t K) {
    std::vector<double> peaked(static_cast<size_t>(K));
    double total = 0.0;
    for (int64_t k = 0; k < K; ++k) total += 1.0 / static_cast<double>((k + 1) * (k + 1));
    double running = 0.0;
    for (int64_t k = 0; k < K; ++k) {
        running += 1.0 / static_cast<double>((k + 1) * (k + 1));
        peaked[static_cast<size_t>(k)] = k == K - 1 ? 1.0 : running / total;
    }
    return peaked;
}

// [num_topics] the base mixture: data.mixture (uniform when empty), normalised, then data.dominant_topic given
// data.dominance with the others scaled to share the rest.
std::vector<double> base_mixture(const DataConfig& config) {
    std::vector<double> base =
        config.mixture.empty() ? std::vector<double>(static_cast<size_t>(config.num_topics), 1.0) : config.mixture;
    base = normalised(base);
    if (config.dominant_topic >= 0) {
        const size_t d = static_cast<size_t>(config.dominant_topic);
        double others = 0.0;
        for (size_t t = 0; t < base.size(); ++t)
            if (t != d) others += base[t];
        for (size_t t = 0; t < base.size(); ++t)
            base[t] = t == d ? config.dominance : (others > 0.0 ? (1.0 - config.dominance) * base[t] / others : 0.0);
        if (!(others > 0.0)) base[d] = 1.0;
    }
    return base;
}

// [shift_steps + 1][num_topics] the mixture segments: the base, then one per shift step (data.shift_mixtures, or
// the base rotated by k + 1 topics).
std::vector<std::vector<double>> mixture_segments(const DataConfig& config) {
    const size_t n = static_cast<size_t>(config.num_topics);
    const std::vector<double> base = base_mixture(config);
    std::vector<std::vector<double>> segments{base};
    for (size_t k = 0; k < config.shift_steps.size(); ++k) {
        std::vector<double> mixture(n);
        if (config.shift_mixtures.empty()) {
            const size_t rotation = (k + 1) % n;
            for (size_t t = 0; t < n; ++t) mixture[(t + rotation) % n] = base[t];
        } else {
            const auto row = config.shift_mixtures.begin() + static_cast<std::ptrdiff_t>(k * n);
            mixture = normalised(std::vector<double>(row, row + static_cast<std::ptrdiff_t>(n)));
        }
        segments.push_back(mixture);
    }
    return segments;
}

}  // namespace

// Topics: a window of S tokens of one random permutation of the vocabulary, consecutive topics overlapping by
// stride/2 tokens; each state has K successors with probabilities proportional to 1/(k+1)^2.
std::vector<GeneratedCorpus::Topic> GeneratedCorpus::make_topics(uint64_t seed, int64_t V, int64_t n) {
    Rng rng(mix64(seed ^ kTopicsTag));
    std::vector<int32_t> permutation(static_cast<size_t>(V));  // [V]
    for (int64_t v = 0; v < V; ++v) permutation[static_cast<size_t>(v)] = static_cast<int32_t>(v);
    rng.shuffle(permutation.data(), static_cast<uint64_t>(V));
    const int64_t stride = (V + n - 1) / n;
    const int64_t S = std::min(V, stride + stride / 2);
    const int64_t K = std::min(S, kSuccessors);
    const std::vector<double> peaked = peaked_cumulative(K);  // [K]
    std::vector<int32_t> states(static_cast<size_t>(S));      // [S] scratch permutation of state indices
    for (int64_t j = 0; j < S; ++j) states[static_cast<size_t>(j)] = static_cast<int32_t>(j);
    std::vector<Topic> topics(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
        Topic& topic = topics[static_cast<size_t>(t)];
        topic.vocab.resize(static_cast<size_t>(S));
        for (int64_t j = 0; j < S; ++j)
            topic.vocab[static_cast<size_t>(j)] = permutation[static_cast<size_t>((t * stride + j) % V)];
        topic.successors.resize(static_cast<size_t>(S * K));
        topic.cumulative.resize(static_cast<size_t>(S * K));
        for (int64_t j = 0; j < S; ++j) {
            for (int64_t k = 0; k < K; ++k) {  // partial Fisher-Yates: K distinct successors
                const int64_t pick = k + static_cast<int64_t>(rng.below(static_cast<uint64_t>(S - k)));
                std::swap(states[static_cast<size_t>(k)], states[static_cast<size_t>(pick)]);
                topic.successors[static_cast<size_t>(j * K + k)] = states[static_cast<size_t>(k)];
                topic.cumulative[static_cast<size_t>(j * K + k)] = peaked[static_cast<size_t>(k)];
            }
        }
    }
    return topics;
}

GeneratedCorpus::GeneratedCorpus(const DataConfig& config, int64_t seq_len, int64_t batch_size)
    : DataSource(seq_len, batch_size, config.vocab_size), seed_(config.seed), num_topics_(config.num_topics),
      doc_len_(config.doc_len), drift_rate_(config.drift_rate), shift_steps_(config.shift_steps) {
    config.validate();
    PROPHET_ASSERT(config.source == "generated");
    topics_ = make_topics(seed_, config.vocab_size, num_topics_);
    segments_ = mixture_segments(config);
    drift_anchors_.push_back(std::vector<double>(static_cast<size_t>(num_topics_), 0.0));
    last_drift_step_ = 0;
    last_drift_ = drift_anchors_[0];
}

std::string GeneratedCorpus::describe() const {
    std::ostringstream out;
    out << "generated corpus (seed " << seed_ << ", vocab " << vocab_size() << ", " << num_topics_ << " topics of "
        << topics_[0].vocab.size() << " tokens, doc_len " << doc_len_;
    if (drift_rate_ > 0.0) out << ", drift " << drift_rate_ << "/step";
    if (!shift_steps_.empty()) out << ", " << shift_steps_.size() << " shifts";
    out << ")";
    return out.str();
}

int64_t GeneratedCorpus::segment_of(int64_t step) const {
    return std::upper_bound(shift_steps_.begin(), shift_steps_.end(), step) - shift_steps_.begin();
}

std::vector<double> GeneratedCorpus::drift_at(int64_t step) const {
    // z(0) = 0; z(s) = z(s-1) + drift_rate * n(s), n(s) = num_topics normal() draws of
    // Rng(mix64(mix64(seed ^ kDriftTag) ^ s)). Every path below evaluates this same recursion.
    const uint64_t drift_seed = mix64(seed_ ^ kDriftTag);
    auto advance = [&](std::vector<double>& z, int64_t from, int64_t to) {  // z(from) -> z(to)
        for (int64_t s = from + 1; s <= to; ++s) {
            Rng rng(mix64(drift_seed ^ static_cast<uint64_t>(s)));
            for (double& value : z) value += drift_rate_ * rng.normal();
        }
    };
    std::lock_guard<std::mutex> lock(drift_mutex_);
    const int64_t anchor = step / kDriftAnchorEvery;
    if (step >= last_drift_step_ && step / kDriftAnchorEvery == last_drift_step_ / kDriftAnchorEvery) {
        advance(last_drift_, last_drift_step_, step);
        last_drift_step_ = step;
        return last_drift_;
    }
    while (static_cast<int64_t>(drift_anchors_.size()) <= anchor) {
        std::vector<double> z = drift_anchors_.back();
        const int64_t from = (static_cast<int64_t>(drift_anchors_.size()) - 1) * kDriftAnchorEvery;
        advance(z, from, from + kDriftAnchorEvery);
        drift_anchors_.push_back(std::move(z));
    }
    std::vector<double> z = drift_anchors_[static_cast<size_t>(anchor)];
    advance(z, anchor * kDriftAnchorEvery, step);
    last_drift_step_ = step;
    last_drift_ = z;
    return z;
}

std::vector<double> GeneratedCorpus::mixture_at(int64_t step) const {
    PROPHET_ASSERT(step >= 0);
    const std::vector<double>& segment = segments_[static_cast<size_t>(segment_of(step))];
    if (drift_rate_ == 0.0) return segment;
    const std::vector<double> z = drift_at(step);
    double top = -HUGE_VAL;
    for (size_t t = 0; t < segment.size(); ++t)
        if (segment[t] > 0.0) top = std::max(top, z[t]);
    std::vector<double> mixture(segment.size());
    for (size_t t = 0; t < segment.size(); ++t) mixture[t] = segment[t] > 0.0 ? segment[t] * std::exp(z[t] - top) : 0.0;
    return normalised(mixture);
}

void GeneratedCorpus::sequences(int64_t step, int64_t seq_begin, int64_t seq_end, int32_t* tokens,
                                int32_t* topics) const {
    const int64_t T = seq_len();
    const std::vector<double> mixture = mixture_at(step);  // [num_topics]
    std::vector<double> cumulative(mixture.size());        // [num_topics]
    double running = 0.0;
    int64_t last_positive = 0;
    for (size_t t = 0; t < mixture.size(); ++t) {
        running += mixture[t];
        cumulative[t] = running;
        if (mixture[t] > 0.0) last_positive = static_cast<int64_t>(t);
    }
    const int64_t half = doc_len_ / 2;
    for (int64_t i = seq_begin; i < seq_end; ++i) {
        Rng rng(sequence_seed(seed_, static_cast<uint64_t>(step), static_cast<uint64_t>(i)));
        int32_t* run_tokens = tokens + (i - seq_begin) * (T + 1);  // [T+1]
        int32_t* run_topics = topics + (i - seq_begin) * (T + 1);  // [T+1]
        int64_t pos = 0;
        bool first = true;
        while (pos < T + 1) {
            const double u = rng.uniform();
            int64_t topic_idx = last_positive;
            for (size_t t = 0; t < mixture.size(); ++t) {
                if (mixture[t] > 0.0 && u < cumulative[t]) {
                    topic_idx = static_cast<int64_t>(t);
                    break;
                }
            }
            int64_t length = doc_len_ - half + static_cast<int64_t>(rng.below(static_cast<uint64_t>(2 * half + 1)));
            if (first) length -= static_cast<int64_t>(rng.below(static_cast<uint64_t>(length)));
            first = false;
            const Topic& topic = topics_[static_cast<size_t>(topic_idx)];
            const int64_t S = static_cast<int64_t>(topic.vocab.size());
            const int64_t K = static_cast<int64_t>(topic.successors.size()) / S;
            int64_t state = static_cast<int64_t>(rng.below(static_cast<uint64_t>(S)));
            const int64_t end = std::min(T + 1, pos + length);
            while (true) {
                run_tokens[pos] = topic.vocab[static_cast<size_t>(state)];
                run_topics[pos] = static_cast<int32_t>(topic_idx);
                if (++pos == end) break;
                const double jump = rng.uniform();
                if (jump < kSmoothing) {
                    state = static_cast<int64_t>(rng.below(static_cast<uint64_t>(S)));
                } else {
                    const double v = (jump - kSmoothing) / (1.0 - kSmoothing);
                    const double* row = topic.cumulative.data() + state * K;
                    int64_t k = 0;
                    while (k < K - 1 && !(v < row[k])) ++k;
                    state = topic.successors[static_cast<size_t>(state * K + k)];
                }
            }
        }
    }
}

std::unique_ptr<DataSource> make_data_source(const DataConfig& config, int64_t seq_len, int64_t batch_size) {
    config.validate();
    if (config.source == "file")
        return std::make_unique<TokenStreamSource>(config.path, config.file_format, seq_len, batch_size,
                                                   config.vocab_size);
    return std::make_unique<GeneratedCorpus>(config, seq_len, batch_size);
}

}  // namespace prophet
