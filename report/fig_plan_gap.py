#!/usr/bin/python3
"""Gap of every policy to the layer lower bound, per system model, from `prophet plan` runs (bars).

`prophet plan` records, per policy P, plan.P.gap_eq6, gap_eq8, gap_fastermoe_sys and gap_sim: the policy's mean
predicted MoE-layer time over the mean lower bound of the layer under that model, minus 1 (docs/bounds.md: no
placement or routing within the replica budget is faster than the bound, so 0 is the best any policy could do).
One panel per model, one bar group per trace / cluster; bars are the mean ± sd across plan runs with the same inputs.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

NAME = "fig_plan_gap"
MODELS = [("gap_eq6", "Eq 6 (transfers blocking)"), ("gap_eq8", "Eq 8 (block-wise scheduler)"),
          ("gap_fastermoe_sys", "FasterMoE's system"), ("gap_sim", "Simulator (MoE time per block)")]


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    con = C.connect_or_exit(args.db, NAME)
    wide = C.load_plan_policy_metrics(
        con, NAME, args, "plan.%.gap_%", "gap_[a-z0-9_]+",
        "no plan.<policy>.gap_* metrics (prophet plan before the bound was recorded)")
    order = C.policy_order(wide["policy"])
    settings = sorted(wide["setting"].unique())
    C.setup_style()
    import matplotlib.pyplot as plt
    import seaborn as sns
    fig, axes = plt.subplots(1, len(MODELS), figsize=(20, 4.6))
    for ax, (col, title) in zip(axes, MODELS):
        if col not in wide.columns:
            ax.set_visible(False)
            continue
        sns.barplot(data=wide, x="policy", y=col, order=order, hue="setting", hue_order=settings,
                    estimator="mean", errorbar="sd", capsize=0.05, errwidth=1.0, ax=ax)
        ax.set_xlabel("policy")
        ax.set_ylabel("gap = predicted / bound - 1")
        ax.set_title(title)
        plt.setp(ax.get_xticklabels(), rotation=35, ha="right")
        if ax is axes[0]:
            ax.legend(title="trace / cluster", fontsize=7)
        elif ax.get_legend() is not None:
            ax.get_legend().remove()
    cap = ("Gap to the layer lower bound (docs/bounds.md), one system model per panel: 0 = as fast as any placement "
           "and routing within the replica budget could be. Bars: mean \u00b1 sd across plan runs with the same inputs. "
           "Data: prophet plan, plan.<policy>.gap_* metrics.")
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    C.save_figure(fig, args.out, NAME)
    cols = [c for c, _ in MODELS if c in wide.columns]
    t = wide.groupby(["setting", "policy"])[cols].mean().reset_index()
    t["_o"] = t["policy"].map({p: i for i, p in enumerate(order)})
    t = t.sort_values(["setting", "_o"]).drop(columns="_o").reset_index(drop=True)
    C.print_result(NAME, cap, t)


if __name__ == "__main__":
    main()
