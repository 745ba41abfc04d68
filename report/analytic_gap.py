#!/usr/bin/python3
"""Where the analytic model's time goes, per op: the analytic simulation of each validated real sweep point (its
`sim_kind_ms.<kind>` metrics: ms per step and device, per simulator op kind) beside the same run's recorded ops (the
sweep's per-op replay validation: `recorded_ms`, own time per trainer op kind, ms per step and rank), in groups
both sides have (docs/reports.md "Where the analytic model's time goes").

Every group is a mean over ranks (devices) per step (1..), so each side's groups add up to its own mean step: the
last group takes what the others leave (measured: the all-to-alls, which include a rank's wait for the slower one,
and the untracked time between ops; analytic: its all-to-alls and a device's idle time waiting for the other).
Trans and Agg count what held up the step: their own time where the schedule runs them on the compute lane
(none), the waits for them (trans_wait, agg_wait) and the simulator's exposed part where they run beside compute.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

pd = C.pd
REST = "all-to-alls, waits and idle"
# group: (recorded trainer kinds, simulator kinds); REST is each side's step minus the other groups
GROUPS = [
    ("expert compute", ["fec", "bec"], ["fec", "bec"]),
    ("non-expert compute", ["data", "embed", "embed_bwd", "attn", "attn_bwd", "gate", "gate_bwd", "head",
                            "head_bwd", "pack", "unpack"], ["gate", "fnec", "bnec"]),
    ("Trans/Agg holding up the step", ["trans_wait", "agg_wait"], ["trans_exposed", "agg_exposed"]),
    ("planning", ["plan", "plan_wait"], ["plan"]),
    ("counts exchange (layout; not in the analytic model)", ["layout"], []),
    ("step tail (all-reduce, optimizer, stats)", ["allreduce", "optimizer", "stats"], ["optimizer"]),
]


def replay_validation(con, exp):
    """The newest per-op replay validation a real sweep named `exp` recorded after its last point (a validate run
    with param validate.sweep) as its parsed event data ({"total": ..., "points": [...]}), or None."""
    df = C._query(con, "SELECT e.data FROM events e JOIN runs r USING (run_id) JOIN params p USING (run_id) "
                       "WHERE r.command = 'validate' AND e.kind = 'validation' AND p.key = 'validate.sweep' AND "
                       "p.value = ? ORDER BY r.started_ms DESC, e.id DESC LIMIT 1", (json.dumps(exp),))
    return None if df.empty else json.loads(df["data"].iloc[0])


def replay_points(con, exp):
    """{child run id: point json} of replay_validation(con, exp)."""
    data = replay_validation(con, exp)
    return {p["run_id"]: p for p in data.get("points", [])} if data else {}


def point_groups(recorded, measured_ms, simulated, sim_ms, schedule):
    """[(group, measured ms, analytic ms)] of one run: recorded = {trainer kind: ms per step and rank}, simulated =
    {sim kind: ms per step and device}; schedule none runs Trans/Agg on the compute lane (their own time counts),
    the others beside it (only the waits and the exposed part count)."""
    rows = []
    for name, rec_kinds, sim_kinds in GROUPS:
        if name.startswith("Trans/Agg") and schedule == "none":
            rec_kinds = rec_kinds + ["trans", "agg"]
        rows.append((name, sum(recorded.get(k, 0.0) for k in rec_kinds),
                     sum(simulated.get(k, 0.0) for k in sim_kinds)))
    rows.append((REST, measured_ms - sum(r[1] for r in rows), sim_ms - sum(r[2] for r in rows)))
    return rows


def gap_table(con, experiment):
    """One row per (experiment, group): measured and analytic ms per step (mean over the experiment's validated
    points that have both sides), analytic - measured, and that difference's share of the whole gap (%)."""
    pts = C.sweep_points(con, experiment, ["sim_step_ms"])
    if pts.empty or "child_run_id" not in pts.columns or "sim_step_ms" not in pts.columns:
        return pd.DataFrame()
    pts = pts[(pts["backend"] == "real") & pts["child_run_id"].notna() & pts["sim_step_ms"].notna()]
    if pts.empty:
        return pd.DataFrame()
    met = C.load_metrics(con, pts["run_id"], like="sim_kind_ms.%")
    sched = C.load_params(con, pts["child_run_id"], keys=["schedule.mode"]).get("schedule.mode",
                                                                               pd.Series(dtype=object))
    rows = []
    for exp, g in pts.groupby("experiment", sort=False):
        replay = replay_points(con, exp)
        for _, p in g.iterrows():
            sim = met[met["run_id"] == p["run_id"]]
            rp = replay.get(p["child_run_id"])
            if sim.empty or rp is None:
                continue
            simulated = {k[len("sim_kind_ms."):]: v for k, v in zip(sim["key"], sim["value"])}
            schedule = str(sched.get(p["child_run_id"], "none"))
            rows += [(exp, *r) for r in point_groups(rp["recorded_ms"], rp["measured_mean_ms"], simulated,
                                                      p["sim_step_ms"], schedule)]
    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame(rows, columns=["experiment", "op group", "measured ms", "analytic ms"])
    t = df.groupby(["experiment", "op group"], sort=False).mean().reset_index()
    t["analytic - measured ms"] = t["analytic ms"] - t["measured ms"]
    total = t.groupby("experiment")["analytic - measured ms"].transform("sum")
    t["share of the gap %"] = 100 * t["analytic - measured ms"] / total.where(total != 0)
    return t


def gap_sentence(exp, t):
    """'The analytic model's step is 3.1 ms (14%) short of the measured 22 ms: counts exchange -1.2 ms, ...' for the
    three groups with the largest |difference|."""
    g = t[t["experiment"] == exp]
    if g.empty:
        return ""
    measured, analytic = g["measured ms"].sum(), g["analytic ms"].sum()
    gap = analytic - measured
    top = g.reindex(g["analytic - measured ms"].abs().sort_values(ascending=False).index).head(3)
    parts = ", ".join(f"{r['op group']} {'+' if r['analytic - measured ms'] >= 0 else '-'}"
                      f"{C.fmt3(abs(r['analytic - measured ms']))} ms" for _, r in top.iterrows())
    word = "short of" if gap < 0 else "over"
    return (f"Per op (table 'Where the analytic model's time goes'), the analytic model's mean step in {exp} is "
            f"{C.fmt3(abs(gap))} ms ({100 * abs(gap) / measured:.0f}%) {word} the measured mean {C.fmt3(measured)} "
            f"ms; the largest differences: {parts}.")
