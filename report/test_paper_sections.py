#!/usr/bin/python3
"""Test of the papers' tables beside ours (report/paper_sections.py, paper_compare.py; docs/paper-comparison.md).

  /usr/bin/python3 report/test_paper_sections.py --prophet build/prophet      (from anywhere)

Fixture (temp dir, seconds): a tiny sweep named paper-tables (2xLPWNV, MoE-GPT-S dims at k = 1 and 2, 3 iterations,
static / deepspeed / fastermoe / prophet, 2 seeds) and a tiny fig15-broadcast (the same S trace at k = 1, static /
deepspeed / top2 / top3 / prophet, 2 seeds).
Checks: the paper value files load; Table V's section has the paper's layout (its columns, its rows in order), the
paper's values, ours per cell with n = 2 seeds, ours / paper equal to the ratio recomputed here with SQL from the
store (deepspeed mean_iteration_ms / policy mean_iteration_ms per seed, mean), the >15% flag exactly where
|ratio - 1| > 0.15, and a reconciliation paragraph counting them; sections without runs say so; the flag and
mechanism matching on hand-made values (10% off: not flagged; 20% off: flagged, matched by column and direction;
a text cell that differs; an unmatched cell listed as such); bad value files fail naming the field, the value and
what is allowed; `prophet report --section paper` writes only these sections, `prophet report` puts the ones with
data into REPORT.md. Last line: "N passed, M failed".
"""
import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common as C  # noqa: E402
import paper_compare as P  # noqa: E402
import paper_sections as S  # noqa: E402
from report_testing import Checker  # noqa: E402  (PASS / FAIL lines and the counts)

ROOT = os.path.dirname(HERE)
TIMEOUT = 600  # seconds per child process: generous, the machine may be loaded

TABLES_SWEEP = """[sweep]
name = "paper-tables"
engine = "sim"
match_devices = true
clusters = ["experiments/clusters/lpwnv-8.toml"]
policies = ["static", "deepspeed", "fastermoe", "prophet"]
seeds = [1, 2]
traces = ["experiments/sweeps/paper-e8-k1-s.toml", "experiments/sweeps/paper-e8-k2-s.toml"]

[sweep.grid]
"trace.num_iterations" = [3]
"""
FIG15_SWEEP = """[sweep]
name = "fig15-broadcast"
engine = "sim"
clusters = ["experiments/clusters/lpwnv-8.toml"]
traces = ["experiments/sweeps/paper-e8-k1-s.toml"]
policies = ["static", "deepspeed", "top2", "top3", "prophet"]
seeds = [1, 2]

[sweep.grid]
"trace.num_iterations" = [3]
"""
MODEL_SWEEP = """[sweep]
name = "paper-tables-model"
engine = "model"
clusters = ["experiments/clusters/lpwnv-8.toml"]
traces = ["experiments/sweeps/paper-e8-k1-s.toml"]
policies = ["static", "deepspeed", "fastermoe", "prophet"]
seeds = [1]

[sweep.grid]
"trace.num_iterations" = [3]
"balance.cost_eq" = [6, 8]
"""


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=TIMEOUT)


def sql_ratio(db, policy, k):
    """Ours for (policy, k) of Table V's S row, read with SQL: per seed deepspeed / policy mean_iteration_ms."""
    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT pp.value, ps.value, m.value FROM runs r "
        "JOIN metrics m ON m.run_id = r.run_id AND m.key = 'mean_iteration_ms' AND m.layer = -1 "
        "JOIN params pp ON pp.run_id = r.run_id AND pp.key = 'balance.policy' "
        "JOIN params ps ON ps.run_id = r.run_id AND ps.key = 'point.seed' "
        "JOIN params pt ON pt.run_id = r.run_id AND pt.key = 'point.trace' "
        "WHERE r.experiment = 'paper-tables' AND pt.value LIKE ?", (f"%paper-e8-k{k}-s.toml%",)).fetchall()
    t = {(p.strip('"'), s): v for p, s, v in rows}
    seeds = sorted({s for _, s in t})
    per_seed = [t[("deepspeed", s)] / t[(policy, s)] for s in seeds]
    return sum(per_seed) / len(per_seed), len(per_seed)


def check_model_cell(db, text):
    """Both cost-model tables are in the section with their label, and their S / Pro-Prophet k=1 cell is the SQL
    ratio deepspeed eqN_ms / prophet eqN_ms of the balance.cost_eq = N points (one seed)."""
    con = sqlite3.connect(db)
    for eq in (6, 8):
        rows = dict(con.execute(
            "SELECT pp.value, m.value FROM runs r JOIN metrics m ON m.run_id = r.run_id AND m.key = ? "
            "JOIN params pp ON pp.run_id = r.run_id AND pp.key = 'balance.policy' "
            "JOIN params pe ON pe.run_id = r.run_id AND pe.key = 'balance.cost_eq' "
            "WHERE r.experiment = 'paper-tables-model' AND pe.value = ?", (f"eq{eq}_ms", str(eq))).fetchall())
        ratio = rows['"deepspeed"'] / rows['"prophet"']  # params hold TOML text: strings are quoted
        want = f"{ratio:.2f} \u00b1 0 (1)"
        part = text.split(f"under Eq {eq} (every policy planned and scored with Eq {eq})")
        if len(part) < 2 or f"cost model Eq {eq}" not in part[1][:200]:
            return False
        s_row = [ln for ln in part[1].splitlines() if ln.startswith("| S |")][0]
        if s_row.split(" | ")[2] != want:
            return False
    return True


