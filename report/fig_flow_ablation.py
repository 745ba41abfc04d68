#!/usr/bin/python3
"""Ablation of flow's components: gap to the lower bound and MoE-layer time of each cumulative step, per column.

Reads the finished `prophet sweep` points whose param ``ablate.variant`` is a flow step, ``flow-<n>-<component>``
(experiments/sweeps/flow-ablation*.toml: 1 placement only, 2 +routing, 3 +transfer-awareness, 4 +topology,
5 +extra copies, 6 +hot sets, 7 +prediction). Engine "model" points give the Eq 6 and Eq 8 columns (``eq6_ms`` /
``gap_eq6``, ``eq8_ms`` / ``gap_eq8``: the mean predicted MoE-layer time and its gap to the cost model's bound); engine "sim" points the Sim
column (the mean over blocks of ``layer_moe_ms``, the simulated MoE-block time, and ``gap_sim``, its gap to the
simulated-time bound). gap = time / bound - 1. One panel column per trace and cluster; top row time / bound
(1 + gap), bottom row ms, both on log axes; bars per step, mean ± sd across seeds. The table adds each step's change in time against the step before.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

NAME = "fig_flow_ablation"
STEP_RE = re.compile(r"^flow-(\d+)-(.+)$")
# the component each shipped step adds (others are labelled by their own name)
STEP_LABELS = {"placement": "placement only", "routing": "+routing", "transfer": "+transfer-awareness",
               "topology": "+topology", "extra-copies": "+extra copies", "hot-sets": "+hot sets",
               "prediction": "+prediction"}
# column -> (time metric, gap metric) of engine model; Sim is computed from the per-layer metric
MODEL_COLUMNS = {"Eq 6": ("eq6_ms", "gap_eq6"), "Eq 8": ("eq8_ms", "gap_eq8")}
COLUMNS = ["Eq 6", "Eq 8", "Sim"]


def step_label(variant):
    m = STEP_RE.match(str(variant))
    return f"{m.group(1)} {STEP_LABELS.get(m.group(2), m.group(2))}" if m else None


def sim_layer_means(con, run_ids):
    """run_id -> mean over blocks of layer_moe_ms (step 0), what gap_sim compares with the bound."""
    met = C.load_metrics(con, run_ids, keys=["layer_moe_ms"])
    met = met[(met["step"] == 0) & (met["layer"] >= 0)]
    return met.groupby("run_id")["value"].mean()


def long_rows(df, sim_ms):
    """One row per (run, column): setting, step, seed, column, ms, gap (%)."""
    rows = []
    for r in df.to_dict("records"):
        base = {"trace": r["trace"], "cluster": r["cluster"], "step": r["step"], "seed": r["seed"]}
        if r.get("point.engine") == "model":
            for col, (ms_key, gap_key) in MODEL_COLUMNS.items():
                rows.append(dict(base, column=col, ms=r.get(ms_key), gap_pct=100.0 * r.get(gap_key, float("nan"))))
        elif r.get("point.engine") == "sim":
            rows.append(dict(base, column="Sim", ms=sim_ms.get(r["run_id"], float("nan")),
                             gap_pct=100.0 * r.get("gap_sim", float("nan"))))
    return C.pd.DataFrame(rows)


def ablation_frame(con, experiment):
    keys = ["eq6_ms", "eq8_ms", "gap_eq6", "gap_eq8", "gap_sim"]
    df = C.sweep_points(con, experiment=experiment, metric_keys=keys)
    if df.empty or "ablate.variant" not in df.columns:
        return C.pd.DataFrame()
    df["step"] = df["ablate.variant"].map(step_label)
    df = df[df["step"].notna()]
    if df.empty:
        return C.pd.DataFrame()
    for k in keys:
        if k not in df.columns:
            df[k] = float("nan")
    out = long_rows(df, sim_layer_means(con, df["run_id"]))
    return out.dropna(subset=["ms", "gap_pct"]) if not out.empty else out


def step_order(steps):
    return sorted(steps, key=lambda s: (int(s.split(" ", 1)[0]), s))


def draw(df, settings, steps, columns):
    import matplotlib.pyplot as plt
    import matplotlib.ticker as ticker
    import seaborn as sns
    fig, axes = plt.subplots(2, len(settings), figsize=(max(6.5, 3.6 * len(settings) + 2.2), 6.4), squeeze=False)
    colors = dict(zip(steps, sns.color_palette("viridis", len(steps))))
    for j, s in enumerate(settings):
        sub = df[df["setting"] == s]
        for i, (value, label) in enumerate([("over_bound", "time / bound (\u00d7, log)"),
                                            ("ms", "MoE-layer time (ms, log)")]):
            ax = axes[i][j]
            sns.barplot(data=sub, x="column", y=value, hue="step", order=columns, hue_order=steps, palette=colors,
                        estimator="mean", errorbar="sd", capsize=0.05, errwidth=1.0, ax=ax)
            ax.set_yscale("log")  # the steps span orders of magnitude (an unaware step replicates everything)
            # plain tick text: names and numbers are never parsed as math here (common.plain_text_figures)
            ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(ticker.NullFormatter())
            ax.set_xlabel("")
            ax.set_ylabel(label if j == 0 else "")
            if i == 0:
                ax.set_title(s, fontsize=9)
            if ax.get_legend() is not None:
                ax.get_legend().remove()
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, title="cumulative step", loc="upper left", bbox_to_anchor=(1.0, 0.95))
    return fig


def step_table(df, steps):
    t = C.mean_sd(df, ["setting", "column", "step"], "ms")
    g = C.mean_sd(df, ["setting", "column", "step"], "gap_pct").drop(columns="n")
    t = t.merge(g, on=["setting", "column", "step"])
    t["order"] = t["step"].map(steps.index)
    t["column_order"] = t["column"].map(COLUMNS.index)
    t = t.sort_values(["setting", "column_order", "order"]).reset_index(drop=True)
    # this step's mean time against the step before it in the same setting and column, %
    prev = t.groupby(["setting", "column"])["ms_mean"].shift(1)
    t["change_vs_previous_pct"] = 100.0 * (t["ms_mean"] / prev - 1.0)
    return t.drop(columns=["order", "column_order"])[
        ["setting", "column", "step", "n", "ms_mean", "ms_sd", "gap_pct_mean", "gap_pct_sd", "change_vs_previous_pct"]]


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    df = C.load_frame(NAME, args, ablation_frame,
                      "no finished sweep points with an ablate.variant flow-<n>-<component> and their times")
    df["setting"] = df["trace"].astype(str) + " @ " + df["cluster"].astype(str)
    df["over_bound"] = 1.0 + df["gap_pct"] / 100.0  # time / bound, drawn on a log axis
    settings = sorted(df["setting"].unique())
    steps = step_order(df["step"].unique())
    columns = [c for c in COLUMNS if c in set(df["column"])]
    C.setup_style()
    fig = draw(df, settings, steps, columns)
    nseeds = int(df.groupby(["setting", "column", "step"])["seed"].nunique().max())
    cap = (f"Each cumulative step of flow (bars, {C.SD_NOTE}, errorbar='sd', up to {nseeds} seeds): top, time / "
           "lower bound (1 + gap; the table gives gap = time / bound - 1 in %); bottom, mean MoE-layer time (ms); "
           "both on log axes. Eq 6 / Eq 8: the cost model's prediction (sweep engine model); Sim: the simulated "
           "MoE block (engine sim).")
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    C.save_figure(fig, args.out, NAME)
    C.print_result(NAME, cap, step_table(df, steps))


if __name__ == "__main__":
    main()
