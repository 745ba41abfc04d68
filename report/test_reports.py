#!/usr/bin/python3
"""End-to-end test of the report scripts: build a fixture store with the real binary, run every script on it.

  /usr/bin/python3 -m pytest report/test_reports.py --prophet build/prophet [--keep]   (what ctest report_scripts runs)
  /usr/bin/python3 report/test_reports.py --prophet build/prophet [--keep]      (through pytest: this file and
                                                                                 test_reports_hostile.py, as before)

The fixture stores (report_testing.build_fixture, which describes them) are built once per session (the `fixture`
fixture) and shared by every test here; --prophet and --keep (keep the temp dir and print its path) and the
`prophet` fixture are declared in report/conftest.py. The hostile-name, corrupt and read-only stores are tested in
test_reports_hostile.py.
Checks: every figure script writes a non-empty PNG and PDF and prints a markdown table (run in the test's process,
as layout_check.py runs them; build_report.py runs each again in its process); rebuilding gives identical files;
every script exits 0 with the no-data message on a missing, an empty and a data-less store (in the test's
process too); the report the smoke sweep writes at its end (build_report.py; the smoke sweep runs last, so it
covers the whole store) opens with the summary and links every figure; every figure drawn from the
fixture has no overlapping tick labels, legend entries or panel titles (layout_check.py measures the text boxes) and
fig_speedup's bars are the store's means; `prophet report` on a missing store exits 5 with one line, on an empty
one 0 with "nothing to report". Each test prints PASS/FAIL per check and fails naming every check that missed.
"""
import itertools
import json
import math
import os
import sys
import tempfile
import traceback

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import build_report  # noqa: E402  (its FIGURES: what an empty store's report must skip)
import layout_check  # noqa: E402  (text overlaps and plotted values of a drawn figure)
from report_testing import Checker, build_fixture, nonempty, release_tmp, run  # noqa: E402
PY = sys.executable
FIGS = ["fig_speedup", "fig_layers", "fig_rb", "fig_iterations", "fig_locality", "fig_sensitivity", "fig_plan_policies",
        "fig_plan_gap", "fig_gap_iterations", "fig_train", "fig_validation", "fig_ablation", "fig_planner_scaling",
        "fig_serving_tail", "fig_serving_sample", "fig_ilp_gap"]
# figures drawn from the validation store (a real sweep; kept apart: fig_speedup does not handle real sweep points)
VALIDATION_FIGS = {"fig_validation"}


def run_script(name, db, out, extra=()):
    return run([PY, os.path.join(HERE, name + ".py"), "--db", db, "--out", out, *extra],
               env=dict(os.environ, MPLBACKEND="Agg"), timeout=120)


def draw_figure(name, db, out):
    """Figure script `name` on `db`, run in this process (layout_check.render) as its process would run: what it
    wrote to `out`, {"exit", "stdout", "error"} ("error": the traceback of an exception, else ""), and the layout
    check's ("drawn" or "no data", overlapping text pairs)."""
    outcome, status, found = {}, "no data", []
    try:
        status, found, _, _ = layout_check.render(name, db, out, outcome=outcome)
        outcome["error"] = ""
    except Exception:  # a crash: what the process would have printed, and its exit status
        outcome = {"exit": 1, "stdout": "", "error": traceback.format_exc()}
    return outcome, (status, found)


def check_layout(c, drawn):
    """Every figure drawn from the fixture: no two tick labels, legend entries or panel titles overlap."""
    for name in FIGS:
        status, found = drawn[name][1]
        c.check(status == "drawn" and not found, f"{name}: no overlapping text ({status})",
                "; ".join(f"{a} / {b}" for a, b in found[:4]))


UNCERTAINTY_SWEEP = """[sweep]
name = "fixture-uncertainty"
engine = "sim"
clusters = ["experiments/clusters/moetuner-h100-ep4.toml"]
traces = ["experiments/traces/tiny-e4-d4.toml"]
policies = ["static", "prophet"]
seeds = [1]
uncertainty = 0.3
"""


