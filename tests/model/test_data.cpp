// test_data.cpp: batch order of the file source, rank slicing, and the generated corpus (determinism, topic
// statistics, dominance, drift, shifts), plus DataConfig validation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "model/data.h"

namespace prophet {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
    static int counter = 0;
    return (fs::path(testing::TempDir()) /
            ("prophet_data_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" + name))
        .string();
}

std::string write_file(const std::string& name, const std::string& bytes) {
    const std::string path = temp_path(name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

Error catch_error(const std::function<void()>& body) {
    try {
        body();
    } catch (const Error& e) {
        return e;
    }
    ADD_FAILURE() << "expected a prophet::Error";
    return Error(0, "");
}

// the whole global batch of `step`: inputs/targets [B, T]
struct Batch {
    std::vector<int32_t> inputs, targets, topics;
};
Batch full_batch(const DataSource& source, int64_t step) {
    const size_t n = static_cast<size_t>(source.batch_size() * source.seq_len());
    Batch batch{std::vector<int32_t>(n), std::vector<int32_t>(n), std::vector<int32_t>(n)};
    source.batch(step, 0, source.batch_size(), batch.inputs.data(), batch.targets.data(), batch.topics.data());
    return batch;
}

// the global batch assembled from the slices of `num_ranks` ranks
Batch ranked_batch(const DataSource& source, int64_t step, int64_t num_ranks) {
    Batch batch;
    for (int64_t rank = 0; rank < num_ranks; ++rank) {
        const auto [first, last] = rank_sequences(source.batch_size(), rank, num_ranks);
        const size_t n = static_cast<size_t>((last - first) * source.seq_len());
        std::vector<int32_t> inputs(n), targets(n), topics(n);  // [last - first, T]
        source.batch(step, first, last, inputs.data(), targets.data(), topics.data());
        batch.inputs.insert(batch.inputs.end(), inputs.begin(), inputs.end());
        batch.targets.insert(batch.targets.end(), targets.begin(), targets.end());
        batch.topics.insert(batch.topics.end(), topics.begin(), topics.end());
    }
    return batch;
}

DataConfig generated_config() {
    DataConfig config;
    config.source = "generated";
    config.seed = 42;
    config.vocab_size = 256;
    config.num_topics = 4;
    config.doc_len = 48;
    return config;
}

// Jensen-Shannon divergence in bits of two histograms
double js_divergence(const std::vector<double>& a, const std::vector<double>& b) {
    double sum_a = 0.0, sum_b = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        sum_a += a[i];
        sum_b += b[i];
    }
    double js = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double p = a[i] / sum_a, q = b[i] / sum_b, m = 0.5 * (p + q);
        if (p > 0.0) js += 0.5 * p * std::log2(p / m);
        if (q > 0.0) js += 0.5 * q * std::log2(q / m);
    }
    return js;
}

// ---- file source --------------------------------------------------------------------------------------------

TEST(DataFileSource, OffsetsFollowTheFormula) {
    const int64_t N = 1000, T = 8, B = 5;
    std::vector<int32_t> stream(N);
    for (int64_t k = 0; k < N; ++k) stream[static_cast<size_t>(k)] = static_cast<int32_t>(k);
    TokenStreamSource source(stream, T, B, N);
    const int64_t modulus = N - T - 1;
    for (int64_t step :
         {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3}, int64_t{24}, int64_t{25}, int64_t{1000}, int64_t{123457}}) {
        const Batch batch = full_batch(source, step);
        for (int64_t i = 0; i < B; ++i) {
            const int64_t offset = ((step * B + i) * T) % modulus;
            for (int64_t k = 0; k < T; ++k) {
                ASSERT_EQ(batch.inputs[static_cast<size_t>(i * T + k)], offset + k) << "step " << step << " seq " << i;
                ASSERT_EQ(batch.targets[static_cast<size_t>(i * T + k)], offset + k + 1);
                ASSERT_EQ(batch.topics[static_cast<size_t>(i * T + k)], -1);
            }
        }
    }
    EXPECT_EQ(source.offset(3, 2), 136);  // (3*5 + 2)*8 = 136 < 991
}

