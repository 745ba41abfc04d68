#!/usr/bin/python3
"""MoETuner's two-stage ILP against the joint ILP (the gap in the joint objective J) and solve time against E, D, L.

Data: the bench table of `bench_ilp_gap` runs (bench/bench_ilp_gap.cpp): one row per instance and solver, rep =
instance seed, real_ns = wall time of the solve, counters = {E, D, L, J, ...}. gap = (J two-stage - J joint) / J joint
(positive: the decomposition lost; the joint ILP stops within its relative MIP gap, so small negatives can occur).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import matplotlib.ticker  # noqa: E402

NAME = "fig_ilp_gap"


def load_bench(con, experiment=None):
    import pandas as pd
    runs = C.load_runs(con, command="bench_ilp_gap", experiment=experiment)
    if runs.empty:
        return pd.DataFrame()
    ids = list(runs["run_id"])
    q = f"SELECT run_id, name, rep, real_ns, counters FROM bench WHERE run_id IN ({','.join('?' * len(ids))})"
    b = C._query(con, q, ids)  # no bench table: empty; a damaged store: exit 5
    if b.empty:
        return b
    c = pd.DataFrame([json.loads(x) if x else {} for x in b["counters"]])
    b = pd.concat([b.drop(columns=["counters"]), c], axis=1)
    b["solver"] = b["name"].str.split("/").str[0]
    b["seconds"] = b["real_ns"] * 1e-9
    b["shape"] = "E" + b["E"].astype(int).astype(str) + " D" + b["D"].astype(int).astype(str) + " L" + \
        b["L"].astype(int).astype(str)
    return b


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    con = C.connect_or_exit(args.db, NAME)
    b = load_bench(con, args.experiment)
    if b.empty:
        C.no_data(NAME, "no bench_ilp_gap runs")
    C.setup_style()
    import matplotlib.pyplot as plt
    import seaborn as sns
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2), squeeze=False)
    ax = axes[0][0]
    joint = b[b["solver"] == "joint"]
    if not joint.empty:
        shapes = list(dict.fromkeys(joint.sort_values(["E", "D", "L"])["shape"]))
        sns.barplot(data=joint.assign(gap_pct=joint["gap"] * 100), x="shape", y="gap_pct", order=shapes,
                    errorbar="sd", color="#4c72b0", ax=ax)
        sns.stripplot(data=joint.assign(gap_pct=joint["gap"] * 100), x="shape", y="gap_pct", order=shapes,
                      color="black", size=3, ax=ax)
        ax.tick_params(axis="x", rotation=45)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_title("two-stage vs joint: gap in J")
    ax.set_xlabel("instance")
    ax.set_ylabel("(J two-stage - J joint) / J joint (%)")
    for ax, (var, fixed) in zip(axes[0][1:], [("E", {"D": 4, "L": 4}), ("D", {"E": 32, "L": 4}),
                                             ("L", {"E": 32, "D": 4})]):
        s = b
        for k, v in fixed.items():
            s = s[s[k] == v]
        if not s.empty:
            sns.lineplot(data=s, x=var, y="seconds", hue="solver", estimator="mean", errorbar="sd", marker="o",
                         ax=ax)
            ax.set_xscale("log", base=2)
            # plain numbers: with math text off (common.plain_text_figures) 2^k ticks would print as raw TeX
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.set_yscale("log")
        ax.set_title("solve time vs " + var + " (" + ", ".join(f"{k}={v}" for k, v in fixed.items()) + ")")
        ax.set_ylabel("wall time (s)")
    cap = ("Left: gap per instance shape, bars mean ± sd across instance seeds (errorbar='sd'), dots: instances; "
           "a joint solve stopped by the time limit (table: proven < 1) gives only the best plan it found. "
           "Right: solve wall time (CBC + MoETuner's warm starts; per-solve time limit in the run's config), "
           "mean ± sd across seeds, log scales.")
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    C.save_figure(fig, args.out, NAME)
    t = b.groupby(["solver", "E", "D", "L"]).agg(J=("J", "mean"), seconds=("seconds", "median"),
                                                seeds=("rep", "nunique")).reset_index()
    if not joint.empty:
        g = joint.groupby(["E", "D", "L"]).agg(gap_mean=("gap", "mean"), gap_max=("gap", "max"),
                                                proven=("proven", "mean")).reset_index().assign(solver="joint")
        t = t.merge(g, on=["solver", "E", "D", "L"], how="left")
    C.print_result(NAME, cap, t)


if __name__ == "__main__":
    main()