def check_truth_band(c, prophet, tmp):
    """fig_speedup on a sweep with `uncertainty`: the bar is the nominal point (every truth scale 1.0) and the band
    beside it (gid 'band|panel|x|policy') spans the perturbed points' speedups: non-empty and holding the bar."""
    db = os.path.join(tmp, "u.db")
    sweep = os.path.join(tmp, "uncertainty.toml")
    with open(sweep, "w") as f:
        f.write(UNCERTAINTY_SWEEP)
    r = run([prophet, "sweep", sweep, "--no-report", "--set", f"store.path={db}"], timeout=600)
    if not c.check(r.returncode == 0, "sweep with uncertainty = 0.3: exit 0", r.stderr[-500:]):
        return
    # beside it a sweep without truth scales: its bars get no band
    r = run([prophet, "sweep", "experiments/sweeps/smoke.toml", "--no-report", "--set", f"store.path={db}"],
            timeout=600)
    if not c.check(r.returncode == 0, "smoke sweep into the same store: exit 0", r.stderr[-500:]):
        return
    captured = {}
    original = layout_check.C.save_figure

    def capture(fig, out_dir, fig_name):
        captured["fig"] = fig
        return original(fig, out_dir, fig_name)

    layout_check.C.save_figure = capture
    try:
        _, _, bars, _ = layout_check.render("fig_speedup", db, os.path.join(tmp, "figs-band"))
    finally:
        layout_check.C.save_figure = original
    fig = captured.get("fig")
    bands = {}
    for ax in (fig.axes if fig else []):
        for coll in ax.collections:
            gid = coll.get_gid() or ""
            if gid.startswith("band|"):
                (x0, y0), (x1, y1) = coll.get_segments()[0]
                bands[gid[len("band|"):]] = (min(y0, y1), max(y0, y1))
    perturbed_bars = {g for g in bars if g.startswith("fixture-uncertainty\n")}
    c.check(len(bands) == 1 and set(bands) == perturbed_bars and len(bars) > len(bands),
            "fig_speedup: a truth band beside the uncertainty sweep's bar (prophet), none beside smoke's",
            f"bands {bands}, bars {bars}")
    for gid, (lo, hi) in bands.items():
        c.check(lo < hi and lo <= bars.get(gid, float("nan")) <= hi,
                f"fig_speedup band {gid!r} is non-empty and holds the nominal bar", f"band {lo}..{hi}, bar {bars}")


def check_speedup_values(c, db, out):
    """fig_speedup's bars against the store: each 'experiment\ncluster|trace|policy' bar of the smoke sweep is the
    mean of its points' speedup_vs_static metric, read here with SQL."""
    import sqlite3
    _, _, bars, _ = layout_check.render("fig_speedup", db, out, experiment="smoke")
    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT pc.value, pt.value, pp.value, m.value FROM runs r "
        "JOIN metrics m ON m.run_id = r.run_id AND m.key = 'speedup_vs_static' "
        "JOIN params pc ON pc.run_id = r.run_id AND pc.key = 'point.cluster' "
        "JOIN params pt ON pt.run_id = r.run_id AND pt.key = 'point.trace' "
        "JOIN params pp ON pp.run_id = r.run_id AND pp.key = 'balance.policy' "
        "WHERE r.experiment = 'smoke' AND r.command = 'sweep' AND r.status = 'finished'").fetchall()
    con.close()
    stem = lambda v: os.path.basename(v.strip('"'))[:-len(".toml")]  # noqa: E731
    compared = 0
    for gid, height in bars.items():
        panel, x, policy = gid.split("|")
        cluster = panel.split("\n")[1]
        values = [v for cl, tr, po, v in rows if stem(cl) == cluster and stem(tr) == x and po.strip('"') == policy]
        ok = values and abs(height - sum(values) / len(values)) <= 1e-9 * max(1.0, abs(height))
        c.check(bool(ok), f"fig_speedup bar {gid!r} = mean of the store's {len(values)} points",
                f"bar {height}, store {values}")
        compared += 1
    c.check(compared >= 2, "fig_speedup: smoke's fastermoe and prophet bars compared with the store", str(bars))


