// cmd_db_merge.h: `prophet db merge SHARDS... --into STORE` (lib/store/merge.h; docs/cluster.md).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace prophet::cli {

struct DbMergeArgs {
    std::vector<std::string> shards;
    std::string into;
    bool json = false;
};

// `db` is the `prophet db` group (other `db` subcommands live in their own files).
CLI::App* add_db_merge_command(CLI::App* db, DbMergeArgs& args);
int run_db_merge(const DbMergeArgs& args);

}  // namespace prophet::cli
