#!/usr/bin/env bash
# slurm_hostile_test.sh: hostile sweep names and paths through a real one-node Slurm (ci/slurm-up.sh), issue 26
# item 1. From a working directory holding a space and a comma, with the store there too:
#   1. a sweep named  exp v2,"$(touch PWNED)"'q  (space, comma, $(...), both quotes) is submitted while the
#      partition is down; Slurm knows the job by exactly "prophet-<name>" and nothing runs the $(...);
#   2. submitting it again is refused (exit 2, "still in the queue"): the guard must not read the comma as a list
#      of names (`squeue --name=a,b`), which let a second array through;
#   3. with the partition up, its two points finish; the next call merges the shards: two finished runs under
#      the name;
#   4. a name holding a newline (the injection: "nightly\ntouch PWNED\n#") and a name that climbs out of the shard
#      directory ("../../../x") are refused with exit 3 naming sweep.name, and nothing is submitted.
# Exit 77 (skipped) where the Slurm daemons cannot start here.
#   tests/cluster/slurm_hostile_test.sh PROPHET_BINARY
set -euo pipefail
prophet="$(realpath "$1")"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
slurm_dir="$(mktemp -d /tmp/prophet-slurm-hostile.XXXXXX)"
work="$(mktemp -d "/tmp/prophet hostile,dir.XXXXXX")"
cleanup() { "$repo/ci/slurm-down.sh" --dir "$slurm_dir" >/dev/null 2>&1 || true; rm -rf "$work" "$slurm_dir"; }
trap cleanup EXIT
fail() { echo "slurm_hostile_test: FAIL: $*" >&2; exit 1; }
json() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
pwned() { for d in "$work" "$repo" /tmp "$slurm_dir"; do [[ -e "$d/PWNED" ]] && return 0; done; return 1; }

rc=0
timeout -s KILL 120 "$repo/ci/slurm-up.sh" --dir "$slurm_dir" || rc=$?
[[ $rc == 0 ]] || { [[ $rc == 77 ]] && exit 77; fail "ci/slurm-up.sh exited $rc"; }
. "$slurm_dir/env"
cd "$work"

name='exp v2,"$(touch PWNED)"'"'q"
sweep_file() {  # NAME-as-TOML-string FILE: a 2-point model sweep (2 policies) that finishes
  cat >"$2" <<TOML
[sweep]
name = $1
engine = "model"
clusters = ["$repo/experiments/clusters/moetuner-h100-ep4.toml"]
traces = ["$repo/experiments/traces/tiny-e4-d4.toml"]
policies = ["static", "prophet"]
seeds = [1]

[sweep.slurm]
time = "00:05:00"
TOML
}
toml_name="$(/usr/bin/python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$name")"
sweep_file "$toml_name" "$work/sweep file.toml"
store="$work/store dir/my store.db"
mkdir -p "$work/store dir"
sweep() { timeout -s KILL 180 "$prophet" sweep "$work/sweep file.toml" --set store.path="$store" "$@"; }
# distinct array jobs (%F: an array's tasks may be listed one by one) whose name is exactly prophet-<name>
jobs_named() {
  squeue -h -o '%F %j' | NAME="prophet-$name" awk '{ id = $1; sub(/^[^ ]* /, ""); if ($0 == ENVIRON["NAME"]) print id }' |
    sort -u | wc -l
}

# 1. submitted while the partition is down (the job waits; SBATCH_HOLD does not hold on this Slurm): the job
#    carries the whole name, nothing ran
scontrol update PartitionName=debug State=DOWN
sweep --launcher slurm --json >"$work/first.json" 2>"$work/first.err" ||
  fail "submission exited $?: $(cat "$work/first.err")"
job="$(json "$work/first.json" 'd["job_id"]')"
[[ "$(jobs_named)" == 1 ]] || fail "no job named exactly prophet-$name: $(squeue -h -o '%i %j')"
pwned && fail "the name's \$(touch PWNED) ran"

# 2. the guard sees the queued job although the name holds a comma
rc=0
sweep --launcher slurm >"$work/second.out" 2>"$work/second.err" || rc=$?
[[ $rc == 2 ]] || fail "a second submission while queued exited $rc, expected 2: $(cat "$work/second.err")"
grep -q "still in the queue" "$work/second.err" || fail "no 'still in the queue': $(cat "$work/second.err")"
[[ "$(jobs_named)" == 1 ]] || fail "a second array was submitted: $(squeue -h -o '%i %j')"

# 3. the partition up: both points finish; the next call merges the shards into the store
scontrol update PartitionName=debug State=UP
for _ in $(seq 120); do [[ -z "$(squeue -h -j "$job" 2>/dev/null)" ]] && break; sleep 1; done
[[ -z "$(squeue -h -j "$job" 2>/dev/null)" ]] || fail "job $job still queued after 120 s"
sweep --launcher slurm --json >"$work/merge.json" 2>"$work/merge.err" || fail "merge call: $(cat "$work/merge.err")"
[[ "$(json "$work/merge.json" 'd["merged_runs"]')" == 2 ]] || fail "merge: $(cat "$work/merge.json")"
finished="$(/usr/bin/python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(
  "SELECT count(*) FROM runs WHERE experiment = ? AND status = ?", (sys.argv[2], "finished")).fetchone()[0])' \
  "$store" "$name")"
[[ "$finished" == 2 ]] || fail "finished runs named $name in the store: $finished"
ls "$store.shards"/slurm-*.out >/dev/null 2>&1 || fail "no task output in $store.shards"
pwned && fail "the name's \$(touch PWNED) ran"

# 4. a newline (the injection) and a path out of the shard directory: exit 3 naming sweep.name, nothing submitted
for bad in $'nightly\ntouch PWNED\n#' '../../../x'; do
  sweep_file "$(/usr/bin/python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$bad")" "$work/bad.toml"
  rc=0
  timeout -s KILL 60 "$prophet" sweep "$work/bad.toml" --set store.path="$store" --launcher slurm \
    2>"$work/bad.err" || rc=$?
  [[ $rc == 3 ]] || fail "name $(printf %q "$bad"): exit $rc, expected 3: $(cat "$work/bad.err")"
  grep -q "sweep.name" "$work/bad.err" || fail "the refusal does not name sweep.name: $(cat "$work/bad.err")"
done
[[ -z "$(squeue -h)" ]] || fail "a refused sweep was submitted: $(squeue -h -o '%i %j')"
pwned && fail "a refused name's touch PWNED ran"
echo "slurm_hostile_test: PASS" >&2
