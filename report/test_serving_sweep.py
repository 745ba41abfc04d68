#!/usr/bin/python3
"""Serving sweeps end to end (issue 23): a tiny version of experiments/sweeps/serving.toml run by the real binary,
every point recorded with its regime fields, and the report's serving section (fig_serving_sweep) agreeing with
the store.

  /usr/bin/python3 report/test_serving_sweep.py --prophet build/prophet [--keep]

The tiny sweep is the shipped file with its trace shortened (30 iterations, 4 experts per device kept) and its grid
scaled down (rebalance_every and window in {5, 20}: one point rebalances 5 times, the other once), 2 seeds. Checks,
one line each (PASS / FAIL): every point finished with balance.regime = serving, its rebalance_every and window, the
serving metrics and one row per rebalance at every multiple of rebalance_every; speedup_vs_static equals static's
forward time per layer over the policy's (same seed and grid values); the section's table (its CSV) holds one row
per (grid values, policy) whose predicted / realised balancedness, stall and geometric-mean speedup are those of
the store, read here with plain SQL; build_report.py's report has the section.
"""
import argparse
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SWEEP = os.path.join(ROOT, "experiments", "sweeps", "serving.toml")
TINY_ITERATIONS, TINY_GRID, TINY_SEEDS = 30, [5, 20], [1, 2]
TOL = 1e-9  # relative: the CSV and the store hold the same doubles, up to the mean's order of summation


def toml_text(value):
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_text(v) for v in value) + "]"
    return str(value)


def tiny_sweep(tmp):
    """The shipped sweep with a shortened trace and a scaled grid, written under tmp; returns its path."""
    with open(SWEEP, "rb") as f:
        spec = tomllib.load(f)["sweep"]
    with open(os.path.join(ROOT, spec["traces"][0]), "rb") as f:
        trace = tomllib.load(f)["trace"]
    trace["num_iterations"] = TINY_ITERATIONS
    trace_path = os.path.join(tmp, "tiny-trace.toml")
    with open(trace_path, "w") as f:
        f.write("[trace]\n" + "".join(f"{k} = {toml_text(v)}\n" for k, v in trace.items()))
    spec.update(name="tiny-serving", traces=[trace_path], seeds=TINY_SEEDS,
                clusters=[os.path.join(ROOT, c) for c in spec["clusters"]])
    grid = dict(spec.pop("grid"), **{"balance.rebalance_every": TINY_GRID, "balance.window": TINY_GRID})
    path = os.path.join(tmp, "tiny-serving.toml")
    with open(path, "w") as f:
        f.write("[sweep]\n" + "".join(f"{k} = {toml_text(v)}\n" for k, v in spec.items()))
        f.write("\n[sweep.grid]\n" + "".join(f'"{k}" = {toml_text(v)}\n' for k, v in grid.items()))
    return path, spec["policies"]


def points(db):
    """{run_id: (params, step-0 metrics, {metric: {step: value}} of rebalance.*)} of the finished sweep points."""
    con = sqlite3.connect(db)
    out = {}
    for (rid,) in con.execute("SELECT run_id FROM runs WHERE command = 'sweep' AND status = 'finished'"):
        params = {k: v.strip('"') for k, v in con.execute("SELECT key, value FROM params WHERE run_id = ?", (rid,))}
        summary, per_rebalance = {}, {}
        for key, step, value in con.execute("SELECT key, step, value FROM metrics WHERE run_id = ?", (rid,)):
            if key.startswith("rebalance."):
                per_rebalance.setdefault(key, {})[step] = value
            elif step == 0:
                summary[key] = value
        out[rid] = (params, summary, per_rebalance)
    return out


class Checker:
    def __init__(self):
        self.failures = []

    def check(self, name, ok, detail=""):
        print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": {detail}"))
        if not ok:
            self.failures.append(name)


def close(a, b):
    return abs(a - b) <= TOL * max(1.0, abs(a), abs(b))


