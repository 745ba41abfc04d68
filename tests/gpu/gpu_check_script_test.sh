#!/usr/bin/env bash
# gpu_check_script_test.sh: the CPU side of ci/gpu-check.sh (ctest gpu_check_script, no GPU needed):
#   - usage errors exit 2 with the usage text;
#   - with every GPU hidden (CUDA_VISIBLE_DEVICES empty) it stops at the device check, exit 3, before building
#     anything (no build directory), with summary.json {"stage": "device"} in RESULTS_DIR, or in $OUT when no
#     RESULTS_DIR is given;
#   - ci/gpu_train_check.py's verdicts on made-up runs: parity passes equal losses and fails a 1e-3 gap or a run
#     without replicas under --min-replicas; ratio divides the median step times; calibration wants every figure
#     positive and the cluster file written; table prints every stage with its number.
# Usage: gpu_check_script_test.sh (from anywhere; exit 0 pass, 1 a check failed)
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
fails=0
expect() {  # expect WHAT CONDITION...
    local what="$1"; shift
    if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fails=$((fails + 1)); fi
}
script="$ROOT/ci/gpu-check.sh"
run() { timeout -s KILL 60 "$@" > "$T/out" 2> "$T/err"; echo $?; }

rc=$(run "$script" one two)
expect "two arguments: exit 2 (got $rc)" [ "$rc" = 2 ]
expect "usage text on stderr" grep -q "^Usage: ci/gpu-check.sh" "$T/err"
rc=$(run "$script" --bogus)
expect "an option: exit 2 (got $rc)" [ "$rc" = 2 ]

rc=$(run env CUDA_VISIBLE_DEVICES= PROPHET_GPU_BUILD_DIR="$T/build" "$script" "$T/results")
expect "no GPU visible: exit 3 (got $rc)" [ "$rc" = 3 ]
expect "one loud line on stderr" grep -q "gpu-check: FAILED: no GPU visible" "$T/err"
expect "nothing built" [ ! -e "$T/build" ]
expect "summary.json names the device stage" grep -q '"status": "fail", "stage": "device"' "$T/results/summary.json"
expect "the stage table is printed" grep -qE "^device +fail" "$T/out"
rc=$(cd "$T" && run env CUDA_VISIBLE_DEVICES=-1 OUT="$T/out-env" PROPHET_GPU_BUILD_DIR="$T/build" "$script")
expect "\$OUT is the results folder without an argument (exit $rc)" [ -f "$T/out-env/summary.json" ]

# gpu_train_check.py on made-up --json step lines
check="$ROOT/ci/gpu_train_check.py"
steps() {  # steps FILE LOSS_SCALE STEP_MS REPLICAS: 20 step lines
    python3 -c "
import json, sys
for s in range(20):
    print(json.dumps({'step': s, 'loss': (5.0 - 0.1 * s) * float(sys.argv[1]), 'step_ms': float(sys.argv[2]) + s % 3,
                      'replicas': int(sys.argv[3])}))" "$2" "$3" "$4" > "$1"
}
steps "$T/a.jsonl" 1 10 0
steps "$T/b.jsonl" 1 20 2
steps "$T/c.jsonl" 1.001 10 2
python3 "$check" parity "$T/b.jsonl" "$T/a.jsonl" "$T/p1.json" --rtol 1e-5 --min-replicas 1 > /dev/null 2>&1
expect "parity: equal losses with replicas pass" [ $? = 0 ]
python3 "$check" parity "$T/c.jsonl" "$T/a.jsonl" "$T/p2.json" --rtol 1e-5 > /dev/null 2>&1
expect "parity: a 1e-3 gap fails at rtol 1e-5" [ $? = 1 ]
python3 "$check" parity "$T/a.jsonl" "$T/b.jsonl" "$T/p3.json" --rtol 1e-5 --min-replicas 1 > /dev/null 2>&1
expect "parity: no replica under --min-replicas 1 fails" [ $? = 1 ]
python3 "$check" ratio "$T/a.jsonl" "$T/b.jsonl" "$T/ratio.json" > /dev/null
expect "ratio: median 11 ms / 21 ms" python3 -c "
import json, sys; r = json.load(open(sys.argv[1]))['ratio']; sys.exit(0 if abs(r - 11 / 21) < 1e-12 else 1)" "$T/ratio.json"
cal='{"expert_gflop_s": 900, "fnec_ms": 0.2, "bnec_ms": 0.4, "step_tail_ms": 3, "p2p_gbit_s": 40, "trans_gbit_s": 30, "agg_gbit_s": 20}'
echo "{\"run_id\": \"x\", \"calibration\": $cal}" > "$T/cal.jsonl"
printf '[cluster]\nnum_devices = 2\n' > "$T/cluster.toml"
python3 "$check" calibration "$T/cal.jsonl" "$T/cluster.toml" "$T/calibration.json" > /dev/null 2>&1
expect "calibration: positive figures and a cluster file pass" [ $? = 0 ]
sed 's/"fnec_ms": 0.2/"fnec_ms": 0/' "$T/cal.jsonl" > "$T/cal0.jsonl"
python3 "$check" calibration "$T/cal0.jsonl" "$T/cluster.toml" "$T/cal0.json" > /dev/null 2>&1
expect "calibration: a zero FNEC fails" [ $? = 1 ]
python3 "$check" calibration "$T/cal.jsonl" "$T/missing.toml" "$T/cal1.json" > /dev/null 2>&1
expect "calibration: no cluster file fails" [ $? = 1 ]
printf 'device\tpass\tGPU 0\nratio\tpass\t\ncalibration\tpass\t\nparity\tfail\tsee parity.json\n' > "$T/stages.tsv"
python3 "$check" table "$T" > "$T/table" 2>&1
expect "table: every stage, the ratio's number" grep -q "prophet/static 0.524" "$T/table"
expect "table: a failed stage's message" grep -qE "^parity +fail +see parity.json" "$T/table"
expect "table: the calibration's figures" grep -q "expert 900 GFLOP/s, FNEC 0.200 ms" "$T/table"

[ "$fails" = 0 ] && echo "gpu_check_script: all checks passed" && exit 0
echo "gpu_check_script: $fails check(s) failed"
exit 1
