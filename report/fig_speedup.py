#!/usr/bin/python3
"""Speedup over static per cluster / trace / policy from `prophet sweep` runs (bars, mean ± sd across seeds).

speedup = static mean iteration time / policy mean iteration time on the same trace, cluster and seed
(the sweep's `speedup_vs_static`; for engine = "model" sweeps the ratio of the `time_ms` of the static point).
Sweeps with a plan.compute_scale / plan.bandwidth_scale grid contribute only their calibrated points (both 1.0);
other grid keys (trace.*, balance.*) are pooled. Sweeps that perturb the simulated truth (truth.*_scale, from
`truth_scale` or `uncertainty` in the sweep file) draw their nominal points (every scale 1.0) as the bar and the
range over the perturbed points as a band (a thin black line over the bar): what an error of that size in the
cluster file's constants does to the speedup.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import significance as S  # noqa: E402

NAME = "fig_speedup"
PAPER_COLUMNS = [("fastermoe", "1"), ("prophet", "1"), ("fastermoe", "2"), ("prophet", "2")]  # PAPER_TABLES' order


def _paper_tables():
    """{cluster: (title, {model: (fastermoe k=1, prophet k=1, fastermoe k=2, prophet k=2)})}: the paper's speedups
    over DeepSpeed-MoE from report/paper_values/pro-prophet.toml (one transcription, read by paper_sections.py too).
    Table IV is 4xHPNV (16 GPUs), Table V 2xLPWNV (8 GPUs; no L there)."""
    import paper_compare
    specs = paper_compare.load_all()
    out = {}
    tables = (("table4", "hpnv-16", "Table IV (4xHPNV)"), ("table5", "lpwnv-8", "Table V (2xLPWNV)"))
    for section, cluster, title in tables:
        spec = specs[section]
        want = ["FasterMoE k=1", "Pro-Prophet k=1", "FasterMoE k=2", "Pro-Prophet k=2"]  # PAPER_COLUMNS' order
        assert spec["columns"] == want, spec["columns"]
        out[cluster] = (title, {row.lower(): tuple(v) for row, v in zip(spec["rows"], spec["values"])})
    return out


PAPER_TABLES = _paper_tables()
MODEL_ORDER = ["s", "m", "l", "ds", "dm"]
TRACE_RE = re.compile(r"^paper-e(\d+)-k(\d+)-([a-z]+)$")  # paper-tables.toml's traces: D, k, model


def truth_band(df):
    """Keeps the nominal rows (every truth.*_scale 1.0, or absent) and adds band_lo / band_hi: the min / max of
    speedup_vs_static over all truth points of the same (experiment, cluster, trace, policy, seed, other grid
    values) where that group has a perturbed point; NaN elsewhere (sweeps without truth_scale / uncertainty)."""
    nominal = C.nominal_truth(df)
    if nominal.all():  # no perturbed point (every truth scale 1.0 or absent): no band
        return df.assign(band_lo=float("nan"), band_hi=float("nan"))
    grid = [c for c in df.columns if c.startswith(("trace.", "balance.", "plan.", "sim.")) and c != "balance.policy"]
    keys = [k for k in ["experiment", "cluster", "trace", "policy", "seed"] + grid if k in df.columns]
    # the band spans every truth point of a group that has a perturbed one (the nominal point included)
    df = df.assign(_perturbed=~nominal)
    band = (df.groupby(keys, dropna=False)
            .agg(band_lo=("speedup_vs_static", "min"), band_hi=("speedup_vs_static", "max"),
                 _any=("_perturbed", "any")).reset_index())
    band.loc[~band["_any"], ["band_lo", "band_hi"]] = float("nan")
    return df[nominal].merge(band.drop(columns="_any"), on=keys, how="left").drop(columns="_perturbed")


def speedup_frame(con, experiment):
    df = C.sweep_points(con, experiment, ["speedup_vs_static", "mean_iteration_ms", "time_ms"], keep_perturbed=True)
    if df.empty:
        return df
    df = truth_band(df)
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
            for i, (policy, k) in enumerate(PAPER_COLUMNS):
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


MAX_BARS = 12    # bars per panel: more groups are split over more panels
MAX_PANELS = 12  # panels per figure: the rest are in the table and the CSV only


def panel_frame(df):
    """Adds panel (title) and x (tick label) columns. Traces named like paper-tables.toml's (paper-e{D}-k{k}-{model})
    get one panel per (experiment, cluster, k) and the model as x; other traces one panel per (experiment, cluster),
    x = trace, split into panels of at most MAX_BARS bars. Returns (frame, panel order, x order per panel)."""
    m = df["trace"].astype(str).str.extract(TRACE_RE)
    is_paper = m[2].notna()
    df = df.assign(panel="", x="")
    df.loc[is_paper, "x"] = m.loc[is_paper, 2].str.upper()
    df.loc[is_paper, "panel"] = (df.loc[is_paper, "experiment"] + "\n" + df.loc[is_paper, "cluster"] + ", k=" +
                                 m.loc[is_paper, 1])
    df.loc[~is_paper, "x"] = df.loc[~is_paper, "trace"]
    n_policies = max(1, df["policy"].nunique())
    per_panel = max(1, MAX_BARS // n_policies)
    panels, xorder = [], {}
    for base, g in df[~is_paper].groupby(df.loc[~is_paper, "experiment"] + "\n" + df.loc[~is_paper, "cluster"]):
        xs = sorted(g["x"].unique())
        chunks = [xs[i:i + per_panel] for i in range(0, len(xs), per_panel)]
        for i, chunk in enumerate(chunks):
            title = base + (f" ({i + 1}/{len(chunks)})" if len(chunks) > 1 else "")
            df.loc[g.index[g["x"].isin(chunk)], "panel"] = title
            panels.append(title)
            xorder[title] = chunk
    for title, g in df[is_paper].groupby("panel"):
        panels.append(title)
        xorder[title] = [x.upper() for x in MODEL_ORDER if x.upper() in set(g["x"])] + sorted(
            set(g["x"]) - {x.upper() for x in MODEL_ORDER})
    return df, sorted(panels), xorder


def paper_value(cluster, x, k, policy):
    """The paper's speedup over DeepSpeed-MoE for (cluster, model, k, policy), or None."""
    table = PAPER_TABLES.get(cluster, (None, {}))[1].get(str(x).lower())
    if table is None or policy not in ("fastermoe", "prophet") or k not in ("1", "2"):
        return None
    return table[PAPER_COLUMNS.index((policy, k))]


