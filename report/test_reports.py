#!/usr/bin/python3
"""End-to-end test of the report scripts: build a fixture store with the real binary, run every script on it.

  /usr/bin/python3 report/test_reports.py --prophet build/prophet      (run from the repository root)

Fixture (temp dir): the smoke sweep, a tiny drift sweep (2 seeds x trace.drift_rate grid, static / prophet /
prophet-oracle) for fig_locality, a tiny planner-scale sweep (plan.compute_scale x plan.bandwidth_scale) for
fig_sensitivity, a tiny ablation sweep ([sweep.variants], the five ablate.variant names) for fig_ablation, a tiny
engine-model sweep over trace.num_experts x trace.num_layers for fig_planner_scaling,
`prophet plan --policy all`, four 3-batch `prophet profile --inference` runs on 4 ranks (static / moetuner, in and
out of sample, replayed on the simulated H100 node) and `bench_ilp_gap --quick` (it must be built beside prophet,
in <build>/bench/) for the serving figures, two 3-step `prophet train` runs (static, prophet); and, in a
second store (fig_validation's), a tiny real sweep (ranks = [1], 3 steps, static / prophet, validate_cluster =
experiments/clusters/cpu-local.toml).
The sim sweeps record the per-layer metrics (layer_moe_ms, layer_rb_vs_static, ...) that fig_layers / fig_rb draw.
Checks: every figure script writes a non-empty PNG and PDF and prints a markdown table; rebuilding gives identical
files; every script exits 0 with the no-data message on a missing, an empty and a data-less store;
build_report.py writes a report linking every figure. Last line: "N passed, M failed".
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import build_report  # noqa: E402  (its FIGURES: what an empty store's report must skip)
ROOT = os.path.dirname(HERE)
PY = sys.executable
FIGS = ["fig_speedup", "fig_layers", "fig_rb", "fig_iterations", "fig_locality", "fig_sensitivity", "fig_plan_policies", "fig_train",
        "fig_validation", "fig_ablation", "fig_planner_scaling",
        "fig_serving_tail", "fig_serving_sample", "fig_ilp_gap"]
# figures drawn from the validation store (a real sweep; kept apart: fig_speedup does not handle real sweep points)
VALIDATION_FIGS = {"fig_validation"}

VALIDATION_SWEEP = """[sweep]
name = "fixture-validation"
engine = "real"
train_config = "experiments/train/skewed-4rank.toml"
ranks = [1]
policies = ["static", "prophet"]
seeds = [1]
validate_cluster = "experiments/clusters/cpu-local.toml"

[sweep.set]
"train.steps" = 3
"""

DRIFT_TRACE = """[trace]
generator = "drift"
seed = 1
num_experts = 4
num_devices = 4
top_k = 2
tokens_per_iteration = 256
num_iterations = 6
num_layers = 2
zipf_s = 1.2
drift_rate = 0.1
d_model = 64
d_ffn = 128
seq_len = 32
"""

LOCALITY_SWEEP = """[sweep]
name = "fixture-locality"
engine = "sim"
clusters = ["experiments/clusters/moetuner-h100-ep4.toml"]
traces = ["{trace}"]
policies = ["static", "prophet", "prophet-oracle"]
seeds = [1, 2]

[sweep.grid]
"trace.drift_rate" = [0.0, 0.3, 1.0]
"""

SENSITIVITY_SWEEP = """[sweep]
name = "fixture-sensitivity"
engine = "sim"
clusters = ["experiments/clusters/moetuner-h100-ep4.toml"]
traces = ["experiments/traces/tiny-e4-d4.toml"]
policies = ["fastermoe", "prophet"]
seeds = [1, 2]

[sweep.grid]
"plan.compute_scale" = [0.5, 1.0, 2.0]
"plan.bandwidth_scale" = [0.5, 1.0]
"""

ABLATION_SWEEP = """[sweep]
name = "fixture-ablation"
engine = "sim"
clusters = ["experiments/clusters/moetuner-h100-ep4.toml"]
traces = ["experiments/traces/tiny-e4-d4.toml"]
seeds = [1, 2]

[sweep.variants.none]
"balance.policy" = "static"
"sim.schedule" = "none"
[sweep.variants.planner]
"balance.policy" = "prophet"
"balance.cost_eq" = 6
"sim.schedule" = "none"
[sweep.variants.scheduler]
"balance.policy" = "fastermoe"
"sim.schedule" = "blockwise"
[sweep.variants."planner+scheduler"]
"balance.policy" = "prophet"
"balance.cost_eq" = 6
"sim.schedule" = "blockwise"
[sweep.variants.full]
"balance.policy" = "prophet"
"sim.schedule" = "blockwise"
"""

SCALING_SWEEP = """[sweep]
name = "fixture-planner-scaling"
engine = "model"
clusters = ["experiments/clusters/moetuner-h100-ep4.toml"]
traces = ["experiments/traces/tiny-e4-d4.toml"]
policies = ["prophet", "fastermoe", "eplb", "moetuner"]
seeds = [1, 2]

