#!/usr/bin/python3
"""Planner time scaling: planning time against E, D and L per policy (mean ± sd across seeds).

Reads finished `prophet sweep` runs of engine "model" (metric ``plan_us``: the median measured planning time of one
MoE layer, evaluate_policy; for the offline policies eplb / moetuner the one-off plan of all layers divided by L)
whose grid sets ``trace.num_experts`` (E); D is the run's world size and L the grid's ``trace.num_layers`` when
gridded. Left: time per layer against E, one line per policy and D. Right: the time to plan all L layers
(plan_us x L: once per iteration for prophet / fastermoe, once per run for eplb / moetuner) against L, at the
largest E and D of the data. Data: e.g. experiments/sweeps/planner-scaling.toml.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

NAME = "fig_planner_scaling"


def scaling_frame(con, experiment):
    df = C.sweep_points(con, experiment, ["plan_us"])
    if df.empty or "plan_us" not in df.columns or "trace.num_experts" not in df.columns:
        return C.pd.DataFrame()
    engine = df.get("point.engine", C.pd.Series(index=df.index, dtype=object))
    df = df[(engine == "model") & df["plan_us"].notna() & df["trace.num_experts"].notna()].copy()
    df = df[df["policy"] != "static"]
    if df.empty:
        return df
    df["E"] = df["trace.num_experts"].astype(int)
    df["D"] = df["world_size"].astype(int)
    df["L"] = df["trace.num_layers"] if "trace.num_layers" in df.columns else float("nan")
    df["plan_all_layers_ms"] = df["plan_us"] * df["L"] * 1e-3
    return df


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    df = C.load_frame(NAME, args, scaling_frame,
                      "no finished engine = \"model\" sweep runs with plan_us and a trace.num_experts grid")
    order = C.policy_order(df["policy"])
    has_l = df["L"].notna().any() and df["L"].nunique() > 1
    C.setup_style()
    import matplotlib.pyplot as plt
    import seaborn as sns
    fig, axes = plt.subplots(1, 2 if has_l else 1, figsize=(12 if has_l else 7, 4.6), squeeze=False)
    ax = axes[0][0]
    sns.lineplot(data=df, x="E", y="plan_us", hue="policy", hue_order=order, style="D", markers=True,
                 estimator="mean", errorbar="sd", palette=C.palette(order), ax=ax)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("experts per layer E")
    ax.set_ylabel("planning time per MoE layer (\u00b5s)")
    ax.set_title("per layer, against E (style: devices D)")
    ax.legend(fontsize=7, loc="upper left")
    if has_l:
        big = df[(df["E"] == df["E"].max()) & (df["D"] == df["D"].max())]
        ax2 = axes[0][1]
        sns.lineplot(data=big, x="L", y="plan_all_layers_ms", hue="policy", hue_order=order, markers=True,
                     style="policy", estimator="mean", errorbar="sd", palette=C.palette(order), ax=ax2)
        ax2.set_yscale("log")
        ax2.set_xlabel("MoE layers L")
        ax2.set_ylabel("time to plan all L layers (ms)")
        ax2.set_title(f"all layers, against L (E = {int(df['E'].max())}, D = {int(df['D'].max())})")
        ax2.legend(fontsize=7, loc="upper left")
    nseeds = int(df.groupby(["policy", "E", "D", "L"], dropna=False)["seed"].nunique().max())
    cap = (f"Lines: {C.SD_NOTE} (errorbar='sd', up to {nseeds} seeds) of the measured planning time (plan_us, "
           "engine model: median over the trace's iterations and layers, one core; eplb / moetuner plan once, "
           "their time per layer is the one-off plan / L). Right: plan_us x L. Wall-clock times of a shared "
           "2-core machine: compare shapes and ratios, not absolute values.")
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    C.save_figure(fig, args.out, NAME)
    t = C.mean_sd(df, ["policy", "D", "E", "L"], "plan_us")
    t["policy"] = t["policy"].astype(str)
    t["order"] = t["policy"].map(lambda p: order.index(p))
    t = t.sort_values(["order", "D", "E", "L"]).drop(columns="order").reset_index(drop=True)
    C.print_result(NAME, cap, t)


if __name__ == "__main__":
    main()
