#!/usr/bin/env bash
# ci/gpu-check.sh: the GPU check (docs/gpu.md), in one go on a machine with an NVIDIA GPU, in under ten minutes:
#   0. a GPU must be visible (CUDA_VISIBLE_DEVICES not hiding it, nvidia-smi listing one): checked FIRST, before
#      anything is built; without one the check ends at once, exit 3
#   1. configure and build the CUDA backend, its op tests and the NCCL communicator test (PROPHET_CUDA=ON)
#   2. ctest -L gpu: every CUDA op against its CPU op (grouped expert GEMMs and bf16 included), the NCCL
#      communicator; a SKIPPED test fails the check
#   3. test_gpu_ops --bench: the ops at the MoE-GPT-S shapes, ms and TFLOP/s or GB/s
#   4. prophet train --set device.kind=cuda against the CPU run (skewed-4rank preset, 20 steps, same seed): every
#      step's loss within 1e-4 relative; then each run resumes the other's step-9 checkpoint and must repeat the
#      CPU losses of steps 10-19 (checkpoints are interchangeable)
#   5. placement invariance: 2 ranks sharing the GPU (expert parallelism, host-staged over MPI), the static
#      placement and prophet-oracle's replicas (Eq 8): losses within 1e-5 relative, and some replica placed
#   5b. the block-wise schedule with 2 ranks sharing the GPU (prophet-oracle, Trans/Agg on the communication thread
#      and their staging on the copy stream): losses within 1e-5 of the static run; its timeline (GPU op times from
#      cudaEvent pairs beside the executor's host ops) goes into train.db (report/fig_gantt.py draws it)
#   6. with two or more GPUs: 2 ranks over NCCL (comm.backend=nccl, a GPU each) repeat the 2-rank MPI losses (1e-5)
#      (one GPU: recorded as skipped in the table, not a failure: the check's target is one H200)
#   7. the prophet/static median step-time ratio with 4 ranks sharing the GPU under the skewed preset
#   8. prophet profile --calibrate on the GPU (2 ranks sharing it): a calibrated cluster file, cluster-gpu.toml,
#      with the GPU's expert FLOP/s, FNEC/BNEC and step tail (calibration.json)
#   9. MoE-GPT-S on one GPU through prophet train, fp32 and train.precision=bf16: tokens/s, achieved TFLOP/s, MFU
#      against the H200's dense peaks (fp32 67 TFLOPS, bf16 989.5 TFLOPS: NVIDIA's H200 datasheet, docs/gpu.md;
#      PROPHET_GPU_PEAK_FP32/_BF16)
# Everything goes into one folder: nvidia-smi.txt, configure.log, build.log, ctest-gpu.log, ctest-gpu.xml
# (JUnit), bench.log, bench.json, train-*.jsonl / .log, train.db, parity*.json, invariance.json, blockwise.json,
# nccl.json, ratio.json, cluster-gpu.toml, calibration.json,
# train-bench*.json, stages.tsv (one line per stage) and summary.json ({"status": "pass"|"fail", "stage",
# elapsed seconds, git sha}); the stage table is printed at the end. A stage after the tests that fails does not
# stop the later ones (device time is scarce): summary.json names the first failed stage.
# Needs no network: the toolkit, NCCL, OpenMPI and the Debian packages of ci/install-deps.sh must be installed.
# Every stage runs under a timeout, so the whole check ends within PROPHET_GPU_CHECK_BUDGET seconds (default 570).
#
# Usage: ci/gpu-check.sh [RESULTS_DIR]        (default: $OUT when set, else results/gpu-check)
#   env PROPHET_GPU_BUILD_DIR   build directory (default build-gpu-check)
#   env PROPHET_MPIRUN          the launcher of the several-rank stages (default: mpirun --allow-run-as-root
#                               --oversubscribe)
# Exit: 0 every stage passed; 1 a stage failed (summary.json names it); 2 usage; 3 no GPU visible (nothing built).
set -euo pipefail

