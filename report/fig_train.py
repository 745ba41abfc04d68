#!/usr/bin/python3
"""Training curves from `prophet train` runs: loss, step time and max/mean load per step, one line per policy.

Policy = the run's balance.policy; lines are the mean across seeds (run.seed) at each step, bands mean ± sd
(errorbar='sd'); global values (layer = rank = -1) only, per-layer values averaged when no global one exists.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

NAME = "fig_train"
PANELS = [("loss", "training loss (nats/token)", "Loss"), ("step_ms", "step time (ms)", "Step time"),
          ("max_mean_load", "max / mean expert load", "Load imbalance")]


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    con = C.connect_or_exit(args.db, NAME)
    runs = C.load_runs(con, command="train", experiment=args.experiment)
    if runs.empty:
        C.no_data(NAME, "no finished `prophet train` runs")
    keys = [k for k, _, _ in PANELS]
    met = C.load_metrics(con, runs["run_id"], keys=keys)
    if met.empty:
        C.no_data(NAME, "no loss / step_ms / max_mean_load metrics")
    glob = met[(met["layer"] == -1) & (met["rank"] == -1)]
    have = set(zip(glob["run_id"], glob["key"]))
    rest = met[[(r, k) not in have for r, k in zip(met["run_id"], met["key"])]]
    rest = rest.groupby(["run_id", "key", "step"])["value"].mean().reset_index()
    met = __import__("pandas").concat([glob[["run_id", "key", "step", "value"]], rest], ignore_index=True)
    params = C.load_params(con, runs["run_id"], keys=["balance.policy", "run.seed"]).reset_index()
    df = met.merge(params, on="run_id", how="left").merge(runs[["run_id", "experiment", "seed"]], on="run_id")
    df["policy"] = df["balance.policy"].fillna("?").astype(str)
    multi_exp = df["experiment"].nunique() > 1
    if multi_exp:
        df["policy"] = df["experiment"] + ": " + df["policy"]
    order = C.policy_order(df["policy"])
    pal = C.palette(order)
    present = [p for p in PANELS if p[0] in set(df["key"])]
    C.setup_style()
    import matplotlib.pyplot as plt
    import seaborn as sns
    from matplotlib.ticker import MaxNLocator
    fig, axes = plt.subplots(1, len(present), figsize=(4.6 * len(present), 4.2), squeeze=False)
    for i, (ax, (k, ylabel, title)) in enumerate(zip(axes[0], present)):
        d = df[df["key"] == k]
        sns.lineplot(data=d, x="step", y="value", hue="policy", hue_order=order, palette=pal, estimator="mean",
                     errorbar="sd", marker="o", markersize=4, ax=ax, legend=(i == 0))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("training step")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        if i == 0:
            ax.legend(title="policy", fontsize=8)
    fig.suptitle("prophet train: " + ", ".join(sorted(df["experiment"].unique())))
    nseeds = int(df.groupby("policy")["seed"].nunique().max())
    cap = (f"Lines: {C.SD_NOTE} (errorbar='sd', up to {nseeds} seeds; a single seed has no band). "
           "Data: prophet train, metrics loss, step_ms, max_mean_load per step.")
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    C.save_figure(fig, args.out, NAME)
    per_run = df.pivot_table(index=["policy", "run_id"], columns="key", values="value", aggfunc="mean")
    last = df[df["key"] == "loss"].sort_values("step").groupby("run_id")["value"].last().rename("final_loss")
    per_run = per_run.join(last, on="run_id").reset_index()
    cols = [c for c in ("final_loss", "step_ms", "max_mean_load") if c in per_run.columns]
    t = per_run.groupby("policy")[cols].agg(["mean", "std"])
    t.columns = [f"{a}_{'sd' if b == 'std' else 'mean'}" for a, b in t.columns]
    t["runs"] = per_run.groupby("policy")["run_id"].nunique()
    t["steps"] = df.groupby("policy")["step"].nunique()
    C.print_result(NAME, cap, t.reset_index())


if __name__ == "__main__":
    main()
