// cmd_db_merge.cpp: `prophet db merge`: argument wiring and the per-shard summary (stdout; JSON with --json).
#include "cmd_db_merge.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "store/merge.h"

namespace prophet::cli {

CLI::App* add_db_merge_command(CLI::App* db, DbMergeArgs& args) {
    CLI::App* merge = db->add_subcommand(
        "merge", "copy every run of shard stores into one store; idempotent (merging twice changes nothing)");
    merge->add_option("shards", args.shards, "shard stores (e.g. one per Slurm array task)")->required();
    merge->add_option("--into", args.into, "the store to merge into (created when missing)")->required();
    merge->add_flag("--json", args.json, "print the summary as JSON");
    merge->footer(
        "A run already in the target is kept unless the shard's row is newer (finished after it was merged while\n"
        "running). A shard of another schema version is refused with exit code 5.\n"
        "Example:\n  prophet db merge results/sweep.db.shards/*.db --into results/sweep.db");
    return merge;
}

int run_db_merge(const DbMergeArgs& args) {
    const MergeSummary s = merge_stores(args.shards, args.into);
    if (args.json) {
        nlohmann::json out;
        out["into"] = args.into;
        out["rows_added"] = s.rows_added;
        out["runs_added"] = s.runs_added;
        out["runs_total"] = s.runs_total;
        out["dangling_references"] = s.dangling_references;
        out["shards"] = nlohmann::json::array();
        for (const MergeCount& c : s.shards)
            out["shards"].push_back({{"shard", c.shard}, {"rows_added", c.rows_added}, {"runs_added", c.runs_added}});
        std::printf("%s\n", out.dump(2).c_str());
    } else {
        for (const MergeCount& c : s.shards)
            std::printf("%s: %lld run(s), %lld row(s) added\n", c.shard.c_str(), static_cast<long long>(c.runs_added),
                        static_cast<long long>(c.rows_added));
        std::printf("merged %zu shard(s) into %s: %lld run(s) added, %lld in total\n", s.shards.size(),
                    args.into.c_str(), static_cast<long long>(s.runs_added), static_cast<long long>(s.runs_total));
    }
    if (s.dangling_references > 0)
        std::fprintf(stderr,
                     "prophet db merge: warning: %lld row(s) reference a run that is in no merged shard (merge the "
                     "remaining shards too)\n",
                     static_cast<long long>(s.dangling_references));
    return kExitOk;
}

}  // namespace prophet::cli