cd "$(dirname "$0")/.."
if [ $# -gt 1 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ] || [[ "${1:-}" == -* ]]; then
    sed -n '/^# Usage:/,/^# Exit:/p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
RESULTS="${1:-${OUT:-results/gpu-check}}"
BUILD="${PROPHET_GPU_BUILD_DIR:-build-gpu-check}"
BUDGET="${PROPHET_GPU_CHECK_BUDGET:-570}"
MPIRUN="${PROPHET_MPIRUN:-mpirun --allow-run-as-root --oversubscribe}"
mkdir -p "$RESULTS"
RESULTS="$(cd "$RESULTS" && pwd)"
START=$(date +%s)
SHA=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
: > "$RESULTS/stages.tsv"

# record STAGE STATUS MESSAGE: one line of stages.tsv (the closing table)
record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$RESULTS/stages.tsv"; }
# summary STATUS STAGE MESSAGE [EXIT]: writes summary.json, prints the stage table and exits (0 on pass, else EXIT
# or 1)
summary() {
    local elapsed=$(( $(date +%s) - START ))
    printf '{"status": "%s", "stage": "%s", "message": "%s", "elapsed_s": %d, "git": "%s"}\n' \
        "$1" "$2" "$3" "$elapsed" "$SHA" > "$RESULTS/summary.json"
    python3 ci/gpu_train_check.py table "$RESULTS" || true
    echo "gpu-check: $1 ($2: $3) after ${elapsed} s; results in $RESULTS"
    if [ "$1" = pass ]; then exit 0; fi
    exit "${4:-1}"
}
# left: seconds of the budget still unspent (at least 1)
left() { local l=$(( BUDGET - ($(date +%s) - START) )); [ "$l" -gt 0 ] && echo "$l" || echo 1; }

# 0. the device, before anything is built: a machine without a GPU fails here, loudly, in a second
no_gpu=""
case "${CUDA_VISIBLE_DEVICES-unset}" in
    "" | -1 | none | NoDevFiles) no_gpu="CUDA_VISIBLE_DEVICES='${CUDA_VISIBLE_DEVICES}' hides every GPU" ;;
esac
if [ -z "$no_gpu" ] && ! command -v nvidia-smi > /dev/null; then
    no_gpu="nvidia-smi not found (no NVIDIA driver on this machine)"
elif [ -z "$no_gpu" ] && [ "$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ')" -eq 0 ]; then
    no_gpu="nvidia-smi lists no GPU"
fi
if [ -n "$no_gpu" ]; then
    echo "gpu-check: FAILED: no GPU visible: $no_gpu; run on a machine with an NVIDIA GPU (nothing was built)" >&2
    record device fail "$no_gpu"
    summary fail device "no GPU visible: $no_gpu" 3
fi
record device pass "$(nvidia-smi -L | head -1)"

{ nvidia-smi 2>&1 || echo "nvidia-smi: not available"; } > "$RESULTS/nvidia-smi.txt"

echo "gpu-check: configure ($BUILD)"
timeout "$(left)" cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPROPHET_CUDA=ON \
    -DPROPHET_BUILD_BENCH=OFF > "$RESULTS/configure.log" 2>&1 ||
    { record configure fail "see configure.log"; summary fail configure "see configure.log"; }
record configure pass ""

echo "gpu-check: build"
timeout "$(left)" cmake --build "$BUILD" -j "$(nproc)" --target test_gpu_ops test_comm_nccl prophet \
    > "$RESULTS/build.log" 2>&1 || { record build fail "see build.log"; summary fail build "see build.log"; }
record build pass ""

echo "gpu-check: ctest -L gpu"
ctest_rc=0
timeout "$(left)" ctest --test-dir "$BUILD" -L gpu --output-on-failure --no-tests=error \
    --output-junit "$RESULTS/ctest-gpu.xml" > "$RESULTS/ctest-gpu.log" 2>&1 || ctest_rc=$?
# the NCCL pair: exactly one applies (gpu_comm_nccl_refusal with fewer than two GPUs, gpu_comm_nccl with two or
# more), so exactly one of the two may be skipped; any other skip fails the check
nccl_pair=' - gpu_comm_nccl(_refusal)? \(Skipped\)'
if grep "(Skipped)" "$RESULTS/ctest-gpu.log" | grep -qvE "$nccl_pair" ||
   [ "$(grep -cE "$nccl_pair" "$RESULTS/ctest-gpu.log")" -gt 1 ]; then
    record tests fail "GPU tests were skipped"
    summary fail tests "GPU tests were skipped: no CUDA device visible, or a driver too old for CUDA 13 (see ctest-gpu.log, nvidia-smi.txt)"
fi
# from here on a failed stage is recorded and the rest still run
FAILED_STAGE="" FAILED_MESSAGE=""
fail_later() {
    if [ -z "$FAILED_STAGE" ]; then FAILED_STAGE="$1" FAILED_MESSAGE="$2"; fi
    record "$1" fail "$2"
    echo "gpu-check: $1 failed: $2"
}
# stage NAME COMMAND...: runs the command; records pass, or fail_later with the message in $MSG
stage() {
    local name="$1"; shift
    if "$@"; then record "$name" pass ""; else fail_later "$name" "$MSG"; fi
}
if [ "$ctest_rc" -eq 0 ]; then record tests pass "$(grep -E 'tests passed' "$RESULTS/ctest-gpu.log" | tail -1)"
else fail_later tests "ctest exited $ctest_rc (see ctest-gpu.log)"; fi

