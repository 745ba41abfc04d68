#!/usr/bin/env bash
# ci/bench-regress.sh: throughput regression gate for CI (docs/reliability.md, "Benchmark regressions").
#
# Measures, on the binaries of a build directory:
#   deterministic  `prophet plan --json` on fixed inputs: predicted time (Eq 6, Eq 8), max/mean load, balance std,
#                  all-to-all / Trans / Agg bytes, replicas of every policy whose plan is deterministic (the ILP
#                  policies run under a time limit and are left out). Compared EXACTLY with the baseline.
#   instructions   bench/planner_instructions under valgrind's callgrind: instructions per plan of prophet,
#                  fastermoe and eplb on bench_planner's inputs, only the planning loop counted. The same binary on
#                  the same input gives the same count every time; a count above the baseline by more than 2% is a
#                  regression (not exact: glibc picks its memcpy/memset for the CPU, so another CPU differs a little).
#   timings        bench_planner (Google Benchmark, CPU time per plan) and bench_model_step --model tiny (tokens/s
#                  of one training step by CPU time). Each is divided by a reference measured in the same repeat:
#                  the median CPU GFLOP/s of OpenBLAS at the model's GEMM shapes (bench_model_step's table), code
#                  this project does not change, so that a slower or busier machine moves both alike. Repeats are
#                  interleaved (reference and contenders in every repeat); the median over repeats is compared
#                  with the baseline against a noise threshold, and a row beyond it is measured again (as many
#                  repeats) before it counts: only a regression seen in the median of all repeats fails.
# Prints one table, records every row (every repeat) in the store's bench table under a run tagged with the git
# commit (report/fig_bench_history.py draws them across commits), and exits
#   0 no confirmed regression, 1 a confirmed regression or a deterministic mismatch, 2 usage or a benchmark that
#   did not run, 5 a store that is not prophet's.
#
# Usage: ci/bench-regress.sh [--build DIR] [--quick] [--repeats N] [--threshold F] [--baseline FILE] [--db FILE]
#                            [--update]
#   --build DIR       build directory with prophet and bench/ (default build)
#   --quick           the CI mode: 2 planner sizes, 2 repeats, threshold 2.0 (fails only beyond 3x)
#   --repeats N       repeats per measurement round (default 5; quick 2)
#   --threshold F     noise threshold: a time row regresses when current/baseline > 1+F, a throughput row when
#                     baseline/current > 1+F (default 0.25; quick 2.0)
#   --baseline FILE   default results/baselines/bench.json
#   --db FILE         store to record into (default results/prophet.db)
#   --update          write the measured figures as the new baseline instead of comparing (review the diff)
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=build QUICK=0 REPEATS="" THRESHOLD="" BASELINE=results/baselines/bench.json DB=results/prophet.db UPDATE=0
usage() { sed -n '/^# Usage:/,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --build) BUILD="${2:?--build needs a directory}"; shift 2 ;;
        --quick) QUICK=1; shift ;;
        --repeats) REPEATS="${2:?--repeats needs a number}"; shift 2 ;;
        --threshold) THRESHOLD="${2:?--threshold needs a number}"; shift 2 ;;
        --baseline) BASELINE="${2:?--baseline needs a file}"; shift 2 ;;
        --db) DB="${2:?--db needs a file}"; shift 2 ;;
        --update) UPDATE=1; shift ;;
        -h|--help) usage ;;
        *) echo "bench-regress: unknown argument '$1'" >&2; usage ;;
    esac
done
for bin in "$BUILD/prophet" "$BUILD/bench/bench_planner" "$BUILD/bench/bench_model_step" "$BUILD/bench/planner_instructions"; do
    if [ ! -x "$bin" ]; then
        echo "bench-regress: $bin not found; fix: cmake --build $BUILD -j2 (or --build DIR)" >&2
        exit 2
    fi
done
if ! command -v valgrind >/dev/null; then
    echo "bench-regress: valgrind not found (instruction counts); fix: apt-get install valgrind (ci/install-deps.sh does)" >&2
    exit 2
fi
if [ "$UPDATE" = 0 ] && [ ! -f "$BASELINE" ]; then
    echo "bench-regress: baseline $BASELINE not found; fix: write one with --update" >&2
    exit 2
fi
export BUILD QUICK REPEATS THRESHOLD BASELINE DB UPDATE

exec /usr/bin/python3 - <<'PY'
import hashlib, json, os, platform, re, secrets, socket, sqlite3, statistics, subprocess, sys, time

