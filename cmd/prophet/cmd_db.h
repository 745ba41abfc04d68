// cmd_db.h: `prophet db check`: the store's integrity, schema version and runs left `running` by a dead process;
// `--repair` marks those `lost` (lib/store/run_health.h).
#pragma once

#include "common.h"

namespace prophet::cli {

struct DbCheckArgs {
    std::string db = "results/prophet.db";
    bool repair = false;
    double stale_after_s = 900;  // kDefaultStaleAfterS
    bool json = false;
};

// Adds `check` under the `db` command (`db` may hold other subcommands).
CLI::App* add_db_check_command(CLI::App* db, DbCheckArgs& args);
int run_db_check(const DbCheckArgs& args);

}  // namespace prophet::cli
