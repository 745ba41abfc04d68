#!/usr/bin/python3
"""Simulator validation: simulated vs measured step time of real sweep points (engine real, validate_cluster).

Each point's child `prophet train` run's recorded expert loads are simulated (under the child's schedule.mode) on
the sweep's validate_cluster; sim_step_ms (mean simulated iteration, iterations 1..) against measured_step_ms (median step_ms,
steps 1..), one marker per policy at the mean across seeds with ± sd error bars, and the y = x line.
Points whose child ran more ranks than cores (param testbed.oversubscribed = true, docs/testbed.md) are left out
unless --include-oversubscribed: their step times measure the OS scheduler, not the code.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

NAME = "fig_validation"
KEYS = ("sim_step_ms", "measured_step_ms", "sim_error")


def own_options(p):
    p.add_argument("--include-oversubscribed", action="store_true",
                   help="keep points whose child ran more ranks than cores (left out by default)")


def without_oversubscribed(df):
    """The rows whose run did not record testbed.oversubscribed = true (docs/testbed.md)."""
    if "testbed.oversubscribed" not in df.columns:
        return df
    over = df["testbed.oversubscribed"].map(lambda v: v is True or str(v).lower() == "true")
    return df[~over]


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv, extra=own_options)
    con = C.connect_or_exit(args.db, NAME)
    df = C.sweep_points(con, experiment=args.experiment, metric_keys=KEYS)
    if not args.include_oversubscribed and not df.empty:
        df = without_oversubscribed(df)
    if df.empty or "sim_step_ms" not in df.columns or df["sim_step_ms"].isna().all():
        C.no_data(NAME, "no sweep run has sim_step_ms (engine = \"real\" with validate_cluster; oversubscribed "
                        "points need --include-oversubscribed)")
    df = df[df["sim_step_ms"].notna() & df["measured_step_ms"].notna()].copy()
    df["policy"] = df["policy"].fillna("?").astype(str)
    ranks = df["point.ranks"] if "point.ranks" in df.columns else C.pd.Series(index=df.index, dtype=float)
    df["ranks"] = ranks.map(lambda r: str(int(r)) if r == r else "?")
    if df["experiment"].nunique() > 1:
        df["policy"] = df["experiment"] + ": " + df["policy"]
    df["label"] = df["policy"] + " D=" + df["ranks"]
    t = df.groupby(["policy", "ranks"]).agg(
        measured_step_ms_mean=("measured_step_ms", "mean"), measured_step_ms_sd=("measured_step_ms", "std"),
        sim_step_ms_mean=("sim_step_ms", "mean"), sim_step_ms_sd=("sim_step_ms", "std"),
        sim_error_mean=("sim_error", "mean"), sim_error_sd=("sim_error", "std"),
        seeds=("seed", "nunique")).reset_index()
    order = C.policy_order(t["policy"])
    t["_o"] = t["policy"].map({p: i for i, p in enumerate(order)})
    t = t.sort_values(["_o", "ranks"]).drop(columns="_o")
    pal = C.palette(order)
    C.setup_style()
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.6, 5.0))
    for _, r in t.iterrows():
        ax.errorbar(r["measured_step_ms_mean"], r["sim_step_ms_mean"],
                    xerr=0 if r["seeds"] < 2 else r["measured_step_ms_sd"],
                    yerr=0 if r["seeds"] < 2 else r["sim_step_ms_sd"], fmt="o", color=pal[r["policy"]],
                    label=f"{r['policy']} D={r['ranks']}", capsize=3)
    hi = 1.1 * max(t["measured_step_ms_mean"].max(), t["sim_step_ms_mean"].max())
    ax.plot([0, hi], [0, hi], "k--", lw=1, label="y = x")
    ax.set_xlim(0, hi)
    ax.set_ylim(0, hi)
    ax.set_xlabel("measured step time (ms, median over steps 1..)")
    ax.set_ylabel("simulated step time (ms)")
    ax.set_title("Simulator validation: " + ", ".join(sorted(df["experiment"].unique())))
    ax.legend(fontsize=8)
    nseeds = int(t["seeds"].max())
    calibrated = sorted(set(df["validate_calibrated_on"].dropna())) if "validate_calibrated_on" in df.columns else []
    cap = (f"Markers: {C.SD_NOTE} (up to {nseeds} seeds; a single seed has no bars); dashed: y = x. " +
           (f"Simulated on a cluster calibrated on: {'; '.join(calibrated)}. " if calibrated else "") +
           "Data: prophet sweep engine real, metrics sim_step_ms, measured_step_ms, sim_error = (sim - measured) / "
           "measured.")
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    C.save_figure(fig, args.out, NAME)
    C.print_result(NAME, cap, t)


if __name__ == "__main__":
    main()
