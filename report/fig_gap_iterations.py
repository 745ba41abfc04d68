#!/usr/bin/python3
"""Gap of every policy to the layer lower bound per iteration, from `prophet plan` runs (lines).

Where over a trace a policy loses: a forecast from the previous iterations pays most where the routing moves fast
(the first snapshots of a training run), a policy planned on the counts it is scored on does not. Per run, policy
and iteration: the sum over the layers of the policy's predicted MoE-layer time over the sum of the layers' lower
bounds (docs/bounds.md), so the mean over all iterations is the gap `prophet plan` prints. Eq 6 and Eq 8 from the
plan_results rows, Sim from plan.<policy>.sim_ms per block; policies scored on the layer_to_layer token path against
that path's bound (plan.<policy>.layer_to_layer), as `prophet plan` does. One panel per model and trace / cluster; a
line is the mean across plan runs with the same inputs, the band their sd. The table splits each gap into the first
tenth of the iterations (at least one) and the rest. Runs recorded before the per-layer rows existed (no
plan.<policy>.layer_to_layer) or with plan.record_layers = false are left out.
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

NAME = "fig_gap_iterations"
MODELS = [("eq6", "Eq 6"), ("eq8", "Eq 8"), ("sim", "Sim")]
MAX_SETTINGS = 4  # rows of panels; further trace / cluster pairs are named in the caption


def bound_key(model, layer_to_layer):
    """the plan.bound.* key a policy's layer times are compared with (the Sim column has one path)"""
    return f"plan.bound.{model}_l2l_ms" if layer_to_layer and model != "sim" else f"plan.bound.{model}_ms"


def run_layers(con, run_id):
    """One run's per-layer rows, long: policy, model, iteration, layer, ms, bound_ms (empty when it has none)."""
    flags = C._query(con, "SELECT key, value FROM metrics WHERE run_id = ? AND key LIKE 'plan.%.layer_to_layer' "
                          "AND layer = -1", (run_id,))
    if flags.empty:
        return C.pd.DataFrame()
    l2l = {k[len("plan."):-len(".layer_to_layer")]: v == 1 for k, v in zip(flags["key"], flags["value"])}
    res = C._query(con, "SELECT policy, iteration, layer, predicted_eq6_ms AS eq6, predicted_eq8_ms AS eq8 "
                        "FROM plan_results WHERE run_id = ?", (run_id,))
    sim = C._query(con, "SELECT substr(key, 6, length(key) - 12) AS policy, step AS iteration, layer, value AS sim "
                        "FROM metrics WHERE run_id = ? AND key LIKE 'plan.%.sim_ms' AND key != 'plan.bound.sim_ms' "
                        "AND layer >= 0", (run_id,))
    bounds = C._query(con, "SELECT key, step AS iteration, layer, value FROM metrics WHERE run_id = ? AND "
                           "key LIKE 'plan.bound.%_ms' AND layer >= 0", (run_id,))
    if res.empty or sim.empty or bounds.empty:
        return C.pd.DataFrame()
    long = res.melt(id_vars=["policy", "iteration", "layer"], value_vars=["eq6", "eq8"], var_name="model",
                    value_name="ms")
    long = C.pd.concat([long, sim.assign(model="sim").rename(columns={"sim": "ms"})], ignore_index=True)
    long = long[long["policy"].isin(l2l)]
    long["key"] = [bound_key(m, l2l[p]) for m, p in zip(long["model"], long["policy"])]
    long = long.merge(bounds.rename(columns={"value": "bound_ms"}), on=["key", "iteration", "layer"], how="inner")
    return long.drop(columns="key").assign(run_id=run_id)


def load(con, args):
    """Every usable plan run's per-layer rows with its setting ("trace / cluster" stems)."""
    runs = C.load_runs(con, command="plan", experiment=args.experiment)
    if runs.empty:
        C.no_data(NAME, "no finished `prophet plan` runs")
    frames = [f for f in (run_layers(con, r) for r in runs["run_id"]) if not f.empty]
    if not frames:
        C.no_data(NAME, "no `prophet plan` run with per-layer bound and Sim rows (plan.<policy>.layer_to_layer; "
                        "runs of an older prophet, or plan.record_layers = false)")
    df = C.pd.concat(frames, ignore_index=True)
    return df.merge(C.plan_settings(con, df["run_id"].unique()), on="run_id", how="left")


