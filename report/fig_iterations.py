#!/usr/bin/python3
"""Per-iteration time over all iterations from `prophet sweep` runs (engine sim): one line per policy, band = sd.

One panel per experiment / cluster / trace; the line is the mean of iteration_ms at each iteration across seeds
(and pooled grid values), the band mean ± sd (seaborn errorbar='sd'). Sweeps with a planner-scale grid contribute
only their calibrated points (plan.compute_scale = plan.bandwidth_scale = 1).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

NAME = "fig_iterations"
MAX_PANELS = 12


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    con = C.connect_or_exit(args.db, NAME)
    pts = C.sweep_points(con, args.experiment)
    if pts.empty:
        C.no_data(NAME, "no finished `prophet sweep` runs")
    for k in ("plan.compute_scale", "plan.bandwidth_scale"):
        if k in pts.columns:
            pts = pts[pts[k].isna() | (pts[k] == 1.0)]
    met = C.load_metrics(con, pts["run_id"], keys=["iteration_ms"])
    met = met[(met["layer"] == -1) & (met["rank"] == -1)]
    if met.empty:
        C.no_data(NAME, "no iteration_ms metrics (engine = sim sweeps record them)")
    df = met.merge(pts[["run_id", "experiment", "cluster", "trace", "policy", "seed"]], on="run_id")
    df["setting"] = df["experiment"] + " / " + df["cluster"] + " / " + df["trace"]
    settings = sorted(df["setting"].unique())
    dropped = settings[MAX_PANELS:]
    settings = settings[:MAX_PANELS]
    df = df[df["setting"].isin(settings)]
    order = C.policy_order(df["policy"])
    C.setup_style()
    import seaborn as sns
    g = sns.relplot(data=df, kind="line", x="step", y="value", hue="policy", hue_order=order,
                    palette=C.palette(order), col="setting", col_order=settings,
                    col_wrap=min(3, len(settings)), estimator="mean", errorbar="sd", facet_kws={"sharey": False},
                    height=3.2, aspect=1.35, marker="o", markersize=3)
    from matplotlib.ticker import MaxNLocator
    for ax in g.axes.flat:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.margins(x=0)  # no tick left of iteration 0 to collide with the lowest y tick label
    g.set_axis_labels("iteration", "iteration time (ms)")
    g.set_titles("{col_name}", size=8)
    g.fig.suptitle("Simulated iteration time per iteration", y=1.02)
    cap = (f"Lines: {C.SD_NOTE} (band: errorbar='sd'; other grid values pooled). Data: prophet sweep, "
           "metric iteration_ms per iteration.")
    if dropped:
        cap += f" {len(dropped)} further settings not shown (use --experiment)."
    C.add_caption(g.fig, cap)
    g.fig.tight_layout(rect=(0, 0.18 if len(settings) <= 3 else 0.08, 1, 1))  # rows apart: no tick label overlaps
    sns.move_legend(g, "center left", bbox_to_anchor=(1.0, 0.5))  # beside the panels, not over the last one
    C.save_figure(g.fig, args.out, NAME)
    per_run = df.groupby(["setting", "policy", "run_id"])["value"].mean().reset_index()
    t = per_run.groupby(["setting", "policy"])["value"].agg(["mean", "std", "count"]).reset_index()
    t = t.rename(columns={"mean": "iteration_ms_mean_over_runs", "std": "sd_across_runs", "count": "runs"})
    t["iterations"] = [int(df[(df["setting"] == s) & (df["policy"] == p)]["step"].nunique())
                       for s, p in zip(t["setting"], t["policy"])]
    C.print_result(NAME, cap, t)


if __name__ == "__main__":
    main()
