#!/usr/bin/python3
"""What each policy did in real training runs, not only how long it took (docs/reports.md "What the policies did").

Read from the `prophet train` children of real sweep points (param child_run_id), every recorded step:
  replicas        the step's `replicas` metric: replica copies over all layers;
  static steps    steps whose placement, in every layer, is static's: every expert owned by its home rank
                  e / (E / D) and no replica (the `placements` rows, written when a layer's placement changes, say
                  which placement held at each step);
  max/mean        the step's `max_mean_load` (max over ranks / mean of the tokens each rank computes under the
                  placement used, mean over layers); balancedness = 1 / that (mean / max device load);
  Trans/Agg       `trans_ms` + `agg_ms` (the transfers) and `trans_exposed_ms` + `agg_exposed_ms` (what of them held
                  up the computation), ms per step.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

pd = C.pd
STEP_KEYS = ["replicas", "max_mean_load", "trans_ms", "agg_ms", "trans_exposed_ms", "agg_exposed_ms"]


def real_points(con, experiment):
    """Finished real sweep points with their child run, rank count and setting label ('real, D ranks')."""
    df = C.sweep_points(con, experiment)
    if df.empty or "child_run_id" not in df.columns:
        return pd.DataFrame()
    df = df[(df["backend"] == "real") & df["child_run_id"].notna() & df["policy"].notna()].copy()
    if df.empty:
        return df
    df["ranks"] = pd.to_numeric(df.get("point.ranks", df["world_size"]), errors="coerce").fillna(df["world_size"])
    df["setting"] = [f"real, {int(r)} ranks" for r in df["ranks"]]
    return df


def static_steps(placements, steps, experts, ranks):
    """[bool] per step of `steps` (ascending): whether every layer's placement in force at that step is static's.

    placements: rows (step, layer, expert, replica, rank) of one run, each layer's rows written at the steps where
    its placement changed. A step before a layer's first row, or with E % D != 0, counts as not static."""
    if experts <= 0 or ranks <= 0 or experts % ranks:
        return [False] * len(steps)
    per = experts // ranks
    layers = {}
    for (layer, step), g in placements.groupby(["layer", "step"]):
        owners = g[g["replica"] == 0]
        is_static = (len(g) == len(owners) == experts and
                     all(int(r) == int(e) // per for e, r in zip(owners["expert"], owners["rank"])))
        layers.setdefault(layer, []).append((step, is_static))
    out = []
    for s in steps:
        ok = bool(layers)
        for changes in layers.values():
            held = [st for step, st in changes if step <= s]
            ok = ok and bool(held) and held[-1]
        out.append(ok)
    return out


def run_steps(con, run_id, experts, ranks):
    """One row per recorded step of a child run: the STEP_KEYS metrics and `static` (static_steps)."""
    met = C.load_metrics(con, [run_id], keys=STEP_KEYS)
    met = met[(met["layer"] == -1) & (met["rank"] == -1)]
    if met.empty:
        return pd.DataFrame()
    wide = met.pivot_table(index="step", columns="key", values="value", aggfunc="first").sort_index()
    wide.columns.name = None
    rows = C._query(con, "SELECT step, layer, expert, replica, rank FROM placements WHERE run_id = ? "
                         "ORDER BY layer, step, expert, replica", (run_id,))
    wide["static"] = static_steps(rows, list(wide.index), experts, ranks) if not rows.empty else False
    return wide.reset_index()


def activity_frame(con, experiment):
    """Every step of every child of a real sweep point: experiment, setting, policy, seed, step, the STEP_KEYS
    metrics and static."""
    pts = real_points(con, experiment)
    if pts.empty:
        return pd.DataFrame()
    params = C.load_params(con, pts["child_run_id"], keys=["model.E"])
    frames = []
    for _, p in pts.iterrows():
        experts = params["model.E"].get(p["child_run_id"], -1) if "model.E" in params.columns else -1
        steps = run_steps(con, p["child_run_id"], int(experts) if experts == experts else -1, int(p["ranks"]))
        if steps.empty:
            continue
        frames.append(steps.assign(experiment=p["experiment"], setting=p["setting"], policy=p["policy"],
                                   seed=p.get("seed")))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _median(g, key):
    return g[key].median() if key in g.columns else float("nan")


def activity_table(frame):
    """One row per (experiment, setting, policy): runs, steps, steps whose placement is static's, share of steps
    with a replica, median replicas per step, median max/mean load, balancedness, median Trans+Agg and exposed
    Trans+Agg ms per step."""
    if frame.empty:
        return pd.DataFrame()
    f = frame.copy()
    for k in STEP_KEYS:
        if k not in f.columns:
            f[k] = float("nan")
    f["transfer_ms"] = f["trans_ms"] + f["agg_ms"]
    f["exposed_ms"] = f["trans_exposed_ms"] + f["agg_exposed_ms"]
    rows = []
    for (exp, setting, policy), g in f.groupby(["experiment", "setting", "policy"], sort=False):
        max_mean = _median(g, "max_mean_load")
        rows.append({"experiment": exp, "setting": setting, "policy": policy, "runs": int(g["seed"].nunique()),
                     "steps": len(g), "static steps": int(g["static"].sum()),
                     "replica steps": int((g["replicas"] > 0).sum()),
                     "replica steps %": 100.0 * float((g["replicas"] > 0).mean()),
                     "median replicas": _median(g, "replicas"), "median max/mean": max_mean,
                     "balancedness": 1.0 / max_mean if max_mean and max_mean == max_mean else float("nan"),
                     "Trans+Agg ms": _median(g, "transfer_ms"), "exposed ms": _median(g, "exposed_ms")})
    t = pd.DataFrame(rows)
    order = {p: i for i, p in enumerate(C.policy_order(t["policy"]))}
    return t.sort_values(["experiment", "setting", "policy"],
                         key=lambda s: s.map(order) if s.name == "policy" else s).reset_index(drop=True)


def all_static(row):
    """Whether every recorded step of the row's policy placed the experts as static does."""
    return row["steps"] > 0 and row["static steps"] == row["steps"]


def activity_sentence(row, static_row=None):
    """One sentence of what a policy did: 'prophet replicated in 297 of 300 steps (median 2 replicas per step);
    median max/mean load 1.21 (static 1.50), Trans/Agg 4.1 ms per step of which 0.8 ms exposed'."""
    n = int(row["steps"])
    if all_static(row):
        return (f"{row['policy']} placed every expert as static does in all {n} steps (no replica, no move), so "
                f"its runs are static's system run again")
    load = f"median max/mean load {C.fmt3(row['median max/mean'])}"
    if static_row is not None:
        load += f" (static {C.fmt3(static_row['median max/mean'])})"
    moved = int(row["steps"] - row["static steps"])
    return (f"{row['policy']} replicated in {int(row['replica steps'])} of {n} steps (median "
            f"{C.fmt3(row['median replicas'])} replicas per step; {moved} steps differ from static's placement); "
            f"{load}; Trans/Agg "
            f"{C.fmt3(row['Trans+Agg ms'])} ms per step, {C.fmt3(row['exposed ms'])} ms of it exposed")