def draw(df, panels, xorder, order):
    """The faceted bar chart: one panel per entry of panels, bars = policies (mean ± sd over seeds) at each x,
    the paper's value as a black diamond beside ours; every bar's gid is 'panel|x|policy' (the tests read it)."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    shown = panels[:MAX_PANELS]
    ncols = min(3, len(shown))
    nrows = (len(shown) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols + 1.8, 3.4 * nrows + 0.9), sharey=True,
                             squeeze=False)
    pal = C.palette(order)
    width = 0.8 / max(1, len(order))
    paper_drawn = band_drawn = False
    for ax, title in zip(axes.flat, shown):
        g = df[df["panel"] == title]
        xs = xorder[title]
        for j, policy in enumerate(order):
            for i, x in enumerate(xs):
                v = g[(g["x"] == x) & (g["policy"] == policy)]["speedup_vs_static"]
                if v.empty:
                    continue
                pos = i + (j - (len(order) - 1) / 2) * width
                sd = v.std(ddof=1) if len(v) > 1 else 0.0
                ax.bar(pos, v.mean(), width * 0.95, yerr=sd, color=pal[policy], capsize=2,
                       error_kw={"elinewidth": 0.8}, gid=f"{title}|{x}|{policy}")
                cell = g[(g["x"] == x) & (g["policy"] == policy)]
                if "band_lo" in cell.columns and cell["band_lo"].notna().any():
                    # the truth band: over seeds, the lowest and highest speedup any perturbed cluster gives
                    ax.vlines(pos + width * 0.25, cell["band_lo"].min(), cell["band_hi"].max(), colors="black",
                              lw=2.0, gid=f"band|{title}|{x}|{policy}")
                    band_drawn = True
                k = title.rsplit("k=", 1)[1] if ", k=" in title else None
                pv = paper_value(g["cluster"].iloc[0], x, k, policy) if k else None
                if pv is not None:
                    ax.plot(pos, pv, marker="D", color="black", markersize=4, ls="none")
                    paper_drawn = True
        ax.axhline(1.0, color="0.3", lw=0.8, ls="--")
        ax.set_xticks(range(len(xs)))
        long_labels = max(len(str(x)) for x in xs) > 6
        ax.set_xticklabels(xs, rotation=30 if long_labels else 0, ha="right" if long_labels else "center",
                           fontsize=7 if long_labels else 9)
        ax.set_xlim(-0.6, len(xs) - 0.4)
        ax.set_title(title, fontsize=9)
    for ax in axes.flat[len(shown):]:
        ax.set_visible(False)
    for row in axes:
        row[0].set_ylabel("speedup over static (\u00d7)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=pal[p]) for p in order]
    labels = list(order)
    if paper_drawn:
        handles.append(Line2D([], [], marker="D", color="black", ls="none", markersize=5))
        labels.append("paper (over DeepSpeed-MoE)")
    if band_drawn:
        handles.append(Line2D([], [], color="black", lw=2.0))
        labels.append("range under the truth perturbations")
    handles.append(Line2D([], [], color="0.3", lw=0.8, ls="--"))
    labels.append("static (1.0)")
    fig.legend(handles, labels, title="policy", loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.suptitle("Speedup of each policy over static", fontsize=11)
    return fig, len(panels) - len(shown)


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    df = C.load_frame(NAME, args, speedup_frame,
                      "no finished `prophet sweep` runs with speedup_vs_static")
    # real-run sweeps (engine = "real") have no cluster file or trace: they train the model of their train_config
    ranks = df["point.ranks"] if "point.ranks" in df.columns else C.pd.Series(index=df.index, dtype=float)
    df["cluster"] = df["cluster"].fillna(ranks.map(lambda r: f"real, {int(r)} CPU ranks" if r == r else "real"))
    tc = df["point.train_config"].map(C.stem) if "point.train_config" in df.columns else None
    df["trace"] = df["trace"].fillna(tc if tc is not None else "train config").fillna("train config")
    table_df = df
    df = df[df["policy"] != "static"]  # static is 1.0 by definition: the dashed line
    if df.empty:
        C.no_data(NAME, "only static points (no policy to compare)")
    order = C.policy_order(df["policy"])
    df, panels, xorder = panel_frame(df)
    C.setup_style()
    fig, hidden = draw(df, panels, xorder, order)
    nseeds = int(df.groupby(["panel", "x", "policy"])["seed"].nunique().max())
    cap = (f"Bars: {C.SD_NOTE} (error bars: sd; up to {nseeds} seeds; grid values other than the planner scales "
           "pooled); one panel per experiment / cluster (and k for the paper's traces). Dashed line: static. "
           "Black diamonds: the paper's speedup over DeepSpeed-MoE for the same cluster, model and k "
           "(Tables IV / V)." + (f" {hidden} further panels only in the table / CSV." if hidden else "") +
           (" Black lines beside a bar: the range of the speedup when the simulated cluster's compute, bandwidth"
            " and latency differ from the file's by the sweep's truth scales (the planner still plans with the"
            " file's); the bar is the nominal point." if df["band_lo"].notna().any() else "") +
           " Data: prophet sweep, metric speedup_vs_static.")
    C.add_caption(fig, cap)
    bottom = 0.1 if len(panels) <= 3 else 0.05
    fig.tight_layout(rect=(0, bottom + (0.08 if df["band_lo"].notna().any() else 0), 1, 0.95))  # longer caption
    C.save_figure(fig, args.out, NAME)
    t = C.mean_sd(table_df, ["experiment", "cluster", "trace", "policy"], "speedup_vs_static")
    t = t.merge(S.interval_columns(table_df, ["experiment", "cluster", "trace", "policy"], "speedup_vs_static"),
                on=["experiment", "cluster", "trace", "policy"], how="left")
    if table_df["band_lo"].notna().any():  # the truth band per row, over seeds
        keys = ["experiment", "cluster", "trace", "policy"]
        band = table_df.groupby(keys).agg(band_lo=("band_lo", "min"), band_hi=("band_hi", "max")).reset_index()
        t = t.merge(band, on=keys, how="left")
    t["policy"] = t["policy"].astype(str)
    t = t.sort_values(["experiment", "cluster", "trace"]).reset_index(drop=True)
    C.print_result(NAME, cap, t)
    tables = paper_tables(table_df)
    if tables:
        print()
        print(tables)


if __name__ == "__main__":
    main()