def check_points(c, pts, policies):
    expected = len(policies) * len(TINY_SEEDS) * len(TINY_GRID) ** 2
    c.check("every point recorded", len(pts) == expected, f"{len(pts)} finished points, expected {expected}")
    keys = ["serving.layer_ms", "serving.static_layer_ms", "serving.stall_ms", "serving.predicted_balancedness",
            "serving.realised_balancedness", "serving.rebalances", "speedup_vs_static"]
    for rid, (params, summary, per) in pts.items():
        label = f"point {params.get('balance.policy')} seed {params.get('point.seed')} every " \
                f"{params.get('balance.rebalance_every')} window {params.get('balance.window')}"
        c.check(f"{label}: regime fields", params.get("balance.regime") == "serving" and
                "balance.rebalance_every" in params and "balance.window" in params, str(params))
        c.check(f"{label}: serving metrics", all(k in summary for k in keys), str(sorted(summary)))
        every = int(params["balance.rebalance_every"])
        steps = list(range(every, TINY_ITERATIONS, every))
        c.check(f"{label}: one row per rebalance", all(sorted(per.get(k, {})) == steps for k in
                ["rebalance.predicted_balancedness", "rebalance.realised_balancedness", "rebalance.stall_ms"]),
                f"steps {sorted(per.get('rebalance.stall_ms', {}))}, expected {steps}")
        ratio = summary.get("serving.static_layer_ms", 0) / summary.get("serving.layer_ms", 1)
        c.check(f"{label}: speedup = static / policy", close(summary.get("speedup_vs_static", -1), ratio),
                f"{summary.get('speedup_vs_static')} vs {ratio}")


def expected_rows(pts):
    """{(every, window, policy): dict of the section's numbers} recomputed from the store."""
    groups = {}
    for params, summary, _ in pts.values():
        key = (int(params["balance.rebalance_every"]), int(params["balance.window"]), params["balance.policy"])
        groups.setdefault(key, []).append(summary)
    rows = {}
    for key, g in groups.items():
        mean = lambda k: sum(s[k] for s in g) / len(g)  # noqa: E731
        rows[key] = {"predicted": mean("serving.predicted_balancedness"),
                     "realised": mean("serving.realised_balancedness"), "stall_ms": mean("serving.stall_ms"),
                     "speedup": math.exp(sum(math.log(s["speedup_vs_static"]) for s in g) / len(g))}
    return rows


def check_section(c, pts, tmp, db):
    out = os.path.join(tmp, "figures")
    r = subprocess.run([sys.executable, os.path.join(HERE, "fig_serving_sweep.py"), "--db", db, "--out", out],
                       capture_output=True, text=True, env=dict(os.environ, MPLBACKEND="Agg"))
    c.check("fig_serving_sweep exits 0", r.returncode == 0, r.stderr[-400:])
    csv = os.path.join(out, "fig_serving_sweep.csv")
    c.check("fig_serving_sweep writes its figure and table",
            os.path.isfile(os.path.join(out, "fig_serving_sweep.png")) and os.path.isfile(csv), r.stdout[:200])
    if not os.path.isfile(csv):
        return
    import pandas as pd
    table = pd.read_csv(csv)
    want = expected_rows(pts)
    c.check("one table row per grid point and policy", len(table) == len(want), f"{len(table)} vs {len(want)}")
    for _, row in table.iterrows():
        key = (int(row["rebalance_every"]), int(row["window"]), row["policy"])
        w = want.get(key)
        c.check(f"row {key} agrees with the store", w is not None and all(close(row[k], w[k]) for k in w),
                f"table {row.to_dict()}, store {w}")


def check_report(c, tmp, db):
    report = os.path.join(tmp, "REPORT.md")
    r = subprocess.run([sys.executable, os.path.join(HERE, "build_report.py"), "--db", db, "--out",
                        os.path.join(tmp, "report-figures"), "--report", report],
                       capture_output=True, text=True, env=dict(os.environ, MPLBACKEND="Agg"))
    text = open(report).read() if os.path.isfile(report) else ""
    c.check("the report has the serving section", r.returncode == 0 and "### fig_serving_sweep" in text,
            r.stderr[-400:])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prophet", default=os.path.join(ROOT, "build", "prophet"))
    p.add_argument("--keep", action="store_true", help="keep the temp dir and print its path")
    args = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="prophet-serving-sweep-")
    os.environ["PROPHET_BINARY"] = os.path.abspath(args.prophet)  # common.py's policy registry
    c = Checker()
    try:
        sweep, policies = tiny_sweep(tmp)
        db = os.path.join(tmp, "store.db")
        r = subprocess.run([args.prophet, "sweep", sweep, "--set", f"store.path={db}", "--no-report"],
                           capture_output=True, text=True)
        c.check("prophet sweep exits 0", r.returncode == 0, r.stderr[-600:])
        pts = points(db) if os.path.isfile(db) else {}
        check_points(c, pts, policies)
        check_section(c, pts, tmp, db)
        check_report(c, tmp, db)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if c.failures:
        print(f"{len(c.failures)} check(s) failed: " + "; ".join(c.failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