TEST(DataFileSource, OffsetWrapsExactlyEvenForHugeSteps) {
    const int64_t N = 1000, T = 8, B = 5;
    std::vector<int32_t> stream(N);
    for (int64_t k = 0; k < N; ++k) stream[static_cast<size_t>(k)] = static_cast<int32_t>(k);
    TokenStreamSource source(stream, T, B, N);
    EXPECT_EQ(source.offset(24, 4), 1);                  // 992 mod 991
    EXPECT_EQ(source.offset(int64_t{1} << 62, 0), 342);  // (2^62 * 40) mod 991, computed exactly
    EXPECT_EQ(source.offset(int64_t{1} << 62, 3), 366);  // ((2^62*5 + 3) * 8) mod 991
    std::vector<int32_t> inputs(T), targets(T);
    source.batch(int64_t{1} << 62, 3, 4, inputs.data(), targets.data());
    EXPECT_EQ(inputs[0], 366);
    EXPECT_EQ(targets[T - 1], 366 + T);
}

TEST(DataFileSource, ShortestStreamAlwaysStartsAtZero) {
    const int64_t T = 6;
    std::vector<int32_t> stream = {5, 4, 3, 2, 1, 0, 7, 9};  // N = T + 2
    TokenStreamSource source(stream, T, 3, 16);
    for (int64_t step = 0; step < 5; ++step) {
        const Batch batch = full_batch(source, step);
        for (int64_t i = 0; i < 3; ++i) {
            EXPECT_EQ(batch.inputs[static_cast<size_t>(i * T)], 5);
            EXPECT_EQ(batch.targets[static_cast<size_t>(i * T + T - 1)], 7);
        }
    }
}

TEST(DataFileSource, RankSlicesConcatenateToTheGlobalBatch) {
    const int64_t N = 777, T = 7, B = 6;
    std::vector<int32_t> stream(N);
    for (int64_t k = 0; k < N; ++k) stream[static_cast<size_t>(k)] = static_cast<int32_t>((k * 37) % 256);
    TokenStreamSource source(stream, T, B, 256);
    for (int64_t step : {0, 1, 17, 500}) {
        const Batch one = full_batch(source, step);
        for (int64_t D : {1, 2, 4}) {
            const Batch ranked = ranked_batch(source, step, D);
            EXPECT_EQ(ranked.inputs, one.inputs) << "D = " << D << " step " << step;
            EXPECT_EQ(ranked.targets, one.targets) << "D = " << D << " step " << step;
        }
    }
}

TEST(DataRankSlices, FollowTheIntegerFormula) {
    EXPECT_EQ(rank_sequences(8, 0, 1), (std::pair<int64_t, int64_t>{0, 8}));
    EXPECT_EQ(rank_sequences(8, 1, 2), (std::pair<int64_t, int64_t>{4, 8}));
    EXPECT_EQ(rank_sequences(6, 0, 4), (std::pair<int64_t, int64_t>{0, 1}));
    EXPECT_EQ(rank_sequences(6, 1, 4), (std::pair<int64_t, int64_t>{1, 3}));
    EXPECT_EQ(rank_sequences(6, 2, 4), (std::pair<int64_t, int64_t>{3, 4}));
    EXPECT_EQ(rank_sequences(6, 3, 4), (std::pair<int64_t, int64_t>{4, 6}));
}