def check_report_text(c, text, rdir):
    """REPORT.md opens with the summary, writes no section for a figure without data, closes with one line
    naming what was not produced, and its summary CSV files are beside the figures."""
    summary_at, figures_at = text.find("## Summary"), text.find("## Figures")
    c.check(0 <= summary_at < figures_at, "REPORT.md opens with the summary, figures after it", text[:300])
    c.check("Skipped" not in text and "_Skipped" not in text, "REPORT.md has no 'Skipped' paragraphs")
    closing = [line for line in text.split("\n") if line.startswith("Not produced (no data in this store): ")]
    c.check(len(closing) == 1 and "fig_gantt (`prophet train --timeline`)" in closing[0],
            "REPORT.md's closing line names what was not produced and the command", text[-400:])
    c.check("### Speedup over static" in text and "\u00b1" in text, "REPORT.md summary: speedup table, mean \u00b1 sd")
    c.check(nonempty(os.path.join(rdir, "figures", "summary_speedup.csv")) and
            nonempty(os.path.join(rdir, "figures", "fig_speedup.csv")), "summary and figure CSV files written")


def check_report_command(c, prophet, tmp, empty, db):
    """`prophet report`: --help explains the options; a missing store is exit 5 and one line; an empty one exit 0
    and 'nothing to report' (no REPORT.md); a store with runs writes REPORT.md."""
    r = run([prophet, "report", "--help"], timeout=60)
    c.check(r.returncode == 0 and all(o in r.stdout for o in ("--db", "--out", "--experiment", "pandas")),
            "prophet report --help explains the options", r.stdout[-300:])
    r = run([prophet, "report", "--db", os.path.join(tmp, "nope.db")], timeout=60)
    c.check(r.returncode == 5 and len(r.stderr.strip().splitlines()) == 1 and "no store" in r.stderr,
            "prophet report on a missing store: exit 5, one line", f"exit {r.returncode}: {r.stderr[-300:]}")
    er = os.path.join(tmp, "empty-report", "REPORT.md")
    r = run([prophet, "report", "--db", empty, "--report", er], timeout=120)
    c.check(r.returncode == 0 and r.stdout.startswith("nothing to report") and not os.path.exists(er),
            "prophet report on an empty store: exit 0, 'nothing to report'", f"exit {r.returncode}: {r.stdout}")
    rr = os.path.join(tmp, "cmd-report", "REPORT.md")
    r = run([prophet, "report", "--db", db, "--report", rr, "--out", os.path.join(tmp, "cmd-report", "figures"),
             "--experiment", "smoke", "fixture-locality"], timeout=600)
    text = open(rr).read() if os.path.isfile(rr) else ""
    c.check(r.returncode == 0 and "fixture-locality" in text and "fixture-sensitivity" not in text,
            "prophet report --experiment A B: a report of those two", f"exit {r.returncode}: {r.stderr[-300:]}")


def check_policy_colours(c, prophet):
    """common.py takes its policy order from the registry (no list of its own) and gives a policy one colour."""
    os.environ["PROPHET_BINARY"] = prophet
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import common
    names = [row["name"] for row in json.loads(run([prophet, "policies", "--json"]).stdout)["policies"]]
    c.check(common.registry_policies() == names and "deepspeed" in names,
            "report order is `prophet policies --json`'s, deepspeed included", str(common.registry_policies()))
    alone, together = common.palette(["deepspeed"]), common.palette(list(reversed(names)))
    c.check(alone["deepspeed"] == together["deepspeed"] and len(set(together.values())) == len(names),
            "deepspeed has one colour in every figure, every policy its own", str(together))
    closest = min((math.dist(together[a], together[b]), a, b) for a, b in itertools.combinations(names, 2))
    c.check(closest[0] >= 0.26, "no two registry policies' colours are closer than tab10's closest pair (0.26 RGB)",
            str(closest))
    c.check("POLICY_ORDER" not in open(common.__file__).read(), "report/common.py keeps no policy list of its own")


