#!/usr/bin/python3
"""MoETuner in and out of sample on real CPU ranks: `prophet profile --inference` runs of several policies, seeds
and both samples, each also served on simulated H100 / H200 nodes; the data of report/fig_serving_*.py.

    /usr/bin/python3 bench/serve_policies.py [--ranks 4] [--seeds 1,2,3] [--store results/prophet.db]

Per seed: `prophet train --save` trains the model of --config (plus --set) for --train-steps steps, so routing has
specialised; then, per sample (in: data A after the profiled batches; out: data B = --eval-mixture) and per
policy, in an order rotated per seed so slow drifts of the machine hit every policy alike, one inference run
serves that checkpoint (docs/serving.md). Every run is recorded in the store (experiment --experiment); the
closing table gives each policy's MoE-part p99 and mean-of-max as a reduction against static of the same seed and
sample, mean ± sd over seeds (measured; the simulated nodes' numbers are in the figures). The same grid on freshly
initialised models is experiments/sweeps/serving-moetuner.toml.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_policies import ROOT, run_json as run  # noqa: E402  (runs a command, exits on failure, JSON lines)
# the serving model: skewed-4rank's corpus (80% of documents from topic 0) with experts heavy enough that their
# GEMMs, not the messages, dominate a layer on CPU ranks
DEFAULT_SETS = ["model.C=128", "model.F=1024", "model.T=64", "model.L=4"]
CLUSTERS = '["experiments/clusters/moetuner-h100-ep4.toml", "experiments/clusters/moetuner-h200-ep4.toml"]'


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--config", default="experiments/train/skewed-4rank.toml")
    p.add_argument("--policies", default="static,eplb,moetuner,prophet")
    p.add_argument("--eval-mixture", default="[0.05, 0.05, 0.85, 0.05]", help="data B's topic weights")
    p.add_argument("--train-steps", type=int, default=30)
    p.add_argument("--iterations", type=int, default=20,
                   help="measured batches per inference run (serve.iterations; p99 over them)")
    p.add_argument("--binary", default="build/prophet")
    p.add_argument("--store", default="results/prophet.db")
    p.add_argument("--experiment", default="serving-cpu")
    p.add_argument("--checkpoints", default="results/ckpt/serving", help="one checkpoint directory per seed below")
    p.add_argument("--set", action="append", default=None, help=f"--set for every run (default {DEFAULT_SETS})")
    args = p.parse_args()
    sets = DEFAULT_SETS if args.set is None else args.set
    # the simulated nodes are 4-device cluster files: the recorded per-rank routing replays only on as many devices
    clusters = CLUSTERS if args.ranks == 4 else "[]"
    if args.ranks != 4:
        print(f"serve_policies: {args.ranks} ranks: no replay on the simulated 4-device nodes", file=sys.stderr)
    policies = args.policies.split(",")
    mpi = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(args.ranks)] if args.ranks > 1 else []
    common = ["--config", args.config, "--set", f"store.path={args.store}"]
    for s in sets:
        common += ["--set", s]
    rows = []
    for i, seed in enumerate(int(s) for s in args.seeds.split(",")):
        ckpt = os.path.join(args.checkpoints, f"seed{seed}")
        if not os.path.isdir(os.path.join(ROOT, ckpt)):
            run(mpi + [args.binary, "train"] + common + [
                "--json", "--save", "--set", f"run.seed={seed}", "--set", f"train.steps={args.train_steps}",
                "--set", f"run.experiment={args.experiment}-train", "--set", f"train.checkpoint_dir={ckpt}"])
        order = policies[i % len(policies):] + policies[:i % len(policies)]
        for sample, mixture in (("in", "[]"), ("out", args.eval_mixture)):
            for pol in order:
                s = run(mpi + [args.binary, "profile", "--inference", "--json"] + common + [
                    "--set", f"run.seed={seed}", "--set", f"balance.policy={pol}",
                    "--set", f"run.experiment={args.experiment}", "--set", f"serve.checkpoint={ckpt}",
                    "--set", f"serve.eval_mixture={mixture}", "--set", f"serve.sim_clusters={clusters}",
                    "--set", f"serve.iterations={args.iterations}"])[-1]
                rows.append({"seed": seed, "sample": sample, "policy": pol, "p99": s["layer_sum"]["p99"],
                             "mom": s["layer_sum"]["mean_of_max"]})
                print(f"seed {seed} {sample:3s} {pol:9s} MoE part p99 {rows[-1]['p99']:8.2f} ms, mean-of-max "
                      f"{rows[-1]['mom']:8.2f} ms (run {s['run_id']})", file=sys.stderr)
    print(f"\nmeasured on {args.ranks} CPU ranks: reduction of the MoE part vs static, mean ± sd over seeds")
    print(f"{'sample':6s} {'policy':9s} {'p99':>16s} {'mean-of-max':>16s}")
    for sample in ("in", "out"):
        for pol in policies:
            if pol == "static":
                continue
            red = {"p99": [], "mom": []}
            for r in rows:
                if r["sample"] != sample or r["policy"] != pol:
                    continue
                base = next(b for b in rows if b["sample"] == sample and b["seed"] == r["seed"] and
                            b["policy"] == "static")
                for k in red:
                    red[k].append(1 - r[k] / base[k])
            cells = [f"{statistics.mean(v) * 100:+6.1f}% ± {statistics.stdev(v) * 100 if len(v) > 1 else 0:4.1f}"
                     for v in red.values()]
            print(f"{sample:6s} {pol:9s} {cells[0]:>16s} {cells[1]:>16s}")
    print("the simulated nodes' numbers: report/fig_serving_sample.py --db " + args.store)


if __name__ == "__main__":
    main()
