#!/usr/bin/env python3
"""ci/gpu_train_check.py: the `prophet train` parts of ci/gpu-check.sh, read from `prophet train --json` output.

  parity GPU.jsonl CPU.jsonl OUT.json [--steps N] [--from S] [--rtol R] [--name NAME]
      every step's loss of the checked (GPU, or resumed) run within R (default 1e-4) relative of the reference
      (CPU) run's, for steps S..S+N-1: the checked run must print exactly those steps, the reference at least
      those; writes the per-step table and exits 1 on a miss.
      --min-replicas K: the checked run must also have placed at least K replicas over its steps (a placement-
      invariance check means little if no expert ever moved).
  bench RUN.jsonl MODEL.toml OUT.json --fp32-peak TFLOPS --bf16-peak TFLOPS [--precision fp32|bf16]
      MoE-GPT-S tokens/s (median over the steps after the first), achieved TFLOP/s from the model's FLOP count
      and MFU against the given dense peaks; writes OUT.json.
  ratio POLICY.jsonl STATIC.jsonl OUT.json [--name NAME]
      the median step time (steps after the first) of a policy's run over the static run's: < 1 means faster.
  calibration PROFILE.jsonl CLUSTER.toml OUT.json
      `prophet profile --calibrate --json`'s calibration: every compute and link figure positive and the cluster
      file written; OUT.json keeps the figures.
  table RESULTS_DIR
      the closing summary: one line per stage of stages.tsv with the key number of its JSON result.

FLOP count per training step (GEMMs and attention, 2*M*N*K per matrix product; backward = 2x forward, so a step
is 3x the forward), the same terms GpuModel::last_forward_flops counts, with N = B*T tokens, dropless routing
(N*K expert rows):
  per layer: 2*N*C*(3C + C + E)  [qkv, projection, gate]  +  4*B*NH*T*T*(C/NH)  [scores, weighted sum]
             + 4*N*K*C*F  [expert w1, w2]
  plus the tied output: 2*N*C*V.
"""
import argparse
import json
import re
import sys

try:
    import tomllib  # Python 3.11+
except ImportError:  # an older python on the GPU machine: the [model] table's integer keys are all we need
    tomllib = None


def steps_of(path):
    """The step lines of a --json run, {step: row}."""
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            row = json.loads(line)
            if "step" in row and "loss" in row:
                rows[int(row["step"])] = row
    return rows


def parity(args):
    gpu, cpu = steps_of(args.gpu), steps_of(args.cpu)
    expected = list(range(args.first, args.first + args.steps))
    problems, table = [], []
    # the checked run must print exactly these steps; the reference (a full run, for a resume check) holds them
    if sorted(gpu) != expected:
        problems.append(f"checked run has steps {sorted(gpu)}, expected {expected}")
    missing = [s for s in expected if s not in cpu]
    if missing:
        problems.append(f"reference run lacks steps {missing}")
    for s in expected:
        if s not in gpu or s not in cpu:
            continue
        g, c = gpu[s]["loss"], cpu[s]["loss"]
        rel = abs(g - c) / abs(c) if c != 0 else abs(g)
        table.append({"step": s, "gpu_loss": g, "cpu_loss": c, "rel_diff": rel, "ok": rel <= args.rtol})
        if not rel <= args.rtol:  # also catches NaN
            problems.append(f"step {s}: gpu {g!r} vs cpu {c!r}, relative difference {rel:.3g} > {args.rtol:g}")
    replicas = sum(int(gpu[s].get("replicas", 0)) for s in gpu)
    if replicas < args.min_replicas:
        problems.append(f"the checked run placed {replicas} replicas, fewer than {args.min_replicas}: no expert moved")
    out = {"check": args.name, "rtol": args.rtol, "steps": table, "max_rel_diff": max((r["rel_diff"] for r in table),
           default=None), "replicas": replicas, "status": "fail" if problems else "pass", "problems": problems}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    for p in problems:
        print(f"{args.name}: {p}", file=sys.stderr)
    print(f"{args.name}: {out['status']}, max relative loss difference {out['max_rel_diff']}")
    return 1 if problems else 0


