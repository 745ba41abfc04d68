// data_config.cpp: the data.* schema keys, reading them from a config, and DataConfig's validation.
#include <cmath>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "core/key_spec.h"
#include "model/data.h"
#include "model/data_internal.h"

namespace prophet {

using data_detail::kMaxVocab;
using data_detail::kTokenWidths;
using data_detail::quote;

namespace {

constexpr int64_t kMaxGeneratedVocab = 1 << 20;  // topic tables are O(V) per topic

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

}  // namespace prophet
