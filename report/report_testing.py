"""Shared by the report tests (test_reports.py, test_reports_hostile.py, test_paper_sections.py): the Checker
(PASS/FAIL per check), running a command from the repository root, and the shared fixture stores (build_fixture).

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
"""
import os
import shutil
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

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
    """collects the checks of one test: each prints PASS/FAIL; assert_passed() fails the test naming every miss"""

    def __init__(self):
        self.passed = 0
        self.failures = []

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            print(f"PASS {what}")
        else:
            self.failures.append(what + (f": {detail}" if detail else ""))
            print(f"FAIL {self.failures[-1]}")
        return ok

    def assert_passed(self):
        assert not self.failures, (f"{len(self.failures)} of {self.passed + len(self.failures)} checks failed:\n" +
                                   "\n".join(self.failures))


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, **kw)


def release_tmp(request, tmp):
    """A fixture's temp dir at its end: kept and its path printed under --keep, else removed."""
    if request.config.getoption("--keep"):
        print(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


def nonempty(path):
    return os.path.isfile(path) and os.path.getsize(path) > 0


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
        ("sweep ablation", [prophet, "sweep", abl, "--no-report", "--set", store]),
        ("sweep planner scaling", [prophet, "sweep", sca, "--no-report", "--set", store]),
        ("sweep locality", [prophet, "sweep", loc, "--no-report", "--set", store]),
        ("sweep sensitivity", [prophet, "sweep", sen, "--no-report", "--set", store]),
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
    # the smoke sweep last: the report it writes at its end (build_report.py on the whole store, as a process) is
    # then the report of every run above, and the `report` fixture's (one full report instead of two)
    cmds.append(("sweep smoke", [prophet, "sweep", "experiments/sweeps/smoke.toml", "--set", store]))
    for what, cmd in cmds:
        r = run(cmd, timeout=600 if what == "sweep smoke" else 240)  # smoke: the sweep and the full report
        c.check(r.returncode == 0, f"fixture: prophet {what}",
                f"exit {r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1]}")
    smoke = r
    c.check(os.path.isfile(db), "fixture: store file exists", db)
    c.check(nonempty(os.path.join(tmp, "REPORT.md")),
            "prophet sweep (smoke) ended by writing REPORT.md beside the store")
    vdb = os.path.join(tmp, "validation.db")
    val = os.path.join(tmp, "validation.toml")
    with open(val, "w") as f:
        f.write(VALIDATION_SWEEP)
    r = run([prophet, "sweep", val, "--no-report", "--set", f"store.path={vdb}"], timeout=240)
    c.check(r.returncode == 0 and "sim " in r.stderr, "fixture: prophet sweep validation (engine real)",
            f"exit {r.returncode}: {r.stderr[-400:]}")
    return db, vdb, smoke
