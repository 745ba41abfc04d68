#!/usr/bin/env bash
# ci/gpu-check.sh: the GPU check (docs/gpu.md), in one go on a machine with an NVIDIA GPU, in under ten minutes:
#   1. configure and build the CUDA backend, its op tests and the NCCL communicator test (PROPHET_CUDA=ON)
#   2. ctest -L gpu: every CUDA op against its CPU op, the NCCL communicator; a SKIPPED test fails the check
#   3. test_gpu_ops --bench: the ops at the MoE-GPT-S shapes, ms and TFLOP/s or GB/s
# Everything goes into one folder: nvidia-smi.txt, configure.log, build.log, ctest-gpu.log, ctest-gpu.xml
# (JUnit), bench.log, bench.json and summary.json ({"status": "pass"|"fail", "stage", elapsed seconds, git sha}).
# Needs no network: the toolkit, NCCL and the Debian packages of ci/install-deps.sh must already be installed.
# Every stage runs under a timeout, so the whole check ends within PROPHET_GPU_CHECK_BUDGET seconds (default 570).
#
# Usage: ci/gpu-check.sh [RESULTS_DIR]        (default results/gpu-check)
#   env PROPHET_GPU_BUILD_DIR   build directory (default build-gpu-check)
# Exit: 0 all GPU tests passed and the benchmark ran; 1 a stage failed (summary.json names it); 2 usage.
set -euo pipefail

cd "$(dirname "$0")/.."
if [ $# -gt 1 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    sed -n '/^# Usage:/,/^# Exit:/p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
OUT="${1:-results/gpu-check}"
BUILD="${PROPHET_GPU_BUILD_DIR:-build-gpu-check}"
BUDGET="${PROPHET_GPU_CHECK_BUDGET:-570}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
START=$(date +%s)
SHA=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

# summary STATUS STAGE MESSAGE: writes summary.json and exits (0 on pass, 1 otherwise)
summary() {
    local elapsed=$(( $(date +%s) - START ))
    printf '{"status": "%s", "stage": "%s", "message": "%s", "elapsed_s": %d, "git": "%s"}\n' \
        "$1" "$2" "$3" "$elapsed" "$SHA" > "$OUT/summary.json"
    echo "gpu-check: $1 ($2: $3) after ${elapsed} s; results in $OUT"
    if [ "$1" = pass ]; then exit 0; fi
    exit 1
}
# left: seconds of the budget still unspent (at least 1)
left() { local l=$(( BUDGET - ($(date +%s) - START) )); [ "$l" -gt 0 ] && echo "$l" || echo 1; }

{ nvidia-smi 2>&1 || echo "nvidia-smi: not available"; } > "$OUT/nvidia-smi.txt"

echo "gpu-check: configure ($BUILD)"
timeout "$(left)" cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPROPHET_CUDA=ON \
    -DPROPHET_BUILD_BENCH=OFF > "$OUT/configure.log" 2>&1 || summary fail configure "see configure.log"

echo "gpu-check: build"
timeout "$(left)" cmake --build "$BUILD" -j "$(nproc)" --target test_gpu_ops test_comm_nccl > "$OUT/build.log" 2>&1 ||
    summary fail build "see build.log"

echo "gpu-check: ctest -L gpu"
ctest_rc=0
timeout "$(left)" ctest --test-dir "$BUILD" -L gpu --output-on-failure --no-tests=error \
    --output-junit "$OUT/ctest-gpu.xml" > "$OUT/ctest-gpu.log" 2>&1 || ctest_rc=$?
# the NCCL pair: exactly one applies (gpu_comm_nccl_refusal with fewer than two GPUs, gpu_comm_nccl with two or
# more), so exactly one of the two may be skipped; any other skip fails the check
nccl_pair=' - gpu_comm_nccl(_refusal)? \(Skipped\)'
if grep "(Skipped)" "$OUT/ctest-gpu.log" | grep -qvE "$nccl_pair" ||
   [ "$(grep -cE "$nccl_pair" "$OUT/ctest-gpu.log")" -gt 1 ]; then
    summary fail tests "GPU tests were skipped: no CUDA device visible, or a driver too old for CUDA 13 (see ctest-gpu.log, nvidia-smi.txt)"
fi
[ "$ctest_rc" -eq 0 ] || summary fail tests "ctest exited $ctest_rc (see ctest-gpu.log)"

echo "gpu-check: benchmark"
timeout "$(left)" "$BUILD/tests/test_gpu_ops" --bench --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1 ||
    summary fail bench "see bench.log"

summary pass all "every GPU op within tolerance; benchmark in bench.json"
