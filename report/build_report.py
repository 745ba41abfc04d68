#!/usr/bin/python3
"""Write REPORT.md: a summary of each experiment (summary.py), then every figure that has data with its table.

Figures without data get no section: one closing line lists them with the command that would make their data.
Exit status: 0 when every script ran (with or without data) or the store has no runs ("nothing to report"),
1 when one crashed, 5 when there is no store at --db or it cannot be read (not a SQLite file, corrupt pages: the
cause is printed; common.database_error). A read-only store (file, directory or mount) is read like any other.
"""
import argparse
import contextlib
import datetime
import importlib
import io
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common as C  # noqa: E402
import paper_sections  # noqa: E402
import summary  # noqa: E402

FIGURES = [
    ("fig_speedup", "Speedup of each policy over static per cluster and trace (prophet sweep)."),
    ("fig_layers", "Per-layer speedup over static (static layer_moe_ms / policy layer_moe_ms), bars per policy "
                   "(prophet sweep, engine sim; the paper's Fig 11)."),
    ("fig_rb", "Balance degree RB = std(static) / std(policy) of the per-device tokens per layer, with prophet RB / "
               "fastermoe RB in the table (prophet sweep, engine sim; the paper's Fig 16)."),
    ("fig_ablation", "Ablation (the paper's Fig 14): speedup of each variant (planner, scheduler, "
                     "planner+scheduler, full) over 'none', beside the paper's numbers (runs with ablate.variant)."),
    ("fig_flow_ablation", "Ablation of flow's components: gap to the lower bound and MoE-layer time of each "
                          "cumulative step (placement only, +routing, +transfer-awareness, +topology, +prediction) "
                          "per trace and column (prophet sweep, engines model and sim)."),
    ("fig_iterations", "Simulated time of every iteration, one line per policy (prophet sweep, engine sim)."),
    ("fig_locality", "Speedup of prophet / prophet-oracle over static against the JS divergence between "
                     "consecutive iterations (prophet sweep over trace.* grids)."),
    ("fig_sensitivity", "Speedup against the planner's compute / bandwidth mis-calibration (prophet sweep over "
                        "plan.compute_scale / plan.bandwidth_scale)."),
    ("fig_plan_policies", "Predicted MoE-layer time and max/mean load of every policy (prophet plan)."),
    ("fig_plan_gap", "Gap of every policy to the layer lower bound under each system model (prophet plan)."),
    ("fig_gap_iterations", "Gap of every policy to the layer lower bound per iteration under Eq 6, Eq 8 and Sim, "
                           "and over the first tenth of the iterations against the rest (prophet plan)."),
    ("fig_planner_scaling", "Measured planning time against E, D and L per policy (prophet sweep, engine model)."),
    ("fig_train", "Loss, step time and max/mean load per step, by policy (prophet train)."),
    ("fig_gantt", "One training step across ranks: compute, all-to-alls, Trans/Agg on the communication thread and "
                  "the compute thread's waits for them (prophet train --timeline, docs/scheduler.md)."),
    ("fig_validation", "The analytic cost model's simulation (each run's schedule, sweep validate_cluster) against the "
                       "measured step time of real sweep points, with the relative error (prophet sweep, engine real)."),
    ("fig_validation_replay", "Recorded runs replayed on their op DAG with the calibrated per-op model against their "
                              "measured step time, held-out points filled, the held-out error in the caption (prophet "
                              "validate, or a validating real sweep after its last point)."),
    ("fig_serving_tail", "Per-layer p99 of the per-layer max over ranks of expert and all-to-all time, with "
                         "MoETuner's mean-of-max, by policy, measured and simulated (prophet profile --inference)."),
    ("fig_serving_sample", "Reduction of the MoE-part tail against static, in-sample against out-of-sample "
                           "(prophet profile --inference, bench/serve_policies.py)."),
    ("fig_serving_sweep", "Serving regime with periodic rebalancing: balancedness predicted on each planning window "
                          "against realised on the iterations served, the one-off moves and their stall, and the "
                          "forward speedup over static per (rebalance_every, window) and policy (prophet sweep)."),
    ("fig_ilp_gap", "MoETuner's two-stage ILP against the joint ILP: gap in the joint objective, and solve time "
                    "against E, D and L (bench_ilp_gap)."),
]