@pytest.fixture(scope="session")
def fixture(prophet, request):
    """the shared fixture stores, built once per session; fixture["checks"] holds how building them went"""
    tmp = tempfile.mkdtemp(prefix="prophet-report-")
    c = Checker()
    db, vdb, smoke = build_fixture(prophet, tmp, c)
    out = os.path.join(tmp, "figs")
    # in this process: each script's import of pandas / matplotlib / seaborn once, not once per figure; the report
    # fixture's build_report.py runs every one again in its process (and test_rebuild_gives_identical_bytes compares)
    drawn = {name: draw_figure(name, vdb if name in VALIDATION_FIGS else db, out) for name in FIGS}
    empty = os.path.join(tmp, "empty.db")
    open(empty, "w").close()
    yield {"tmp": tmp, "db": db, "vdb": vdb, "out": out, "drawn": drawn, "empty": empty, "checks": c,
           "smoke": smoke}
    release_tmp(request, tmp)


def test_fixture_commands(fixture):
    fixture["checks"].assert_passed()


@pytest.mark.parametrize("name", FIGS)
def test_figure_script(fixture, name):
    c = Checker()
    r, out = fixture["drawn"][name][0], fixture["out"]
    png, pdf = os.path.join(out, name + ".png"), os.path.join(out, name + ".pdf")
    c.check(r["exit"] == 0, f"{name}: exit 0", f"exit {r['exit']}: {r['error'][-800:]}")
    c.check(nonempty(png) and nonempty(pdf), f"{name}: wrote non-empty PNG and PDF", r["stdout"].strip()[:300])
    c.check("\n|---" in r["stdout"], f"{name}: printed a markdown table", r["stdout"][:300])
    c.check("sd" in r["stdout"].splitlines()[0] if r["stdout"] else False, f"{name}: caption names the sd",
            r["stdout"][:200])
    c.assert_passed()


def test_layout(fixture):
    c = Checker()
    check_layout(c, fixture["drawn"])
    c.assert_passed()


def test_speedup_values(fixture):
    c = Checker()
    check_speedup_values(c, fixture["db"], os.path.join(fixture["tmp"], "figs-values"))
    c.assert_passed()


def test_truth_band(prophet, fixture):
    c = Checker()
    check_truth_band(c, prophet, fixture["tmp"])
    c.assert_passed()


@pytest.mark.parametrize("name", ["fig_speedup", "fig_train"])
def test_rebuild_gives_identical_bytes(fixture, report, name):
    """deterministic output: the figure rebuilt by build_report.py (the same script on the same store, another
    process and --out) has the same bytes as the fixture's"""
    c = Checker()
    out, out2 = fixture["out"], report["figures"]
    for ext in ("png", "pdf"):
        a, b = os.path.join(out, f"{name}.{ext}"), os.path.join(out2, f"{name}.{ext}")
        same = nonempty(a) and nonempty(b) and open(a, "rb").read() == open(b, "rb").read()
        c.check(same, f"{name}.{ext}: identical bytes when rebuilt")
    c.assert_passed()


def test_experiment_filter(fixture):
    c = Checker()
    r = run_script("fig_speedup", fixture["db"], os.path.join(fixture["tmp"], "figs3"), ["--experiment", "smoke"])
    c.check(r.returncode == 0 and "fixture-locality" not in r.stdout and "smoke" in r.stdout,
            "fig_speedup --experiment smoke filters", r.stdout[:300])
    c.assert_passed()


def test_experiment_without_match(fixture):
    c = Checker()
    r = run_script("fig_train", fixture["db"], os.path.join(fixture["tmp"], "figs3"),
                   ["--experiment", "no-such-experiment"])
    c.check(r.returncode == 0 and r.stdout.startswith("no data:"), "--experiment with no match: no-data message",
            r.stdout[:200] + r.stderr[-300:])
    c.assert_passed()


