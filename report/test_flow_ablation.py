#!/usr/bin/python3
"""The flow ablation end to end (issue 22, item 5): the shipped sweeps' six cumulative steps run by the real
binary on a tiny trace, and fig_flow_ablation's figure and table agreeing with the store.

  /usr/bin/python3 report/test_flow_ablation.py --prophet build/prophet [--keep]

The tiny sweeps are experiments/sweeps/flow-ablation.toml (engine sim) and flow-ablation-model.toml (engine model)
with their variants as shipped, on experiments/traces/tiny-e4-d4.toml and a 4-device cluster. Checks, one line each
(PASS / FAIL): both sweeps exit 0 with one finished point per step; fig_flow_ablation writes its PNG, PDF and CSV;
the CSV holds one row per (column, step), Eq 6 / Eq 8 from the model points and Sim from the sim points, each row's
ms and gap (%) those of the store (eq6_ms / gap_eq6, eq8_ms / gap_eq8, the mean of layer_moe_ms / gap_sim) read
here with plain SQL, and each step's change against the step before it; build_report lists the figure.
"""
import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SWEEPS = {"sim": "flow-ablation.toml", "model": "flow-ablation-model.toml"}
TRACE = os.path.join(ROOT, "experiments", "traces", "tiny-e4-d4.toml")
CLUSTER = os.path.join(ROOT, "experiments", "clusters", "moetuner-h100-ep4.toml")
TOL = 1e-9  # relative: the CSV and the store hold the same doubles, up to the mean's order of summation


def toml_text(value):
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(toml_text(v) for v in value) + "]"
    return str(value)


def tiny_sweep(tmp, engine):
    """The shipped sweep of `engine` on the tiny trace and cluster, written under tmp; returns (path, variants)."""
    with open(os.path.join(ROOT, "experiments", "sweeps", SWEEPS[engine]), "rb") as f:
        spec = tomllib.load(f)["sweep"]
    variants = spec.pop("variants")
    spec.pop("grid", None)  # the shipped file's layer cut (trace.num_layers) is for the DeepSeek-V3-scale trace
    spec.update(name=f"tiny-flow-ablation-{engine}", traces=[TRACE], clusters=[CLUSTER])
    path = os.path.join(tmp, f"tiny-{engine}.toml")
    with open(path, "w") as f:
        f.write("[sweep]\n" + "".join(f"{k} = {toml_text(v)}\n" for k, v in spec.items()))
        for name, keys in variants.items():
            f.write(f"\n[sweep.variants.{name}]\n" + "".join(f'"{k}" = {toml_text(v)}\n' for k, v in keys.items()))
    return path, sorted(variants)


def store_values(db):
    """{(column, variant): (ms, gap %)} of the finished sweep points, read with plain SQL."""
    con = sqlite3.connect(db)
    out = {}
    for (rid,) in con.execute("SELECT run_id FROM runs WHERE command = 'sweep' AND status = 'finished'"):
        params = {k: v.strip('"') for k, v in con.execute("SELECT key, value FROM params WHERE run_id = ?", (rid,))}
        summary, layers = {}, []
        for key, step, layer, value in con.execute(
                "SELECT key, step, layer, value FROM metrics WHERE run_id = ? AND step = 0 AND rank = -1", (rid,)):
            if key == "layer_moe_ms" and layer >= 0:
                layers.append(value)
            elif layer == -1:
                summary[key] = value
        v = params["ablate.variant"]
        if params["point.engine"] == "model":
            out[("Eq 6", v)] = (summary["eq6_ms"], 100 * summary["gap_eq6"])
            out[("Eq 8", v)] = (summary["eq8_ms"], 100 * summary["gap_eq8"])
        else:
            out[("Sim", v)] = (sum(layers) / len(layers), 100 * summary["gap_sim"])
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


def check_table(c, table, want, variants):
    import fig_flow_ablation as F
    c.check("one table row per column and step", len(table) == len(want), f"{len(table)} rows vs {len(want)}")
    label = {F.step_label(v): v for v in variants}
    previous = {}
    for _, row in table.iterrows():
        key = (row["column"], label.get(row["step"]))
        w = want.get(key)
        c.check(f"row {key} agrees with the store",
                w is not None and close(row["ms_mean"], w[0]) and close(row["gap_pct_mean"], w[1]),
                f"table {row['ms_mean']}, {row['gap_pct_mean']}; store {w}")
        prev = previous.get(row["column"])
        step_change = 100 * (row["ms_mean"] / prev - 1) if prev else None
        c.check(f"row {key} change against the step before",
                (prev is None and row["change_vs_previous_pct"] != row["change_vs_previous_pct"]) or
                (prev is not None and close(row["change_vs_previous_pct"], step_change)),
                f"{row['change_vs_previous_pct']} vs {step_change}")
        previous[row["column"]] = row["ms_mean"]


def check_figure(c, tmp, db, variants):
    out = os.path.join(tmp, "figures")
    r = subprocess.run([sys.executable, os.path.join(HERE, "fig_flow_ablation.py"), "--db", db, "--out", out],
                       capture_output=True, text=True, env=dict(os.environ, MPLBACKEND="Agg"))
    c.check("fig_flow_ablation exits 0", r.returncode == 0, r.stderr[-400:])
    files = [os.path.join(out, "fig_flow_ablation." + ext) for ext in ("png", "pdf", "csv")]
    c.check("fig_flow_ablation writes its figure and table", all(os.path.getsize(f) > 0 for f in files
                                                                  if os.path.isfile(f)) and
            all(os.path.isfile(f) for f in files), r.stdout[:200])
    if os.path.isfile(files[2]):
        import pandas as pd
        check_table(c, pd.read_csv(files[2]), store_values(db), variants)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prophet", default=os.path.join(ROOT, "build", "prophet"))
    p.add_argument("--keep", action="store_true", help="keep the temp dir and print its path")
    args = p.parse_args()
    sys.path.insert(0, HERE)
    tmp = tempfile.mkdtemp(prefix="prophet-flow-ablation-")
    os.environ["PROPHET_BINARY"] = os.path.abspath(args.prophet)  # common.py's policy registry
    c = Checker()
    try:
        db = os.path.join(tmp, "store.db")
        for engine in SWEEPS:
            sweep, variants = tiny_sweep(tmp, engine)
            r = subprocess.run([args.prophet, "sweep", sweep, "--set", f"store.path={db}", "--no-report"],
                               capture_output=True, text=True)
            c.check(f"prophet sweep ({engine}) exits 0", r.returncode == 0, r.stderr[-600:])
        got = store_values(db) if os.path.isfile(db) else {}
        c.check("every column of every step recorded", len(got) == 3 * len(variants), sorted(got))
        check_figure(c, tmp, db, variants)
        import build_report
        c.check("the report lists the figure", "fig_flow_ablation" in dict(build_report.FIGURES))
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
