// store_queries.h: one recorded run's metric or param, for the CLI tests that read a sweep's store.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "store/store.h"

namespace prophet::testing {

// the run's only value of metric `key` (a test failure when it has none or several; -1 then)
inline double metric(Store& store, const std::string& run_id, const std::string& key) {
    const auto rows = store.get_metrics(run_id, key);
    EXPECT_EQ(rows.size(), 1u) << run_id << " " << key;
    return rows.empty() ? -1 : rows[0].value;
}

// a run's param as stored (TOML text), "" when it has none
inline std::string param(Store& store, const std::string& run_id, const std::string& key) {
    for (const auto& [k, v] : store.get_params(run_id))
        if (k == key) return v;
    return "";
}

}  // namespace prophet::testing
