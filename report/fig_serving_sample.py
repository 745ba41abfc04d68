#!/usr/bin/python3
"""In-sample against out-of-sample: each policy's reduction of the MoE-layer tail against static, by platform.

Data: `prophet profile --inference` runs and their simulated children. Per run, the MoE part of a batch is the sum
over layers of the per-layer maximum over ranks of the layer time (expert + all-to-all + layout/Trans); its p99 and
mean-of-max over batches are compared with the static run of the same seed, sample and platform:
reduction = 1 - policy / static (positive: faster than static). In-sample: measured on data A, after the profiled
batches; out-of-sample: data B (serve.eval_mixture). Bars: mean over seeds, error bars sd.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
from fig_serving_tail import serving_or_exit  # noqa: E402

NAME = "fig_serving_sample"
# (kind, stat, column) the table reports; the figure draws the first two
COLUMNS = [("layer", "p99", "moe_p99"), ("layer", "mean_of_max", "moe_mean_of_max"),
           ("expert", "p99", "expert_p99"), ("expert", "mean_of_max", "expert_mean_of_max"),
           ("a2a", "p99", "a2a_p99"), ("a2a", "mean_of_max", "a2a_mean_of_max"), ("layer", "p50", "moe_p50")]


def reductions(df):
    """One row per non-static run: 1 - policy/static for every COLUMNS entry (summed over layers, layer = -1)."""
    import pandas as pd
    d = df[df["layer"] == -1]
    rows = []
    for kind, stat, col in COLUMNS:
        s = d[(d["kind"] == kind) & (d["stat"] == stat)]
        keys = ["experiment", "platform", "sample", "seed"]
        base = s[s["policy"] == "static"][keys + ["value"]].rename(columns={"value": "static"})
        m = s[s["policy"] != "static"].merge(base, on=keys)
        m["metric"] = col
        m["reduction"] = 1.0 - m["value"] / m["static"]
        rows.append(m[keys + ["policy", "run_id", "metric", "reduction"]])
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    df = serving_or_exit(args, NAME)
    r = reductions(df)
    if r.empty:
        C.no_data(NAME, "no policy run with a static run of the same seed, sample and platform")
    platforms = sorted(r["platform"].unique())
    order = [p for p in C.policy_order(r["policy"]) if p != "static"]
    C.setup_style()
    import matplotlib.pyplot as plt
    import seaborn as sns
    fig, axes = plt.subplots(len(platforms), 2, figsize=(11, 3.6 * len(platforms)), squeeze=False)
    for row, platform in zip(axes, platforms):
        for ax, (metric, title) in zip(row, [("moe_p99", "p99"), ("moe_mean_of_max", "mean-of-max (MoETuner)")]):
            s = r[(r["platform"] == platform) & (r["metric"] == metric)]
            sns.barplot(data=s, x="policy", y="reduction", hue="sample", hue_order=["in", "out"], order=order,
                        errorbar="sd", ax=ax)
            ax.axhline(0, color="black", linewidth=0.8)
            ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v * 100:.0f}%"))
            ax.set_title(f"{platform}: MoE-part {title} vs static", fontsize=10)
            ax.set_xlabel("")
            ax.set_ylabel("reduction vs static")
            ax.legend(title="sample", fontsize=8)
    cap = ("Reduction = 1 - policy / static of the MoE part (sum over layers of the per-layer max over ranks) per "
           f"seed, {C.SD_NOTE} (errorbar='sd'); in = data A after the profile, out = data B (another topic "
           "mixture). MoETuner reports -27...-36% tail (its mean-of-max) and 9.3% / 17.5% end to end, in-sample.")
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    C.save_figure(fig, args.out, NAME)
    t = r.groupby(["platform", "sample", "policy", "metric"])["reduction"].agg(["mean", "std", "count"]).reset_index()
    t["cell"] = [f"{m * 100:+.1f}% ± {0 if s != s else s * 100:.1f}" for m, s in zip(t["mean"], t["std"])]
    w = t.pivot_table(index=["platform", "sample", "policy"], columns="metric", values="cell", aggfunc="first")
    w.columns.name = None
    w["seeds"] = t.groupby(["platform", "sample", "policy"])["count"].max()
    cols = [c for _, _, c in COLUMNS if c in w.columns] + ["seeds"]
    C.print_result(NAME, cap, w.reset_index()[["platform", "sample", "policy"] + cols])


if __name__ == "__main__":
    main()
