"""The measuring and comparing half of ci/bench-regress.sh (which parses the arguments into the environment and
documents them). Rows, reference, statistics and exit codes: the script's header and docs/reliability.md."""
import datetime, hashlib, json, os, platform, re, secrets, socket, sqlite3, statistics, subprocess, sys, tempfile, time

env = os.environ
BUILD, BASELINE, DB = env["BUILD"], env["BASELINE"], env["DB"]
QUICK, UPDATE = env["QUICK"] == "1", env["UPDATE"] == "1"
REPEATS = int(env["REPEATS"] or (2 if QUICK else 5))
THRESHOLD = float(env["THRESHOLD"] or (2.0 if QUICK else 0.10))
INJECT_PCT = float(env.get("INJECT_PCT") or 0)  # TEST ONLY: debug.slow_step_pct of both training rows
HISTORY = env.get("HISTORY") or ""  # append one line here after comparing (--append-history)
MPIRUN = env.get("MPIRUN") or "mpirun"
AGAINST = env.get("AGAINST") or ""  # a second build measured in the same repeats: the timing rows' baseline
if REPEATS < 1 or THRESHOLD <= 0 or INJECT_PCT < 0:
    sys.exit(f"bench-regress: --repeats {REPEATS} must be >= 1, --threshold {THRESHOLD} > 0 and "
             f"--inject-slowdown {INJECT_PCT} >= 0")
if AGAINST and REPEATS % 2:
    REPEATS += 1  # the first of the pair alternates: an even count puts each build first equally often
if AGAINST and (UPDATE or HISTORY):
    sys.exit("bench-regress: --against compares two builds in one run; it writes no baseline or history line "
             "(drop --update / --append-history)")
if INJECT_PCT and (UPDATE or HISTORY):
    sys.exit("bench-regress: --inject-slowdown (test only) with --update or --append-history would record a slowed "
             "build as the baseline or history; drop one of them")


def git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True).stdout.strip()


if HISTORY and (not git("rev-parse", "HEAD") or git("status", "--porcelain", "--untracked-files=no")):
    sys.exit("bench-regress: --append-history records landed changes, but the tree has uncommitted changes to "
             "tracked files (or is no git checkout); fix: commit first")
if HISTORY and os.path.exists(HISTORY):
    with open(HISTORY) as f:
        if any(json.loads(line).get("commit") == git("rev-parse", "HEAD") for line in f if line.strip()):
            sys.exit(f"bench-regress: {HISTORY} already has a line for {git('rev-parse', 'HEAD')[:12]}; one line per "
                     "landed change")

# deterministic inputs: (trace, cluster) of `prophet plan`; the policies whose plan does not depend on time
PLAN_INPUTS = [("experiments/traces/zipf-e16-k2.toml", "experiments/clusters/hpwnv-16.toml"),
               ("experiments/traces/shift-e16-k1.toml", "experiments/clusters/hpnv-16.toml")]
DET_POLICIES = ["static", "deepspeed", "fastermoe", "prophet", "prophet-oracle", "eplb", "top2", "top3"]
# every system model `prophet plan` reports a policy under (docs/cost-model.md), and the fields of each
DET_MODELS = ["eq6", "eq8", "fastermoe_system", "sim"]
DET_FIELDS = ["predicted_ms", "max_mean_load", "balance_std", "a2a_bytes", "trans_bytes", "agg_bytes", "replicas"]
PLANNER_SIZES = ["E:32/D:16", "E:256/D:64"] if QUICK else ["E:32/D:16", "E:64/D:32", "E:256/D:64"]
PLANNER_FILTER = "BM_plan_(prophet|fastermoe|eplb)/(" + "|".join(PLANNER_SIZES) + ")$"
TRAIN_ROW = "train_step tiny tokens/s"
# the 2-rank step: `prophet train` under mpirun, each rank pinned to a core, one BLAS thread; wall time (the ranks
# wait for each other, so CPU time would miss the communication)
TWO_RANK_ROW = "train_step 2-rank pinned tokens/s"
TWO_RANK_CONFIG = "experiments/train/skewed-4rank.toml"  # tiny model, E = 8 and B = 16 divide by 2 ranks
TWO_RANK_STEPS, TWO_RANK_WARMUP = (8, 2) if QUICK else (30, 5)
INSTR_POLICIES = ["prophet", "fastermoe", "eplb"]
INSTR_PLANS = 5
INSTR_THRESHOLD = 0.02


def fail(code, message):
    print(f"bench-regress: {message}", file=sys.stderr)
    sys.exit(code)


