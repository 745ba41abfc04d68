#!/usr/bin/env bash
# ci/gpu-check.sh: the GPU check (docs/gpu.md), in one go on a machine with an NVIDIA GPU, in under ten minutes:
#   1. configure and build the CUDA backend, its op tests and the NCCL communicator test (PROPHET_CUDA=ON)
#   2. ctest -L gpu: every CUDA op against its CPU op, the NCCL communicator; a SKIPPED test fails the check
#   3. test_gpu_ops --bench: the ops at the MoE-GPT-S shapes, ms and TFLOP/s or GB/s
#   4. prophet train --set device.kind=cuda against the CPU run (skewed-4rank preset, 20 steps, same seed): every
#      step's loss within 1e-4 relative; then each run resumes the other's step-9 checkpoint and must repeat the
#      CPU losses of steps 10-19 (checkpoints are interchangeable)
#   5. MoE-GPT-S on one GPU through prophet train: tokens/s, achieved TFLOP/s, MFU against the H200's dense peaks
#      (fp32 67 TFLOPS, bf16 989.5 TFLOPS: NVIDIA's H200 datasheet, docs/gpu.md; PROPHET_GPU_PEAK_FP32/_BF16)
# Everything goes into one folder: nvidia-smi.txt, configure.log, build.log, ctest-gpu.log, ctest-gpu.xml
# (JUnit), bench.log, bench.json, train-*.jsonl / .log, parity*.json, train-bench.json and summary.json
# ({"status": "pass"|"fail", "stage", elapsed seconds, git sha}). A stage after the tests that fails does not stop
# the later ones (device time is scarce): summary.json names the first failed stage.
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
timeout "$(left)" cmake --build "$BUILD" -j "$(nproc)" --target test_gpu_ops test_comm_nccl prophet > "$OUT/build.log" 2>&1 ||
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
# from here on a failed stage is recorded and the rest still run
FAILED_STAGE="" FAILED_MESSAGE=""
fail_later() { if [ -z "$FAILED_STAGE" ]; then FAILED_STAGE="$1" FAILED_MESSAGE="$2"; fi; echo "gpu-check: $1 failed: $2"; }
[ "$ctest_rc" -eq 0 ] || fail_later tests "ctest exited $ctest_rc (see ctest-gpu.log)"

echo "gpu-check: benchmark"
timeout "$(left)" "$BUILD/tests/test_gpu_ops" --bench --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1 ||
    fail_later bench "see bench.log"

# train NAME ARGS...: one `prophet train --json` run of the skewed preset into train-NAME.jsonl / .log
PRESET=experiments/train/skewed-4rank.toml
train() {
    local name="$1"; shift
    timeout "$(left)" "$BUILD/prophet" train --config "$PRESET" --json --set store.path="$OUT/train.db" "$@" \
        > "$OUT/train-$name.jsonl" 2> "$OUT/train-$name.log"
}
echo "gpu-check: loss parity, prophet train on cuda vs cpu (20 steps)"
if train gpu --set device.kind=cuda --save --set train.save_every=10 --set train.checkpoint_dir="$OUT/ckpt-gpu" &&
   train cpu --set device.kind=cpu --save --set train.save_every=10 --set train.checkpoint_dir="$OUT/ckpt-cpu"; then
    python3 ci/gpu_train_check.py parity "$OUT/train-gpu.jsonl" "$OUT/train-cpu.jsonl" "$OUT/parity.json" ||
        fail_later parity "GPU losses differ from the CPU's by more than 1e-4 relative (parity.json)"
    echo "gpu-check: checkpoints across devices (resume step 9 on the other device)"
    if train cpu-from-gpu --set device.kind=cpu --resume "$OUT/ckpt-gpu/step-00000009" &&
       train gpu-from-cpu --set device.kind=cuda --resume "$OUT/ckpt-cpu/step-00000009"; then
        python3 ci/gpu_train_check.py parity --name resume-cpu-from-gpu --from 10 --steps 10 \
            "$OUT/train-cpu-from-gpu.jsonl" "$OUT/train-cpu.jsonl" "$OUT/parity-cpu-from-gpu.json" ||
            fail_later checkpoints "a CPU run resumed from the GPU checkpoint left the CPU losses (parity-cpu-from-gpu.json)"
        python3 ci/gpu_train_check.py parity --name resume-gpu-from-cpu --from 10 --steps 10 \
            "$OUT/train-gpu-from-cpu.jsonl" "$OUT/train-cpu.jsonl" "$OUT/parity-gpu-from-cpu.json" ||
            fail_later checkpoints "a GPU run resumed from the CPU checkpoint left the CPU losses (parity-gpu-from-cpu.json)"
    else
        fail_later checkpoints "a resumed run failed (train-cpu-from-gpu.log, train-gpu-from-cpu.log)"
    fi
else
    fail_later parity "a training run failed (train-gpu.log, train-cpu.log)"
fi

echo "gpu-check: MoE-GPT-S on one GPU through prophet train"
MOE_S=experiments/models/moe-gpt-s.toml
if timeout "$(left)" "$BUILD/prophet" train --config "$MOE_S" --json --set device.kind=cuda \
       --set train.steps="${PROPHET_GPU_BENCH_STEPS:-6}" --set store.path="$OUT/train.db" \
       > "$OUT/train-moe-gpt-s.jsonl" 2> "$OUT/train-moe-gpt-s.log"; then
    python3 ci/gpu_train_check.py bench "$OUT/train-moe-gpt-s.jsonl" "$MOE_S" "$OUT/train-bench.json" \
        --fp32-peak "${PROPHET_GPU_PEAK_FP32:-67}" --bf16-peak "${PROPHET_GPU_PEAK_BF16:-989.5}" ||
        fail_later train-bench "see train-moe-gpt-s.jsonl"
else
    fail_later train-bench "prophet train on MoE-GPT-S failed (train-moe-gpt-s.log)"
fi

[ -z "$FAILED_STAGE" ] || summary fail "$FAILED_STAGE" "$FAILED_MESSAGE"
summary pass all "every GPU op within tolerance; train losses within 1e-4 of the CPU; benchmarks in bench.json, train-bench.json"