env = os.environ
BUILD, BASELINE, DB = env["BUILD"], env["BASELINE"], env["DB"]
QUICK, UPDATE = env["QUICK"] == "1", env["UPDATE"] == "1"
REPEATS = int(env["REPEATS"] or (2 if QUICK else 5))
THRESHOLD = float(env["THRESHOLD"] or (2.0 if QUICK else 0.25))
if REPEATS < 1 or THRESHOLD <= 0:
    sys.exit(f"bench-regress: --repeats {REPEATS} must be >= 1 and --threshold {THRESHOLD} > 0")

# deterministic inputs: (trace, cluster) of `prophet plan`; the policies whose plan does not depend on time
PLAN_INPUTS = [("experiments/traces/zipf-e16-k2.toml", "experiments/clusters/hpwnv-16.toml"),
               ("experiments/traces/shift-e16-k1.toml", "experiments/clusters/hpnv-16.toml")]
DET_POLICIES = ["static", "fastermoe", "prophet", "prophet-oracle", "eplb", "top2", "top3"]
DET_FIELDS = ["predicted_eq6_ms", "predicted_eq8_ms", "max_mean_load", "balance_std", "a2a_bytes", "trans_bytes",
              "agg_bytes", "replicas", "dropped_tokens"]
PLANNER_SIZES = ["E:32/D:16", "E:256/D:64"] if QUICK else ["E:32/D:16", "E:64/D:32", "E:256/D:64"]
PLANNER_FILTER = "BM_plan_(prophet|fastermoe|eplb)/(" + "|".join(PLANNER_SIZES) + ")$"
TRAIN_ROW = "train_step tiny tokens/s"
INSTR_POLICIES = ["prophet", "fastermoe", "eplb"]
INSTR_PLANS = 5
INSTR_THRESHOLD = 0.02


def fail(code, message):
    print(f"bench-regress: {message}", file=sys.stderr)
    sys.exit(code)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail(2, f"{' '.join(cmd)} exited {r.returncode}: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return r.stdout


def stem(path):
    return os.path.splitext(os.path.basename(path))[0]


def deterministic():
    rows = {}
    for trace, cluster in PLAN_INPUTS:
        out = run([f"{BUILD}/prophet", "plan", "--trace", trace, "--cluster", cluster, "--policy", "all", "--json",
                   "--set", f"store.path={DB}", "--set", "plan.repeats=1", "--set", "plan.record_layers=false",
                   "--set", "plan.save_trace=false"])
        for p in json.loads(out)["policies"]:
            if p["name"] in DET_POLICIES and not p.get("skipped"):
                for f in DET_FIELDS:
                    rows[f"plan {stem(trace)}@{stem(cluster)} {p['name']} {f}"] = p[f]
    return rows


def instructions():
    """name -> instructions per plan (callgrind, only prophet_counted_plans counted)"""
    rows = {}
    out_file = f"/tmp/bench-regress-callgrind-{os.getpid()}.out"
    for policy in INSTR_POLICIES:
        for size in PLANNER_SIZES:
            E, D = (int(part.split(":")[1]) for part in size.split("/"))
            run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}", "--collect-atstart=no",
                 "--toggle-collect=prophet_counted_plans", f"{BUILD}/bench/planner_instructions", policy, str(E),
                 str(D), str(INSTR_PLANS)])
            with open(out_file) as f:
                totals = [int(line.split()[1]) for line in f if line.startswith("totals:")]
            os.remove(out_file)
            if not totals or totals[0] <= 0:
                fail(2, f"callgrind counted no instructions in prophet_counted_plans ({policy} {size})")
            rows[f"instructions plan_{policy}/{size} per plan"] = totals[0] / INSTR_PLANS
    return rows


def model_step():
    """(reference GFLOP/s by CPU time: median over the GEMM shapes, training tokens/s by CPU time)"""
    out = run([f"{BUILD}/bench/bench_model_step", "--model", "tiny", "--steps", "8" if QUICK else "20",
               "--warmup", "2"])
    tokens = None
    gflops = []
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if cells[0] == "train step, cpu time":
            tokens = float(cells[5])
        elif len(cells) == 7 and re.fullmatch(r"[01]{2}", cells[4]):  # a GEMM shape row: ... | tt | wall | cpu
            gflops.append(float(cells[6]))
    if tokens is None or len(gflops) < 4:
        fail(2, "bench_model_step printed no 'train step, cpu time' row or GEMM table; its format changed?")
    return statistics.median(gflops), tokens


def planner():
    out = run([f"{BUILD}/bench/bench_planner", f"--benchmark_filter={PLANNER_FILTER}", "--benchmark_min_time=0.05",
               "--benchmark_format=json"])
    # NOTE: Google Benchmark prints NaN/Infinity unquoted; json accepts them
    rows = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("run_type") != "iteration" or b.get("error_occurred"):
            continue
        scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[b["time_unit"]]
        rows[b["name"]] = (b["real_time"] * scale, b["cpu_time"] * scale, b["iterations"])
    if not rows:
        fail(2, f"bench_planner ran no benchmark matching {PLANNER_FILTER}")
    return rows