TEST(DataFileSource, ReadsAFileAsBytes) {
    const std::string text = "the quick brown fox jumps over the lazy dog";
    const std::string path = write_file("bytes.txt", text);
    TokenStreamSource source(path, "bytes", 4, 2, 256);
    ASSERT_EQ(source.num_tokens(), static_cast<int64_t>(text.size()));
    const Batch batch = full_batch(source, 1);
    const int64_t offset = ((1 * 2 + 1) * 4) % (static_cast<int64_t>(text.size()) - 4 - 1);
    for (int64_t k = 0; k < 4; ++k) {
        EXPECT_EQ(batch.inputs[static_cast<size_t>(4 + k)], static_cast<unsigned char>(text[offset + k]));
        EXPECT_EQ(batch.targets[static_cast<size_t>(4 + k)], static_cast<unsigned char>(text[offset + k + 1]));
    }
    fs::remove(path);
}

TEST(DataFileSource, ReadsLittleEndianTokenFiles) {
    std::string u16, i32;
    for (int32_t token = 0; token < 20; ++token) {
        const int32_t value = 1000 + token * 3000;  // up to 58000: needs both bytes
        u16 += static_cast<char>(value & 0xff);
        u16 += static_cast<char>((value >> 8) & 0xff);
        for (int b = 0; b < 4; ++b) i32 += static_cast<char>(((value + 70000) >> (8 * b)) & 0xff);
    }
    const std::string path16 = write_file("tokens.u16", u16);
    const std::string path32 = write_file("tokens.i32", i32);
    TokenStreamSource source16(path16, "uint16", 4, 1, 65536);
    TokenStreamSource source32(path32, "int32", 4, 1, 200000);
    std::vector<int32_t> inputs(4), targets(4);
    source16.batch(0, 0, 1, inputs.data(), targets.data());
    EXPECT_EQ(inputs, (std::vector<int32_t>{1000, 4000, 7000, 10000}));
    source32.batch(0, 0, 1, inputs.data(), targets.data());
    EXPECT_EQ(inputs, (std::vector<int32_t>{71000, 74000, 77000, 80000}));
    EXPECT_EQ(targets[3], 83000);
    fs::remove(path16);
    fs::remove(path32);
}

TEST(DataFileSource, BadFileErrorIsExit3NamingPathMinimumFix) {
    const int64_t T = 8;
    const std::string missing = temp_path("does_not_exist.txt");
    const std::string empty = write_file("empty.txt", "");
    const std::string short_file = write_file("short.txt", std::string(T + 1, 'a'));
    for (const std::string& path : {missing, empty, short_file}) {
        const Error e = catch_error([&] { TokenStreamSource(path, "bytes", T, 4, 256); });
        EXPECT_EQ(e.exit_code(), kExitConfig) << e.what();
        const std::string message = e.what();
        EXPECT_NE(message.find(path), std::string::npos) << message;
        EXPECT_NE(message.find("T+2 = 10"), std::string::npos) << message;
        EXPECT_NE(message.find("fix:"), std::string::npos) << message;
    }
    EXPECT_NE(
        std::string(catch_error([&] { TokenStreamSource(missing, "bytes", T, 4, 256); }).what()).find("not found"),
        std::string::npos);
    EXPECT_NE(std::string(catch_error([&] { TokenStreamSource(empty, "bytes", T, 4, 256); }).what()).find("empty"),
              std::string::npos);
    const std::string exact = write_file("exact.txt", std::string(T + 2, 'b'));
    EXPECT_NO_THROW(TokenStreamSource(exact, "bytes", T, 4, 256));

    const std::string odd = write_file("odd.u16", std::string(41, 'x'));
    const Error odd_error = catch_error([&] { TokenStreamSource(odd, "uint16", T, 4, 65536); });
    EXPECT_EQ(odd_error.exit_code(), kExitConfig);
    EXPECT_NE(std::string(odd_error.what()).find("whole number"), std::string::npos) << odd_error.what();
    const std::string big = write_file("big.u16", std::string(40, '\xff'));  // token 65535
    const Error range_error = catch_error([&] { TokenStreamSource(big, "uint16", T, 4, 50000); });
    EXPECT_EQ(range_error.exit_code(), kExitConfig);
    EXPECT_NE(std::string(range_error.what()).find("65535"), std::string::npos) << range_error.what();
    for (const std::string& path : {empty, short_file, exact, odd, big}) fs::remove(path);
}

