#!/usr/bin/env bash
# validate-heldout-wide.sh: the wide held-out validation of the per-op model (issue 25 item 4; docs/validation-heldout.md
# lists the points). It builds nothing (PROPHET, default ./build/prophet, must exist). On a QUIET 2-core machine,
# 2 ranks pinned one per core (mpirun --bind-to core --map-by core), one BLAS thread per rank (OPENBLAS_NUM_THREADS=1;
# an OPENBLAS_CORETYPE in the environment is passed to the ranks):
#   1. calibrates the per-op model ONCE, on one config: experiments/train/main-2rank.toml (C = 64, F = 2048, NH = 4,
#      E = 4, K = 1, L = 2) with the gate's routing on the skewed corpus, no link, schedule none. The GEMMs are
#      measured on the calibration's fixed (M, N, K) grid, the same for every config, and no --ops-shape is given:
#      nothing is microbenchmarked at a validated shape;
#      The calibration config is recorded again (`prophet train --timeline`, CAL_STEPS steps) after every 4 configs,
#      and the per-kind scale and in_step_us are re-fitted on all its recordings pooled (`prophet validate
#      --refit-on` each): the machine's drift over the campaign is sampled, not the one moment before it;
#   2. records 36 x SEEDS held-out runs with --timeline: 12 configs x 3 policies (static, prophet, top2: the heavy
#      replicator), SEEDS seeds each (default 3). The 12 configs are a fractional design over 3 model shapes (C, F, NH), none the
#      calibration's, and 5 two-level factors, E in {4, 8}, K in {1, 2}, L in {2, 3}, schedule in {none, blockwise},
#      link in {none, 2 Gbit/s emulated (comm.link_gbps)}: per shape 4 configs in which every factor takes each value
#      twice (E, K, L on the same three orthogonal columns; schedule and link on the others, rotated per shape);
#   3. replays every run with `prophet validate` (its table on stdout, a validation run in the store) and prints
#      the acceptance summary: the share of points within 10%, MAPE, bias, max, the policy order where significant,
#      and the machine's load before and after.
# One command:   experiments/validate-heldout-wide.sh        (a few minutes on a quiet 2-core machine)
# Smoke (1 config x 3 policies, 3 steps; checks the script, no evidence):   SMOKE=1 experiments/validate-heldout-wide.sh
# Environment: PROPHET, STORE, CLUSTER, STEPS (default 20), CAL_STEPS (the calibration run's steps, default 60: the
# per-kind scale is a median over them, docs/validation-heldout.md "Calibration noise"), SEEDS (default 3; smoke 1):
# every point runs once per seed, each its own process, so the policy order's significance test compares policies
# against the spread between processes (one process's steps vary far less than processes do: up to ~7% here).
set -euo pipefail
prophet=${PROPHET:-./build/prophet}
store=${STORE:-results/validate-heldout-wide.db}
cluster=${CLUSTER:-results/clusters/validate-heldout-wide.toml}
steps=${STEPS:-20}
cal_steps=${CAL_STEPS:-60}
seeds=${SEEDS:-3}
base=experiments/train/main-2rank.toml
exp=validate-heldout-wide
if [[ ! -x "$prophet" ]]; then
    echo "validate-heldout-wide.sh: no binary at '$prophet' (build it first, or set PROPHET)" >&2
    exit 2
fi
mpirun=(timeout -s KILL 900 mpirun --allow-run-as-root --bind-to core --map-by core -np 2 -x OPENBLAS_NUM_THREADS=1)
if [[ -n "${OPENBLAS_CORETYPE:-}" ]]; then mpirun+=(-x OPENBLAS_CORETYPE); fi
# the configs: C F NH | E K L | schedule link_gbps
configs=(
    "64 1024 4   8 2 3  none      0"
    "64 1024 4   8 1 2  none      2"
    "64 1024 4   4 2 2  blockwise 0"
    "64 1024 4   4 1 3  blockwise 2"
    "96 1536 4   8 2 3  blockwise 0"
    "96 1536 4   8 1 2  none      0"
    "96 1536 4   4 2 2  none      2"
    "96 1536 4   4 1 3  blockwise 2"
    "128 1024 8  8 2 3  blockwise 0"
    "128 1024 8  8 1 2  none      2"
    "128 1024 8  4 2 2  blockwise 2"
    "128 1024 8  4 1 3  none      0"
)
policies=(static prophet top2)
if [[ -n "${SMOKE:-}" ]]; then
    configs=("${configs[3]}"); steps=3; cal_steps=3; seeds=${SEEDS:-1}
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load before: $load_before (the campaign wants < 1; the store records it per run)" >&2
mkdir -p "$(dirname "$store")" "$(dirname "$cluster")"
common=(--set store.path="$store" --set train.log_every=1000 --set train.steps="$steps")
# the gate's routing on the skewed corpus (not main-2rank's replayed trace, which is E = 4, K = 1 only), no link,
# schedule none: the calibration's settings; the points set their own after these
common+=(--set routing.source='"gate"' --set data.dominant_topic=0 --set data.dominance=0.9 --set comm.link_gbps=0
         --set schedule.mode='"none"')

# the finished recordings of the calibration config in the store (one run id a line)
calibration_runs() {
    if [[ ! -e "$store" ]]; then return 0; fi
    "$prophet" runs --db "$store" --experiment "$exp-calibration" --status finished --limit 0 --json |
        /usr/bin/python3 -c 'import json, sys; print("\n".join(r["run_id"] for r in json.load(sys.stdin)))'
}
mapfile -t earlier_cal_runs < <(calibration_runs)  # a store reused from an earlier campaign: not this one's

