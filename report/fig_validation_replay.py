#!/usr/bin/python3
"""Replay validation: simulated (per-op model) vs measured step time of recorded runs (prophet validate).

Reads the newest `prophet validate` run of the store (command validate, its `validation` event: the report
`--json` prints; a validating real sweep records one after its last point, docs/sweep.md) whose replay is the
per-op model, and draws one marker per validated run: x the measured median
step (steps 1..), y the replayed median step with every op's duration from the calibrated [ops] tables, the run's
recorded counts and placements (never re-planned). Filled markers are held out (a model shape or rank count the
tables were not calibrated on), hollow ones the calibration set. The dashed line is y = x, the band +-10%. The
caption gives the held-out MAPE, bias, P90 and max |error| and the Kendall tau of the policy order.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

NAME = "fig_validation_replay"


def latest_report(con):
    """The newest validation report with replay = model, as a dict; None when there is none."""
    df = C._query(con, "SELECT e.data FROM events e JOIN runs r USING (run_id) WHERE r.command = 'validate' AND "
                       "e.kind = 'validation' ORDER BY r.started_ms DESC, e.id DESC")
    for data in df["data"] if not df.empty else []:
        report = json.loads(data)
        if report.get("replay") == "model" and report.get("points"):
            return report
    return None


def pct(x):
    return f"{100 * x:+.1f}%"


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    con = C.connect_or_exit(args.db, NAME)
    report = latest_report(con)
    if report is None:
        C.no_data(NAME, "no `prophet validate --cluster FILE` run (replay = model) in the store")
    pts = C.pd.DataFrame(report["points"])
    if args.experiment is not None:  # only the validated runs of these experiments
        wanted = [args.experiment] if isinstance(args.experiment, str) else list(args.experiment)
        runs = C._query(con, "SELECT run_id, experiment FROM runs")
        keep = set(runs.loc[runs["experiment"].isin(wanted), "run_id"])
        pts = pts[pts["run_id"].isin(keep)]
        if pts.empty:
            C.no_data(NAME, f"the newest validation report has no runs of {', '.join(wanted)}")
    pts["set"] = pts["held_out"].map(lambda h: "held out" if h else "calibration")
    order = C.policy_order(pts["policy"])
    pal = C.palette(order)
    C.setup_style()
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.6, 5.0))
    markers = {"none": "o", "blockwise": "s"}
    for _, r in pts.iterrows():
        color = pal[r["policy"]]
        ax.plot(r["measured_median_ms"], r["sim_median_ms"], markers.get(r["schedule"], "^"), ms=7,
                color=color, markerfacecolor=color if r["held_out"] else "none",
                label=f"{r['policy']}, {r['schedule']}, {r['set']}")
    hi = 1.1 * max(pts["measured_median_ms"].max(), pts["sim_median_ms"].max())
    ax.plot([0, hi], [0, hi], "k--", lw=1, label="y = x")
    ax.fill_between([0, hi], [0, 0.9 * hi], [0, 1.1 * hi], color="0.85", alpha=0.5, lw=0, label="+-10%")
    ax.set_xlim(0, hi)
    ax.set_ylim(0, hi)
    ax.set_xlabel("measured step time (ms, median over steps 1..)")
    ax.set_ylabel("replayed step time, per-op model (ms, median)")
    ax.set_title("Replay validation (prophet validate)")
    handles, labels = ax.get_legend_handles_labels()
    seen = {}
    for h, l in zip(handles, labels):
        seen.setdefault(l, h)
    ax.legend(seen.values(), seen.keys(), fontsize=7)
    t = report["total"]
    held = (f"held out ({t['heldout_points']} points): MAPE {100 * t['heldout_mape']:.1f}%, bias "
            f"{pct(t['heldout_bias'])}, P90 |err| {100 * t['heldout_p90_abs']:.1f}%, max {100 * t['heldout_max_abs']:.1f}%"
            if t["heldout_points"] else "No held-out point")
    cap = (f"One marker per run (no sd: each is one run's median step); filled: held out, hollow: calibration set "
           f"(tables calibrated on {report.get('calibrated_on') or '?'}). {held}; all {t['points']} points: MAPE "
           f"{100 * t['mape']:.1f}%, bias {pct(t['bias'])}. Kendall tau of the policy order {t['kendall_tau']:.2f} "
           f"over {t['tau_pairs']} significant pairs. Data: "
           f"{report.get('data') or 'prophet validate --cluster ' + report.get('cluster', '?')}.")
    if len(pts) < len(report["points"]):  # --experiment drew a subset; the statistics are the report's own
        cap += (f" Drawn: {len(pts)} of the report's {len(report['points'])} runs (--experiment); the statistics "
                f"above are over all of them.")
    C.add_caption(fig, cap)
    # leave the caption's wrapped lines (add_caption: ~15 characters per inch of width, 8 pt) room under the axes
    lines = len(cap) // max(40, int(fig.get_figwidth() * 15)) + 2
    fig.set_figheight(fig.get_figheight() + 0.16 * lines)
    fig.tight_layout(rect=(0, min(0.45, 0.16 * lines / fig.get_figheight()), 1, 1))
    C.save_figure(fig, args.out, NAME)
    table = pts[["run_id", "policy", "schedule", "set", "measured_median_ms", "sim_median_ms", "error_median"]]
    C.print_result(NAME, cap, table)


if __name__ == "__main__":
    main()