TEST(DataConfigValidate, RejectsBadValuesNamingTheKey) {
    EXPECT_NO_THROW(DataConfig{}.validate());
    struct Case {
        std::function<void(DataConfig&)> edit;
        std::string key;
    };
    const std::vector<Case> cases = {
        {[](DataConfig& c) { c.source = "web"; }, "data.source"},
        {[](DataConfig& c) { c.source = "file"; }, "data.path"},
        {[](DataConfig& c) {
             c.source = "file";
             c.path = std::string("corpus.txt");
             c.file_format = "u8";
         },
         "data.file_format"},
        {[](DataConfig& c) {
             c.source = "file";
             c.path = std::string("corpus.txt");
             c.vocab_size = 100;
         },
         "data.vocab_size"},
        {[](DataConfig& c) { c.vocab_size = 1; }, "data.vocab_size"},
        {[](DataConfig& c) { c.num_topics = 0; }, "data.num_topics"},
        {[](DataConfig& c) { c.num_topics = 300; }, "data.num_topics"},
        {[](DataConfig& c) { c.doc_len = 0; }, "data.doc_len"},
        {[](DataConfig& c) {
             c.mixture = {1.0, 2.0};
         },
         "data.mixture"},
        {[](DataConfig& c) {
             c.mixture = {1.0, -1.0, 1.0, 1.0};
         },
         "data.mixture"},
        {[](DataConfig& c) {
             c.mixture = {0.0, 0.0, 0.0, 0.0};
         },
         "data.mixture"},
        {[](DataConfig& c) { c.drift_rate = -0.1; }, "data.drift_rate"},
        {[](DataConfig& c) { c.drift_rate = NAN; }, "data.drift_rate"},
        {[](DataConfig& c) {
             c.shift_steps = {100, 100};
         },
         "data.shift_steps"},
        {[](DataConfig& c) { c.shift_steps = {0}; }, "data.shift_steps"},
        {[](DataConfig& c) {
             c.shift_steps = {10};
             c.shift_mixtures = {1.0, 0.0};
         },
         "data.shift_mixtures"},
        {[](DataConfig& c) {
             c.shift_steps = {10};
             c.shift_mixtures = {0.0, 0.0, 0.0, 0.0};
         },
         "data.shift_mixtures"},
        {[](DataConfig& c) { c.dominant_topic = 4; }, "data.dominant_topic"},
        {[](DataConfig& c) { c.dominant_topic = -2; }, "data.dominant_topic"},
        {[](DataConfig& c) { c.dominance = 0.8; }, "data.dominance"},
        {[](DataConfig& c) {
             c.dominant_topic = 0;
             c.dominance = 1.5;
         },
         "data.dominance"},
    };
    for (const Case& test_case : cases) {
        DataConfig config;
        test_case.edit(config);
        const Error e = catch_error([&] { config.validate(); });
        EXPECT_EQ(e.exit_code(), kExitConfig) << test_case.key;
        const std::string message = e.what();
        EXPECT_EQ(message.rfind("config error: " + test_case.key + " = ", 0), 0u) << message;
        EXPECT_NE(message.find("; fix: "), std::string::npos) << message;
    }
}

TEST(DataConfigValidate, SchemaKeysReadIntoDataConfig) {
    Schema schema;
    add_data_keys(schema);
    Config config(schema);
    config.apply_set("data.num_topics=3");
    config.apply_set("data.mixture=[1, 2, 3]");
    config.apply_set("data.shift_steps=[10, 20]");
    config.apply_set("data.dominant_topic=1");
    config.apply_set("data.dominance=0.8");
    config.apply_set("data.seed=77");
    const DataConfig data = data_config_from(config);
    EXPECT_EQ(data.source, "generated");
    EXPECT_EQ(data.num_topics, 3);
    EXPECT_EQ(data.mixture, (std::vector<double>{1, 2, 3}));
    EXPECT_EQ(data.shift_steps, (std::vector<int64_t>{10, 20}));
    EXPECT_EQ(data.dominant_topic, 1);
    EXPECT_DOUBLE_EQ(data.dominance, 0.8);
    EXPECT_EQ(data.seed, 77u);
    config.apply_set("data.dominant_topic=-1");
    const Error e = catch_error([&] { data_config_from(config); });
    EXPECT_EQ(e.exit_code(), kExitConfig);
    EXPECT_NE(std::string(e.what()).find("data.dominance"), std::string::npos) << e.what();
}