def no_data_outcome(name, db, out):
    """Figure script `name` on a store without its data, run in this process as draw_figure runs it (its exit
    status, stdout and any traceback are what its process would show; a process per script and store would spend
    its time importing pandas and matplotlib, and build_report.py runs every script again on the fixture
    stores): (whether it printed the no-data message, exited 0 and wrote no PNG into `out`, detail)."""
    r, _ = draw_figure(name, db, out)
    ok = r["exit"] == 0 and r["stdout"].startswith("no data:") and not os.path.exists(os.path.join(out, name + ".png"))
    return ok, f"exit {r['exit']}: {r['stdout'][:200]}{r['error'][-400:]}"


def test_missing_and_empty_stores(fixture):
    """missing file, empty file: every figure prints the no-data message, writes nothing and exits 0"""
    c = Checker()
    tmp, empty = fixture["tmp"], fixture["empty"]
    for label, path in (("missing", os.path.join(tmp, "nope.db")), ("empty file", empty)):
        for name in FIGS:
            ok, detail = no_data_outcome(name, path, os.path.join(tmp, "empty-out"))
            c.check(ok, f"{name} on {label} store: no-data message, exit 0", detail)
    c.check(os.path.getsize(empty) == 0, "read-only: the empty file was not written")
    c.assert_passed()


def test_store_with_train_runs_only(prophet, fixture):
    """a prophet store without runs of the right kind: every figure but fig_train prints the no-data message"""
    c = Checker()
    tmp = fixture["tmp"]
    only_train = os.path.join(tmp, "train-only.db")
    r = run([prophet, "train", "--config", "experiments/train/skewed-4rank.toml", "--set", "train.steps=1",
             "--set", f"store.path={only_train}"], timeout=120)
    if c.check(os.path.isfile(only_train), "train-only store written", f"exit {r.returncode}: {r.stderr[-300:]}"):
        for name in [n for n in FIGS if n != "fig_train"]:
            ok, detail = no_data_outcome(name, only_train, os.path.join(tmp, "train-only-out"))
            c.check(ok, f"{name} on a store with train runs only: no-data message", detail)
    c.assert_passed()


@pytest.fixture(scope="session")
def report(fixture):
    """build_report.py on the fixture store, once: the report the smoke sweep wrote at its end, the fixture's last
    command (`prophet sweep` runs build_report.py --db <store> --out <dir>/figures --report <dir>/REPORT.md as a
    process, its output quiet): its REPORT.md (test_build_report) and its figures (rebuilt figures,
    test_rebuild_gives_identical_bytes). "ok": the sweep exited 0 and printed its 'report:' line, which it prints
    only when build_report.py exited 0 (else a warning with the exit code)."""
    rdir = fixture["tmp"]
    path, figures = os.path.join(rdir, "REPORT.md"), os.path.join(rdir, "figures")
    r = fixture["smoke"]
    ok = r.returncode == 0 and f"prophet sweep: report: {path}" in r.stderr
    return {"dir": rdir, "path": path, "figures": figures, "ok": ok, "why": r.stderr[-800:]}


def test_build_report(fixture, report):
    """build_report.py links every figure; the validation store's report links fig_validation (fig_speedup's exit
    on real points is not ours); REPORT.md's text (check_report_text)"""
    c = Checker()
    vdb, rdir = fixture["vdb"], report["dir"]
    c.check(report["ok"] and os.path.isfile(report["path"]), "build_report.py: exit 0 and REPORT.md written",
            report["why"])
    text = open(report["path"]).read() if os.path.isfile(report["path"]) else ""
    for name in FIGS:
        if name in VALIDATION_FIGS:
            continue
        c.check(f"](figures/{name}.png)" in text and nonempty(os.path.join(rdir, "figures", name + ".png")),
                f"REPORT.md links {name}.png")
    vreport = os.path.join(rdir, "VALIDATION.md")
    r = run([PY, os.path.join(HERE, "build_report.py"), "--db", vdb, "--out", os.path.join(rdir, "figures-v"),
             "--report", vreport], timeout=600)
    vtext = open(vreport).read() if os.path.isfile(vreport) else ""
    for name in sorted(VALIDATION_FIGS):
        c.check(f"](figures-v/{name}.png)" in vtext and nonempty(os.path.join(rdir, "figures-v", name + ".png")),
                f"validation REPORT links {name}.png", r.stderr[-400:])
    check_report_text(c, text, rdir)
    c.assert_passed()