def measure(repeats, samples):
    """samples: name -> list of dicts (one per repeat), appended in place."""
    for _ in range(repeats):
        ref, tokens = model_step()
        samples.setdefault(TRAIN_ROW, []).append(
            {"norm": tokens / ref, "ref": ref, "real_ns": None, "cpu_ns": 1e9 / tokens, "iterations": None})
        for name, (real_ns, cpu_ns, iterations) in planner().items():
            # CPU ns per plan x reference GFLOP/s = the reference's kFLOP in the same CPU time
            samples.setdefault(name, []).append(
                {"norm": cpu_ns * ref / 1e3, "ref": ref, "real_ns": real_ns, "cpu_ns": cpu_ns,
                 "iterations": iterations})


def better(name):
    return "higher" if name == TRAIN_ROW else "lower"


def unit(name):
    return "tokens per ref GFLOP" if name == TRAIN_ROW else "ref kFLOP per plan"


def verdict(name, current, base):
    """(ratio current/baseline, regressed)"""
    ratio = current / base if base else float("inf")
    slowdown = ratio if better(name) == "lower" else (1 / ratio if ratio else float("inf"))
    return ratio, slowdown > 1 + THRESHOLD


started_ms = int(time.time() * 1000)
det = deterministic()
instr = instructions()
samples = {}
measure(REPEATS, samples)
median = {name: statistics.median(s["norm"] for s in v) for name, v in samples.items()}
host = {"host": socket.gethostname(), "machine": platform.machine()}
try:
    with open("/proc/cpuinfo") as f:
        host["cpu"] = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
except OSError:
    pass

if UPDATE:
    baseline = {"comment": "written by ci/bench-regress.sh --update; deterministic rows compare exactly, timing rows "
                           "are medians normalised by the reference (see the script's header)",
                "machine": host, "quick": QUICK, "repeats": REPEATS,
                "deterministic": det,
                "instructions": instr,
                "timings": {n: {"value": median[n], "unit": unit(n), "better": better(n)} for n in sorted(median)}}
    os.makedirs(os.path.dirname(BASELINE) or ".", exist_ok=True)
    tmp = BASELINE + ".tmp"
    with open(tmp, "w") as f:
        json.dump(baseline, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, BASELINE)
    print(f"bench-regress: wrote {BASELINE}: {len(det)} deterministic rows, {len(median)} timing rows")
    base_det, base_instr, base_time = det, instr, {n: median[n] for n in median}
else:
    try:
        with open(BASELINE) as f:
            baseline = json.load(f)
        base_det = baseline["deterministic"]
        base_instr = baseline.get("instructions", {})
        base_time = {n: v["value"] for n, v in baseline["timings"].items()}
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(2, f"baseline {BASELINE} unreadable: {e}; fix: restore it or write one with --update")

# timing rows beyond the threshold are measured again; the verdict is on the median of all repeats
suspects = [n for n in median if n in base_time and verdict(n, median[n], base_time[n])[1]]
if suspects and not UPDATE:
    print(f"bench-regress: {len(suspects)} row(s) beyond the {THRESHOLD:.0%} threshold; measuring again "
          f"({REPEATS} more repeats)", file=sys.stderr)
    measure(REPEATS, samples)
    median = {name: statistics.median(s["norm"] for s in v) for name, v in samples.items()}

table, failures = [], []
for name in sorted(set(det) | set(base_det)):
    cur, base = det.get(name), base_det.get(name)
    ok = cur is not None and base is not None and cur == base
    status = "ok" if ok else ("MISSING" if cur is None else "NEW" if base is None else "MISMATCH")
    table.append(("exact", name, base, cur, "=" if ok else "!=", status))
    if status in ("MISMATCH", "MISSING"):
        failures.append(name)


def compare(kind, current, baseline_rows, judge, digits):
    """Rows measured against the baseline; judge(name, current, baseline) -> (ratio, regressed)."""
    for name in sorted(set(current) | set(baseline_rows)):
        cur, base = current.get(name), baseline_rows.get(name)
        if cur is None and QUICK:
            table.append((kind, name, base, cur, "", "not run (quick)"))
            continue
        if cur is None or base is None:
            table.append((kind, name, base, cur, "", "MISSING" if cur is None else "NEW"))
            if cur is None:
                failures.append(name)
            continue
        ratio, regressed = judge(name, cur, base)
        if regressed:
            failures.append(name)
        table.append((kind, name, base, cur, f"{ratio:.{digits}f}", "REGRESSION" if regressed else "ok"))