start=$SECONDS
"${mpirun[@]}" "$prophet" profile --config "$base" --calibrate --cluster-out "$cluster" "${common[@]}" \
    --set train.steps="$cal_steps" --set run.experiment="$exp-calibration" >&2

# the calibration config again, as the profile run above ran it (its scale / in_step_us re-fit pools them all)
record_calibration() {
    echo "calibration config again" >&2
    "${mpirun[@]}" "$prophet" train --config "$base" --timeline "${common[@]}" --set train.steps="$cal_steps" \
        --set run.experiment="$exp-calibration" >/dev/null
}

done_configs=0
for seed in $(seq 1 "$seeds"); do  # seeds outermost: a point's seeds are minutes apart, so their spread holds drift
    for config in "${configs[@]}"; do
        if ((done_configs > 0 && done_configs % 4 == 0)); then record_calibration; fi
        done_configs=$((done_configs + 1))
        read -r C F NH E K L schedule link <<<"$config"
        for policy in "${policies[@]}"; do
            echo "point C=$C F=$F NH=$NH E=$E K=$K L=$L $schedule link=$link $policy seed=$seed" >&2
            "${mpirun[@]}" "$prophet" train --config "$base" --timeline "${common[@]}" --set run.experiment="$exp" \
                --set model.C="$C" --set model.F="$F" --set model.NH="$NH" --set model.E="$E" --set model.K="$K" \
                --set model.L="$L" --set schedule.mode="$schedule" --set comm.link_gbps="$link" \
                --set balance.policy="$policy" --set run.seed="$seed" >/dev/null
        done
    done
done
record_calibration
# this campaign's recordings of the calibration config (the profile run and the train runs above)
mapfile -t cal_runs < <(calibration_runs)
refit=()
for run in "${cal_runs[@]}"; do
    if [[ " ${earlier_cal_runs[*]} " != *" $run "* ]]; then refit+=(--refit-on "$run"); fi
done
echo "calibration recordings pooled: ${refit[*]}" >&2
"$prophet" validate --store "$store" --experiment "$exp" --cluster "$cluster" "${refit[@]}"
json=$(mktemp "${TMPDIR:-/tmp}/validate-heldout-wide.XXXXXX.json")
trap 'rm -f "$json"' EXIT
"$prophet" validate --store "$store" --experiment "$exp" --cluster "$cluster" "${refit[@]}" --json --no-record >"$json"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
/usr/bin/python3 - "$json" "$load_before" "$load_after" "$((SECONDS - start))" <<'EOF'
# the acceptance summary of issue 25 item 4 over the held-out points
import json, statistics, sys

report = json.load(open(sys.argv[1]))
points = [p for p in report["points"] if p["held_out"]]
if not points:
    sys.exit("validate-heldout-wide.sh: no held-out point to summarise")


def summary(errors):
    within = sum(abs(e) <= 0.10 for e in errors)
    return within, (f"within 10%: {within} of {len(errors)} ({within / len(errors):.0%})   MAPE "
                    f"{statistics.mean(abs(e) for e in errors):.1%}   bias {statistics.mean(errors):+.1%}   "
                    f"max |err| {max(abs(e) for e in errors):.1%}")


# a point is a (config, schedule, policy); its error is the mean of its seeds' runs' errors (each run: the median
# step, simulated against measured). The seeds are separate processes minutes apart: one process can run 10-25%
# slower than the others of its point (docs/validation-heldout.md "Process-to-process spread"), which is the
# machine, not the model, so the acceptance reads the point's mean; the runs are printed too.
by_point = {}
for p in points:
    by_point.setdefault((p["config"], p["schedule"], p["policy"]), []).append(p["error_median"])
errors = [statistics.mean(e) for e in by_point.values()]
within, line = summary(errors)
bias = statistics.mean(errors)
total = report["total"]
seeds = sorted({len(e) for e in by_point.values()})
print(f"\nwide held-out campaign: {len(errors)} held-out points ({len(points)} runs: {'/'.join(map(str, seeds))} "
      f"seed(s) each), calibrated on {report['calibrated_on']}")
print(f"  points (the mean of their seeds' errors): {line}")
print(f"  runs (each seed alone): {summary([p['error_median'] for p in points])[1]}")
pairs, tau = total["tau_pairs"], total["kendall_tau"]
order = "no significant pair" if pairs == 0 else f"Kendall tau {tau:.2f} over {pairs} significant pairs"
print(f"  policy order: {order}")
# the median error per level of every factor (config: 'V=.. T=.. C=.. NH=.. L=.. E=.. K=.. F=.. B=.. D=.. link=..')
levels = {}
for p in points:
    kv = dict(item.split("=") for item in p["config"].split())
    for factor in ("C", "E", "K", "L", "link"):
        levels.setdefault((factor, kv[factor]), []).append(p["error_median"])
    levels.setdefault(("schedule", p["schedule"]), []).append(p["error_median"])
    levels.setdefault(("policy", p["policy"]), []).append(p["error_median"])
print("  median error per factor level: " +
      ", ".join(f"{f}={v} {statistics.median(e):+.1%} ({len(e)})" for (f, v), e in sorted(levels.items())))
checks = [(within >= 0.9 * len(errors), ">= 90% of points within 10%"), (abs(bias) <= 0.03, "|bias| <= 3%"),
          (pairs == 0 or tau == 1.0, "policy order kept wherever significant")]
for ok, what in checks:
    print(f"  {'PASS' if ok else 'FAIL'}: {what}")
print(f"  load (1, 5, 15 min) before: {sys.argv[2]}; after: {sys.argv[3]}; {sys.argv[4]} s wall")
EOF
