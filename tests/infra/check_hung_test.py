#!/usr/bin/python3
"""A deliberately hung test makes ctest fail in bounded time instead of hanging (docs/reliability.md).

Configures a throw-away CMake project with two tests that sleep far beyond their limit: one with a TIMEOUT
property (what every test of this project has), one without, which only the `--timeout` of the ctest command
bounds (the README's test command gives one). Runs ctest on it and checks that ctest exits non-zero, reports both
as "Timeout", and ends within --bound seconds (the sleeps last 600 s). A few seconds of CPU.

Usage: check_hung_test.py [--cmake PATH] [--ctest PATH] [--bound S]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

PROJECT = """cmake_minimum_required(VERSION 3.16)
project(hung_test NONE)
enable_testing()
add_test(NAME sleeps_past_its_timeout COMMAND sleep 600)
set_tests_properties(sleeps_past_its_timeout PROPERTIES TIMEOUT 2)
add_test(NAME sleeps_without_a_timeout COMMAND sh -c "sleep 600; true")
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cmake", default="cmake")
    ap.add_argument("--ctest", default="ctest")
    ap.add_argument("--bound", type=float, default=60)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="prophet-hung-test-") as tmp:
        with open(os.path.join(tmp, "CMakeLists.txt"), "w") as f:
            f.write(PROJECT)
        subprocess.run([args.cmake, "-S", tmp, "-B", os.path.join(tmp, "build")], check=True, capture_output=True,
                       timeout=120)
        t0 = time.monotonic()
        try:
            r = subprocess.run([args.ctest, "--test-dir", os.path.join(tmp, "build"), "--output-on-failure", "-j2",
                                "--timeout", "3"], capture_output=True, text=True, timeout=args.bound)
        except subprocess.TimeoutExpired:
            print(f"check_hung_test: ctest still running after {args.bound:g} s: a hung test hangs the suite")
            return 1
        took = time.monotonic() - t0
    out = r.stdout + r.stderr
    problems = []
    if r.returncode == 0:
        problems.append("ctest exited 0 with two hung tests")
    for name in ("sleeps_past_its_timeout", "sleeps_without_a_timeout"):
        if not any(name in line and "Timeout" in line for line in out.splitlines()):
            problems.append(f"{name} not reported as Timeout")
    for p in problems:
        print(f"check_hung_test: {p}")
    print(f"check_hung_test: ctest exited {r.returncode} after {took:.1f} s (bound {args.bound:g} s)")
    if problems:
        print(out)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
