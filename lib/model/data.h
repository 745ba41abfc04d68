// data.h: training data for MoE-GPT: a token stream read from a file, or a seeded generated corpus of topics.
//
// Both sources answer one question: "which T input tokens and T target tokens make up sequence i of the global
// batch at training step s?" The answer is a pure function of (config, s, i), so a run gives the same batches on
// 1 or D ranks and after a resume. Rank r of D takes sequences [r*B/D, (r+1)*B/D) (rank_sequences below).
//
// File source (ARCHITECTURE.md, "The model"): the file is a stream of N tokens; sequence i of step s starts at
// offset ((s*B + i)*T) mod (N - T - 1); inputs are the T tokens from there, targets the next T (shifted by one).
//
// Generated source: num_topics topics, each a first-order Markov chain over its own sub-vocabulary with a sparse,
// peaked transition matrix. Sequences are made of documents (length about doc_len), each drawn from one topic
// according to a mixture over topics that may be fixed, drift (random walk per step) or shift at listed steps.
// The exact generation rule is in docs/data-and-checkpoints.md and in GeneratedCorpus below.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace prophet {

class Config;
class Schema;

struct DataConfig {
    std::string source = "generated";    // "generated" | "file"
    std::string path;                    // file source: the file to read
    std::string file_format = "bytes";   // file source: "bytes" (1 token per byte) | "uint16" | "int32" (little-endian)
    uint64_t seed = 1234;                // generated source: topics, mixture drift and every sequence derive from it
    int64_t vocab_size = 256;            // V; token ids are in [0, V)
    int64_t num_topics = 4;              // generated source: number of topics
    int64_t doc_len = 256;               // generated source: mean document length in tokens
    std::vector<double> mixture;         // [num_topics] topic weights (normalised); empty = uniform
    double drift_rate = 0.0;             // sd of the per-step random-walk change of each topic's log-weight; 0 = off
    std::vector<int64_t> shift_steps;    // strictly increasing steps > 0 at which the mixture changes abruptly
    std::vector<double> shift_mixtures;  // [shift_steps.size(), num_topics] mixture from each shift on;
                                         // empty = rotate the base mixture by one more topic at each shift
    int64_t dominant_topic = -1;         // -1 = none; else this topic gets `dominance` of the documents
    double dominance = 0.0;              // in [0, 1]; the other topics share 1 - dominance by their base weights

    // Throws prophet::Error (exit 3) with "config error: data.<key> = <value>: <rule>; fix: <fix>".
    void validate() const;
};

// Registers the data.* keys (types, defaults, bounds, help) on a command's schema.
void add_data_keys(Schema& schema);
// Reads the data.* keys of a resolved config and validates them.
DataConfig data_config_from(const Config& config);

// Sequences [first, last) of a global batch of `batch_size` that rank `rank` of `num_ranks` takes:
// [rank*B/D, (rank+1)*B/D).
std::pair<int64_t, int64_t> rank_sequences(int64_t batch_size, int64_t rank, int64_t num_ranks);

class DataSource {
  public:
    DataSource(int64_t seq_len, int64_t batch_size, int64_t vocab_size);
    virtual ~DataSource() = default;
    DataSource(const DataSource&) = delete;
    DataSource& operator=(const DataSource&) = delete;

    int64_t seq_len() const { return seq_len_; }        // T
    int64_t batch_size() const { return batch_size_; }  // B, the global batch
    int64_t vocab_size() const { return vocab_size_; }  // V
    virtual int64_t num_topics() const { return 0; }    // 0 when the source has no topics
    virtual std::string describe() const = 0;           // one line for the parameter table

    // Sequences [seq_begin, seq_end) of the global batch at `step` (0 <= seq_begin <= seq_end <= B, step >= 0):
    // inputs  [seq_end - seq_begin, T] token ids,
    // targets [seq_end - seq_begin, T] the token after each input token,
    // topics  [seq_end - seq_begin, T] optional: topic of each input token's document, -1 for the file source.
    void batch(int64_t step, int64_t seq_begin, int64_t seq_end, int32_t* inputs, int32_t* targets,
               int32_t* topics = nullptr) const;

  protected:
    // sequences [seq_begin, seq_end) of `step` as runs of T+1 tokens (inputs are tokens[0..T), targets
    // tokens[1..T]): tokens [n, T+1]; topics [n, T+1]
    virtual void sequences(int64_t step, int64_t seq_begin, int64_t seq_end, int32_t* tokens,
                           int32_t* topics) const = 0;

  private:
    int64_t seq_len_;
    int64_t batch_size_;
    int64_t vocab_size_;
};

// A token stream held in memory: a file (bytes, uint16 or int32 little-endian) or a vector (tests).
class TokenStreamSource : public DataSource {
  public:
    // Reads the file; a missing, unreadable, empty or too short (< T+2 tokens) file, a size that is not a whole
    // number of tokens or a token >= V throws prophet::Error exit 3 naming the path (exit 4 if it does not fit in
    // memory).
    TokenStreamSource(const std::string& path, const std::string& file_format, int64_t seq_len, int64_t batch_size,
                      int64_t vocab_size);
    // tokens [N], every one in [0, V); N >= T+2
    TokenStreamSource(std::vector<int32_t> tokens, int64_t seq_len, int64_t batch_size, int64_t vocab_size);

