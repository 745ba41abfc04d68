#!/usr/bin/python3
"""Side-by-side benchmark of balancing policies in real `prophet train` runs on CPU ranks, and the cost model's
error against them.

    /usr/bin/python3 bench/train_policies.py --ranks 4 --repeats 5 [--config experiments/train/skewed-4rank.toml]

For each repeat, every policy runs once, in an order rotated per repeat (ABCD, BCDA, ...) so slow drifts of the
machine hit every policy alike. Per run: the median over steps 1.. (step 0 pays for allocation) of the step time,
max/mean load and the MoE-layer time (all-to-all + expert compute + Trans + Agg, per layer). Reported: the median
over repeats, and each policy's ratio to static measured within the same repeat (median of the ratios).
Then `prophet profile --calibrate` measures the machine and records the routing trace, and `prophet plan` predicts
the MoE-layer time of each policy on that trace with the calibrated cluster: predicted vs measured is the cost
model's error. Every run is recorded in the store (default results/prophet.db).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_json(cmd):
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stderr}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--config", default="experiments/train/skewed-4rank.toml")
    p.add_argument("--policies", default="static,prophet,fastermoe,eplb")
    p.add_argument("--binary", default="build/prophet")
    p.add_argument("--store", default="results/prophet.db")
    p.add_argument("--set", action="append", default=[], help="extra --set for every run")
    args = p.parse_args()
    policies = args.policies.split(",")
    mpi = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(args.ranks)] if args.ranks > 1 else []
    base = [args.binary, "train", "--config", args.config, "--json", "--set", f"store.path={args.store}",
            "--set", "run.experiment=bench-train-policies"]
    for s in args.set:
        base += ["--set", s]

    per = {pol: {"step_ms": [], "load": [], "moe_ms": []} for pol in policies}
    ratios = {pol: [] for pol in policies}
    for rep in range(args.repeats):
        order = policies[rep % len(policies):] + policies[:rep % len(policies)]
        rep_ms = {}
        for pol in order:
            rows = run_json(mpi + base + ["--set", f"balance.policy={pol}"])
            steps = [r for r in rows if "step" in r and not r.get("summary")][1:]
            step_ms = statistics.median(r["step_ms"] for r in steps)
            per[pol]["step_ms"].append(step_ms)
            per[pol]["load"].append(statistics.median(r["max_mean_load"] for r in steps))
            per[pol]["moe_ms"].append(statistics.median(r["a2a_ms"] + r["expert_ms"] + r["trans_ms"] + r["agg_ms"]
                                                         for r in steps))
            rep_ms[pol] = step_ms
            print(f"repeat {rep + 1}/{args.repeats} {pol:>10}: median step {step_ms:8.2f} ms", file=sys.stderr)
        for pol in policies:
            ratios[pol].append(rep_ms["static"] / rep_ms[pol])

    print(f"# {args.ranks} ranks, {args.repeats} repeats, {args.config}; medians over repeats")
    print(f"# {'policy':>10} {'step ms':>9} {'static/x':>9} {'max/mean':>9} {'MoE ms/step':>12}")
    for pol in policies:
        d = per[pol]
        print(f"  {pol:>10} {statistics.median(d['step_ms']):9.2f} {statistics.median(ratios[pol]):9.3f} "
              f"{statistics.median(d['load']):9.3f} {statistics.median(d['moe_ms']):12.3f}")

    # the cost model against the measurements
    trace = os.path.join("results", "traces", "bench-train-policies.ptrace")
    cluster = os.path.join("results", "clusters", f"calibrated-{args.ranks}rank.toml")
    run_json(mpi + [args.binary, "profile", "--config", args.config, "--json", "--calibrate", "--out", trace,
                    "--cluster-out", cluster, "--set", f"store.path={args.store}"] + sum((["--set", s] for s in args.set), []))
    out = subprocess.run([args.binary, "plan", "--trace", trace, "--cluster", cluster, "--json", "--policy", "all",
                          "--set", f"store.path={args.store}"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"prophet plan failed: {out.stderr}")
    plan = json.loads(out.stdout)
    num_layers = plan["trace"]["layers"]
    print(f"# cost model: predicted (prophet plan, calibrated {cluster}) vs measured MoE-layer time, ms per layer")
    print(f"# {'policy':>10} {'predicted':>10} {'measured':>10} {'error':>8}")
    for entry in plan["policies"]:
        if entry["name"] not in per or entry.get("skipped"):
            continue
        measured = statistics.median(per[entry["name"]]["moe_ms"]) / num_layers
        predicted = entry["predicted_eq6_ms"]
        print(f"  {entry['name']:>10} {predicted:10.3f} {measured:10.3f} {100 * (predicted - measured) / measured:7.1f}%")


if __name__ == "__main__":
    main()
