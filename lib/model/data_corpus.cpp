// data_corpus.cpp: the generated topic corpus (data.source = "generated"): topics, the mixture over steps, and
// every sequence as a pure function of (seed, step, sequence).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/rng.h"
#include "model/data.h"

namespace prophet {

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

// weights [n] -> normalised copy (sum > 0 checked by validate())
std::vector<double> normalised(std::vector<double> weights) {
    double sum = 0.0;
    for (double w : weights) sum += w;
    for (double& w : weights) w /= sum;
    return weights;
}

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

}  // namespace prophet