def check_table(c, db, out):
    con = C.connect(db)
    specs = P.load_all()
    c.check({"table4", "table5", "fig11", "fig12", "fig14", "fig15", "fig16", "moetuner"} <= set(specs),
            "every paper section has transcribed values", str(sorted(specs)))
    lines = S.render("table5", specs["table5"], S.BUILDERS["table5"](con, "table5", specs["table5"]), out)
    text = "\n".join(lines)
    header = "| row | FasterMoE k=1 | Pro-Prophet k=1 | FasterMoE k=2 | Pro-Prophet k=2 |"
    c.check(header in text, "Table V: the paper's columns", text[:400])
    rows = [ln.split(" | ")[0][2:] for ln in text.splitlines() if ln.startswith("| ") and not ln.startswith("| row")]
    c.check(rows[:4] == ["S", "M", "DS", "DM"], "Table V: the paper's rows in order", str(rows[:4]))
    for v in ("paper 1.20", "paper 1.30", "paper 1.56", "paper 1.91", "paper 0.96", "paper 1.58"):
        c.check(v in text, f"Table V: the paper's value '{v}' is in the section")
    frame = C.pd.read_csv(os.path.join(out, "paper_table5.csv"))
    main = frame[frame["section"] == "table5"]
    for col, policy, k in (("FasterMoE k=1", "fastermoe", 1), ("Pro-Prophet k=1", "prophet", 1),
                           ("FasterMoE k=2", "fastermoe", 2), ("Pro-Prophet k=2", "prophet", 2)):
        rec = main[(main["row"] == "S") & (main["column"] == col)].iloc[0]
        want, n = sql_ratio(db, policy, k)
        c.check(abs(rec["ours_mean"] - want) < 1e-9 and rec["n"] == n == 2,
                f"Table V S / {col}: ours = SQL deepspeed/{policy} over {n} seeds", f"{rec['ours_mean']} vs {want}")
        c.check(abs(rec["ratio"] - rec["ours_mean"] / rec["paper_value"]) < 1e-12,
                f"Table V S / {col}: ratio = ours / paper")
        c.check(bool(rec["flagged"]) == (abs(rec["ratio"] - 1) > 0.15), f"Table V S / {col}: flagged iff >15% off")
    other = main[main["row"] != "S"]
    c.check((other["n"] == 0).all() and not other["flagged"].any(), "rows without runs: no value, not flagged")
    nflag = int(main["flagged"].sum())
    c.check(f"**Reconciliation.** {nflag} of 4 compared cells" in text,  # only row S has runs in the fixture
            "the reconciliation counts the flags among the cells with both values",
            text[-600:])
    rel = frame[frame["section"].str.startswith("table5: ")]
    c.check(len(rel) == 8 and rel["paper_value"].notna().all(), "Pro-Prophet over FasterMoE: the paper's ratio")
    c.check(check_model_cell(db, text), "Table V under Eq 6 / Eq 8: labelled, S / Pro-Prophet k=1 = SQL "
                                        "deepspeed / prophet eqN_ms at balance.cost_eq = N", text[-1500:])
    fig15 = "\n".join(S.render("fig15", specs["fig15"], S.BUILDERS["fig15"](con, "fig15", specs["fig15"]), out))
    c.check("| k=1 | " in fig15 and "paper 1.77\u20131.82" in fig15, "Fig 15: k rows and the paper's range")
    none = "\n".join(S.render("fig12", specs["fig12"], S.BUILDERS["fig12"](con, "fig12", specs["fig12"]), out))
    c.check("No data: no finished runs of `fig12-iterations`" in none, "a section without runs says so")