def per_iteration(df):
    """per (setting, run, policy, model, iteration): the layers' summed ms and bounds, and their ratio (gap + 1)"""
    g = df.groupby(["setting", "run_id", "policy", "model", "iteration"])[["ms", "bound_ms"]].sum().reset_index()
    g["ratio"] = g["ms"] / g["bound_ms"]
    return g


def split_table(it):
    """per setting and policy: each model's gap over all iterations, the first tenth and the rest (mean over runs)"""
    rows = []
    for (setting, policy), grp in it.groupby(["setting", "policy"]):
        iterations = sorted(grp["iteration"].unique())
        first = set(iterations[:max(1, math.ceil(len(iterations) / 10))])
        row = dict(setting=f"{setting} ({len(iterations)} iterations)", policy=policy)
        for model, _ in MODELS:
            sel = grp[grp["model"] == model]
            for part, rows_of in (("all", sel), ("first", sel[sel["iteration"].isin(first)]),
                                  ("rest", sel[~sel["iteration"].isin(first)])):
                per_run = rows_of.groupby("run_id")[["ms", "bound_ms"]].sum()
                row[f"{model}_{part}"] = ((per_run["ms"] / per_run["bound_ms"] - 1).mean() if not per_run.empty
                                          else float("nan"))
        row["runs"] = grp["run_id"].nunique()
        rows.append(row)
    return C.pd.DataFrame(rows)


def draw(it, settings, order, dropped):
    C.setup_style()
    import matplotlib.pyplot as plt
    import seaborn as sns
    from matplotlib import ticker
    fig, axes = plt.subplots(len(settings), len(MODELS), figsize=(6.2 * len(MODELS), 3.6 * len(settings) + 0.8),
                             squeeze=False)
    colours = C.palette(order)
    for row, setting in zip(axes, settings):
        for ax, (model, title) in zip(row, MODELS):
            sel = it[(it["setting"] == setting) & (it["model"] == model)]
            many = sel["iteration"].nunique() > 30
            sns.lineplot(data=sel, x="iteration", y="ratio", hue="policy", hue_order=order, palette=colours,
                         estimator="mean", errorbar="sd", marker=None if many else "o", markersize=3,
                         linewidth=1.0, ax=ax, legend=False)
            ax.axhline(1.0, color="0.2", linewidth=0.8, linestyle="--")
            ax.set_yscale("log")  # static sits tens of times above the bound, the best policies within 2x of it
            ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))  # 1, 2, 5, 10, ...: a
            # panel whose lines stay within one decade still has labels
            ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))  # no math text (common.py)
            ax.yaxis.set_minor_formatter(ticker.NullFormatter())
            ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
            ax.set_xlabel("iteration")
            ax.set_ylabel("predicted / bound (gap + 1)")
            ax.set_title(f"{title}: {setting}", fontsize=8)
            ax.margins(x=0)
    # one legend for every panel: a policy missing from the first row (skipped on that trace) is still named
    from matplotlib.lines import Line2D
    axes[0][-1].legend([Line2D([], [], color=colours[p]) for p in order], order, title="policy", fontsize=7,
                       loc="upper left", bbox_to_anchor=(1.02, 1.0))
    cap = ("Gap to the layer lower bound per iteration, one system model per column and trace / cluster per row "
           "(log scale; the dashed line is the bound): per iteration the layers' summed predicted time over their "
           "summed bound. Lines: mean across plan runs with the same inputs, band: sd. Data: prophet plan, "
           "plan_results and plan.<policy>.sim_ms per layer, plan.bound.* per layer.")
    if dropped:
        cap += f" {len(dropped)} further trace / cluster pairs not shown (use --experiment)."
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.06 if len(settings) > 1 else 0.1, 1, 1))
    return fig, cap


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    con = C.connect_or_exit(args.db, NAME)
    df = load(con, args)
    it = per_iteration(df)
    settings = sorted(it["setting"].unique())
    dropped, settings = settings[MAX_SETTINGS:], settings[:MAX_SETTINGS]
    it = it[it["setting"].isin(settings)]
    order = C.policy_order(it["policy"])
    fig, cap = draw(it, settings, order, dropped)
    C.save_figure(fig, args.out, NAME)
    t = split_table(it)
    t["_o"] = t["policy"].map({p: i for i, p in enumerate(order)})
    t = t.sort_values(["setting", "_o"]).drop(columns="_o").reset_index(drop=True)
    C.print_result(NAME, cap + " Table: each model's gap over all iterations (what prophet plan prints), over the "
                   "first tenth of them (at least one) and over the rest.", t)


if __name__ == "__main__":
    main()