# Figure scripts that fail, each as REPORT.md must show it (build_report runs them in its process): name, source,
# the error its "Failed" line quotes. fig_rcparams_leak changes a matplotlib setting no figure sets itself (the PDF's
# compression) before it fails: the next figure (fig_train) must still have the bytes the fixture drew.
FAILING_FIGURES = [
    ("fig_raises", "def main(argv=None):\n    raise ValueError('boom at row 3')\n",
     "exit 1: ValueError: boom at row 3"),
    ("fig_exits_with_message", "import sys\ndef main(argv=None):\n    sys.exit('bad column x')\n",
     "exit 1: bad column x"),
    ("fig_exits_two", "import sys\ndef main(argv=None):\n    print('oops', file=sys.stderr)\n    sys.exit(2)\n",
     "exit 2: oops"),
    ("fig_rcparams_leak", "import matplotlib\ndef main(argv=None):\n    matplotlib.rcParams['pdf.compression'] = 0\n"
                          "    raise RuntimeError('after the setting')\n", "exit 1: RuntimeError: after the setting"),
]


def test_failing_figures_fail_alone(fixture, monkeypatch):
    """a figure script that raises or exits non-zero is reported as failed with its error line, the report exits 1,
    and the figures after it are drawn as if it had never run"""
    c = Checker()
    tmp = os.path.join(fixture["tmp"], "failing")
    os.makedirs(tmp)
    for name, source, _ in FAILING_FIGURES:
        with open(os.path.join(tmp, name + ".py"), "w") as f:
            f.write(source)
    monkeypatch.syspath_prepend(tmp)
    monkeypatch.setattr(build_report, "FIGURES", [(n, n) for n, _, _ in FAILING_FIGURES] + [("fig_train", "train")])
    report, figures = os.path.join(tmp, "REPORT.md"), os.path.join(tmp, "figures")
    code = build_report.main(["--db", fixture["db"], "--out", figures, "--report", report])
    text = open(report).read() if os.path.isfile(report) else ""
    c.check(code == 1, "a failed figure: build_report exits 1", f"exit {code}")
    for name, _, error in FAILING_FIGURES:
        c.check(f"### {name}\n\n**Failed** ({build_report.C.md(error)})" in text,
                f"{name}: reported failed with '{error}'", text[-800:])
    c.check("---\n1 figures, 4 failed." in text, "closing line counts 1 figure and 4 failures", text[-300:])
    for ext in ("png", "pdf"):
        same = [open(os.path.join(d, f"fig_train.{ext}"), "rb").read() for d in (figures, fixture["out"])
                if nonempty(os.path.join(d, f"fig_train.{ext}"))]
        c.check(len(same) == 2 and same[0] == same[1], f"fig_train.{ext} after the failures: the fixture's bytes")
    c.assert_passed()


def test_report_command(prophet, fixture):
    c = Checker()
    check_report_command(c, prophet, fixture["tmp"], fixture["empty"], fixture["db"])
    c.assert_passed()


def test_policy_colours(prophet):
    c = Checker()
    check_policy_colours(c, prophet)
    c.assert_passed()


if __name__ == "__main__":
    # the old entry point: python3 report/test_reports.py --prophet build/prophet [--keep]; as before it runs every
    # report-script test, the hostile-store ones (test_reports_hostile.py) included
    sys.exit(pytest.main([__file__, os.path.join(HERE, "test_reports_hostile.py"), "-v", "-p", "no:cacheprovider",
                          *sys.argv[1:]]))
