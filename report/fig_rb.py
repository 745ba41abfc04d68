#!/usr/bin/python3
"""Balance degree RB per layer (the paper's Fig 16) from `prophet sweep` runs, engine sim (bars, mean ± sd across seeds).

RB of layer l = std(static) / std(policy) of the per-device computed tokens H_i, mean over iterations (metric
layer_rb_vs_static, layer = l, step 0; static is 1 by definition and not drawn). The table adds, per layer, the
ratio prophet RB / fastermoe RB (of the means across seeds) when both policies are present (the paper: up to
11.01x). One panel per experiment / cluster / trace.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
from fig_layers import MAX_PANELS, layer_frame  # noqa: E402

NAME = "fig_rb"
KEY = "layer_rb_vs_static"


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    con = C.connect(args.db)
    if con is None:
        C.no_data(NAME, f"no store at {args.db}")
    df, _ = layer_frame(con, args.experiment, KEY)
    if not df.empty:
        df = df[df["policy"] != "static"]
    if df.empty:
        C.no_data(NAME, "no finished non-static `prophet sweep` runs with per-layer layer_rb_vs_static" +
                  (f" in experiment {args.experiment}" if args.experiment else ""))
    df = df.rename(columns={KEY: "rb"})
    df["setting"] = df["experiment"] + " / " + df["cluster"].astype(str) + " / " + df["trace"].astype(str)
    settings = sorted(df["setting"].unique())[:MAX_PANELS]
    df = df[df["setting"].isin(settings)]
    order = C.policy_order(df["policy"])
    C.setup_style()
    import matplotlib.pyplot as plt
    import seaborn as sns
    nl = int(df["layer"].nunique())
    n = len(settings)
    ncols = 1 if n <= 2 else 2
    nrows = (n + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(min(12.0, max(6.0, 0.3 * nl * len(order) + 2)) * ncols, 3.4 * nrows + 0.6),
                             squeeze=False)
    pal = C.palette(order)
    for i, s in enumerate(settings):
        ax = axes[i // ncols][i % ncols]
        sns.barplot(data=df[df["setting"] == s], x="layer", y="rb", hue="policy", hue_order=order, palette=pal,
                    estimator="mean", errorbar="sd", capsize=0.05, errwidth=1.0, ax=ax)
        ax.axhline(1.0, color="0.3", lw=0.8, ls="--")
        ax.set_title(s, fontsize=9)
        ax.set_xlabel("layer (MoE block)")
        ax.set_ylabel("RB = std(static) / std(policy)")
        if i == 0:
            ax.legend(title="policy", fontsize=7)
        elif ax.get_legend() is not None:
            ax.get_legend().remove()
    for j in range(n, nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    nseeds = int(df.groupby(["setting", "policy", "layer"])["seed"].nunique().max())
    cap = (f"Balance degree RB per layer = std(static) / std(policy) of the per-device computed tokens (mean over "
           f"iterations). Bars: {C.SD_NOTE} (errorbar='sd', up to {nseeds} seeds; grid values pooled). Dashed line: "
           "static (RB = 1). Table: prophet_over_fastermoe = mean prophet RB / mean fastermoe RB per layer. Data: "
           "prophet sweep (engine sim), metric layer_rb_vs_static.")
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.06 if nrows > 1 else 0.1, 1, 1))
    C.save_figure(fig, args.out, NAME)
    by = ["experiment", "cluster", "trace", "layer"]
    t = C.mean_sd(df, by + ["policy"], "rb")
    t["policy"] = t["policy"].astype(str)
    pols = set(t["policy"])
    if {"prophet", "fastermoe"} <= pols:
        p = t[t["policy"] == "prophet"][by + ["rb_mean"]].rename(columns={"rb_mean": "p"})
        f = t[t["policy"] == "fastermoe"][by + ["rb_mean"]].rename(columns={"rb_mean": "f"})
        r = p.merge(f, on=by, how="inner")
        r["prophet_over_fastermoe"] = r["p"] / r["f"].where(r["f"] > 0)
        t = t.merge(r[by + ["prophet_over_fastermoe"]], on=by, how="left")
    t = t.sort_values(["experiment", "cluster", "trace", "layer", "policy"]).reset_index(drop=True)
    C.print_result(NAME, cap, t)


if __name__ == "__main__":
    main()