compare("instr", instr, base_instr, lambda name, cur, base: (cur / base, cur / base > 1 + INSTR_THRESHOLD), 4)
compare("time", median, base_time, verdict, 3)


def cell(v):
    return "-" if v is None else f"{v:.10g}" if isinstance(v, float) else str(v)


widths = [max(len(cell(r[i])) for r in table + [("kind", "row", "baseline", "current", "ratio", "verdict")])
          for i in range(6)]
for r in [("kind", "row", "baseline", "current", "ratio", "verdict")] + table:
    print("  ".join(cell(v).ljust(w) for v, w in zip(r, widths)).rstrip())
n = len(samples[TRAIN_ROW])
print(f"# {n} repeats; timings: median of CPU-time figures / the same repeat's reference (median OpenBLAS GFLOP/s, "
      f"now {statistics.median(s['ref'] for s in samples[TRAIN_ROW]):.1f}); threshold {THRESHOLD:.0%}; "
      f"instructions: callgrind, {INSTR_PLANS} plans, threshold {INSTR_THRESHOLD:.0%}")

# ---- record every row: one run, its bench rows, in one transaction
exit_code = 1 if failures and not UPDATE else 0
git = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True).stdout.strip()
sha = git("rev-parse", "HEAD")
dirty = 1 if git("status", "--porcelain", "--untracked-files=no") else 0
config = (f'build = "{BUILD}"\nbaseline = "{BASELINE}"\nquick = {str(QUICK).lower()}\nrepeats = {REPEATS}\n'
          f'threshold = {THRESHOLD}\nupdate = {str(UPDATE).lower()}\n')
try:
    con = sqlite3.connect(DB, timeout=10, isolation_level=None)
    app_id = con.execute("PRAGMA application_id").fetchone()[0]
    version = con.execute("PRAGMA user_version").fetchone()[0]
    if app_id != 0x50525054 or version not in (1, 2):  # 2 only adds nullable runs columns (docs/store.md)
        fail(5, f"{DB} is not a prophet store of schema 1 or 2 (application_id={app_id:#x}, user_version={version})")
    con.execute("PRAGMA foreign_keys=ON")
    con.execute("BEGIN IMMEDIATE")
    run_id = secrets.token_hex(8)
    now = int(time.time() * 1000)
    con.execute("INSERT INTO runs(run_id, experiment, command, status, started_ms, ended_ms, heartbeat_ms, config, "
                "config_hash, git_sha, git_dirty, seed, world_size, backend, hardware, exit_code, error) "
                "VALUES(?, 'bench-regress', 'bench-regress', ?, ?, ?, ?, ?, ?, ?, ?, 0, 1, 'cpu', ?, ?, ?)",
                (run_id, "failed" if exit_code else "finished", started_ms, now, now, config,
                 hashlib.sha256(config.encode()).hexdigest(), sha or None, dirty, json.dumps(host), exit_code,
                 ("regressed: " + ", ".join(failures)) if exit_code else None))
    for name, value in det.items():
        con.execute("INSERT INTO bench(run_id, name, rep, counters) VALUES(?, ?, 0, ?)",
                    (run_id, "exact: " + name, json.dumps({"value": value, "baseline": base_det.get(name)})))
    for name, value in instr.items():
        con.execute("INSERT INTO bench(run_id, name, rep, counters) VALUES(?, ?, 0, ?)",
                    (run_id, name, json.dumps({"normalized": value, "unit": "instructions per plan", "better": "lower",
                                               "baseline": base_instr.get(name)})))
    for name, reps in samples.items():
        for rep, s in enumerate(reps):
            con.execute("INSERT INTO bench(run_id, name, rep, real_ns, cpu_ns, iterations, counters) "
                        "VALUES(?, ?, ?, ?, ?, ?, ?)",
                        (run_id, name, rep, s["real_ns"], s["cpu_ns"], s["iterations"],
                         json.dumps({"normalized": s["norm"], "unit": unit(name), "better": better(name),
                                     "ref_gflops": s["ref"], "baseline": base_time.get(name)})))
    con.execute("COMMIT")
    print(f"bench-regress: recorded run {run_id} ({sha[:12] or 'no git'}{' dirty' if dirty else ''}) in {DB}",
          file=sys.stderr)
except sqlite3.Error as e:
    fail(5, f"{DB}: {e}")
if exit_code:
    print(f"bench-regress: confirmed regression in {len(failures)} row(s): {', '.join(failures)}", file=sys.stderr)
sys.exit(exit_code)
PY
