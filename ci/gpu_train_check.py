#!/usr/bin/env python3
"""ci/gpu_train_check.py: the `prophet train` parts of ci/gpu-check.sh, read from `prophet train --json` output.

  parity GPU.jsonl CPU.jsonl OUT.json [--steps N] [--from S] [--rtol R] [--name NAME]
      every step's loss of the checked (GPU, or resumed) run within R (default 1e-4) relative of the reference
      (CPU) run's, for steps S..S+N-1: the checked run must print exactly those steps, the reference at least
      those; writes the per-step table and exits 1 on a miss.
  bench RUN.jsonl MODEL.toml OUT.json --fp32-peak TFLOPS --bf16-peak TFLOPS
      MoE-GPT-S tokens/s (median over the steps after the first), achieved TFLOP/s from the model's FLOP count
      and MFU against the given dense peaks; writes OUT.json.

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
    out = {"check": args.name, "rtol": args.rtol, "steps": table, "max_rel_diff": max((r["rel_diff"] for r in table),
           default=None), "status": "fail" if problems else "pass", "problems": problems}
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


def bench(args):
    rows = steps_of(args.run)
    model = model_table(args.model)
    ordered = [rows[s] for s in sorted(rows)]
    timed = ordered[1:] if len(ordered) > 1 else ordered  # the first step pays for allocation
    if not timed:
        print("bench: the run printed no steps", file=sys.stderr)
        return 1
    ms = sorted(r["step_ms"] for r in timed)
    median_ms = ms[len(ms) // 2] if len(ms) % 2 else 0.5 * (ms[len(ms) // 2 - 1] + ms[len(ms) // 2])
    tokens = model["B"] * model["T"]
    flops = step_flops(model)
    tflops = flops / (median_ms * 1e-3) / 1e12
    out = {"model": args.model, "steps_timed": len(timed), "median_step_ms": median_ms,
           "tokens_per_s": tokens / (median_ms * 1e-3), "flops_per_step": flops, "achieved_tflops": tflops,
           "fp32_peak_tflops": args.fp32_peak, "bf16_peak_tflops": args.bf16_peak,
           "mfu_vs_fp32_peak": tflops / args.fp32_peak, "mfu_vs_bf16_peak": tflops / args.bf16_peak,
           "precision": "fp32 (no TF32, no bf16: the only path built)",
           "peaks_source": "NVIDIA H200 datasheet: FP32 67 TFLOPS; BF16 Tensor Core 1,979 TFLOPS with sparsity, "
                           "989.5 dense (docs/gpu.md)"}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"bench: {out['tokens_per_s']:.0f} tokens/s, {tflops:.2f} TFLOP/s, MFU {100 * out['mfu_vs_fp32_peak']:.1f}% "
          f"of fp32 peak, {100 * out['mfu_vs_bf16_peak']:.1f}% of bf16 peak")
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
    b = sub.add_parser("bench")
    b.add_argument("run"), b.add_argument("model"), b.add_argument("out")
    b.add_argument("--fp32-peak", type=float, required=True)
    b.add_argument("--bf16-peak", type=float, required=True)
    args = p.parse_args()
    return parity(args) if args.what == "parity" else bench(args)


if __name__ == "__main__":
    sys.exit(main())