    int64_t num_tokens() const { return num_tokens_; }  // N
    int32_t token(int64_t pos) const { return wide_ ? tokens32_[pos] : tokens16_[pos]; }
    // ((step*B + seq_idx)*T) mod (N - T - 1), exact for any step >= 0
    int64_t offset(int64_t step, int64_t seq_idx) const;
    std::string describe() const override;

  protected:
    void sequences(int64_t step, int64_t seq_begin, int64_t seq_end, int32_t* tokens, int32_t* topics) const override;

  private:
    bool wide_ = false;               // tokens32_ holds the stream (V > 65536), else tokens16_
    std::vector<uint16_t> tokens16_;  // [N] when !wide_
    std::vector<int32_t> tokens32_;   // [N] when wide_
    int64_t num_tokens_ = 0;          // N
    std::string origin_;              // the path, or "memory"
};

// The seeded generated corpus. Determinism rule (also in docs/data-and-checkpoints.md):
//   mix64(x)                 = splitmix64 finaliser of x + 0x9E3779B97F4A7C15
//   topic tables             from Rng(mix64(seed ^ kTopicsTag))
//   drift noise of step s    from Rng(mix64(mix64(seed ^ kDriftTag) ^ s)), num_topics normal() draws
//   sequence i of step s     from Rng(sequence_seed(seed, s, i)),
//                            sequence_seed = mix64(mix64(mix64(seed ^ kSequenceTag) ^ s) ^ i)
// with the topic of each document drawn from mixture_at(s). Nothing depends on the rank count or on earlier calls.
class GeneratedCorpus : public DataSource {
  public:
    static constexpr uint64_t kTopicsTag = 0x746f70696373ull;        // "topics"
    static constexpr uint64_t kDriftTag = 0x6472696674ull;           // "drift"
    static constexpr uint64_t kSequenceTag = 0x73657175656e6365ull;  // "sequence"
    static constexpr int64_t kSuccessors = 8;           // non-zero entries per transition row (peaked part)
    static constexpr double kSmoothing = 0.05;          // probability of a uniform jump inside the sub-vocabulary
    static constexpr int64_t kDriftAnchorEvery = 1024;  // cached random-walk states, for random access by step

    // `config` must be valid (validate()) with source "generated".
    GeneratedCorpus(const DataConfig& config, int64_t seq_len, int64_t batch_size);

    static uint64_t mix64(uint64_t x);
    static uint64_t sequence_seed(uint64_t seed, uint64_t step, uint64_t seq_idx);

    int64_t num_topics() const override { return num_topics_; }
    std::string describe() const override;
    // mixture over topics used for the documents of `step`: [num_topics], sums to 1
    std::vector<double> mixture_at(int64_t step) const;
    // mixture of segment k (before drift): k = number of shift steps <= step
    const std::vector<double>& segment_mixture(int64_t segment) const { return segments_[segment]; }
    // the sub-vocabulary of topic t: [S] token ids
    const std::vector<int32_t>& topic_vocabulary(int64_t topic) const { return topics_[topic].vocab; }

  protected:
    void sequences(int64_t step, int64_t seq_begin, int64_t seq_end, int32_t* tokens, int32_t* topics) const override;

  private:
    struct Topic {
        std::vector<int32_t> vocab;       // [S] token id of each state
        std::vector<int32_t> successors;  // [S, K] state index of each successor
        std::vector<double> cumulative;   // [S, K] cumulative successor probabilities (last = 1)
    };
    // [n] the topic tables of the determinism rule over a vocabulary of V, drawn from Rng(mix64(seed ^ kTopicsTag))
    static std::vector<Topic> make_topics(uint64_t seed, int64_t V, int64_t n);
    int64_t segment_of(int64_t step) const;
    std::vector<double> drift_at(int64_t step) const;  // [num_topics] log-weight offsets z(step)

    uint64_t seed_;
    int64_t num_topics_;
    int64_t doc_len_;
    double drift_rate_;
    std::vector<int64_t> shift_steps_;
    std::vector<Topic> topics_;                  // [num_topics]
    std::vector<std::vector<double>> segments_;  // [shift_steps.size() + 1][num_topics]
    mutable std::mutex drift_mutex_;
    mutable std::vector<std::vector<double>> drift_anchors_;  // [k][num_topics] = z(k * kDriftAnchorEvery)
    mutable int64_t last_drift_step_ = 0;                     // the step of last_drift_
    mutable std::vector<double> last_drift_;                  // [num_topics] = z(last_drift_step_)
};

// The source a validated config asks for; seq_len T and batch_size B come from the model/training config.
std::unique_ptr<DataSource> make_data_source(const DataConfig& config, int64_t seq_len, int64_t batch_size);

}  // namespace prophet
