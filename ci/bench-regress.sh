#!/usr/bin/env bash
# ci/bench-regress.sh: throughput regression gate for CI (docs/reliability.md, "Benchmark regressions").
#
# Measures, on the binaries of a build directory:
#   deterministic  `prophet plan --json` on fixed inputs: predicted time (Eq 6, Eq 8), max/mean load, balance std,
#                  all-to-all / Trans / Agg bytes, replicas of every policy whose plan is deterministic (the ILP
#                  policies run under a time limit and are left out). Compared EXACTLY with the baseline.
#   instructions   bench/planner_instructions under valgrind's callgrind: instructions per plan of prophet,
#                  fastermoe and eplb on bench_planner's inputs, only the planning loop counted. The same binary on
#                  the same input gives the same count every time; a count above the baseline by more than 2% is a
#                  regression (not exact: glibc picks its memcpy/memset for the CPU, so another CPU differs a little).
#   timings        bench_planner (Google Benchmark, CPU time per plan), bench_model_step --model tiny (tokens/s of
#                  one training step on one rank by CPU time) and a 2-rank pinned step (`prophet train` under
#                  mpirun --bind-to core -np 2, one BLAS thread per rank: tokens/s by wall time, the 75th
#                  percentile of the 25 steps after 5 warm-up steps: other jobs only add wall time to a step). Each is divided by a reference measured before and after the rows in the same
#                  repeat: bench/bench_reference, cblas_sgemm called directly at the tiny model's GEMM shapes (no
#                  code of this project, not even its gemm() wrapper), by CPU time for the CPU-time rows and, for
#                  the 2-rank row, by wall time of two copies pinned like its ranks (mpirun --bind-to core -np 2),
#                  so that a slower or busier machine moves both alike. The median over
#                  repeats is compared with the baseline against the threshold (10%: a 15% regression fails), and a
#                  row beyond it is measured again (as many repeats) before it counts: only a regression seen in
#                  the median of all repeats fails.
# Prints one table, records every row (every repeat) in the store's bench table under a run tagged with the git
# commit (report/fig_bench_history.py draws them across commits), and exits
#   0 no confirmed regression, 1 a confirmed regression or a deterministic mismatch, 2 usage or a benchmark that
#   did not run, 5 a store that is not prophet's.
#
# Usage: ci/bench-regress.sh [--build DIR] [--quick] [--repeats N] [--threshold F] [--baseline FILE] [--db FILE]
#                            [--update] [--append-history] [--inject-slowdown PCT] [--against DIR]
#   --build DIR       build directory with prophet and bench/ (default build)
#   --quick           the CI mode: 2 planner sizes, 2 repeats, short runs, threshold 2.0 (fails only beyond 3x: under
#                     ctest -j2 on a loaded 2-core machine another test shares the cores, so 10% would flake; it
#                     checks that every row runs, the exact rows and the instruction counts)
#   --repeats N       repeats per measurement round (default 5; quick 2)
#   --threshold F     noise threshold: a time row regresses when current/baseline > 1+F, a throughput row when
#                     baseline/current > 1+F (default 0.10; quick 2.0)
#   --baseline FILE   default results/baselines/bench.json
#   --db FILE         store to record into (default results/prophet.db)
#   --update          write the measured figures as the new baseline instead of comparing (review the diff)
#   --append-history  after comparing, append one line (commit, date, machine, every row's median and baseline,
#                     verdict) to results/baselines/history.jsonl; needs a committed tree, once per commit
#   --against DIR     a second build directory (e.g. the parent commit's) measured in the same repeats, back to
#                     back with --build, the first alternating: the timing rows' baseline is that build, and a row's
#                     ratio is the median over repeats of the paired ratio (drift in the machine falls on both);
#                     an odd --repeats is rounded up so that each build goes first equally often.
#                     Deterministic and instruction rows still compare with --baseline. Not with --update or
#                     --append-history
#   --inject-slowdown PCT  TEST ONLY: both training rows become PCT% slower, a spin in every step (prophet train
#                     --set debug.slow_step_pct, bench_model_step --slow-step-pct): the gate's acceptance check
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=build QUICK=0 REPEATS="" THRESHOLD="" BASELINE=results/baselines/bench.json DB=results/prophet.db UPDATE=0
HISTORY="" INJECT_PCT="" AGAINST=""
usage() { sed -n '/^# Usage:/,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --build) BUILD="${2:?--build needs a directory}"; shift 2 ;;
        --quick) QUICK=1; shift ;;
        --repeats) REPEATS="${2:?--repeats needs a number}"; shift 2 ;;
        --threshold) THRESHOLD="${2:?--threshold needs a number}"; shift 2 ;;
        --baseline) BASELINE="${2:?--baseline needs a file}"; shift 2 ;;
        --db) DB="${2:?--db needs a file}"; shift 2 ;;
        --update) UPDATE=1; shift ;;
        --append-history) HISTORY=results/baselines/history.jsonl; shift ;;
        --inject-slowdown) INJECT_PCT="${2:?--inject-slowdown needs a percentage}"; shift 2 ;;
        --against) AGAINST="${2:?--against needs a build directory}"; shift 2 ;;
        -h|--help) usage ;;
        *) echo "bench-regress: unknown argument '$1'" >&2; usage ;;
    esac
done
for bin in "$BUILD/prophet" "$BUILD/bench/bench_planner" "$BUILD/bench/bench_model_step" \
           "$BUILD/bench/planner_instructions" "$BUILD/bench/bench_reference" \
           ${AGAINST:+"$AGAINST/prophet" "$AGAINST/bench/bench_planner" "$AGAINST/bench/bench_model_step"}; do
    if [ ! -x "$bin" ]; then
        echo "bench-regress: $bin not found; fix: cmake --build $BUILD -j2 (or --build DIR)" >&2
        exit 2
    fi
done
if ! command -v valgrind >/dev/null; then
    echo "bench-regress: valgrind not found (instruction counts); fix: apt-get install valgrind (ci/install-deps.sh does)" >&2
    exit 2
fi
if ! command -v mpirun >/dev/null; then
    echo "bench-regress: mpirun not found (the 2-rank step); fix: apt-get install openmpi-bin (ci/install-deps.sh does)" >&2
    exit 2
fi
if [ "$UPDATE" = 0 ] && [ ! -f "$BASELINE" ]; then
    echo "bench-regress: baseline $BASELINE not found; fix: write one with --update" >&2
    exit 2
fi
export BUILD QUICK REPEATS THRESHOLD BASELINE DB UPDATE HISTORY INJECT_PCT AGAINST
exec /usr/bin/python3 ci/bench_regress.py

