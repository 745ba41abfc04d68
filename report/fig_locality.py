#!/usr/bin/python3
"""Speedup over static vs routing locality (JS divergence between consecutive iterations), from `prophet sweep`.

x = js_divergence_mean of the point's trace (0: every iteration routes like the previous one), y = speedup of
prophet and prophet-oracle (and any other non-static policy present) over static. Points: one per run; line: mean
per trace setting (trace file and trace.* grid values) across seeds, band: mean ± sd of the speedup where seeds repeat.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

NAME = "fig_locality"


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    con = C.connect_or_exit(args.db, NAME)
    df = C.sweep_points(con, args.experiment, ["speedup_vs_static", "js_divergence_mean"])
    need = {"speedup_vs_static", "js_divergence_mean"}
    if df.empty or not need <= set(df.columns):
        C.no_data(NAME, "no finished sim sweep runs with js_divergence_mean and speedup_vs_static")
    for k in ("plan.compute_scale", "plan.bandwidth_scale"):
        if k in df.columns:
            df = df[df[k].isna() | (df[k] == 1.0)]
    df = df.dropna(subset=list(need))
    df = df[df["policy"] != "static"]
    prophets = [p for p in ("prophet", "prophet-oracle") if p in set(df["policy"])]
    if prophets:
        df = df[df["policy"].isin(prophets)]
    if df.empty:
        C.no_data(NAME, "no non-static sweep points")
    if df["js_divergence_mean"].nunique() < 2:
        C.no_data(NAME, "all points have the same JS divergence (sweep a trace.* grid, e.g. trace.drift_rate)")
    grid = sorted(c for c in df.columns if c.startswith("trace.") and c != "trace.seed")
    df["trace_setting"] = df["experiment"] + " " + df["cluster"] + " " + df["trace"]
    for c in grid:
        df["trace_setting"] += " " + c + "=" + df[c].astype(str)
    grp = df.groupby(["policy", "trace_setting"])
    t = grp.agg(js_mean=("js_divergence_mean", "mean"), js_sd=("js_divergence_mean", "std"),
                speedup_mean=("speedup_vs_static", "mean"), speedup_sd=("speedup_vs_static", "std"),
                seeds=("seed", "nunique")).reset_index().sort_values(["policy", "js_mean"])
    order = C.policy_order(df["policy"])
    pal = C.palette(order)
    C.setup_style()
    import matplotlib.pyplot as plt
    import seaborn as sns
    fig, ax = plt.subplots(figsize=(7.0, 4.6))
    sns.scatterplot(data=df, x="js_divergence_mean", y="speedup_vs_static", hue="policy", hue_order=order,
                    palette=pal, alpha=0.45, s=22, ax=ax, legend=False)
    for p in order:
        s = t[t["policy"] == p]
        ax.plot(s["js_mean"], s["speedup_mean"], color=pal[p], marker="o", lw=1.6, label=p)
        sd = s["speedup_sd"].fillna(0.0)
        if (s["seeds"] > 1).any():
            ax.fill_between(s["js_mean"], s["speedup_mean"] - sd, s["speedup_mean"] + sd, color=pal[p], alpha=0.18,
                            lw=0)
    ax.axhline(1.0, color="0.3", lw=0.8, ls="--")
    ax.set_xlabel("JS divergence between consecutive iterations (mean, nats)")
    ax.set_ylabel("speedup over static (\u00d7)")
    ax.set_title("Prediction-based planning vs routing locality")
    ax.legend(title="policy (mean line)")
    nseeds = int(t["seeds"].max())
    cap = (f"Dots: single runs. Lines: mean per trace setting; bands: {C.SD_NOTE} (up to {nseeds} seeds, "
           "shown where seeds repeat). Dashed: static. Data: prophet sweep, js_divergence_mean, speedup_vs_static.")
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    C.save_figure(fig, args.out, NAME)
    C.print_result(NAME, cap, t.reset_index(drop=True))


if __name__ == "__main__":
    main()