def step_flops(m):
    V, T, C, NH, L, E, K, B = (m[k] for k in ("V", "T", "C", "NH", "L", "E", "K", "B"))
    F = m.get("F", 0) or 2 * C
    N = B * T
    layer = 2.0 * N * C * (3 * C + C + E) + 4.0 * B * NH * T * T * (C / NH) + 4.0 * N * K * C * F
    return 3.0 * (L * layer + 2.0 * N * C * V)


def model_table(path):
    """The [model] table of a preset: tomllib, or its integer keys by line when tomllib is missing."""
    if tomllib is not None:
        with open(path, "rb") as f:
            return tomllib.load(f)["model"]
    table, section = {}, None
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            head = re.fullmatch(r"\[([^\]]+)\]", line)
            if head:
                section = head.group(1).strip()
                continue
            kv = re.fullmatch(r"(\w+)\s*=\s*(-?\d+)", line)
            if section == "model" and kv:
                table[kv.group(1)] = int(kv.group(2))
    return table


def median_step_ms(path):
    """Median step_ms over the steps after the first (which pays for allocation); None without steps."""
    rows = steps_of(path)
    ordered = [rows[s] for s in sorted(rows)]
    timed = ordered[1:] if len(ordered) > 1 else ordered
    if not timed:
        return None, 0
    ms = sorted(r["step_ms"] for r in timed)
    return (ms[len(ms) // 2] if len(ms) % 2 else 0.5 * (ms[len(ms) // 2 - 1] + ms[len(ms) // 2])), len(timed)


def bench(args):
    model = model_table(args.model)
    median_ms, steps_timed = median_step_ms(args.run)
    if median_ms is None:
        print("bench: the run printed no steps", file=sys.stderr)
        return 1
    tokens = model["B"] * model["T"]
    flops = step_flops(model)
    tflops = flops / (median_ms * 1e-3) / 1e12
    out = {"model": args.model, "steps_timed": steps_timed, "median_step_ms": median_ms,
           "tokens_per_s": tokens / (median_ms * 1e-3), "flops_per_step": flops, "achieved_tflops": tflops,
           "fp32_peak_tflops": args.fp32_peak, "bf16_peak_tflops": args.bf16_peak,
           "mfu_vs_fp32_peak": tflops / args.fp32_peak, "mfu_vs_bf16_peak": tflops / args.bf16_peak,
           "precision": args.precision + (" (bf16 tensor-core GEMMs, fp32 storage and master weights)"
                                          if args.precision == "bf16" else " (no TF32)"),
           "peaks_source": "NVIDIA H200 datasheet: FP32 67 TFLOPS; BF16 Tensor Core 1,979 TFLOPS with sparsity, "
                           "989.5 dense (docs/gpu.md)"}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"bench: {out['tokens_per_s']:.0f} tokens/s, {tflops:.2f} TFLOP/s, MFU {100 * out['mfu_vs_fp32_peak']:.1f}% "
          f"of fp32 peak, {100 * out['mfu_vs_bf16_peak']:.1f}% of bf16 peak")
    return 0


def ratio(args):
    policy, n_policy = median_step_ms(args.policy)
    static, n_static = median_step_ms(args.static)
    if policy is None or static is None or static <= 0:
        print(f"{args.name}: a run printed no steps", file=sys.stderr)
        return 1
    out = {"check": args.name, "policy_median_step_ms": policy, "static_median_step_ms": static,
           "steps_timed": min(n_policy, n_static), "ratio": policy / static}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"{args.name}: policy/static median step time {out['ratio']:.3f} ({policy:.1f} ms / {static:.1f} ms)")
    return 0