echo "gpu-check: benchmark"
MSG="see bench.log"
run_bench() {
    timeout "$(left)" "$BUILD/tests/test_gpu_ops" --bench --json "$RESULTS/bench.json" > "$RESULTS/bench.log" 2>&1
}
stage bench run_bench

# train NAME ARGS...: one `prophet train --json` run of the skewed preset into train-NAME.jsonl / .log
# mtrain RANKS NAME ARGS...: the same on RANKS ranks sharing this machine's GPU(s)
PRESET=experiments/train/skewed-4rank.toml
train() {
    local name="$1"; shift
    timeout "$(left)" "$BUILD/prophet" train --config "$PRESET" --json --set store.path="$RESULTS/train.db" "$@" \
        > "$RESULTS/train-$name.jsonl" 2> "$RESULTS/train-$name.log"
}
mtrain() {
    local ranks="$1" name="$2"; shift 2
    # shellcheck disable=SC2086 # MPIRUN is a command line
    timeout "$(left)" $MPIRUN -np "$ranks" "$BUILD/prophet" train --config "$PRESET" --json \
        --set store.path="$RESULTS/train.db" "$@" > "$RESULTS/train-$name.jsonl" 2> "$RESULTS/train-$name.log"
}
check() { python3 ci/gpu_train_check.py "$@"; }
# both resumed runs repeat the CPU run's steps 10-19
check_resumes() {
    check parity --name resume-cpu-from-gpu --from 10 --steps 10 \
        "$RESULTS/train-cpu-from-gpu.jsonl" "$RESULTS/train-cpu.jsonl" "$RESULTS/parity-cpu-from-gpu.json" &&
        check parity --name resume-gpu-from-cpu --from 10 --steps 10 \
            "$RESULTS/train-gpu-from-cpu.jsonl" "$RESULTS/train-cpu.jsonl" "$RESULTS/parity-gpu-from-cpu.json"
}

echo "gpu-check: loss parity, prophet train on cuda vs cpu (20 steps)"
if train gpu --set device.kind=cuda --save --set train.save_every=10 --set train.checkpoint_dir="$RESULTS/ckpt-gpu" &&
   train cpu --set device.kind=cpu --save --set train.save_every=10 --set train.checkpoint_dir="$RESULTS/ckpt-cpu"; then
    MSG="GPU losses differ from the CPU's by more than 1e-4 relative (parity.json)"
    stage parity check parity "$RESULTS/train-gpu.jsonl" "$RESULTS/train-cpu.jsonl" "$RESULTS/parity.json"
    echo "gpu-check: checkpoints across devices (resume step 9 on the other device)"
    if train cpu-from-gpu --set device.kind=cpu --resume "$RESULTS/ckpt-gpu/step-00000009" &&
       train gpu-from-cpu --set device.kind=cuda --resume "$RESULTS/ckpt-cpu/step-00000009"; then
        MSG="a resumed run left the CPU losses (parity-cpu-from-gpu.json, parity-gpu-from-cpu.json)"
        stage checkpoints check_resumes
    else
        fail_later checkpoints "a resumed run failed (train-cpu-from-gpu.log, train-gpu-from-cpu.log)"
    fi
else
    fail_later parity "a training run failed (train-gpu.log, train-cpu.log)"
fi

echo "gpu-check: placement invariance, 2 ranks sharing the GPU (static vs prophet-oracle replicas)"
if mtrain 2 ep2-static --set device.kind=cuda &&
   mtrain 2 ep2-oracle --set device.kind=cuda --set balance.policy=prophet-oracle --set balance.cost_eq=8; then
    MSG="2-rank GPU losses depend on the placement by more than 1e-5 relative, or no replica (invariance.json)"
    stage placement-invariance check parity --name placement-invariance --rtol 1e-5 --min-replicas 1 \
        "$RESULTS/train-ep2-oracle.jsonl" "$RESULTS/train-ep2-static.jsonl" "$RESULTS/invariance.json"
else
    fail_later placement-invariance "a 2-rank GPU run failed (train-ep2-static.log, train-ep2-oracle.log)"
fi

