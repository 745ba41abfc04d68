#!/usr/bin/python3
"""Serving sweeps: balancedness predicted vs realised, one-off moves and speedup over static per rebalance setting.

Data: `prophet sweep` points run under balance.regime = serving (experiments/sweeps/serving.toml, docs/serving.md
"Serving sweeps"). Per point the sweep records the mean over its rebalances of the balancedness (mean / max device
load, 1 = balanced) predicted on the window each placement was planned on and realised on the iterations it then
served, the copies it moved and their stall (ms, every rebalance together: the one-off move, not in the speedup),
and speedup_vs_static = static's forward time per layer / the policy's on the same trace and seed. Rows: one per
sweep, cluster, trace, (rebalance_every, window) and policy; balancedness, copies and stall are means over seeds,
the speedup the geometric mean over seeds with its 95% interval (report/significance.py).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import significance as S  # noqa: E402

NAME = "fig_serving_sweep"
METRICS = ["serving.predicted_balancedness", "serving.realised_balancedness", "serving.copies_moved",
           "serving.stall_ms", "serving.rebalances", "speedup_vs_static"]
KEYS = ["experiment", "cluster", "trace", "rebalance_every", "window", "policy"]


def serving_points(con, experiment=None):
    """Finished serving sweep points (balance.regime = serving), one row per point with METRICS."""
    df = C.sweep_points(con, experiment, METRICS)
    if df.empty or "balance.regime" not in df.columns:
        return df.iloc[0:0]
    df = df[df["balance.regime"] == "serving"].copy()
    df["rebalance_every"] = df["balance.rebalance_every"].astype(int)
    df["window"] = df["balance.window"].astype(int)
    return df


def serving_table(df):
    """One row per KEYS: predicted / realised balancedness, copies and stall (means over seeds), the speedup over
    static (geometric mean, 95% interval, verdict) and the number of seeds."""
    import pandas as pd
    rows = []
    for key, g in df.groupby(KEYS, sort=True):
        centre, low, high = S.speedup_interval(g["speedup_vs_static"])
        rows.append(dict(zip(KEYS, key), predicted=g["serving.predicted_balancedness"].mean(),
                         realised=g["serving.realised_balancedness"].mean(),
                         rebalances=g["serving.rebalances"].mean(), copies_moved=g["serving.copies_moved"].mean(),
                         stall_ms=g["serving.stall_ms"].mean(), speedup=centre, speedup_low=low, speedup_high=high,
                         verdict=S.verdict(low, high), seeds=int(g["seed"].nunique())))
    t = pd.DataFrame(rows)
    order = {p: i for i, p in enumerate(C.policy_order(t["policy"]))}
    t["_o"] = t["policy"].map(order)
    return t.sort_values(KEYS[:-1] + ["_o"]).drop(columns="_o").reset_index(drop=True)


def draw(t, args):
    import matplotlib.pyplot as plt
    C.setup_style()
    settings = t[["rebalance_every", "window"]].drop_duplicates().values.tolist()
    policies = C.policy_order(t["policy"])
    colours = C.palette(policies)
    fig, axes = plt.subplots(2, 1, figsize=(max(7, 1.6 * len(settings) * len(policies) / 2), 7.5))
    width = 0.8 / len(policies)
    for i, p in enumerate(policies):
        s = t[t["policy"] == p].groupby(["rebalance_every", "window"])[["predicted", "realised", "speedup"]].mean()
        xs = [j + (i - (len(policies) - 1) / 2) * width for j in range(len(settings))]
        vals = [s.loc[tuple(k)] if tuple(k) in s.index else None for k in settings]
        axes[0].bar(xs, [v["realised"] if v is not None else 0 for v in vals], width, color=colours[p], label=p)
        axes[0].scatter(xs, [v["predicted"] if v is not None else 0 for v in vals], color="black", marker="_",
                        s=120, zorder=3, label="predicted" if i == 0 else None)
        axes[1].bar(xs, [v["speedup"] if v is not None else 0 for v in vals], width, color=colours[p], label=p)
    labels = [f"every {e}\nwindow {w}" for e, w in settings]
    for ax, ylabel in zip(axes, ["balancedness (mean/max)", "speedup over static"]):
        ax.set_xticks(range(len(settings)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel(ylabel)
    axes[0].set_ylim(0, 1.05)
    axes[0].set_title("realised (bars) vs predicted (black tick) balancedness, mean over rebalances and seeds",
                      fontsize=10)
    axes[1].axhline(1.0, color="black", linewidth=0.8)
    axes[1].set_title("forward speedup over static (one-off moves apart), geometric mean over seeds", fontsize=10)
    axes[0].legend(fontsize=8, loc="lower right", ncol=2)
    cap = ("Serving regime: each rebalance plans on the previous `window` iterations; predicted = balancedness "
           "on that window's loads, realised = on the iterations its placement then served. The one-off moves "
           "(copies, stall) are in the table, not in the speedup.")
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    C.save_figure(fig, args.out, NAME)
    return cap


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    df = C.load_frame(NAME, args, serving_points, "no sweep point with balance.regime = serving")
    t = serving_table(df)
    cap = draw(t, args)
    t["speedup vs static (95% CI)"] = [S.interval_text(c, lo, hi) for c, lo, hi in
                                       zip(t["speedup"], t["speedup_low"], t["speedup_high"])]
    cols = KEYS + ["predicted", "realised", "rebalances", "copies_moved", "stall_ms", "speedup",
                   "speedup vs static (95% CI)", "verdict", "seeds"]
    C.print_result(NAME, cap + f" Balancedness, copies and stall: means over seeds; {S.LEVEL:.0%} intervals "
                   "of the geometric-mean speedup (Student's t on logs).", t[cols])


if __name__ == "__main__":
    main()
