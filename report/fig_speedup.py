#!/usr/bin/python3
"""Speedup over static per cluster / trace / policy from `prophet sweep` runs (bars, mean ± sd across seeds).

speedup = static mean iteration time / policy mean iteration time on the same trace, cluster and seed
(the sweep's `speedup_vs_static`; for engine = "model" sweeps the ratio of the `time_ms` of the static point).
Sweeps with a plan.compute_scale / plan.bandwidth_scale grid contribute only their calibrated points (both 1.0);
other grid keys (trace.*, balance.*) are pooled.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

NAME = "fig_speedup"


def speedup_frame(con, experiment):
    df = C.sweep_points(con, experiment, ["speedup_vs_static", "mean_iteration_ms", "time_ms"])
    if df.empty:
        return df
    for k in ("plan.compute_scale", "plan.bandwidth_scale"):
        if k in df.columns:
            df = df[df[k].isna() | (df[k] == 1.0)]
    if "speedup_vs_static" not in df.columns:
        df["speedup_vs_static"] = float("nan")
    # engine = model: static time / policy time for the same point
    if "time_ms" in df.columns and df["speedup_vs_static"].isna().any():
        grid = [c for c in df.columns if c.startswith(("trace.", "balance.", "plan.")) and c != "balance.policy"]
        keys = ["experiment", "cluster", "trace", "seed"] + grid
        keys = [k for k in keys if k in df.columns]
        st = df[df["policy"] == "static"][keys + ["time_ms"]].rename(columns={"time_ms": "static_ms"})
        if not st.empty:
            df = df.merge(st, on=keys, how="left")
            miss = df["speedup_vs_static"].isna() & (df["time_ms"] > 0)
            df.loc[miss, "speedup_vs_static"] = df.loc[miss, "static_ms"] / df.loc[miss, "time_ms"]
    return df.dropna(subset=["speedup_vs_static", "policy"])


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    con = C.connect(args.db)
    if con is None:
        C.no_data(NAME, f"no store at {args.db}")
    df = speedup_frame(con, args.experiment)
    if df.empty:
        C.no_data(NAME, "no finished `prophet sweep` runs with speedup_vs_static" +
                  (f" in experiment {args.experiment}" if args.experiment else ""))
    # real-run sweeps (engine = "real") have no cluster file or trace: they train the model of their train_config
    df["cluster"] = df["cluster"].fillna("real CPU ranks")
    df["trace"] = df["trace"].fillna("train config")
    df["setting"] = df["experiment"] + "\n" + df["cluster"] + "\n" + df["trace"]
    order = C.policy_order(df["policy"])
    settings = sorted(df["setting"].unique())
    C.setup_style()
    import matplotlib.pyplot as plt
    import seaborn as sns
    width = max(7.0, 2.5 + 0.3 * len(settings) * (len(order) + 1))
    fig, ax = plt.subplots(figsize=(min(width, 24), 4.6))
    sns.barplot(data=df, x="setting", y="speedup_vs_static", hue="policy", hue_order=order, order=settings,
                estimator="mean", errorbar="sd", palette=C.palette(order), capsize=0.05, errwidth=1.0, ax=ax)
    ax.axhline(1.0, color="0.3", lw=0.8, ls="--")
    ax.set_xlabel("experiment / cluster / trace")
    ax.set_ylabel("speedup over static (\u00d7)")
    ax.set_title("Speedup of each policy over static (simulated mean iteration time)")
    ax.legend(title="policy", bbox_to_anchor=(1.01, 1), loc="upper left")
    if len(settings) > 2:
        plt.setp(ax.get_xticklabels(), rotation=30, ha="right", fontsize=7)
    nseeds = int(df.groupby(["setting", "policy"])["seed"].nunique().max())
    cap = (f"Bars: {C.SD_NOTE} (errorbar='sd', up to {nseeds} seeds; grid values other than the planner scales "
           "pooled). Dashed line: static. Data: prophet sweep, metric speedup_vs_static.")
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    C.save_figure(fig, args.out, NAME)
    t = C.mean_sd(df, ["experiment", "cluster", "trace", "policy"], "speedup_vs_static")
    t["policy"] = t["policy"].astype(str)
    t = t.sort_values(["experiment", "cluster", "trace"]).reset_index(drop=True)
    C.print_result(NAME, cap, t)


if __name__ == "__main__":
    main()