def check_flags(c):
    spec = {"rows": ["a", "b"], "columns": ["x", "y"], "unit": "x", "values": [[1.0, 2.0], ["2, 5", ""]],
            "mechanism": [{"columns": ["y"], "direction": "low", "sweep": "s1", "text": "LOWTEXT"},
                          {"columns": [], "direction": "differs", "sweep": "s2", "text": "TEXTDIFF"}]}
    ours = {("a", "x"): [1.08, 1.12], ("a", "y"): [1.6, 1.6], ("b", "x"): ["2", "2"], ("b", "y"): [3.0]}
    f = P.compare("t", spec, ours, "simulator")
    cell = lambda r, col: f[(f["row"] == r) & (f["column"] == col)].iloc[0]  # noqa: E731
    c.check(not cell("a", "x")["flagged"] and abs(cell("a", "x")["ratio"] - 1.10) < 1e-12, "10% off: not flagged")
    c.check(cell("a", "y")["flagged"] and cell("a", "y")["direction"] == "low", "20% low: flagged 'low'")
    c.check(cell("b", "x")["flagged"] and cell("b", "x")["direction"] == "differs", "a differing text cell: flagged")
    c.check(not cell("b", "y")["flagged"], "no paper value: not flagged")
    text = P.reconciliation(f, spec)
    c.check("2 of 3 compared cells" in text and "a / y (0.80)" in text and "LOWTEXT" in text and "`s1`" in text
            and "TEXTDIFF" in text, "reconciliation: each flagged cell under its mechanism and sweep", text)
    spec["mechanism"] = spec["mechanism"][:1]
    spec["mechanism"][0]["direction"] = "high"
    c.check("No mechanism written yet for a / y (0.80), b / x" in P.reconciliation(f, spec),
            "reconciliation: a cell no mechanism matches is named as such")


def check_below(c):
    """The 'prophet slower than fastermoe' note: a setting is listed when prophet's mean time is more than 0.5%
    above fastermoe's, with its grid values as key=value and the ratio fastermoe / prophet."""
    df = C.pd.DataFrame({"cluster": ["c"] * 8, "trace": ["t"] * 8, "trace.zipf_s": [1.2] * 4 + [2.0] * 4,
                         "policy": ["prophet", "fastermoe"] * 4, "seed": [1, 1, 2, 2] * 2,
                         "time_ms": [10.0, 10.0, 10.04, 10.0, 12.0, 10.0, 12.0, 10.0]})
    got = S._below(df, ["cluster", "trace", "trace.zipf_s"], "x", 0.005)
    c.check(got == ["- x: 1 of 2 settings: c, t, zipf_s=2 (0.83)"], "prophet-below-fastermoe note", str(got))


def check_errors(c, tmp):
    cases = [('[t]\ntitle="t"\nsource="s"\nbaseline="b"\nunit="ms"\nrows=["a"]\ncolumns=["x"]\nvalues=[[1.0]]\n',
              "unit = 'ms': allowed: x, %"),
             ('[t]\ntitle="t"\nsource="s"\nbaseline="b"\nunit="x"\nrows=["a","b"]\ncolumns=["x"]\nvalues=[[1.0]]\n',
              "must be 2 rows x 1 columns"),
             ('[t]\ntitle="t"\nsource="s"\nunit="x"\nrows=["a"]\ncolumns=["x"]\nvalues=[[1.0]]\n', "baseline = None"),
             ('[t]\ntitle="t"\nsource="s"\nbaseline="b"\nunit="x"\nrows=["a"]\ncolumns=["x"]\nvalues=[[1.0]]\n'
              '[[t.mechanism]]\ncolumns=["z"]\ndirection="low"\nsweep="s"\ntext="m"\n', "allowed: x")]
    for i, (body, want) in enumerate(cases):
        path = os.path.join(tmp, f"bad{i}.toml")
        with open(path, "w") as f:
            f.write(body)
        try:
            P.load_values(path)
            c.check(False, f"bad value file {i} is refused", "loaded")
        except P.PaperValueError as e:
            c.check(want in str(e) and "[t]" in str(e), f"bad value file {i}: the error names field and allowed",
                    str(e))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prophet", required=True)
    args = p.parse_args()
    prophet = os.path.abspath(args.prophet)
    c = Checker()
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "p.db")
        for name, body in (("tables.toml", TABLES_SWEEP), ("fig15.toml", FIG15_SWEEP), ("model.toml", MODEL_SWEEP)):
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                f.write(body)
            r = run([prophet, "sweep", path, "--set", f"store.path={db}", "--no-report"])
            c.check(r.returncode == 0, f"fixture sweep {name}", r.stderr[-400:])
        out = os.path.join(tmp, "figs")
        check_table(c, db, out)
        check_flags(c)
        check_below(c)
        check_errors(c, tmp)
        rep = os.path.join(tmp, "P.md")
        r = run([prophet, "report", "--db", db, "--out", out, "--report", rep, "--section", "paper"])
        text = open(rep).read() if os.path.isfile(rep) else ""
        c.check(r.returncode == 0 and "### Table V" in text and "### Fig 16" in text and "## Figures" not in text,
                "prophet report --section paper: every paper section and nothing else", r.stderr[-300:])
        full = os.path.join(tmp, "R.md")
        r = run([prophet, "report", "--db", db, "--out", out, "--report", full])
        text = open(full).read() if os.path.isfile(full) else ""
        c.check(r.returncode == 0 and "### Table V" in text and "### Fig 15" in text and "### Fig 16" not in text,
                "prophet report: the paper sections with data, none without", r.stderr[-300:])
    print(f"{c.passed} passed, {len(c.failures)} failed")
    return 0 if not c.failures else 1


if __name__ == "__main__":
    sys.exit(main())
