#!/usr/bin/python3
"""Tail latency per MoE layer of inference runs: p50 / p95 / p99 and MoETuner's mean-of-max, by policy.

Data: `prophet profile --inference` runs (real CPU ranks) and their simulated children (serve.sim_clusters), metrics
tail.<expert|a2a>.<stat> per layer. Each statistic is over the measured batches of one run, of the per-layer
maximum over ranks (percentiles: linear interpolation, type 7); bars are the mean over seeds, error bars sd.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

NAME = "fig_serving_tail"
COMMANDS = ("profile --inference", "profile --inference (simulated)")
STATS = ["p50", "p95", "p99", "mean_of_max"]


def load_serving(con, experiment=None):
    """One row per (run, kind, stat, layer) of tail.* metrics, with policy, seed, sample (in / out) and platform."""
    import pandas as pd
    runs = pd.concat([C.load_runs(con, command=c, experiment=experiment) for c in COMMANDS], ignore_index=True)
    if runs.empty:
        return pd.DataFrame()
    params = C.load_params(con, runs["run_id"], keys=["balance.policy", "serve.eval_mixture",
                                                      "serve.sim_cluster_name"]).reset_index()
    met = C.load_metrics(con, runs["run_id"], like="tail.%")
    if met.empty:
        return pd.DataFrame()
    parts = met["key"].str.split(".", expand=True)
    met["kind"], met["stat"] = parts[1], parts[2]
    df = met.merge(params, on="run_id", how="left").merge(runs[["run_id", "experiment", "seed"]], on="run_id")
    df["policy"] = df["balance.policy"].astype(str)
    mix = df["serve.eval_mixture"] if "serve.eval_mixture" in df.columns else pd.Series("[]", index=df.index)
    df["sample"] = ["in" if (m is None or str(m).replace(" ", "") in ("[]", "nan")) else "out" for m in mix]
    sim = (df["serve.sim_cluster_name"] if "serve.sim_cluster_name" in df.columns
           else pd.Series(None, index=df.index, dtype=object))
    df["platform"] = ["CPU ranks (measured)" if (s is None or str(s) == "nan") else f"{s} (simulated)" for s in sim]
    return df


def serving_or_exit(args, name):
    """load_serving on args.db / args.experiment, or the no-data line and exit 0."""
    con = C.connect_or_exit(args.db, name)
    df = load_serving(con, args.experiment)
    if df.empty:
        C.no_data(name, "no finished `prophet profile --inference` runs with tail.* metrics")
    return df


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    df = serving_or_exit(args, NAME)
    d = df[(df["layer"] >= 0) & (df["kind"].isin(["expert", "a2a"])) & (df["stat"].isin(STATS))]
    if d.empty:
        C.no_data(NAME, "no per-layer tail metrics")
    order = C.policy_order(d["policy"])
    pal = C.palette(order)
    platforms = sorted(d["platform"].unique())
    panels = [(p, k) for p in platforms for k in ("expert", "a2a")]
    C.setup_style()
    import matplotlib.pyplot as plt
    import seaborn as sns
    fig, axes = plt.subplots(len(platforms), 2, figsize=(11, 3.6 * len(platforms)), squeeze=False)
    for ax, (platform, kind) in zip(axes.flat, panels):
        s = d[(d["platform"] == platform) & (d["kind"] == kind) & (d["stat"] == "p99") & (d["sample"] == "in")]
        if s.empty:  # only out-of-sample runs on this platform
            s = d[(d["platform"] == platform) & (d["kind"] == kind) & (d["stat"] == "p99")]
        sns.barplot(data=s, x="layer", y="value", hue="policy", hue_order=[p for p in order if p in set(s["policy"])],
                    palette=pal, errorbar="sd", ax=ax)
        mom = d[(d["platform"] == platform) & (d["kind"] == kind) & (d["stat"] == "mean_of_max") &
                (d["sample"].isin(set(s["sample"])))]
        means = mom.groupby(["layer", "policy"])["value"].mean().reset_index()
        hues = [p for p in order if p in set(s["policy"])]
        width = 0.8 / max(1, len(hues))
        for j, pol in enumerate(hues):
            m = means[means["policy"] == pol]
            ax.scatter(m["layer"] - 0.4 + width * (j + 0.5), m["value"], marker="_", s=120, color="black", zorder=5,
                       label="mean-of-max" if j == 0 else None)
        ax.set_title(f"{platform}: {'expert token processing' if kind == 'expert' else 'all-to-all'}", fontsize=10)
        ax.set_xlabel("MoE layer")
        ax.set_ylabel("p99 of per-layer max over ranks (ms)")
        ax.legend(fontsize=7)
    cap = ("Bars: p99 over measured batches of the per-layer maximum over ranks, in-sample runs, "
           f"{C.SD_NOTE} (errorbar='sd'); black ticks: MoETuner's mean-of-max (the mean of the same maxima). "
           "Simulated rows: the CPU runs' routing scaled to serve.sim_tokens_per_device on the cluster file.")
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    C.save_figure(fig, args.out, NAME)
    t = (d[d["layer"] >= 0].groupby(["platform", "sample", "kind", "layer", "policy", "stat"])["value"]
         .agg(["mean", "std", "count"]).reset_index())
    t = t.pivot_table(index=["platform", "sample", "kind", "layer", "policy"], columns="stat", values="mean")
    t.columns.name = None
    C.print_result(NAME, cap, t.reset_index()[["platform", "sample", "kind", "layer", "policy"] +
                                              [s for s in STATS if s in t.columns]])


if __name__ == "__main__":
    main()
