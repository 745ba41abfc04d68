// data.cpp: the data source interface (a batch's inputs and targets from a source's token runs), the split of a
// global batch over ranks, and the source a DataConfig names.
#include "model/data.h"

#include <algorithm>

#include "core/error.h"
#include "model/data_internal.h"

namespace prophet {

using data_detail::kMaxVocab;

std::pair<int64_t, int64_t> rank_sequences(int64_t batch_size, int64_t rank, int64_t num_ranks) {
    PROPHET_ASSERT(batch_size >= 0 && num_ranks >= 1 && rank >= 0 && rank < num_ranks);
    return {rank * batch_size / num_ranks, (rank + 1) * batch_size / num_ranks};
}

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

std::unique_ptr<DataSource> make_data_source(const DataConfig& config, int64_t seq_len, int64_t batch_size) {
    config.validate();
    if (config.source == "file")
        return std::make_unique<TokenStreamSource>(config.path, config.file_format, seq_len, batch_size,
                                                   config.vocab_size);
    return std::make_unique<GeneratedCorpus>(config, seq_len, batch_size);
}

}  // namespace prophet
