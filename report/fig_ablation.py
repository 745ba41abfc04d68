#!/usr/bin/python3
"""Ablation (the paper's Fig 14): speedup of each variant over "none" (bars, mean ± sd across seeds).

Reads every finished run that carries the param ``ablate.variant`` (none, planner, scheduler, planner+scheduler,
full), whatever made it: `prophet sweep` on the simulator (experiments/sweeps/fig14-ablation.toml; time = the run's
``mean_iteration_ms``) or `prophet ablate` real runs (time = the mean of the run's global ``step_ms``, the first 2
steps left out as warm-up when there are more, as `prophet ablate` does by default). speedup = time of "none" / time of the variant, paired by
setting (experiment, engine, cluster / trace or train config, k) and seed. The paper's Fig 14 numbers (incremental:
planner over none, planner+scheduler over planner, full over planner+scheduler) are drawn as markers at their
cumulative values and listed beside ours in the table.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import significance as S  # noqa: E402

NAME = "fig_ablation"
VARIANTS = ["none", "planner", "scheduler", "planner+scheduler", "full"]


def _paper_steps():
    """The paper's Fig 14 (MoE-GPT-M), each step's speedup over the previous one, per k, from
    report/paper_values/pro-prophet.toml (rows: add planner, add scheduler, full; columns k=1, k=2, average)."""
    import paper_compare
    spec = paper_compare.load_all()["fig14"]
    variants = ["planner", "planner+scheduler", "full"]  # the variant each of the paper's rows adds
    return {k: {v: row[i] for v, row in zip(variants, spec["values"])} for i, k in enumerate((1, 2))}


PAPER_STEPS = _paper_steps()
PREVIOUS = {"planner": "none", "planner+scheduler": "planner", "full": "planner+scheduler"}
WARMUP = 2  # steps left out of a real run's mean step time (prophet ablate's default --warmup)


def paper_cumulative(k):
    steps = PAPER_STEPS.get(k)
    if not steps:
        return {}
    out, acc = {}, 1.0
    for v in ("planner", "planner+scheduler", "full"):
        acc *= steps[v]
        out[v] = acc
    return out


def top_k(row):
    """k of a run: model.K (real runs), trace.top_k (a grid), else the 'k<N>' in the trace file name."""
    for key in ("model.K", "trace.top_k"):
        v = row.get(key)
        if v is not None and v == v:
            return int(v)
    m = re.search(r"(?:^|[-_])k(\d+)(?:[-_.]|$)", str(row.get("trace") or ""))
    return int(m.group(1)) if m else None


def ablation_frame(con, experiment):
    runs = C.load_runs(con, experiment=experiment)
    if runs.empty:
        return runs
    params = C.load_params(con, runs["run_id"])
    if "ablate.variant" not in params.columns:
        return params.iloc[0:0]
    params = params[params["ablate.variant"].notna()]
    df = runs.set_index("run_id").join(params, how="inner")
    if df.empty:
        return df.reset_index()
    met = C.load_metrics(con, df.index, keys=["mean_iteration_ms", "step_ms"])
    met = met[(met["layer"] == -1) & (met["rank"] == -1)]
    sim = met[(met["key"] == "mean_iteration_ms") & (met["step"] == 0)].groupby("run_id")["value"].first()
    steps = met[met["key"] == "step_ms"]
    # the first WARMUP steps are warm-up (allocation, first plans), left out as `prophet ablate --warmup` does
    # by default, in runs that have more steps than that
    order = steps.groupby("run_id")["step"].rank(method="first")
    more = steps.groupby("run_id")["step"].transform("count") > WARMUP
    steps = steps[~more | (order > WARMUP)]
    real = steps.groupby("run_id")["value"].mean()
    df["time_ms"] = sim.reindex(df.index)
    df["time_ms"] = df["time_ms"].fillna(real.reindex(df.index))
    df["time_source"] = ["mean_iteration_ms" if r in sim.index else f"mean step_ms after {WARMUP} warm-up steps"
                         for r in df.index]
    df = df.reset_index()
    df["variant"] = df["ablate.variant"]
    df["cluster"] = df.get("point.cluster", C.pd.Series(index=df.index, dtype=object)).map(C.stem)
    df["trace"] = df.get("point.trace", C.pd.Series(index=df.index, dtype=object)).map(C.stem)
    if "point.seed" in df.columns:
        df["seed"] = df["point.seed"].fillna(df["seed"])
    df["k"] = [top_k(r) for r in df.to_dict("records")]
    df["cluster"] = df["cluster"].fillna(df["backend"].map(lambda b: f"real ({b})"))
    df["trace"] = df["trace"].fillna(df.get("point.train_config", C.pd.Series(index=df.index, dtype=object))
                                     .map(C.stem)).fillna(df["command"])
    # one `prophet ablate` invocation (its ablate.id) is one setting: its seeds pair with its own "none" runs
    ids = df.get("ablate.id", C.pd.Series(index=df.index, dtype=object))
    df["setting"] = (df["experiment"] + "\n" + df["cluster"] + " " + df["trace"] +
                     ids.map(lambda i: f" #{str(i)[:8]}" if isinstance(i, str) else "") + "\nk=" +
                     df["k"].map(lambda k: "?" if k is None or k != k else str(int(k))))
    df = df.dropna(subset=["time_ms"])
    df = df[df["time_ms"] > 0]
    base = df[df["variant"] == "none"][["setting", "seed", "time_ms"]].rename(columns={"time_ms": "none_ms"})
    base = base.groupby(["setting", "seed"], as_index=False)["none_ms"].mean()
    df = df.merge(base, on=["setting", "seed"], how="inner")
    df["speedup_vs_none"] = df["none_ms"] / df["time_ms"]
    return df


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    df = C.load_frame(NAME, args, ablation_frame,
                      "no finished runs with an ablate.variant param and a 'none' run to compare with")
    order = [v for v in VARIANTS if v in set(df["variant"])]
    order += sorted(v for v in set(df["variant"]) if v not in VARIANTS)
    settings = sorted(df["setting"].unique())
    C.setup_style()
    import matplotlib.pyplot as plt
    import seaborn as sns
    fig, ax = plt.subplots(figsize=(max(7.0, 1.2 + 1.6 * len(settings) * len(order) / 4), 4.6))
    colors = dict(zip(order, sns.color_palette("viridis", len(order))))
    sns.barplot(data=df, x="setting", y="speedup_vs_none", hue="variant", hue_order=order, order=settings,
                estimator="mean", errorbar="sd", palette=colors, capsize=0.05, errwidth=1.0, ax=ax)
    # the paper's cumulative speedups, as black markers over the matching bars
    nh = len(order)
    width = 0.8 / nh
    drawn = False
    for i, s in enumerate(settings):
        k = df[df["setting"] == s]["k"].iloc[0]
        for v, val in paper_cumulative(int(k) if k == k and k is not None else None).items():
            if v in order:
                x = i - 0.4 + width * (order.index(v) + 0.5)
                ax.plot([x], [val], marker="D", color="black", markersize=5, ls="none",
                        label="paper Fig 14 (cumulative)" if not drawn else None)
                drawn = True
    ax.axhline(1.0, color="0.3", lw=0.8, ls="--")
    ax.set_xlabel("experiment / cluster, trace / k")
    ax.set_ylabel("speedup over 'none' (\u00d7)")
    ax.set_title("Ablation: speedup of each variant over static placement without scheduler")
    ax.legend(title="variant", bbox_to_anchor=(1.01, 1), loc="upper left")
    nseeds = int(df.groupby(["setting", "variant"])["seed"].nunique().max())
    sources = ", ".join(sorted(df["time_source"].unique()))
    cap = (f"Bars: {C.SD_NOTE} (errorbar='sd', up to {nseeds} seeds) of time(none) / time(variant), paired by "
           f"setting and seed; time = {sources}. Black diamonds: the paper's Fig 14 (MoE-GPT-M) chained to "
           "cumulative speedups (" + "; ".join(f"k={k}: " + ", x".join(f"{v:.2f}" for v in steps.values())
                                             for k, steps in PAPER_STEPS.items()) + "). Dashed line: none.")
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    C.save_figure(fig, args.out, NAME)
    t = C.mean_sd(df, ["setting", "variant"], "speedup_vs_none")
    t = t.merge(S.interval_columns(df, ["setting", "variant"], "speedup_vs_none"), on=["setting", "variant"],
                how="left")
    t["setting"] = t["setting"].str.replace("\n", " / ")
    # incremental step (the paper's presentation): this variant's mean speedup over its predecessor's
    means = t.set_index(["setting", "variant"])["speedup_vs_none_mean"]
    ks = df.groupby("setting")["k"].first()
    ks.index = ks.index.str.replace("\n", " / ")
    inc, paper = [], []
    for s, v in zip(t["setting"], t["variant"]):
        prev = PREVIOUS.get(v)
        inc.append(means[(s, v)] / means[(s, prev)] if prev and (s, prev) in means.index else float("nan"))
        k = ks.get(s)
        steps = PAPER_STEPS.get(int(k)) if k == k and k is not None else None
        paper.append(steps.get(v, float("nan")) if steps else float("nan"))
    t["step_over_previous"] = inc
    t["paper_step"] = paper
    t["order"] = t["variant"].map(lambda v: order.index(v))
    t = t.sort_values(["setting", "order"]).drop(columns="order").reset_index(drop=True)
    C.print_result(NAME, cap, t)


if __name__ == "__main__":
    main()