// ---- generated corpus ---------------------------------------------------------------------------------------

TEST(DataGenerated, BatchIsAPureFunctionOfSeedStepSequence) {
    DataConfig config = generated_config();
    config.drift_rate = 0.01;
    config.shift_steps = {3};
    GeneratedCorpus a(config, 32, 8), b(config, 32, 8);
    for (int64_t step : {0, 2, 3, 9}) {
        const Batch batch_a = full_batch(a, step), batch_b = full_batch(b, step);
        EXPECT_EQ(batch_a.inputs, batch_b.inputs);
        EXPECT_EQ(batch_a.targets, batch_b.targets);
        EXPECT_EQ(batch_a.topics, batch_b.topics);
        for (int32_t token : batch_a.inputs) ASSERT_TRUE(token >= 0 && token < 256);
        for (int64_t i = 0; i < 8; ++i) {  // one sequence alone equals its row of the batch
            std::vector<int32_t> inputs(32), targets(32);
            b.batch(step, i, i + 1, inputs.data(), targets.data());
            EXPECT_TRUE(std::equal(inputs.begin(), inputs.end(), batch_a.inputs.begin() + i * 32));
            EXPECT_TRUE(std::equal(targets.begin(), targets.end(), batch_a.targets.begin() + i * 32));
            for (int64_t k = 0; k + 1 < 32; ++k)
                EXPECT_EQ(inputs[static_cast<size_t>(k + 1)], targets[static_cast<size_t>(k)]);
        }
    }
    const Batch step1 = full_batch(a, 1), step2 = full_batch(a, 2);
    EXPECT_NE(step1.inputs, step2.inputs);
    EXPECT_FALSE(std::equal(step1.inputs.begin(), step1.inputs.begin() + 32, step1.inputs.begin() + 32));
    DataConfig other = config;
    other.seed = 43;
    GeneratedCorpus c(other, 32, 8);
    EXPECT_NE(full_batch(c, 1).inputs, step1.inputs);
}

TEST(DataGenerated, SequenceSeedRuleIsStable) {
    // the documented rule: Rng(mix64(mix64(mix64(seed ^ "sequence") ^ step) ^ i)), mix64 = splitmix64 finaliser
    EXPECT_EQ(GeneratedCorpus::mix64(0), 0xe220a8397b1dcdafull);
    const uint64_t expected =
        GeneratedCorpus::mix64(GeneratedCorpus::mix64(GeneratedCorpus::mix64(7 ^ 0x73657175656e6365ull) ^ 11) ^ 5);
    EXPECT_EQ(GeneratedCorpus::sequence_seed(7, 11, 5), expected);
    EXPECT_NE(GeneratedCorpus::sequence_seed(7, 11, 5), GeneratedCorpus::sequence_seed(7, 5, 11));
}

TEST(DataGenerated, SameBatchForAnyRankCount) {
    DataConfig config = generated_config();
    config.drift_rate = 0.02;
    config.shift_steps = {2};
    config.dominant_topic = 1;
    config.dominance = 0.6;
    GeneratedCorpus source(config, 16, 6);
    for (int64_t step : {0, 1, 2, 5}) {
        const Batch one = full_batch(source, step);
        for (int64_t D : {1, 2, 4}) {
            GeneratedCorpus fresh(config, 16, 6);  // another process: no shared cache
            const Batch ranked = ranked_batch(fresh, step, D);
            EXPECT_EQ(ranked.inputs, one.inputs) << "D = " << D;
            EXPECT_EQ(ranked.targets, one.targets) << "D = " << D;
            EXPECT_EQ(ranked.topics, one.topics) << "D = " << D;
        }
    }
}

