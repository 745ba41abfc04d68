#!/usr/bin/python3
"""Checks every test ctest knows (ctest --show-only=json-v1 of a build directory) against the rules that keep a
regression from hanging CI or hiding behind a Passed (docs/reliability.md, "Test infrastructure"):

  timeout     every test has a TIMEOUT property, 0 < TIMEOUT <= --max-timeout s (ctest's default is 10^7 s)
  mpi cases   no GoogleTest case of an Mpi* suite is registered as a one-process test (it could only skip): those
              run only inside an mpirun test
  skips       every test that runs GoogleTest cases (a --gtest_filter, or a GoogleTest executable) turns a case's
              "[  SKIPPED ]" into a ctest skip or failure (SKIP_REGULAR_EXPRESSION / FAIL_REGULAR_EXPRESSION),
              never a silent pass
  command     .ci/run runs exactly the README's test command, and that command gives ctest a --timeout

Usage: check_ctest_registry.py --build DIR --source DIR [--ctest PATH] [--max-timeout S]
Exits 0 when every rule holds, 1 naming each test that breaks one, 2 on usage or an unreadable registry.
"""
import argparse
import json
import re
import subprocess
import sys

SKIPPED = "SKIPPED"


def props(test):
    return {p["name"]: p["value"] for p in test.get("properties", [])}


_gtest_cache = {}


def is_gtest_binary(path):
    """a GoogleTest executable (it holds gtest's flag names), for tests registered by hand without a filter"""
    if path not in _gtest_cache:
        try:
            with open(path, "rb") as f:
                _gtest_cache[path] = b"gtest_also_run_disabled_tests" in f.read()
        except OSError:
            _gtest_cache[path] = False
    return _gtest_cache[path]


def readme_test_command(source):
    """The line after '**Run the tests**' in README.md's fenced block, and the matching line of .ci/run."""
    with open(f"{source}/README.md") as f:
        lines = f.read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("**Run the tests**")), None)
    if start is None or start + 2 >= len(lines) or lines[start + 1] != "```":
        return None, None
    readme = lines[start + 2].strip()
    with open(f"{source}/.ci/run") as f:
        ci = [l.strip() for l in f if "ctest " in l and not l.lstrip().startswith("#")]
    return readme, ci


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--ctest", default="ctest")
    ap.add_argument("--max-timeout", type=float, default=1800)
    args = ap.parse_args()
    r = subprocess.run([args.ctest, "--test-dir", args.build, "--show-only=json-v1"], capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0:
        print(f"check_ctest_registry: ctest --show-only exited {r.returncode}: {r.stderr.strip()}", file=sys.stderr)
        return 2
    tests = json.loads(r.stdout).get("tests", [])
    if len(tests) < 10:
        print(f"check_ctest_registry: only {len(tests)} tests registered in {args.build}; built?", file=sys.stderr)
        return 2
    problems = []
    for t in tests:
        name, p, command = t["name"], props(t), t.get("command", [])
        timeout = float(p.get("TIMEOUT", 0) or 0)
        if not 0 < timeout <= args.max_timeout:
            problems.append(f"{name}: TIMEOUT {p.get('TIMEOUT', 'unset')} (want 0 < TIMEOUT <= {args.max_timeout:g})")
        launched = any(re.search(r"(^|/)(mpirun|mpiexec|slow-net\.sh)$", c) for c in command)
        if re.match(r"^(Mpi[A-Za-z0-9_]*)[./]", name) and not launched:
            problems.append(f"{name}: an Mpi* case registered as a one-process test (runs only under mpirun)")
        if any(c.startswith("--gtest_filter") for c in command) or any(is_gtest_binary(c) for c in command[:1]):
            regexes = " ".join(str(p.get(k, "")) for k in ("SKIP_REGULAR_EXPRESSION", "FAIL_REGULAR_EXPRESSION"))
            if SKIPPED not in regexes:
                problems.append(f"{name}: runs GoogleTest cases but a '[  SKIPPED ]' case would report Passed "
                                "(set SKIP_REGULAR_EXPRESSION or FAIL_REGULAR_EXPRESSION)")
    readme, ci = readme_test_command(args.source)
    if readme is None:
        problems.append("README.md: no '**Run the tests**' fenced command")
    else:
        if ci != [readme]:
            problems.append(f".ci/run's ctest line(s) {ci} differ from the README's test command '{readme}'")
        if not re.search(r"ctest .*--timeout \d+", readme):
            problems.append(f"README test command gives ctest no --timeout: '{readme}'")
    for line in problems:
        print(f"check_ctest_registry: {line}")
    print(f"check_ctest_registry: {len(tests)} tests, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
