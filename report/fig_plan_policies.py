#!/usr/bin/python3
"""Predicted MoE-layer time and max/mean load per policy from `prophet plan` runs (bars).

`prophet plan --policy all` records, per policy P, metrics plan.P.eq6_ms (planned and scored with Eq 6: transfers
blocking) and plan.P.eq8_ms (planned and scored with Eq 8: the block-wise scheduler), one panel each so no panel
mixes system models (per MoE layer, mean over iterations and layers), and plan.P.max_mean_load. One bar group per
trace / cluster; bars are the mean ± sd across plan runs with the same inputs (errorbar='sd'; a single run has no bar).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

NAME = "fig_plan_policies"


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    con = C.connect_or_exit(args.db, NAME)
    wide = C.load_plan_policy_metrics(con, NAME, args, "plan.%", "eq6_ms|eq8_ms|max_mean_load",
                                      "no plan.<policy>.eq6_ms / eq8_ms / max_mean_load metrics")
    order = C.policy_order(wide["policy"])
    settings = sorted(wide["setting"].unique())
    C.setup_style()
    import matplotlib.pyplot as plt
    import seaborn as sns
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.6))
    specs = [("eq6_ms", "predicted MoE-layer time, Eq 6 (ms)", "Transfers blocking (Eq 6)"),
             ("eq8_ms", "predicted MoE-layer time, Eq 8 (ms)", "Block-wise scheduler (Eq 8)"),
             ("max_mean_load", "max / mean device load", "Load imbalance per policy")]
    for ax, (col, ylabel, title) in zip(axes, specs):
        if col not in wide.columns:
            ax.set_visible(False)
            continue
        sns.barplot(data=wide, x="policy", y=col, order=order, hue="setting", hue_order=settings,
                    estimator="mean", errorbar="sd", capsize=0.05, errwidth=1.0, ax=ax)
        ax.set_xlabel("policy")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        plt.setp(ax.get_xticklabels(), rotation=35, ha="right")
        if col == "max_mean_load":
            ax.axhline(1.0, color="0.3", lw=0.8, ls="--")
        if ax is axes[0]:
            ax.legend(title="trace / cluster", fontsize=7)
        elif ax.get_legend() is not None:
            ax.get_legend().remove()
    cap = ("Bars: mean \u00b1 sd across plan runs with the same inputs (errorbar='sd'; one run: no bar). One system model per "
           "panel: Eq 6 (transfers blocking) and Eq 8 (block-wise scheduler), each policy planned for it. Dashed: perfect balance. Data: prophet plan, plan.<policy>.* metrics.")
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    C.save_figure(fig, args.out, NAME)
    cols = [c for c in ("eq6_ms", "eq8_ms", "max_mean_load") if c in wide.columns]
    t = wide.groupby(["setting", "policy"])[cols].agg(["mean", "std"])
    t.columns = [f"{a}_{'sd' if b == 'std' else b}" for a, b in t.columns]
    t = t.reset_index()
    t["_o"] = t["policy"].map({p: i for i, p in enumerate(order)})
    t = t.sort_values(["setting", "_o"]).drop(columns="_o").reset_index(drop=True)
    t["runs"] = [int(wide[(wide["setting"] == s) & (wide["policy"] == p)]["run_id"].nunique())
                 for s, p in zip(t["setting"], t["policy"])]
    C.print_result(NAME, cap, t)


if __name__ == "__main__":
    main()
