#!/usr/bin/python3
"""Speedup over static vs the planner's cost-model mis-calibration (plan.compute_scale / plan.bandwidth_scale).

From `prophet sweep` runs whose grid varies plan.compute_scale and/or plan.bandwidth_scale (the planner's belief
only; the simulated cluster stays calibrated). One panel per varied scale, taken at the other scale = 1 when that
slice exists (else pooled); lines: mean ± sd across seeds (errorbar='sd').
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

NAME = "fig_sensitivity"
SCALES = ["plan.compute_scale", "plan.bandwidth_scale"]


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    con = C.connect_or_exit(args.db, NAME)
    df = C.sweep_points(con, args.experiment, ["speedup_vs_static"])
    if df.empty or "speedup_vs_static" not in df.columns:
        C.no_data(NAME, "no finished sweep runs with speedup_vs_static")
    df = df.dropna(subset=["speedup_vs_static"])
    df = df[df["policy"] != "static"]
    varied_exps = set()
    for k in SCALES:
        if k in df.columns:
            n = df.groupby("experiment")[k].nunique()
            varied_exps |= set(n[n > 1].index)
    df = df[df["experiment"].isin(varied_exps)]
    varied = [k for k in SCALES if k in df.columns and df[k].nunique() > 1]
    if df.empty or not varied:
        C.no_data(NAME, "no sweep varies plan.compute_scale or plan.bandwidth_scale")
    df["setting"] = df["experiment"] + " / " + df["cluster"] + " / " + df["trace"]
    order = C.policy_order(df["policy"])
    pal = C.palette(order)
    C.setup_style()
    import matplotlib.pyplot as plt
    import seaborn as sns
    fig, axes = plt.subplots(1, len(varied), figsize=(5.2 * len(varied), 4.4), squeeze=False)
    rows = []
    multi = df["setting"].nunique() > 1
    for ax, k in zip(axes[0], varied):
        other = [o for o in SCALES if o != k and o in df.columns]
        d = df
        note = "pooled"
        for o in other:
            s = d[d[o] == 1.0]
            if not s.empty:
                d, note = s, f"{o.split('.')[1]} = 1"
        sns.lineplot(data=d, x=k, y="speedup_vs_static", hue="policy", hue_order=order, palette=pal,
                     style="setting" if multi else None, estimator="mean", errorbar="sd", marker="o", ax=ax)
        ax.axhline(1.0, color="0.3", lw=0.8, ls="--")
        ax.axvline(1.0, color="0.6", lw=0.8, ls=":")
        ax.set_xscale("log", base=2)
        ticks = sorted(float(v) for v in d[k].dropna().unique())
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{v:g}" for v in ticks])
        ax.minorticks_off()
        ax.set_xlabel(f"planner {k.split('.')[1].replace('_', ' ')} (\u00d7 calibrated, log scale)")
        ax.set_ylabel("speedup over static (\u00d7)")
        ax.set_title(f"{k} ({note})", fontsize=9)
        t = C.mean_sd(d, ["setting", "policy", k], "speedup_vs_static")
        t.insert(0, "varied", k)
        t = t.rename(columns={k: "scale"})
        rows.append(t)
    fig.suptitle("Sensitivity of the planners to a mis-calibrated cost model")
    cap = (f"Lines: {C.SD_NOTE} (errorbar='sd'). Only the planner's belief is scaled; the simulator uses the "
           "calibrated cluster. Dashed: static; dotted: calibrated. Data: prophet sweep with a plan.*_scale grid.")
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    C.save_figure(fig, args.out, NAME)
    import pandas as pd
    C.print_result(NAME, cap, pd.concat(rows, ignore_index=True))


if __name__ == "__main__":
    main()