echo "gpu-check: block-wise schedule on the GPU (2 ranks, Trans/Agg and their staging on the copy stream)"
if mtrain 2 ep2-blockwise --set device.kind=cuda --set schedule.mode=blockwise --set balance.policy=prophet-oracle \
       --set balance.cost_eq=8 --timeline; then
    MSG="2-rank block-wise GPU losses differ from the static run by more than 1e-5, or no replica (blockwise.json)"
    stage blockwise check parity --name blockwise --rtol 1e-5 --min-replicas 1 \
        "$RESULTS/train-ep2-blockwise.jsonl" "$RESULTS/train-ep2-static.jsonl" "$RESULTS/blockwise.json"
else
    fail_later blockwise "the 2-rank block-wise GPU run failed (train-ep2-blockwise.log)"
fi

GPUS=$(nvidia-smi -L | grep -c '^GPU ')
if [ "$GPUS" -ge 2 ]; then
    echo "gpu-check: NCCL, one rank per GPU (2 ranks, comm.backend=nccl) against the 2-rank MPI run"
    if mtrain 2 ep2-nccl --set device.kind=cuda --set comm.backend=nccl; then
        MSG="2 ranks over NCCL differ from 2 ranks over MPI by more than 1e-5 relative (nccl.json)"
        stage nccl check parity --name nccl-vs-mpi --rtol 1e-5 \
            "$RESULTS/train-ep2-nccl.jsonl" "$RESULTS/train-ep2-static.jsonl" "$RESULTS/nccl.json"
    else
        fail_later nccl "the 2-rank NCCL run failed (train-ep2-nccl.log)"
    fi
else
    record nccl skip "one GPU: comm.backend=nccl needs a GPU per rank"
fi

echo "gpu-check: prophet/static step-time ratio, 4 ranks sharing the GPU (skewed preset)"
if mtrain 4 ep4-static --set device.kind=cuda && mtrain 4 ep4-prophet --set device.kind=cuda --set balance.policy=prophet; then
    MSG="see ratio.json"
    stage ratio check ratio --name prophet-vs-static-4-ranks "$RESULTS/train-ep4-prophet.jsonl" \
        "$RESULTS/train-ep4-static.jsonl" "$RESULTS/ratio.json"
else
    fail_later ratio "a 4-rank GPU run failed (train-ep4-static.log, train-ep4-prophet.log)"
fi

echo "gpu-check: calibration on the GPU (prophet profile --calibrate, 2 ranks sharing it)"
run_calibration() {
    # shellcheck disable=SC2086 # MPIRUN is a command line
    timeout "$(left)" $MPIRUN -np 2 "$BUILD/prophet" profile --config "$PRESET" --json --set device.kind=cuda \
        --set train.steps=3 --set store.path="$RESULTS/train.db" --calibrate --cluster-out "$RESULTS/cluster-gpu.toml" \
        -o "$RESULTS/trace-gpu.ptrace" > "$RESULTS/calibrate.jsonl" 2> "$RESULTS/calibrate.log" &&
        check calibration "$RESULTS/calibrate.jsonl" "$RESULTS/cluster-gpu.toml" "$RESULTS/calibration.json"
}
MSG="prophet profile --calibrate on the GPU failed or measured nothing (calibrate.log, calibration.json)"
stage calibration run_calibration

echo "gpu-check: MoE-GPT-S on one GPU through prophet train (fp32, then bf16)"
MOE_S=experiments/models/moe-gpt-s.toml
for precision in fp32 bf16; do
    name=train-bench; [ "$precision" = fp32 ] || name=train-bench-$precision
    if timeout "$(left)" "$BUILD/prophet" train --config "$MOE_S" --json --set device.kind=cuda \
           --set train.precision=$precision --set train.steps="${PROPHET_GPU_BENCH_STEPS:-6}" \
           --set store.path="$RESULTS/train.db" > "$RESULTS/$name.jsonl" 2> "$RESULTS/$name.log"; then
        MSG="see $name.jsonl"
        stage "$name" check bench "$RESULTS/$name.jsonl" "$MOE_S" "$RESULTS/$name.json" --precision $precision \
            --fp32-peak "${PROPHET_GPU_PEAK_FP32:-67}" --bf16-peak "${PROPHET_GPU_PEAK_BF16:-989.5}"
    else
        fail_later "$name" "prophet train on MoE-GPT-S ($precision) failed ($name.log)"
    fi
done

[ -z "$FAILED_STAGE" ] || summary fail "$FAILED_STAGE" "$FAILED_MESSAGE"
summary pass all "every GPU op within tolerance; train losses within 1e-4 of the CPU; 2-rank placement invariance within 1e-5; benchmarks in bench.json, train-bench*.json, ratio.json"