TEST(DataGenerated, ResumeAtAnyStepGivesTheSameBatch) {
    DataConfig config = generated_config();
    config.drift_rate = 0.01;
    GeneratedCorpus walked(config, 8, 2);
    std::vector<double> walked_mixture;
    Batch walked_batch;
    for (int64_t step = 0; step <= 2600; ++step) {
        walked_mixture = walked.mixture_at(step);
        if (step == 2600) walked_batch = full_batch(walked, step);
    }
    GeneratedCorpus resumed(config, 8, 2);  // first call is step 2600
    const Batch resumed_batch = full_batch(resumed, 2600);
    EXPECT_EQ(resumed.mixture_at(2600), walked_mixture);
    EXPECT_EQ(resumed_batch.inputs, walked_batch.inputs);
    EXPECT_EQ(resumed_batch.topics, walked_batch.topics);
    EXPECT_EQ(resumed.mixture_at(17), walked.mixture_at(17));  // going back is exact too
}

TEST(DataGenerated, TopicsHaveDistinctTokenStatistics) {
    DataConfig config = generated_config();
    GeneratedCorpus source(config, 128, 64);
    std::vector<std::vector<double>> histogram(4, std::vector<double>(256, 0.0));  // [topic, V]
    std::vector<std::vector<double>> halves(2, std::vector<double>(256, 0.0));     // topic 0, even/odd steps
    for (int64_t step = 0; step < 8; ++step) {
        const Batch batch = full_batch(source, step);
        for (size_t k = 0; k < batch.inputs.size(); ++k) {
            const int32_t topic = batch.topics[k];
            ASSERT_TRUE(topic >= 0 && topic < 4);
            histogram[static_cast<size_t>(topic)][static_cast<size_t>(batch.inputs[k])] += 1.0;
            if (topic == 0) halves[static_cast<size_t>(step % 2)][static_cast<size_t>(batch.inputs[k])] += 1.0;
            const std::vector<int32_t>& vocab = source.topic_vocabulary(topic);
            ASSERT_NE(std::find(vocab.begin(), vocab.end(), batch.inputs[k]), vocab.end());
        }
    }
    for (size_t a = 0; a < 4; ++a)
        for (size_t b = a + 1; b < 4; ++b)
            EXPECT_GT(js_divergence(histogram[a], histogram[b]), 0.4) << "topics " << a << " and " << b;
    EXPECT_LT(js_divergence(halves[0], halves[1]), 0.05);  // same topic: statistics agree
}

TEST(DataGenerated, DominanceGivesThatShareOfDocuments) {
    DataConfig config = generated_config();
    config.dominant_topic = 2;
    config.dominance = 0.8;
    config.mixture = {1.0, 1.0, 2.0, 2.0};
    GeneratedCorpus source(config, 16, 256);
    const std::vector<double> mixture = source.mixture_at(0);
    EXPECT_DOUBLE_EQ(mixture[2], 0.8);
    EXPECT_DOUBLE_EQ(mixture[0], 0.2 / 4.0);
    EXPECT_DOUBLE_EQ(mixture[3], 0.2 / 2.0);
    // the first document of every sequence is an independent draw from the mixture
    std::vector<double> counts(4, 0.0);
    const int64_t steps = 8;
    for (int64_t step = 0; step < steps; ++step) {
        const Batch batch = full_batch(source, step);
        for (int64_t i = 0; i < 256; ++i) counts[static_cast<size_t>(batch.topics[static_cast<size_t>(i * 16)])] += 1;
    }
    const double n = static_cast<double>(steps * 256);
    for (size_t t = 0; t < 4; ++t) {
        const double p = mixture[t], sd = std::sqrt(p * (1.0 - p) / n);
        EXPECT_NEAR(counts[t] / n, p, 4.0 * sd) << "topic " << t;
    }
}

