#!/usr/bin/python3
"""Converts SGLang expert-distribution recorder dumps (torch.save files) to the JSON that
`prophet trace import --format sglang` reads (and SGLang's --init-expert-location accepts):
{"logical_count": [steps][layers][logical experts]}.

SGLang writes the dumps when started with --expert-distribution-recorder-mode and asked over HTTP
(/start_expert_distribution_record, /stop_expert_distribution_record, /dump_expert_distribution_record) into
SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR:
  stat, stat_approx   one file (rank 0) expert_distribution_recorder_<time>.pt: {"logical_count": [steps, layers,
                      logical experts] summed over ranks, ...}; the steps are the slots of a ring buffer
                      (--expert-distribution-recorder-buffer-size), in slot order, unfilled slots all zero
  per_pass, per_token one file per rank expert_distribution_recorder_<time>_<rank>.pt: {"records": [{
                      "forward_pass_id", "rank", "global_physical_count": [layers, physical experts], ...}],
                      "last_physical_to_logical_map": [layers, physical experts]}
For per_pass / per_token the counts of every rank's record of a forward pass are mapped to logical experts by the
file's last_physical_to_logical_map (SGLang names it "last": a rebalance during recording changes the map, and the
passes before it are then mapped with the final one) and summed over ranks; steps are forward passes in id order.

Needs Debian's python3-torch (loaded with weights_only=True: tensors and plain containers, no code from the file).
Usage: sglang_dump_to_json.py DUMP.pt [DUMP.pt ...] -o OUT.json [--num-experts E]
Exit codes: 0 ok, 2 usage, 3 a dump that is not a recorder dump (the file and the field named), 77 no torch.
"""
import argparse
import json
import os
import sys


def fail(path, problem):
    print(f"sglang_dump_to_json: input error: {path}: {problem}", file=sys.stderr)
    sys.exit(3)


def load(torch, path):
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a broken or hostile file: report it, never execute it
        fail(path, f"not a torch.save file this script can read safely ({type(e).__name__}: {e})")


def as_int_lists(torch, value, path, field, dims):
    if not isinstance(value, torch.Tensor) or value.dim() != dims:
        fail(path, f"field \"{field}\" must be a {dims}-D tensor")
    if value.is_floating_point() or (value < 0).any():
        fail(path, f"field \"{field}\" must hold non-negative integer counts")
    return value.to(torch.int64)


def stat_counts(torch, dump, path):
    return as_int_lists(torch, dump["logical_count"], path, "logical_count", 3).tolist()


def per_pass_counts(torch, dumps, num_experts):
    """{forward_pass_id: [layers][experts]} summed over ranks, mapped to logical experts."""
    passes = {}
    for path, dump in dumps:
        if "records" not in dump or "last_physical_to_logical_map" not in dump:
            fail(path, "neither a stat dump (\"logical_count\") nor a per_pass dump (\"records\" and "
                       "\"last_physical_to_logical_map\")")
        mapping = as_int_lists(torch, dump["last_physical_to_logical_map"], path, "last_physical_to_logical_map", 2)
        layers, physical = mapping.shape
        experts = num_experts or int(mapping.max()) + 1
        for i, record in enumerate(dump["records"]):
            field = f"records[{i}].global_physical_count"
            count = as_int_lists(torch, record.get("global_physical_count"), path, field, 2)
            if tuple(count.shape) != (layers, physical):
                fail(path, f"field \"{field}\" has shape {tuple(count.shape)}, the map {tuple(mapping.shape)}")
            logical = torch.zeros((layers, experts), dtype=torch.int64)
            logical.scatter_add_(1, mapping, count)
            key = int(record["forward_pass_id"])
            passes[key] = passes[key] + logical if key in passes else logical
    return [passes[k].tolist() for k in sorted(passes)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dumps", nargs="+")
    parser.add_argument("-o", "--out", required=True)
    parser.add_argument("--num-experts", type=int, default=0, help="logical experts (default: the map's largest + 1)")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("sglang_dump_to_json: skipped: python3-torch is not installed (apt-get install python3-torch); "
              "SGLang's dumps are torch.save files", file=sys.stderr)
        return 77
    dumps = [(p, load(torch, p)) for p in args.dumps]
    for path, dump in dumps:
        if not isinstance(dump, dict):
            fail(path, "the file does not hold a dict (a recorder dump does)")
    if all("logical_count" in d for _, d in dumps):
        steps = [step for path, dump in dumps for step in stat_counts(torch, dump, path)]
    else:
        steps = per_pass_counts(torch, dumps, args.num_experts)
    tmp = args.out + ".tmp"
    with open(tmp, "x") as f:  # exclusive: never over another writer's file
        json.dump({"logical_count": steps}, f)
    os.replace(tmp, args.out)
    print(f"sglang_dump_to_json: wrote {len(steps)} steps to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
