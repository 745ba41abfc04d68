// train_fixtures.h: what the training tests share: the skewed 4-rank preset with --set overrides, and a run on
// in-process ranks (threads of a LocalGroup) returning every step's statistics.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm.h"
#include "train/trainer.h"

namespace prophet {

inline Config skewed_config(const std::vector<std::string>& sets) {
    Config c(train_schema());
    c.merge_toml_file(std::string(PROPHET_SOURCE_DIR) + "/experiments/train/skewed-4rank.toml");
    c.apply_set(std::string("balance.cluster=\"") + PROPHET_SOURCE_DIR + "/experiments/clusters/cpu-local.toml\"");
    for (const std::string& s : sets) c.apply_set(s);
    return c;
}

// Runs `steps` steps of the config on `ranks` in-process ranks; returns every rank's step statistics [rank][step].
inline std::vector<std::vector<StepStats>> run_local_stats(
    const Config& config, int ranks, int steps, const std::function<void(Trainer&, int rank)>& before = nullptr,
    const std::function<void(Trainer&, int rank)>& after = nullptr) {
    const TrainSettings settings = train_settings_from(config, ranks);
    auto group = make_local_group(ranks);
    std::vector<std::vector<StepStats>> stats(ranks);
    std::vector<std::exception_ptr> errors(ranks);
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r)
        threads.emplace_back([&, r] {
            try {
                Trainer trainer(*group[r], settings, checkpoint_config_hash(config));
                if (before) before(trainer, r);
                for (int i = 0; i < steps; ++i) stats[r].push_back(trainer.step());
                if (after) after(trainer, r);
            } catch (...) {
                errors[r] = std::current_exception();
            }
        });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
    return stats;
}

// The same, returning rank 0's losses (and checking every rank saw the same ones).
inline std::vector<double> run_local(const Config& config, int ranks, int steps,
                                     const std::function<void(Trainer&, int rank)>& before = nullptr,
                                     const std::function<void(Trainer&, int rank)>& after = nullptr) {
    const auto stats = run_local_stats(config, ranks, steps, before, after);
    std::vector<std::vector<double>> losses(ranks);
    for (int r = 0; r < ranks; ++r)
        for (const StepStats& s : stats[r]) losses[r].push_back(s.loss);
    for (int r = 1; r < ranks; ++r) EXPECT_EQ(losses[r], losses[0]) << "ranks disagree on the loss";
    return losses[0];
}

inline void expect_close(const std::vector<double>& a, const std::vector<double>& b, double rel,
                         const std::string& what) {
    ASSERT_EQ(a.size(), b.size());
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double d = std::fabs(a[i] - b[i]) / std::fabs(b[i]);
        worst = std::max(worst, d);
        EXPECT_LE(d, rel) << what << ": step " << i << " " << a[i] << " vs " << b[i];
    }
    std::printf("%s: worst relative loss difference %.3g over %zu steps\n", what.c_str(), worst, a.size());
}

}  // namespace prophet