TEST(DataGenerated, DriftChangesTheMixtureGradually) {
    DataConfig config = generated_config();
    config.drift_rate = 0.02;
    GeneratedCorpus source(config, 8, 2);
    std::vector<double> previous = source.mixture_at(0);
    for (double w : previous) EXPECT_DOUBLE_EQ(w, 0.25);
    double max_step_change = 0.0;
    for (int64_t step = 1; step <= 3000; ++step) {
        const std::vector<double> mixture = source.mixture_at(step);
        double sum = 0.0, change = 0.0;
        for (size_t t = 0; t < 4; ++t) {
            sum += mixture[t];
            change += std::fabs(mixture[t] - previous[t]);
        }
        ASSERT_NEAR(sum, 1.0, 1e-12);
        EXPECT_GT(change, 0.0) << "step " << step;
        max_step_change = std::max(max_step_change, change);
        previous = mixture;
    }
    double total_change = 0.0;
    for (size_t t = 0; t < 4; ++t) total_change += std::fabs(previous[t] - 0.25);
    EXPECT_LT(max_step_change, 4.0 * config.drift_rate);  // gradual: a few drift_rate per step at most
    EXPECT_GT(total_change, 0.2);                         // but it does wander over 3000 steps
    config.drift_rate = 0.0;
    GeneratedCorpus fixed(config, 8, 2);
    EXPECT_EQ(fixed.mixture_at(2999), fixed.mixture_at(0));
}

TEST(DataGenerated, ShiftChangesTheMixtureExactlyAtListedSteps) {
    DataConfig config = generated_config();
    config.dominant_topic = 0;
    config.dominance = 0.7;
    config.shift_steps = {100, 250};
    GeneratedCorpus rotating(config, 8, 2);
    std::vector<double> previous = rotating.mixture_at(0);
    for (int64_t step = 1; step < 400; ++step) {
        const std::vector<double> mixture = rotating.mixture_at(step);
        if (step == 100 || step == 250)
            EXPECT_NE(mixture, previous) << "step " << step;
        else
            EXPECT_EQ(mixture, previous) << "step " << step;
        previous = mixture;
    }
    EXPECT_DOUBLE_EQ(rotating.mixture_at(99)[0], 0.7);
    EXPECT_DOUBLE_EQ(rotating.mixture_at(100)[1], 0.7);  // rotated by one topic
    EXPECT_DOUBLE_EQ(rotating.mixture_at(250)[2], 0.7);  // and by one more

    config.shift_mixtures = {0, 0, 0, 1, 1, 0, 0, 0};
    GeneratedCorpus explicit_shifts(config, 8, 16);
    EXPECT_EQ(explicit_shifts.mixture_at(100), (std::vector<double>{0, 0, 0, 1}));
    EXPECT_EQ(explicit_shifts.mixture_at(250), (std::vector<double>{1, 0, 0, 0}));
    const Batch before = full_batch(explicit_shifts, 99), at = full_batch(explicit_shifts, 100);
    for (int32_t topic : at.topics) EXPECT_EQ(topic, 3);
    EXPECT_NE(std::count(before.topics.begin(), before.topics.end(), 3), static_cast<long>(before.topics.size()));
}

TEST(DataGenerated, MakeDataSourcePicksTheSource) {
    DataConfig config = generated_config();
    auto generated = make_data_source(config, 16, 4);
    EXPECT_EQ(generated->num_topics(), 4);
    EXPECT_NE(generated->describe().find("generated"), std::string::npos);
    config.source = "file";
    config.path = temp_path("missing.txt");
    const Error e = catch_error([&] { make_data_source(config, 16, 4); });
    EXPECT_EQ(e.exit_code(), kExitConfig);
    EXPECT_NE(std::string(e.what()).find(config.path), std::string::npos);
}

}  // namespace
}  // namespace prophet