# What makes each figure's data: the closing line of a report names these for the figures it could not draw.
PRODUCED_BY = {
    "fig_speedup": "prophet sweep experiments/sweeps/main-sim.toml",
    "fig_layers": "prophet sweep experiments/sweeps/fig11-layers.toml",
    "fig_rb": "prophet sweep experiments/sweeps/fig16-rb.toml",
    "fig_ablation": "prophet ablate --config experiments/train/ablate-4rank.toml",
    "fig_flow_ablation": "prophet sweep experiments/sweeps/flow-ablation.toml (and flow-ablation-model.toml, "
                         "flow-ablation-real.toml, flow-ablation-real-model.toml)",
    "fig_iterations": "prophet sweep experiments/sweeps/fig12-iterations.toml",
    "fig_locality": "prophet sweep experiments/sweeps/locality-stress.toml",
    "fig_sensitivity": "prophet sweep experiments/sweeps/sensitivity.toml",
    "fig_plan_policies": "prophet plan --policy all",
    "fig_plan_gap": "prophet plan --policy all",
    "fig_gap_iterations": "prophet plan --policy all",
    "fig_planner_scaling": "prophet sweep experiments/sweeps/planner-scaling.toml",
    "fig_train": "prophet train",
    "fig_gantt": "prophet train --timeline",
    "fig_validation": "prophet sweep experiments/sweeps/main-real.toml",
    "fig_validation_replay": "prophet sweep experiments/sweeps/main-real.toml, or experiments/validate-heldout.sh",
    "fig_serving_tail": "prophet sweep experiments/sweeps/serving-moetuner.toml",
    "fig_serving_sample": "prophet sweep experiments/sweeps/serving-moetuner.toml",
    "fig_serving_sweep": "prophet sweep experiments/sweeps/serving.toml",
    "fig_ilp_gap": "build/bench/bench_ilp_gap",
}
NOTHING = "nothing to report"  # the line (and exit 0) for a store without runs

# ci/bench-regress.sh's history, listed only for a store that holds bench-regress runs
BENCH_FIGURE = ("fig_bench_history", "Planner and training throughput across commits, relative to the first run "
                                     "(ci/bench-regress.sh, bench table).")


def has_bench_runs(db):
    con = C.connect(db)
    return con is not None and not C._query(con, "SELECT 1 FROM runs WHERE command = 'bench-regress' LIMIT 1").empty


def run_script(name, argv):
    """Figure script `name`'s main(argv) in this process, as `python3 <name>.py ARGV` would run it: (exit status,
    stdout, stderr). The status is sys.exit's (None: 0, a message: 1 with the message on stderr), 1 with the
    traceback on stderr for an exception, else 0 (a script's __main__ ignores main's return value). Each script
    starts from the same matplotlib settings and leaves no setting or open figure behind. One process for every
    figure: pandas, matplotlib and seaborn are imported (~1 s) and the policy registry read once per report."""
    out, err = io.StringIO(), io.StringIO()
    C._last_out_dir = None  # print_result writes a CSV only beside a figure this script saved
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), C.matplotlib.rc_context():
        try:
            importlib.import_module(name).main(argv)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
            if not isinstance(e.code, int) and e.code is not None:
                print(e.code, file=sys.stderr)
        except Exception:  # noqa: BLE001  a figure that crashes fails alone, as its process would
            code = 1
            traceback.print_exc()
        finally:
            if "matplotlib.pyplot" in sys.modules:
                sys.modules["matplotlib.pyplot"].close("all")
    return code, out.getvalue(), err.getvalue()


def run_figure(name, args):
    """Run one figure script: (status, text) with status 'made' (text: its stdout), 'skipped' (text: the reason)
    or 'failed' (text: its last stderr line)."""
    argv = ["--db", args.db, "--out", args.out]
    if args.experiment:
        argv += ["--experiment", *args.experiment]
    code, out, err = run_script(name, argv)
    out = out.strip()
    if code != 0:
        return "failed", f"exit {code}: " + (err.strip().splitlines() or ["?"])[-1]
    if out.startswith(C.NO_DATA_PREFIX) or not os.path.isfile(os.path.join(args.out, name + ".png")):
        return "skipped", out.splitlines()[0] if out else "no figure written"
    return "made", out


