#!/usr/bin/env bash
# slurm_sweep_test.sh: a small real sweep through a real one-node Slurm (ci/slurm-up.sh), end to end:
#   1. `prophet sweep --launcher slurm` submits 4 points as a job array (held, then released); points 1 and 2
#      fail (a 16-device cluster for a 4-device trace), 4 finishes, and the task of point 3 is cancelled with
#      scancel before it ran;
#   2. --status reads the shards and squeue;
#   3. the re-submission (--wait) runs only the points without a finished run (1, 2, 3: not 4), then merges the
#      shards: every point has exactly one finished run or is recorded failed;
#   4. `prophet db merge` of the same shards again changes nothing (the store's dump is identical), and a shard of
#      another schema version is refused with exit 5.
# Exit 77 (skipped) where the Slurm daemons cannot start here.
#   tests/cluster/slurm_sweep_test.sh PROPHET_BINARY
set -euo pipefail
prophet="$(realpath "$1")"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"
work="$(mktemp -d /tmp/prophet-slurm-test.XXXXXX)"
slurm_dir="$work/slurm"
cleanup() { "$repo/ci/slurm-down.sh" --dir "$slurm_dir" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "slurm_sweep_test: FAIL: $*" >&2; exit 1; }
json() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

rc=0
timeout -s KILL 120 "$repo/ci/slurm-up.sh" --dir "$slurm_dir" || rc=$?
[[ $rc == 0 ]] || { [[ $rc == 77 ]] && exit 77; fail "ci/slurm-up.sh exited $rc"; }
. "$slurm_dir/env"

store="$work/store.db"
cat >"$work/sweep.toml" <<TOML
[sweep]
name = "slurm-test"
engine = "model"
clusters = ["experiments/clusters/hpwnv-16.toml", "experiments/clusters/moetuner-h100-ep4.toml"]
traces = ["experiments/traces/tiny-e4-d4.toml"]
policies = ["static", "prophet"]
seeds = [1]

[sweep.slurm]
time = "00:05:00"
max_parallel = 1
TOML
sweep() { timeout -s KILL 180 "$prophet" sweep "$work/sweep.toml" --set store.path="$store" "$@"; }

# --dry-run prints the batch script and submits nothing
sweep --launcher slurm --dry-run >"$work/script.txt"
grep -q '^#SBATCH --array=0-3%1$' "$work/script.txt" || fail "dry-run script has no 4-task array: $(cat "$work/script.txt")"
grep -q -- '--points "$points"' "$work/script.txt" || fail "dry-run script runs no points"
[[ -z "$(squeue -h --name prophet-slurm-test)" ]] || fail "--dry-run submitted a job"

# 1. submit held (sbatch reads SBATCH_HOLD), cancel point 3's task (array index 2) before any task ran, release
SBATCH_HOLD=1 sweep --launcher slurm --json >"$work/first.json"
job="$(json "$work/first.json" 'd["job_id"]')"
[[ "$(json "$work/first.json" 'd["submitted_points"]')" == "[1, 2, 3, 4]" ]] || fail "first submission: $(cat "$work/first.json")"
scancel "${job}_2"
scontrol release "$job"
# 2. the status shows the queue while the job runs
sweep --status >"$work/status1.txt"
grep -q "queue: squeue not available" "$work/status1.txt" && fail "--status found no squeue"
for _ in $(seq 120); do [[ -z "$(squeue -h --name prophet-slurm-test)" ]] && break; sleep 1; done
[[ -z "$(squeue -h --name prophet-slurm-test)" ]] || fail "job $job still queued after 120 s"
sweep --status --json >"$work/status2.json"
[[ "$(json "$work/status2.json" '[d["points"][k] for k in "1234"]')" == "['failed', 'failed', 'missing', 'finished']" ]] ||
  fail "status after the first job: $(cat "$work/status2.json")"

# 3. re-submit and wait: only points 1, 2, 3 run (4 is finished), then the shards are merged
rc=0
sweep --launcher slurm --wait --json >"$work/second.json" || rc=$?
[[ $rc == 1 ]] || fail "re-submission exited $rc, expected 1 (points 1 and 2 fail): $(cat "$work/second.json")"
[[ "$(json "$work/second.json" 'd["submitted_points"]')" == "[1, 2, 3]" ]] || fail "re-submission: $(cat "$work/second.json")"
[[ "$(json "$work/second.json" '[d["progress"][k] for k in ("finished", "failed", "missing")]')" == "[2, 2, 0]" ]] ||
  fail "after the re-submission: $(cat "$work/second.json")"
# the merged store: each finished point exactly once, the failed points recorded (once per submission)
counts="$(sqlite3 "$store" "SELECT status || ':' || count(*) FROM runs WHERE experiment = 'slurm-test'
  GROUP BY config_hash ORDER BY status, count(*)" | tr '\n' ' ')"
[[ "$counts" == "failed:2 failed:2 finished:1 finished:1 " ]] || fail "merged store runs per point: $counts"
echo "slurm_sweep_test: merged store: $(sqlite3 "$store" "SELECT count(*) FROM runs") runs: $counts" >&2

# 4. merging the same shards again changes nothing; another schema version is refused with exit 5
sqlite3 "$store" .dump >"$work/before.sql"
timeout -s KILL 60 "$prophet" db merge "$store.shards"/*.db --into "$store" >"$work/merge.txt"
grep -q "0 run(s) added" "$work/merge.txt" || fail "second merge added runs: $(cat "$work/merge.txt")"
sqlite3 "$store" .dump >"$work/after.sql"
cmp -s "$work/before.sql" "$work/after.sql" || fail "a second merge changed the store"
cp "$store.shards/shard-4.db" "$work/future.db"
sqlite3 "$work/future.db" "PRAGMA user_version = 999"
rc=0
timeout -s KILL 60 "$prophet" db merge "$work/future.db" --into "$store" 2>"$work/refused.txt" || rc=$?
[[ $rc == 5 ]] || fail "a schema-999 shard: exit $rc, expected 5"
grep -q "future.db has schema version 999" "$work/refused.txt" || fail "refusal does not name the file: $(cat "$work/refused.txt")"
echo "slurm_sweep_test: PASS" >&2