[sweep.grid]
"trace.num_experts" = [4, 8]
"trace.num_layers" = [1, 2]
"""


class Checker:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            print(f"PASS {what}")
        else:
            self.failed += 1
            print(f"FAIL {what}" + (f": {detail}" if detail else ""))
        return ok


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, **kw)


def build_fixture(prophet, tmp, c):
    db = os.path.join(tmp, "f.db")
    store = f"store.path={db}"
    trace = os.path.join(tmp, "drift-e4-d4.toml")
    with open(trace, "w") as f:
        f.write(DRIFT_TRACE)
    loc = os.path.join(tmp, "locality.toml")
    with open(loc, "w") as f:
        f.write(LOCALITY_SWEEP.format(trace=trace))
    sen = os.path.join(tmp, "sensitivity.toml")
    with open(sen, "w") as f:
        f.write(SENSITIVITY_SWEEP)
    abl, sca = os.path.join(tmp, "ablation.toml"), os.path.join(tmp, "scaling.toml")
    for path, text in ((abl, ABLATION_SWEEP), (sca, SCALING_SWEEP)):
        with open(path, "w") as f:
            f.write(text)
    cmds = [
        ("sweep smoke", [prophet, "sweep", "experiments/sweeps/smoke.toml", "--set", store]),
        ("sweep ablation", [prophet, "sweep", abl, "--no-report", "--set", store]),
        ("sweep planner scaling", [prophet, "sweep", sca, "--no-report", "--set", store]),
        ("sweep locality", [prophet, "sweep", loc, "--set", store]),
        ("sweep sensitivity", [prophet, "sweep", sen, "--set", store]),
        ("plan", [prophet, "plan", "--trace", "experiments/traces/tiny-e4-d4.toml", "--cluster",
                  "experiments/clusters/moetuner-h100-ep4.toml", "--policy", "all", "--set", "plan.repeats=1",
                  "--set", store]),
    ]
    # serving: static / moetuner in and out of sample on 4 ranks (replayed on the H100 node), and the ILP-gap bench
    # (without mpirun: one rank and no replay, since the simulated node has 4 devices)
    serve = [prophet, "profile", "--inference", "--config", "experiments/train/skewed-4rank.toml", "--set",
             "serve.iterations=3", "--set", "serve.warmup=0", "--set", "serve.profile_iterations=1", "--set", store]
    if shutil.which("mpirun"):
        serve = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "4"] + serve + [
            "--set", 'serve.sim_clusters=["experiments/clusters/moetuner-h100-ep4.toml"]']
    for pol in ("static", "moetuner"):
        for mix in ("[]", "[0.1, 0.1, 0.7, 0.1]"):
            cmds.append((f"profile --inference {pol} {mix}",
                         serve + ["--set", f"balance.policy={pol}", "--set", f"serve.eval_mixture={mix}"]))
    bench = os.path.join(os.path.dirname(prophet), "bench", "bench_ilp_gap")
    if c.check(os.access(bench, os.X_OK), "fixture: bench_ilp_gap is built beside prophet", bench):
        cmds.append(("bench_ilp_gap --quick", [bench, "--quick", "--seeds", "1", "--time-limit", "0.2", "--store", db]))
    for pol in ("static", "prophet"):
        cmds.append((f"train {pol}", [prophet, "train", "--config", "experiments/train/skewed-4rank.toml", "--set",
                                      "train.steps=3", "--set", f"balance.policy={pol}", "--set", store]))
    for what, cmd in cmds:
        r = run(cmd, timeout=240)
        c.check(r.returncode == 0, f"fixture: prophet {what}",
                f"exit {r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1]}")
    c.check(os.path.isfile(db), "fixture: store file exists", db)
    vdb = os.path.join(tmp, "validation.db")
    val = os.path.join(tmp, "validation.toml")
    with open(val, "w") as f:
        f.write(VALIDATION_SWEEP)
    r = run([prophet, "sweep", val, "--no-report", "--set", f"store.path={vdb}"], timeout=240)
    c.check(r.returncode == 0 and "sim " in r.stderr, "fixture: prophet sweep validation (engine real)",
            f"exit {r.returncode}: {r.stderr[-400:]}")
    return db, vdb


def run_script(name, db, out, extra=()):
    return run([PY, os.path.join(HERE, name + ".py"), "--db", db, "--out", out, *extra],
               env=dict(os.environ, MPLBACKEND="Agg"), timeout=120)


def nonempty(path):
    return os.path.isfile(path) and os.path.getsize(path) > 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prophet", required=True, help="path to the prophet binary")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir and print its path")
    args = ap.parse_args()
    prophet = os.path.abspath(args.prophet)
    c = Checker()
    tmp = tempfile.mkdtemp(prefix="prophet-report-")
    try:
        if not c.check(os.access(prophet, os.X_OK), "prophet binary is executable", prophet):
            raise SystemExit
        db, vdb = build_fixture(prophet, tmp, c)
        out = os.path.join(tmp, "figs")
        for name in FIGS:
            r = run_script(name, vdb if name in VALIDATION_FIGS else db, out)
            png, pdf = os.path.join(out, name + ".png"), os.path.join(out, name + ".pdf")
            c.check(r.returncode == 0, f"{name}: exit 0", r.stderr[-800:])
            c.check(nonempty(png) and nonempty(pdf), f"{name}: wrote non-empty PNG and PDF",
                    r.stdout.strip()[:300])
            c.check("\n|---" in r.stdout, f"{name}: printed a markdown table", r.stdout[:300])
            c.check("sd" in r.stdout.splitlines()[0] if r.stdout else False, f"{name}: caption names the sd",
                    r.stdout[:200])
        # deterministic output: rebuild one figure and compare bytes
        out2 = os.path.join(tmp, "figs2")
        for name in ("fig_speedup", "fig_train"):
            run_script(name, db, out2)
            for ext in ("png", "pdf"):
                a, b = os.path.join(out, f"{name}.{ext}"), os.path.join(out2, f"{name}.{ext}")
                same = nonempty(a) and nonempty(b) and open(a, "rb").read() == open(b, "rb").read()
                c.check(same, f"{name}.{ext}: identical bytes when rebuilt")
        # --experiment filter
        r = run_script("fig_speedup", db, os.path.join(tmp, "figs3"), ["--experiment", "smoke"])
        c.check(r.returncode == 0 and "fixture-locality" not in r.stdout and "smoke" in r.stdout,
                "fig_speedup --experiment smoke filters", r.stdout[:300])
        r = run_script("fig_train", db, os.path.join(tmp, "figs3"), ["--experiment", "no-such-experiment"])
        c.check(r.returncode == 0 and r.stdout.startswith("no data:"), "--experiment with no match: no-data message",
                r.stdout[:200] + r.stderr[-300:])
        # empty stores: missing file, empty file, a prophet store without runs of the right kind
        empty = os.path.join(tmp, "empty.db")
        open(empty, "w").close()
        only_train = os.path.join(tmp, "train-only.db")
        r = run([prophet, "train", "--config", "experiments/train/skewed-4rank.toml", "--set", "train.steps=1",
                 "--set", f"store.path={only_train}"], timeout=120)
        for label, path in (("missing", os.path.join(tmp, "nope.db")), ("empty file", empty)):
            for name in FIGS:
                eo = os.path.join(tmp, "empty-out")
                r = run_script(name, path, eo)
                c.check(r.returncode == 0 and r.stdout.startswith("no data:") and
                        not os.path.exists(os.path.join(eo, name + ".png")),
                        f"{name} on {label} store: no-data message, exit 0", r.stdout[:200] + r.stderr[-400:])
        if os.path.isfile(only_train):
            for name in [n for n in FIGS if n != "fig_train"]:
                eo = os.path.join(tmp, "train-only-out")
                r = run_script(name, only_train, eo)
                c.check(r.returncode == 0 and r.stdout.startswith("no data:"),
                        f"{name} on a store with train runs only: no-data message", r.stdout[:200] + r.stderr[-400:])
        c.check(os.path.getsize(empty) == 0, "read-only: the empty file was not written")
        # build_report.py
        rdir = os.path.join(tmp, "results")
        report = os.path.join(rdir, "REPORT.md")
        r = run([PY, os.path.join(HERE, "build_report.py"), "--db", db, "--out", os.path.join(rdir, "figures"),
                 "--report", report], timeout=600)
        c.check(r.returncode == 0 and os.path.isfile(report), "build_report.py: exit 0 and REPORT.md written",
                r.stderr[-800:])
        text = open(report).read() if os.path.isfile(report) else ""
        for name in FIGS:
            if name in VALIDATION_FIGS:
                continue
            c.check(f"](figures/{name}.png)" in text and nonempty(os.path.join(rdir, "figures", name + ".png")),
                    f"REPORT.md links {name}.png")
        # the validation store: its report links fig_validation (fig_speedup's exit on real points is not ours)
        vreport = os.path.join(rdir, "VALIDATION.md")
        r = run([PY, os.path.join(HERE, "build_report.py"), "--db", vdb, "--out", os.path.join(rdir, "figures-v"),
                 "--report", vreport], timeout=600)
        vtext = open(vreport).read() if os.path.isfile(vreport) else ""
        for name in sorted(VALIDATION_FIGS):
            c.check(f"](figures-v/{name}.png)" in vtext and nonempty(os.path.join(rdir, "figures-v", name + ".png")),
                    f"validation REPORT links {name}.png", r.stderr[-400:])
        r = run([PY, os.path.join(HERE, "build_report.py"), "--db", empty, "--out", os.path.join(tmp, "eo2"),
                 "--report", os.path.join(tmp, "EMPTY.md")], timeout=300)
        etext = open(os.path.join(tmp, "EMPTY.md")).read() if r.returncode == 0 else ""
        # every figure build_report.py lists (FIGS plus those the fixture cannot feed, e.g. fig_gantt) is skipped
        c.check(r.returncode == 0 and etext.count("_Skipped: no data:") == len(build_report.FIGURES),
                "build_report.py on an empty store: every figure skipped", r.stderr[-400:])
    except SystemExit:
        pass
    except Exception as e:  # noqa: BLE001
        c.check(False, "test harness", repr(e))
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{c.passed} passed, {c.failed} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