def figure_section(name, what, out, args, report_dir):
    """The markdown of one drawn figure: heading, image, caption with the PDF and CSV links, its table."""
    rel = lambda ext: os.path.relpath(os.path.abspath(os.path.join(args.out, f"{name}.{ext}")), report_dir)  # noqa
    body = out.splitlines()
    caption = what
    if body and body[0].startswith("caption: "):
        caption = what + " " + body[0][len("caption: "):]
        body = body[1:]
    links = f"[PDF]({rel('pdf')})" + (f", [CSV]({rel('csv')})" if os.path.isfile(os.path.join(args.out, name + ".csv"))
                                      else "")
    return [f"### {name}", "", f"![{name}]({rel('png')})", "", f"{caption} ({links})", "", "\n".join(body).strip(), ""]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", default=C.DEFAULT_DB)
    p.add_argument("--out", default=C.DEFAULT_OUT)
    p.add_argument("--report", default="results/REPORT.md")
    p.add_argument("--experiment", default=None, nargs="+", help="only these experiments")
    p.add_argument("--section", default="all", choices=["all", "paper"],
                   help="paper: only the papers' tables and figures beside ours (report/paper_sections.py)")
    args = p.parse_args(argv)
    if not os.path.isfile(args.db):
        print(f"no store at {args.db}", file=sys.stderr)
        return 5
    con = C.connect(args.db)
    if con is None:
        print(f"{args.db} is not a SQLite store", file=sys.stderr)
        return 5
    experiment = args.experiment[0] if args.experiment and len(args.experiment) == 1 else args.experiment
    runs = C.load_runs(con, experiment=experiment, status=None)
    if runs.empty:
        print(f"{NOTHING}: {args.db} has no runs" + (f" of {', '.join(args.experiment)}" if args.experiment else ""))
        return 0
    report_dir = os.path.dirname(os.path.abspath(args.report))
    os.makedirs(report_dir, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    head = ["# prophet report", "",
            f"Store: `{args.db}`" + (f", experiments {C.md(', '.join(args.experiment))}" if args.experiment else "") +
            f"; {C.runs_status_line(con)}.", ""]
    # the papers' tables beside ours: every section with --section paper, else those whose sweep is in the store
    sweeps = paper_sections.SWEEPS
    paper = (paper_sections.sections_with_data(con, args.experiment) if args.section == "all" else
             [n for n in sweeps if not args.experiment or sweeps[n][0] in args.experiment])
    paper_lines = paper_sections.build(con, paper, args.out) if paper else []
    if args.section == "paper":
        with open(args.report, "w") as f:
            f.write("\n".join(head + paper_lines) + "\n")
        print(f"wrote {args.report}: {len(paper)} paper sections")
        return 0
    summary_lines, summary_tables = summary.build(con, experiment)
    for name, t in summary_tables.items():
        t.to_csv(os.path.join(args.out, name + ".csv"), index=False)
    failed, made, skipped, sections, failures = [], [], [], [], []
    for name, what in FIGURES + ([BENCH_FIGURE] if has_bench_runs(args.db) else []):
        status, text = run_figure(name, args)
        print(f"{name}: {status}" + ("" if status == "made" else f" ({text})"), file=sys.stderr)
        if status == "made":
            made.append(name)
            sections += figure_section(name, what, text, args, report_dir)
        elif status == "failed":
            failed.append(name)
            failures.append((name, text))
            sections += [f"### {name}", "", f"**Failed** ({C.md(text)})", ""]
        else:
            skipped.append(name)
    lines = head + summary_lines + paper_lines
    if sections:
        lines += ["## Figures", "", f"Error bars and bands are {C.SD_NOTE} (seaborn errorbar='sd') unless a "
                                    "caption says otherwise; every table's full data is the CSV beside its figure.",
                  ""] + sections
    lines += ["---", f"{len(made)} figures, {len(failed)} failed."]
    if skipped:
        lines.append("Not produced (no data in this store): " +
                     "; ".join(f"{n} (`{PRODUCED_BY.get(n, '?')}`)" for n in skipped) + ".")
    with open(args.report, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.report}: {len(made)} figures, {len(skipped)} without data, {len(failed)} failed")
    database_failures = [n for n, t in failures if t.startswith("exit 5:")]  # common.database_error
    if database_failures:
        print(f"database error: {args.db} could not be read by {', '.join(database_failures)} (see above)",
              file=sys.stderr)
        return 5
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