def calibration(args):
    cal = None
    with open(args.run) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{") and "calibration" in line:
                cal = json.loads(line)["calibration"]
    problems = []
    if cal is None:
        problems.append("no calibration in the profile's --json output")
    else:
        for key in ("expert_gflop_s", "fnec_ms", "bnec_ms", "step_tail_ms", "p2p_gbit_s", "trans_gbit_s", "agg_gbit_s"):
            if not (isinstance(cal.get(key), (int, float)) and cal[key] > 0):
                problems.append(f"{key} = {cal.get(key)!r}, not a positive number")
    try:
        with open(args.cluster) as f:
            if "[cluster]" not in f.read():
                problems.append(f"{args.cluster} has no [cluster] table")
    except OSError:
        problems.append(f"{args.cluster} was not written")
    out = {"check": "calibration", "calibration": cal, "cluster_file": args.cluster,
           "status": "fail" if problems else "pass", "problems": problems}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    for p in problems:
        print(f"calibration: {p}", file=sys.stderr)
    return 1 if problems else 0


def key_number(results, name):
    """The number a stage's JSON result is read for, as text ('' when the stage has none or it is missing)."""
    files = {"parity": ["parity.json"], "checkpoints": ["parity-cpu-from-gpu.json", "parity-gpu-from-cpu.json"],
             "placement-invariance": ["invariance.json"], "nccl": ["nccl.json"], "blockwise": ["blockwise.json"], "calibration": ["calibration.json"], "train-bench": ["train-bench.json"],
             "train-bench-bf16": ["train-bench-bf16.json"], "ratio": ["ratio.json"]}.get(name, [])
    parts = []
    for f in files:
        try:
            with open(f"{results}/{f}") as h:
                j = json.load(h)
        except (OSError, ValueError):
            continue
        if "max_rel_diff" in j and j["max_rel_diff"] is not None:
            parts.append(f"{f}: max rel {j['max_rel_diff']:.2e}" + (f", {j['replicas']} replicas" if j.get("replicas")
                                                                     else ""))
        elif "tokens_per_s" in j:
            parts.append(f"{j['tokens_per_s']:.0f} tok/s, {j['achieved_tflops']:.1f} TFLOP/s, MFU "
                         f"{100 * j['mfu_vs_fp32_peak']:.1f}% fp32 / {100 * j['mfu_vs_bf16_peak']:.1f}% bf16")
        elif "ratio" in j:
            parts.append(f"prophet/static {j['ratio']:.3f}")
        elif j.get("calibration"):
            c = j["calibration"]
            parts.append(f"expert {c['expert_gflop_s']:.0f} GFLOP/s, FNEC {c['fnec_ms']:.3f} ms, "
                         f"BNEC {c['bnec_ms']:.3f} ms, tail {c['step_tail_ms']:.2f} ms")
    return "; ".join(parts)


def table(args):
    try:
        with open(f"{args.results}/stages.tsv") as f:
            stages = [line.rstrip("\n").split("\t", 2) for line in f if line.strip()]
    except OSError:
        print("table: no stages.tsv in " + args.results, file=sys.stderr)
        return 1
    width = max([len(s[0]) for s in stages] + [5])
    print(f"{'stage':<{width}}  status  result")
    for stage, status, message in [(s + ["", ""])[:3] for s in stages]:
        number = key_number(args.results, stage)
        print(f"{stage:<{width}}  {status:<6}  {number or message}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    a = sub.add_parser("parity")
    a.add_argument("gpu"), a.add_argument("cpu"), a.add_argument("out")
    a.add_argument("--steps", type=int, default=20)
    a.add_argument("--from", dest="first", type=int, default=0)
    a.add_argument("--rtol", type=float, default=1e-4)
    a.add_argument("--name", default="parity")
    a.add_argument("--min-replicas", type=int, default=0)
    b = sub.add_parser("bench")
    b.add_argument("run"), b.add_argument("model"), b.add_argument("out")
    b.add_argument("--fp32-peak", type=float, required=True)
    b.add_argument("--bf16-peak", type=float, required=True)
    b.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    r = sub.add_parser("ratio")
    r.add_argument("policy"), r.add_argument("static"), r.add_argument("out")
    r.add_argument("--name", default="ratio")
    c = sub.add_parser("calibration")
    c.add_argument("run"), c.add_argument("cluster"), c.add_argument("out")
    t = sub.add_parser("table")
    t.add_argument("results")
    args = p.parse_args()
    return {"parity": parity, "bench": bench, "ratio": ratio, "calibration": calibration,
            "table": table}[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
