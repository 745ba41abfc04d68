#!/usr/bin/python3
"""Checks sglang_dump_to_json.py on recorder dumps built here with torch.save in the layout SGLang writes
(python/sglang/srt/eplb/expert_distribution.py: the stat and per_pass accumulators), against counts summed by hand.
Exit 0 pass, 1 fail, 77 skipped (no python3-torch)."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "sglang_dump_to_json.py")


def convert(paths, out):
    return subprocess.run([sys.executable, SCRIPT, *paths, "-o", out], capture_output=True, text=True)


def main():
    try:
        import torch
    except ImportError:
        print("test_sglang_dump_to_json: skipped: python3-torch is not installed (apt-get install python3-torch)")
        return 77
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        # stat mode: logical_count [steps=2, layers=2, experts=3], already summed over ranks
        stat = os.path.join(tmp, "expert_distribution_recorder_1.pt")
        torch.save({"rank": 0, "logical_count": torch.tensor([[[1, 2, 3], [0, 4, 2]], [[2, 2, 2], [6, 0, 0]]],
                                                             dtype=torch.int32),
                    "average_utilization_rate_over_window": None}, stat)
        out = os.path.join(tmp, "stat.json")
        r = convert([stat], out)
        if r.returncode != 0 or json.load(open(out)) != {"logical_count": [[[1, 2, 3], [0, 4, 2]],
                                                                           [[2, 2, 2], [6, 0, 0]]]}:
            failures.append(f"stat: rc {r.returncode} {r.stderr}")
        # per_pass mode: 2 ranks, 2 layers, 4 physical experts over 3 logical (physical 3 is a copy of logical 0
        # at layer 0 and of logical 2 at layer 1); passes 7 and 8 on both ranks
        mapping = torch.tensor([[0, 1, 2, 0], [0, 1, 2, 2]])
        rank_counts = {0: {7: [[1, 0, 2, 3], [1, 1, 1, 3]], 8: [[0, 0, 0, 6], [2, 2, 2, 0]]},
                       1: {7: [[2, 2, 2, 0], [0, 3, 0, 3]], 8: [[1, 1, 1, 3], [0, 0, 6, 0]]}}
        files = []
        for rank, passes in rank_counts.items():
            records = [{"forward_pass_id": fid, "rank": rank, "gatherer_key": "primary",
                        "global_physical_count": torch.tensor(c, dtype=torch.int32)} for fid, c in passes.items()]
            path = os.path.join(tmp, f"expert_distribution_recorder_1_{rank}.pt")
            torch.save({"records": records, "last_physical_to_logical_map": mapping}, path)
            files.append(path)
        out = os.path.join(tmp, "pass.json")
        r = convert(files, out)
        # pass 7, layer 0: logical 0 = (1+3) + (2+0) = 6, 1 = 0+2, 2 = 2+2; layer 1: 0 = 1+0, 1 = 1+3, 2 = (1+3)+(0+3)
        expected = {"logical_count": [[[6, 2, 4], [1, 4, 7]], [[10, 1, 1], [2, 2, 8]]]}
        if r.returncode != 0 or json.load(open(out)) != expected:
            failures.append(f"per_pass: rc {r.returncode} {r.stderr} {open(out).read() if os.path.exists(out) else ''}")
        # not a recorder dump: exit 3 naming the file
        bad = os.path.join(tmp, "bad.pt")
        torch.save({"something": torch.zeros(2)}, bad)
        r = convert([bad], os.path.join(tmp, "bad.json"))
        if r.returncode != 3 or "bad.pt" not in r.stderr or "records" not in r.stderr:
            failures.append(f"bad dump: rc {r.returncode} {r.stderr}")
    for f in failures:
        print("FAIL", f)
    print("test_sglang_dump_to_json:", "FAIL" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
