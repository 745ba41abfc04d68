#!/usr/bin/env bash
# validate-heldout.sh: the held-out validation campaign of issue 12 (docs/simulator.md "Replay validation").
# On a QUIET 2-core machine, 2 ranks pinned one per core (mpirun --bind-to core), one BLAS thread per rank:
#   1. calibrates the per-op model once, on the README's main job (experiments/train/main-2rank.toml: C = 64,
#      F = 2048), into $CLUSTER (its [ops] section); the GEMMs come from the calibration's fixed grid, --ops-shape
#      adds the attention rate measured at the held-out shapes (a microbenchmark only: the calibration run and its
#      per-kind scale fit stay C = 64, F = 2048), and the calibration measures the emulated link's cost per message
#      (link_message_us). experiments/validate-heldout-wide.sh holds out whole configurations instead;
#   2. records held-out runs with --timeline: 3 model shapes the calibration never saw x 3 policies x 2 seeds x
#      2 schedules x 2 links (none, and an emulated 4 Gbit/s link: comm.link_gbps) = 72 points, plus the
#      calibration config itself under each policy (the calibration set, marked as such);
#   3. runs `prophet validate` over all of them (table on stdout, a validation run in the store) and draws
#      report/fig_validation_replay.py.
# One command:   experiments/validate-heldout.sh           (about 10 minutes on a quiet 2-core machine)
# Smoke (1 point, 3 steps, no evidence):   SMOKE=1 experiments/validate-heldout.sh
# Environment: PROPHET (binary, default ./build/prophet), STORE, CLUSTER, STEPS (default 20), OUT (figures).
set -euo pipefail
prophet=${PROPHET:-./build/prophet}
store=${STORE:-results/validate-heldout.db}
cluster=${CLUSTER:-results/clusters/validate-heldout.toml}
out=${OUT:-results/figures}
steps=${STEPS:-20}
base=experiments/train/main-2rank.toml
mpirun=(timeout -s KILL 900 mpirun --allow-run-as-root --bind-to core -np 2)
# held-out shapes (C F NH), none of them the calibration's (64 2048 4)
shapes=("64 1024 4" "96 1536 4" "128 1024 8")
policies=(static prophet fastermoe)
seeds=(1 2)
schedules=(none blockwise)
links=(0 4)
if [[ -n "${SMOKE:-}" ]]; then
    shapes=("64 1024 4"); policies=(prophet); seeds=(1); schedules=(blockwise); links=(0); steps=3
fi
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (the campaign wants < 1; the store records it per run)" >&2
mkdir -p "$(dirname "$store")" "$(dirname "$cluster")"
common=(--set store.path="$store" --set train.log_every=1000)
# the campaign's config as documented (main-2rank before it replayed a routing trace over a link): the gate's
# routing on the skewed corpus, no link, blocking schedule; the points set their own link and schedule after these
common+=(--set routing.source='"gate"' --set data.dominant_topic=0 --set data.dominance=0.9 --set comm.link_gbps=0
         --set schedule.mode='"none"')
ops_shapes=()
for shape in "${shapes[@]}"; do
    read -r C F NH <<<"$shape"
    ops_shapes+=(--ops-shape "C=$C,F=$F,NH=$NH")
done

"${mpirun[@]}" "$prophet" profile --config "$base" --calibrate --cluster-out "$cluster" "${common[@]}" --set train.steps="$steps" \
    --set run.experiment=validate-heldout-calibration "${ops_shapes[@]}" >&2

train() {  # train EXPERIMENT SET...
    local exp=$1; shift
    "${mpirun[@]}" "$prophet" train --config "$base" --timeline "${common[@]}" --set run.experiment="$exp" \
        --set train.steps="$steps" "$@" >/dev/null
}
for policy in "${policies[@]}"; do  # the calibration set: the calibrated config itself
    train validate-heldout --set balance.policy="$policy" --set run.seed=1
done
for shape in "${shapes[@]}"; do
    read -r C F NH <<<"$shape"
    for policy in "${policies[@]}"; do
        for seed in "${seeds[@]}"; do
            for schedule in "${schedules[@]}"; do
                for link in "${links[@]}"; do
                    echo "point C=$C F=$F $policy seed $seed $schedule link $link" >&2
                    train validate-heldout --set model.C="$C" --set model.F="$F" --set model.NH="$NH" \
                        --set balance.policy="$policy" --set run.seed="$seed" --set schedule.mode="$schedule" \
                        --set comm.link_gbps="$link"
                done
            done
        done
    done
done
"$prophet" validate --store "$store" --experiment validate-heldout --cluster "$cluster"
/usr/bin/python3 report/fig_validation_replay.py --db "$store" --out "$out"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
