#!/usr/bin/python3
"""Run every figure script into --out and write a markdown report linking each figure with the table behind it.

Figures without data are listed as skipped, with the reason the script printed. Exit status: 0 when every script
ran (with or without data), 1 when one crashed.
"""
import argparse
import datetime
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common as C  # noqa: E402

FIGURES = [
    ("fig_speedup", "Speedup of each policy over static per cluster and trace (prophet sweep)."),
    ("fig_layers", "Per-layer speedup over static (static layer_moe_ms / policy layer_moe_ms), bars per policy "
                   "(prophet sweep, engine sim; the paper's Fig 11)."),
    ("fig_rb", "Balance degree RB = std(static) / std(policy) of the per-device tokens per layer, with prophet RB / "
               "fastermoe RB in the table (prophet sweep, engine sim; the paper's Fig 16)."),
    ("fig_ablation", "Ablation (the paper's Fig 14): speedup of each variant (planner, scheduler, "
                     "planner+scheduler, full) over 'none', beside the paper's numbers (runs with ablate.variant)."),
    ("fig_iterations", "Simulated time of every iteration, one line per policy (prophet sweep, engine sim)."),
    ("fig_locality", "Speedup of prophet / prophet-oracle over static against the JS divergence between "
                     "consecutive iterations (prophet sweep over trace.* grids)."),
    ("fig_sensitivity", "Speedup against the planner's compute / bandwidth mis-calibration (prophet sweep over "
                        "plan.compute_scale / plan.bandwidth_scale)."),
    ("fig_plan_policies", "Predicted MoE-layer time and max/mean load of every policy (prophet plan)."),
    ("fig_planner_scaling", "Measured planning time against E, D and L per policy (prophet sweep, engine model)."),
    ("fig_train", "Loss, step time and max/mean load per step, by policy (prophet train)."),
    ("fig_gantt", "One training step across ranks: compute, all-to-alls, Trans/Agg on the communication thread and "
                  "the compute thread's waits for them (prophet train --timeline, docs/scheduler.md)."),
    ("fig_validation", "Simulated (schedule none, sweep validate_cluster) against measured step time of real sweep "
                       "points, with the relative error (prophet sweep, engine real)."),
    ("fig_serving_tail", "Per-layer p99 of the per-layer max over ranks of expert and all-to-all time, with "
                         "MoETuner's mean-of-max, by policy, measured and simulated (prophet profile --inference)."),
    ("fig_serving_sample", "Reduction of the MoE-part tail against static, in-sample against out-of-sample "
                           "(prophet profile --inference, bench/serve_policies.py)."),
    ("fig_ilp_gap", "MoETuner's two-stage ILP against the joint ILP: gap in the joint objective, and solve time "
                    "against E, D and L (bench_ilp_gap)."),
]

# ci/bench-regress.sh's history, listed only for a store that holds bench-regress runs
BENCH_FIGURE = ("fig_bench_history", "Planner and training throughput across commits, relative to the first run "
                                     "(ci/bench-regress.sh, bench table).")


def has_bench_runs(db):
    con = C.connect(db)
    return con is not None and not C._query(con, "SELECT 1 FROM runs WHERE command = 'bench-regress' LIMIT 1").empty


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", default=C.DEFAULT_DB)
    p.add_argument("--out", default=C.DEFAULT_OUT)
    p.add_argument("--report", default="results/REPORT.md")
    p.add_argument("--experiment", default=None)
    args = p.parse_args(argv)
    report_dir = os.path.dirname(os.path.abspath(args.report))
    os.makedirs(report_dir, exist_ok=True)
    env = dict(os.environ, MPLBACKEND="Agg")
    lines = ["# prophet report", "",
             f"Store: `{args.db}`" + (f", experiment `{args.experiment}`" if args.experiment else "") + ".",
             f"Error bars and bands are {C.SD_NOTE} (seaborn errorbar='sd') unless a caption says otherwise.", ""]
    failed, made, skipped = [], [], []
    for name, what in FIGURES + ([BENCH_FIGURE] if has_bench_runs(args.db) else []):
        cmd = [sys.executable, os.path.join(HERE, name + ".py"), "--db", args.db, "--out", args.out]
        if args.experiment:
            cmd += ["--experiment", args.experiment]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        lines += [f"## {name}", "", what, ""]
        out = r.stdout.strip()
        png = os.path.join(args.out, name + ".png")
        if r.returncode != 0:
            failed.append(name)
            err = (r.stderr.strip().splitlines() or ["?"])[-1]
            lines += [f"**Failed** (exit {r.returncode}): `{err}`", ""]
            print(f"{name}: FAILED (exit {r.returncode}): {err}", file=sys.stderr)
            continue
        if out.startswith(C.NO_DATA_PREFIX) or not os.path.isfile(png):
            skipped.append(name)
            lines += [f"_Skipped: {out.splitlines()[0] if out else 'no figure written'}_", ""]
            print(f"{name}: skipped ({out.splitlines()[0] if out else 'no figure'})", file=sys.stderr)
            continue
        made.append(name)
        rel = os.path.relpath(os.path.abspath(png), report_dir)
        pdf_rel = os.path.relpath(os.path.abspath(os.path.join(args.out, name + ".pdf")), report_dir)
        body = out.splitlines()
        caption = ""
        if body and body[0].startswith("caption: "):
            caption = body[0][len("caption: "):]
            body = body[1:]
        lines += [f"![{name}]({rel})", "", f"{caption} ([PDF]({pdf_rel}))", "", "\n".join(body).strip(), ""]
        print(f"{name}: {png}", file=sys.stderr)
    lines += ["---", f"{len(made)} figures, {len(skipped)} skipped (no data), {len(failed)} failed."]
    with open(args.report, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.report}: {len(made)} figures, {len(skipped)} skipped, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
