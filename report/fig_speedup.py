#!/usr/bin/python3
"""Speedup over static per cluster / trace / policy from `prophet sweep` runs (bars, mean ± sd across seeds).

speedup = static mean iteration time / policy mean iteration time on the same trace, cluster and seed
(the sweep's `speedup_vs_static`; for engine = "model" sweeps the ratio of the `time_ms` of the static point).
Sweeps with a plan.compute_scale / plan.bandwidth_scale grid contribute only their calibrated points (both 1.0);
other grid keys (trace.*, balance.*) are pooled.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

NAME = "fig_speedup"
# pro-prophet.md §6: speedup over DeepSpeed-MoE, per model, as (fastermoe k=1, prophet k=1, fastermoe k=2,
# prophet k=2). Table IV is 4xHPNV (16 GPUs), Table V 2xLPWNV (8 GPUs; no L there).
PAPER_TABLES = {
    "hpnv-16": ("Table IV (4xHPNV)", {"s": (1.63, 1.98, 2.31, 2.62), "m": (1.99, 2.22, 1.82, 2.10),
                                      "l": (1.62, 1.80, 1.94, 2.23), "ds": (1.34, 1.70, 1.77, 1.94),
                                      "dm": (1.68, 2.26, 1.84, 2.07)}),
    "lpwnv-8": ("Table V (2xLPWNV)", {"s": (1.20, 1.30, 1.56, 1.91), "m": (1.02, 1.18, 1.29, 1.94),
                                      "ds": (1.12, 1.30, 1.44, 1.64), "dm": (0.96, 1.26, 1.25, 1.58)}),
}
MODEL_ORDER = ["s", "m", "l", "ds", "dm"]
TRACE_RE = re.compile(r"^paper-e(\d+)-k(\d+)-([a-z]+)$")  # paper-tables.toml's traces: D, k, model


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


def paper_tables(df):
    """The paper's table layout for every cluster with paper-e{D}-k{k}-{model} traces: one row per model, columns
    fastermoe / prophet at k = 1 and 2 as 'mean ± sd (n)', and the paper's value (over DeepSpeed-MoE) where it
    has one. Returns markdown text ('' when no such traces)."""
    m = df["trace"].astype(str).str.extract(TRACE_RE)
    d = df.assign(k=m[1], model=m[2]).dropna(subset=["model"])
    d = d[d["policy"].isin(["fastermoe", "prophet"])]
    if d.empty:
        return ""
    out = []
    for (experiment, cluster), g in d.groupby(["experiment", "cluster"]):
        title, paper = PAPER_TABLES.get(cluster, (None, {}))
        rows = []
        for model in [x for x in MODEL_ORDER if x in set(g["model"])] + sorted(set(g["model"]) - set(MODEL_ORDER)):
            row = {"model": model.upper()}
            for i, (policy, k) in enumerate([("fastermoe", "1"), ("prophet", "1"), ("fastermoe", "2"),
                                             ("prophet", "2")]):
                v = g[(g["model"] == model) & (g["policy"] == policy) & (g["k"] == k)]["speedup_vs_static"]
                cell = "-" if v.empty else f"{v.mean():.2f} \u00b1 {v.std(ddof=1) if len(v) > 1 else 0:.3f} ({len(v)})"
                if model in paper:
                    cell += f" [paper {paper[model][i]:.2f}]"
                row[f"{policy} k={k}"] = cell
            rows.append(row)
        head = f"**{experiment}, {cluster}**" + (f": the layout of the paper's {title}" if title else "")
        out += [head + " \u2014 speedup over static, mean \u00b1 sd (seeds); [paper: over DeepSpeed-MoE]", "",
                C.markdown_table(C.pd.DataFrame(rows)), ""]
    return "\n".join(out)


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    df = C.load_frame(NAME, args, speedup_frame,
                      "no finished `prophet sweep` runs with speedup_vs_static")
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
    tables = paper_tables(df)
    if tables:
        print()
        print(tables)


if __name__ == "__main__":
    main()
