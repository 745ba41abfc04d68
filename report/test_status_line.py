#!/usr/bin/python3
"""runs_status_line (report/common.py) on a store the real binary wrote: one finished, one failed and one killed
training run; the killed one reads `running` until `prophet db check --repair` marks it lost.

  /usr/bin/python3 report/test_status_line.py --prophet build/prophet      (run from the repository root)
"""
import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

ROOT = os.path.dirname(HERE)


def prophet(binary, *args):
    # bounded: a hang fails the test instead of CI
    return subprocess.run([binary, *args], cwd=ROOT, capture_output=True, text=True, timeout=120).returncode


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prophet", required=True)
    binary = os.path.abspath(parser.parse_args().prophet)
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "store.db")
        train = ["train", "--config", "experiments/models/tiny.toml", "--set", f"store.path={db}",
                 "--set", "train.steps=3"]
        assert prophet(binary, *train) == 0
        assert prophet(binary, *train, "--set", "debug.fail_rank=0", "--set", "debug.fail_step=1",
                       "--set", "debug.fail_mode=error") == 1
        assert prophet(binary, *train, "--set", "debug.fail_rank=0", "--set", "debug.fail_step=1",
                       "--set", "debug.fail_mode=kill") == -9
        con = sqlite3.connect(db)
        got = common.runs_status_line(con)
        assert got == "runs: 1 finished, 1 failed, 1 running", got
        con.close()
        assert prophet(binary, "db", "check", "--repair", "--db", db) == 0
        con = common.connect(db)
        got = common.runs_status_line(con)
        assert got == "runs: 1 finished, 1 failed, 1 lost", got
        empty = sqlite3.connect(":memory:")
        assert common.runs_status_line(empty) == "runs: none"
    print("runs_status_line: ok")


if __name__ == "__main__":
    main()
