#!/usr/bin/python3
"""Gantt chart of one training step across ranks, from `prophet train --timeline` (the scheduler's evidence).

Each rank has up to three lanes: compute (the main thread: non-expert and expert compute, the all-to-alls, and its
waits on Trans/Agg, drawn hatched: the exposed communication), comm (the communication stream's thread: the
Trans/Agg transfers) and plan (the planner thread). Times are ms from the earliest rank's step start; the ops come
from the store's `timeline` events (docs/scheduler.md). Without --run the newest run with a timeline is drawn;
without --step its median-time step after step 1 (steps 0 and 1 pay for warm-up).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

NAME = "fig_gantt"
LANES = ["compute", "comm", "plan"]
COLORS = {
    # non-expert compute: blues (forward lighter, backward darker); fnec/bnec: stores written before the complete
    # timeline (one op for a block's whole non-expert compute)
    "embed": "#deebf7", "attn": "#9ecae1", "gate": "#c6dbef", "head": "#d9d9d9",
    "head_bwd": "#969696", "gate_bwd": "#4292c6", "attn_bwd": "#6baed6", "embed_bwd": "#2171b5",
    "fnec": "#9ecae1", "bnec": "#6baed6",
    "fec": "#74c476", "bec": "#31a354",
    # the four all-to-alls (oranges) and the copies around them (yellows)
    "dispatch": "#fdae6b", "combine": "#fd8d3c", "dispatch_bwd": "#f16913", "combine_bwd": "#d94801",
    "pack": "#fee391", "unpack": "#fec44f", "layout": "#bdbdbd",
    "trans": "#de2d26", "agg": "#756bb1", "trans_wait": "#de2d26", "agg_wait": "#756bb1", "plan": "#fccde5",
    "plan_wait": "#fccde5",
    # the rest of the step
    "data": "#e7d4e8", "allreduce": "#8c6bb1", "optimizer": "#636363", "stats": "#f0f0f0",
}


def own_options(p):
    p.add_argument("--run", default=None, help="run id (default: the newest run with a timeline)")
    p.add_argument("--step", type=int, default=None, help="step to draw (default: the median-time step after 1)")
    p.add_argument("--name", default=NAME, help="output file stem (default %(default)s)")


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv, extra=own_options)
    con = C.connect_or_exit(args.db, NAME)
    ev = C._query(con, "SELECT e.run_id, e.step, e.rank, e.data AS data_json, r.started_ms FROM events e "
                       "JOIN runs r ON r.run_id = e.run_id WHERE e.kind = 'timeline'")
    if ev.empty:
        C.no_data(NAME, "no timeline events (run prophet train --timeline)")
    if args.experiment:
        runs = C.load_runs(con, experiment=args.experiment, status=None)
        ids = set(runs["run_id"]) if not runs.empty else set()
        ev = ev[ev["run_id"].isin(ids)]
        if ev.empty:
            C.no_data(NAME, f"no timeline events in experiment {args.experiment}")
    run = args.run or ev.sort_values("started_ms")["run_id"].iloc[-1]
    ev = ev[ev["run_id"] == run]
    if ev.empty:
        C.no_data(NAME, f"run {run} has no timeline events")
    if args.step is not None:
        step = args.step
    else:
        met = C.load_metrics(con, [run], keys=["step_ms"])
        met = met[(met["layer"] == -1) & (met["rank"] == -1) & (met["step"] >= 2)]
        if met.empty:
            step = int(ev["step"].max())
        else:
            met = met.sort_values("value")
            step = int(met["step"].iloc[len(met) // 2])
    ev = ev[ev["step"] == step]
    if ev.empty:
        C.no_data(NAME, f"run {run} has no timeline for step {step}")
    rows = []
    for r in ev.itertuples():
        for kind, lane, block, part, start, end in json.loads(r.data_json):
            rows.append({"rank": int(r.rank), "kind": kind, "lane": lane, "block": block, "part": part,
                         "start_ms": start / 1e3, "end_ms": end / 1e3})
    df = C.pd.DataFrame(rows)
    params = C.load_params(con, [run], keys=["balance.policy", "schedule.mode", "comm.link_gbps"])
    params = params.iloc[0].to_dict() if not params.empty else {}

    C.setup_style()
    ranks = sorted(df["rank"].unique())
    lanes_used = [lane for lane in LANES if lane in set(df["lane"])]
    y_of = {}
    labels = []
    for rank in ranks:
        for lane in lanes_used:
            y_of[(rank, lane)] = len(labels)
            labels.append(f"rank {rank} {lane}")
    fig, ax = C.plt.subplots(figsize=(12, 0.45 * len(labels) + 1.6))
    for op in df.itertuples():
        y = y_of[(op.rank, op.lane)]
        waiting = op.kind.endswith("_wait")
        ax.barh(y, op.end_ms - op.start_ms, left=op.start_ms, height=0.8, color=COLORS.get(op.kind, "#969696"),
                edgecolor="black" if waiting else "none", linewidth=0.4, hatch="////" if waiting else None)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    ax.set_xlabel("time since the step began (ms)")
    from matplotlib.patches import Patch

    kinds = [k for k in COLORS if k in set(df["kind"])]
    ax.legend(handles=[Patch(facecolor=COLORS[k], hatch="////" if k.endswith("_wait") else None, label=k)
                       for k in kinds], ncol=min(6, len(kinds)), fontsize=7, loc="upper center",
              bbox_to_anchor=(0.5, -0.12 if len(labels) > 6 else -0.25))
    title = (f"run {run}, step {step}: policy {params.get('balance.policy', '?')}, schedule "
             f"{params.get('schedule.mode', 'none')}, link {params.get('comm.link_gbps', '0')} Gbit/s")
    ax.set_title(title, fontsize=9)

    # the table behind it: per rank, busy and exposed Trans/Agg
    def total(frame, kinds, lane=None):
        f = frame[frame["kind"].isin(kinds)]
        if lane:
            f = f[f["lane"] == lane]
        return float((f["end_ms"] - f["start_ms"]).sum())

    table = []
    for rank in ranks:
        d = df[df["rank"] == rank]
        table.append({"rank": rank, "step_ms": float(d["end_ms"].max() - d["start_ms"].min()),
                      "trans_busy_ms": total(d, ["trans"]), "agg_busy_ms": total(d, ["agg"]),
                      "trans_exposed_ms": total(d, ["trans_wait"]) + total(d, ["trans"], "compute"),
                      "agg_exposed_ms": total(d, ["agg_wait"]) + total(d, ["agg"], "compute")})
    table = C.pd.DataFrame(table)
    # the part of each rank's step no compute-lane op covers (timeline_remainder_ms, stores since the complete timeline)
    rem = C.load_metrics(con, [run], keys=["timeline_remainder_ms", "timeline_step_ms"])
    rem = rem[rem["step"] == step] if not rem.empty else rem
    if not rem.empty:
        by = rem.pivot_table(index="rank", columns="key", values="value")
        table["remainder_ms"] = table["rank"].map(by.get("timeline_remainder_ms", {}))
    caption = C.add_caption(fig, f"One step of run {run} (step {step}) on {len(ranks)} ranks. Hatched: the compute "
                                 "thread waiting for a Trans/Agg (exposed communication); red/purple bars on the "
                                 "comm lane: the transfers themselves.")
    C.save_figure(fig, args.out, args.name)
    C.print_result(NAME, caption, table)


if __name__ == "__main__":
    main()
