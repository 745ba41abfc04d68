#!/usr/bin/python3
"""Per-layer speedup over static (the paper's Fig 11) from `prophet sweep` runs, engine sim (bars, mean ± sd across seeds).

speedup of layer l = static layer_moe_ms / policy layer_moe_ms for the same experiment, cluster, trace, seed and
grid values (layer_moe_ms: the mean over iterations of block l's simulated MoE time; metric layer = l, step 0).
Points without a static point at the same coordinates are left out. One panel per experiment / cluster / trace.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

NAME = "fig_layers"
MAX_PANELS = 12


def layer_frame(con, experiment, key):
    """One row per (run, layer) with the point's coordinates and `key`'s value; empty when none."""
    df = C.sweep_points(con, experiment)
    if df.empty or "policy" not in df.columns:
        return df, []
    met = C.load_metrics(con, df["run_id"], keys=[key])
    met = met[(met["layer"] >= 0) & (met["step"] == 0) & (met["rank"] == -1)]
    if met.empty:
        return met, []
    met = met[["run_id", "layer", "value"]].rename(columns={"value": key})
    grid = [c for c in df.columns if c.startswith(("trace.", "balance.", "plan.")) and c != "balance.policy"]
    keys = [k for k in ["experiment", "cluster", "trace", "seed"] + grid if k in df.columns]
    out = df[["run_id", "policy"] + keys].merge(met, on="run_id", how="inner")
    out["layer"] = out["layer"].astype(int)
    return out, keys


def draw_layer_panels(df, y, ylabel):
    """One panel per experiment / cluster / trace (the first MAX_PANELS): bars of `y` per layer and policy, mean
    +- sd across seeds, a dashed line at 1 (static). Returns the frame restricted to the drawn settings (with a
    `setting` column), the figure, its number of rows and the largest number of seeds behind a bar."""
    df = df.copy()
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
        sns.barplot(data=df[df["setting"] == s], x="layer", y=y, hue="policy", hue_order=order, palette=pal,
                    estimator="mean", errorbar="sd", capsize=0.05, errwidth=1.0, ax=ax)
        ax.axhline(1.0, color="0.3", lw=0.8, ls="--")
        ax.set_title(s, fontsize=9)
        ax.set_xlabel("layer (MoE block)")
        ax.set_ylabel(ylabel)
        if i == 0:
            ax.legend(title="policy", fontsize=7)
        elif ax.get_legend() is not None:
            ax.get_legend().remove()
    for j in range(n, nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    nseeds = int(df.groupby(["setting", "policy", "layer"])["seed"].nunique().max())
    return df, fig, nrows, nseeds


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    con = C.connect_or_exit(args.db, NAME)
    df, keys = layer_frame(con, args.experiment, "layer_moe_ms")
    why = "no finished `prophet sweep` runs with per-layer layer_moe_ms" + (
        f" in experiment {args.experiment}" if args.experiment else "")
    if df.empty:
        C.no_data(NAME, why)
    st = df[df["policy"] == "static"][keys + ["layer", "layer_moe_ms"]].rename(
        columns={"layer_moe_ms": "static_moe_ms"})
    df = df[df["policy"] != "static"].merge(st, on=keys + ["layer"], how="inner")
    df = df[df["layer_moe_ms"] > 0]
    if df.empty:
        C.no_data(NAME, why + " and a static point at the same coordinates")
    df["speedup"] = df["static_moe_ms"] / df["layer_moe_ms"]
    df, fig, nrows, nseeds = draw_layer_panels(df, "speedup", "speedup over static (\u00d7)")
    cap = (f"Per-layer speedup over static = static layer_moe_ms / policy layer_moe_ms (simulated MoE time of the "
           f"block, mean over iterations) at the same point coordinates. Bars: {C.SD_NOTE} (errorbar='sd', up to "
           f"{nseeds} seeds; grid values pooled). Dashed line: static. Data: prophet sweep (engine sim), metric "
           "layer_moe_ms.")
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.06 if nrows > 1 else 0.1, 1, 1))
    C.save_figure(fig, args.out, NAME)
    t = C.mean_sd(df, ["experiment", "cluster", "trace", "policy", "layer"], "speedup")
    t["policy"] = t["policy"].astype(str)
    t = t.sort_values(["experiment", "cluster", "trace", "policy", "layer"]).reset_index(drop=True)
    C.print_result(NAME, cap, t)


if __name__ == "__main__":
    main()