# every measured child runs with one OpenBLAS thread from its start: openblas_set_num_threads(1) after start-up
# leaves the pool's other thread spinning, which doubled the reference's CPU time (70 instead of 140 GFLOP/s here)
CHILD_ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1")


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, env=CHILD_ENV)
    if r.returncode != 0:
        fail(2, f"{' '.join(cmd)} exited {r.returncode}: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return r.stdout


def stem(path):
    return os.path.splitext(os.path.basename(path))[0]


def deterministic():
    rows = {}
    for trace, cluster in PLAN_INPUTS:
        # only the recorded policies: `all` would also solve the ILPs (moetuner, exhaustive) for rows never kept
        out = run([f"{BUILD}/prophet", "plan", "--trace", trace, "--cluster", cluster, "--policy",
                   ",".join(DET_POLICIES), "--json",
                   "--set", f"store.path={DB}", "--set", "plan.repeats=1", "--set", "plan.record_layers=false",
                   "--set", "plan.save_trace=false"])
        for p in json.loads(out)["policies"]:
            if p["name"] in DET_POLICIES and not p.get("skipped"):
                prefix = f"plan {stem(trace)}@{stem(cluster)} {p['name']}"
                rows[f"{prefix} dropped_tokens"] = p["dropped_tokens"]
                for model in DET_MODELS:
                    for f in DET_FIELDS:
                        rows[f"{prefix} {model}.{f}"] = p[model][f]
    return rows


def instructions():
    """name -> instructions per plan (callgrind, only prophet_counted_plans counted)"""
    rows = {}
    # callgrind's output in a directory of our own (created exclusively), not a guessable name in /tmp
    with tempfile.TemporaryDirectory(prefix="bench-regress-callgrind-") as tmp:
        out_file = os.path.join(tmp, "callgrind.out")
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


REFERENCE_LINE = re.compile(r"^reference cpu_gflops=([0-9.]+) wall_gflops=([0-9.]+)$", re.M)


def reference():
    """CPU-time GFLOP/s of cblas_sgemm called directly (bench/bench_reference: no code of this project)"""
    m = REFERENCE_LINE.search(run([f"{BUILD}/bench/bench_reference"]))
    if not m or float(m.group(1)) <= 0:
        fail(2, "bench_reference printed no 'reference cpu_gflops=.. wall_gflops=..' line; its format changed?")
    return float(m.group(1))


def pinned_reference():
    """wall-time GFLOP/s of bench_reference on the 2-rank row's cores: two copies started as the 2-rank step is
    (mpirun --bind-to core -np 2; they do not use MPI), the mean of the two; so the reference sees the same cores
    shared with the same other jobs as the row it divides"""
    out = run([MPIRUN, "--allow-run-as-root", "--bind-to", "core", "-np", "2", "-x", "OPENBLAS_NUM_THREADS=1",
               f"{BUILD}/bench/bench_reference"])
    walls = [float(m.group(2)) for m in REFERENCE_LINE.finditer(out)]
    if len(walls) != 2 or min(walls) <= 0:
        fail(2, f"two pinned bench_reference printed {len(walls)} 'reference' lines, expected 2")
    return statistics.mean(walls)


def model_step(build, inject):
    """training tokens/s of one rank by CPU time (bench_model_step --model tiny)"""
    cmd = [f"{build}/bench/bench_model_step", "--model", "tiny", "--steps", "8" if QUICK else "20", "--warmup", "2"]
    if inject:
        cmd += ["--slow-step-pct", str(inject)]
    for line in run(cmd).splitlines():
        cells = [c.strip() for c in line.split("|")]
        if cells[0] == "train step, cpu time":
            return float(cells[5])
    fail(2, "bench_model_step printed no 'train step, cpu time' row; its format changed?")


def two_rank_step(build, inject):
    """tokens/s (wall) of a 2-rank pinned `prophet train`: the 75th percentile over the steps after the warm-up,
    i.e. the step time a quarter of the steps beat. Not the median: other processes can only add wall time to a
    step, so the less-disturbed quarter tracks the code and not the machine's load (a uniform slowdown of every
    step moves it in full)."""
    with tempfile.TemporaryDirectory(prefix="bench-regress-") as tmp:
        cmd = [MPIRUN, "--allow-run-as-root", "--bind-to", "core", "-np", "2", "-x", "OPENBLAS_NUM_THREADS=1",
               f"{build}/prophet", "train", "--config", TWO_RANK_CONFIG, "--json",
               "--set", f"train.steps={TWO_RANK_STEPS}", "--set", "train.threads=1", "--set", "balance.policy=static",
               "--set", "train.record_loads=false", "--set", f"store.path={tmp}/train.db"]
        if inject:
            cmd += ["--set", f"debug.slow_step_pct={inject}"]
        tokens = []
        for line in run(cmd).splitlines():
            if line.startswith("{"):
                j = json.loads(line)
                if "step" in j and "tokens_per_s" in j and j["step"] >= TWO_RANK_WARMUP:
                    tokens.append(float(j["tokens_per_s"]))
    if len(tokens) != TWO_RANK_STEPS - TWO_RANK_WARMUP:
        fail(2, f"2-rank train printed {len(tokens)} step lines after the warm-up, expected "
                f"{TWO_RANK_STEPS - TWO_RANK_WARMUP}; its --json format changed?")
    return sorted(tokens, reverse=True)[len(tokens) // 4]


def planner(build):
    out = run([f"{build}/bench/bench_planner", f"--benchmark_filter={PLANNER_FILTER}", "--benchmark_min_time=0.05",
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


def measure_rows(build, inject):
    """one repeat of every timing row of `build`, each divided by the reference measured around it: CPU time
    around the one-rank rows, wall time on the same two pinned cores around the 2-rank step. -> name -> sample"""
    before = reference()
    tokens = model_step(build, inject)
    planned = planner(build)
    after = reference()
    wall_before = pinned_reference()
    two_rank = two_rank_step(build, inject)
    wall_after = pinned_reference()
    ref_cpu, ref_wall = (before + after) / 2, (wall_before + wall_after) / 2
    rows = {TRAIN_ROW: {"norm": tokens / ref_cpu, "ref": ref_cpu, "real_ns": None, "cpu_ns": 1e9 / tokens,
                        "iterations": None},
            TWO_RANK_ROW: {"norm": two_rank / ref_wall, "ref": ref_wall, "real_ns": 1e9 / two_rank, "cpu_ns": None,
                           "iterations": None}}
    for name, (real_ns, cpu_ns, iterations) in planned.items():
        # CPU ns per plan x reference GFLOP/s = the reference's kFLOP in the same CPU time
        rows[name] = {"norm": cpu_ns * ref_cpu / 1e3, "ref": ref_cpu, "real_ns": real_ns, "cpu_ns": cpu_ns,
                      "iterations": iterations}
    return rows


def measure(repeats, samples, against_samples):
    """samples (and against_samples with --against): name -> list of dicts (one per repeat), appended in place.
    Each repeat measures the reference around its rows (interleaved: a machine that slows down mid-run moves the
    reference with the rows). With --against, both builds in every repeat, back to back, the first alternating
    (ABBA...), so drift in the machine's speed falls on both alike."""
    for _ in range(repeats):
        order = [(BUILD, INJECT_PCT, samples)]
        if AGAINST:
            pair = (AGAINST, 0, against_samples)
            order = [pair] + order if len(against_samples.get(TRAIN_ROW, [])) % 2 == 0 else order + [pair]
        for build, inject, into in order:
            for name, sample in measure_rows(build, inject).items():
                into.setdefault(name, []).append(sample)


def better(name):
    return "higher" if name in (TRAIN_ROW, TWO_RANK_ROW) else "lower"


def unit(name):
    return {TRAIN_ROW: "tokens per ref GFLOP (cpu)", TWO_RANK_ROW: "tokens per ref GFLOP (wall)"}.get(
        name, "ref kFLOP per plan")


def verdict(name, current, base):
    """(ratio current/baseline, regressed)"""
    ratio = current / base if base else float("inf")
    slowdown = ratio if better(name) == "lower" else (1 / ratio if ratio else float("inf"))
    return ratio, slowdown > 1 + THRESHOLD


started_ms = int(time.time() * 1000)
det = deterministic()
instr = instructions()
samples, against_samples = {}, {}


def medians():
    """name -> the candidate's median normalised figure. With --against, the against build's median times the
    median over repeats of the paired ratio candidate / against (so current / baseline is that paired ratio)."""
    if not AGAINST:
        return {name: statistics.median(s["norm"] for s in v) for name, v in samples.items()}
    return {name: statistics.median(a["norm"] for a in against_samples[name]) *
            statistics.median(c["norm"] / a["norm"] for c, a in zip(v, against_samples[name]))
            for name, v in samples.items() if name in against_samples}


measure(REPEATS, samples, against_samples)
median = medians()
host = {"host": socket.gethostname(), "machine": platform.machine(), "cpus": os.cpu_count(),
        "loadavg_1m": round(os.getloadavg()[0], 2)}  # a loaded machine's timings are not evidence
try:
    with open("/proc/cpuinfo") as f:
        host["cpu"] = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
except OSError:
    pass

if UPDATE:
    baseline = {"comment": "written by ci/bench-regress.sh --update; deterministic rows compare exactly, timing rows "
                           "are medians normalised by the reference (cblas_sgemm called directly, bench_reference; "
                           "see the script's header); instruction rows (callgrind) regress above +2%",
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
    if AGAINST:  # the timing rows' baseline: the other build, measured in the same repeats
        base_time = {name: statistics.median(a["norm"] for a in v) for name, v in against_samples.items()}

# timing rows beyond the threshold are measured again; the verdict is on the median of all repeats
# quick mode against the committed baseline (CI: ctest -j2 runs another test beside it) reports the 2-rank row as
# "info", not judged: its two pinned ranks need both cores, so its wall time there measures whatever else runs; the
# full gate on a quiet machine, and any --against run (paired in the same repeats), judge it
UNJUDGED = {TWO_RANK_ROW} if QUICK and not AGAINST else set()
suspects = [n for n in median if n in base_time and n not in UNJUDGED and verdict(n, median[n], base_time[n])[1]]
if suspects and not UPDATE:
    print(f"bench-regress: {len(suspects)} row(s) beyond the {THRESHOLD:.0%} threshold; measuring again "
          f"({REPEATS} more repeats)", file=sys.stderr)
    measure(REPEATS, samples, against_samples)
    median = medians()
    if AGAINST:
        base_time = {name: statistics.median(a["norm"] for a in v) for name, v in against_samples.items()}

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
        if name in UNJUDGED:
            table.append((kind, name, base, cur, f"{ratio:.{digits}f}", "info"))
            continue
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
print(f"# {n} repeats; timings: median of each repeat's figure / the same repeat's reference (cblas_sgemm GFLOP/s, "
      f"now cpu {statistics.median(s['ref'] for s in samples[TRAIN_ROW]):.1f}, wall "
      f"{statistics.median(s['ref'] for s in samples[TWO_RANK_ROW]):.1f}); threshold {THRESHOLD:.0%}; "
      f"instructions: callgrind, {INSTR_PLANS} plans, threshold {INSTR_THRESHOLD:.0%}"
      + (f"; INJECTED slowdown {INJECT_PCT:g}% (test only)" if INJECT_PCT else "")
      + (f"; timing baseline: {AGAINST} in the same repeats, ratio = median paired ratio" if AGAINST else ""))

# ---- record every row: one run, its bench rows, in one transaction
exit_code = 1 if failures and not UPDATE else 0
sha = git("rev-parse", "HEAD")
dirty = 1 if git("status", "--porcelain", "--untracked-files=no") else 0
config = (f'build = "{BUILD}"\nbaseline = "{BASELINE}"\nquick = {str(QUICK).lower()}\nrepeats = {REPEATS}\n'
          f'threshold = {THRESHOLD}\nupdate = {str(UPDATE).lower()}\ninject_slowdown_pct = {INJECT_PCT}\n'
          f'against = "{AGAINST}"\n')
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
        paired = against_samples.get(name, [])
        for rep, s in enumerate(reps):
            counters = {"normalized": s["norm"], "unit": unit(name), "better": better(name), "ref_gflops": s["ref"],
                        "baseline": base_time.get(name)}
            if rep < len(paired):  # --against: the other build's figure of the same repeat, for its paired ratio
                counters["against_normalized"] = paired[rep]["norm"]
            con.execute("INSERT INTO bench(run_id, name, rep, real_ns, cpu_ns, iterations, counters) "
                        "VALUES(?, ?, ?, ?, ?, ?, ?)",
                        (run_id, name, rep, s["real_ns"], s["cpu_ns"], s["iterations"], json.dumps(counters)))
    con.execute("COMMIT")
    print(f"bench-regress: recorded run {run_id} ({sha[:12] or 'no git'}{' dirty' if dirty else ''}) in {DB}",
          file=sys.stderr)
except sqlite3.Error as e:
    fail(5, f"{DB}: {e}")

# ---- the history kept in git: one line per landed change (results/baselines/history.jsonl)
if HISTORY:
    line = {"commit": sha, "subject": git("log", "-1", "--format=%s"),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": host, "quick": QUICK, "repeats": len(samples[TRAIN_ROW]), "threshold": THRESHOLD,
            "verdict": "regression" if exit_code else ("baseline" if UPDATE else "ok"),
            "timings": {n: {"value": median[n], "unit": unit(n), "better": better(n),
                            "baseline": base_time.get(n)} for n in sorted(median)},
            "instructions": instr}
    with open(HISTORY, "a") as f:
        f.write(json.dumps(line, sort_keys=True) + "\n")
    print(f"bench-regress: appended {sha[:12]} to {HISTORY} (commit it with the change)", file=sys.stderr)
if exit_code:
    print(f"bench-regress: confirmed regression in {len(failures)} row(s): {', '.join(failures)}", file=sys.stderr)
sys.exit(exit_code)
