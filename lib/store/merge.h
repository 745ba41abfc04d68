// merge.h: `prophet db merge SHARDS... --into STORE`: copies every row of shard stores into one store.
//
// Why: SQLite on a shared (network) file system is not safe for concurrent writers, so a sweep on Slurm gives
// each array task its own shard store and merges them afterwards (docs/cluster.md).
//
// Rules (all of them make a second merge of the same shards a no-op):
//   - every table of the target's schema is copied with INSERT ... SELECT ... ON CONFLICT DO NOTHING through an
//     ATTACHed shard, so a row whose primary key is already in the target is kept as it is;
//   - `runs` is the exception: a run already in the target is replaced by the shard's row when the shard's is
//     newer (a later ended_ms / heartbeat_ms / started_ms): a shard merged while a point ran, then again after it
//     finished, ends with the finished row;
//   - tables keyed by a bare rowid (`events`) have no natural key: a row is copied unless an equal row (every
//     column but the rowid) exists, and gets a new rowid in the target;
//   - each shard is one transaction (ATTACH is refused inside one); foreign keys are checked after the last
//     shard and dangling references counted, not refused (a resumed run may name a parent in a shard not merged
//     yet).
// A shard that is not a prophet store or has a schema version other than the target's is refused (exit 5,
// naming the file and both versions) before anything is written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace prophet {

struct MergeCount {
    std::string shard;
    int64_t rows_added = 0;  // rows inserted or (runs) replaced by a newer row, over all tables
    int64_t runs_added = 0;  // new run_ids
};

struct MergeSummary {
    std::vector<MergeCount> shards;
    int64_t rows_added = 0, runs_added = 0;
    int64_t runs_total = 0;  // rows of `runs` in the target after the merge
    int64_t dangling_references = 0;  // rows whose foreign key names a missing row (a shard not merged yet)
};

// Opens (or creates) `into` with Store::open, then merges every shard in order. Throws prophet::Error: exit 5
// for an unreadable / foreign / other-schema shard or a database error, exit 3 when a shard is `into` itself or
// does not exist.
MergeSummary merge_stores(const std::vector<std::string>& shards, const std::string& into);

}  // namespace prophet
