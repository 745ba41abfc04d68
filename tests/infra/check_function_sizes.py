#!/usr/bin/python3
"""Tests ci/function_sizes.py on tests/infra/function_sizes_fixture/: every function of the hard cases (braces in
comments, strings, raw strings and macros, digit separators, constructors with braced member initializers,
operators, templates with default arguments, lambdas and local classes, trailing return types, extern "C") is
found with its first line and length, and the CI gate passes, fails on an unlisted function over 100 lines,
fails when the count over 60 rises above the ratchet, and refuses a malformed allowlist.

Usage: check_function_sizes.py [--script PATH]     exits 0 when every case holds, 1 naming each that does not
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "function_sizes_fixture")

# (length, file:line, name) as --list prints them, longest first
EXPECTED = [
    (101, "lib/long_ones.cpp:63", "long_101"),
    (61, "lib/long_ones.cpp:2", "long_61"),
    (60, "lib/long_ones.cpp:164", "short_60"),
    (11, "lib/hard_cases.cpp:58", "templated"),
    (6, "lib/hard_cases.cpp:18", "strings"),
    (5, "lib/hard_cases.cpp:25", "raw"),
    (4, "lib/hard_cases.cpp:31", "separators"),
    (3, "lib/hard_cases.cpp:14", "plain"),
    (3, "lib/hard_cases.cpp:44", "Point"),
    (3, "lib/hard_cases.cpp:52", "operator=="),
    (3, "lib/hard_cases.cpp:70", "trailing"),
    (3, "lib/hard_cases.cpp:75", "c_linkage"),
    (1, "lib/hard_cases.cpp:43", "sum"),
    (1, "lib/hard_cases.cpp:51", "Widget"),
]

# (case, allowlist text, expected exit code, a phrase the output must hold)
GATE_CASES = [
    ("listed and within the ratchet", "over_60 2\nallow lib/long_ones.cpp long_101 101\n", 0, "0 rule(s) broken"),
    ("over 100 and not listed", "over_60 2\n", 1, "long_101 is 101 lines"),
    ("count over 60 above the ratchet", "over_60 1\nallow lib/long_ones.cpp long_101\n", 1, "ratchet allows 1"),
    ("malformed line", "over_60 2\nallowed long_101\n", 2, "neither"),
    ("no ratchet line", "allow lib/long_ones.cpp long_101\n", 2, "no 'over_60 N'"),
]


def run(script, *args):
    p = subprocess.run([sys.executable, script, "--root", FIXTURE, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def check_listing(script):
    rc, out = run(script, "--list")
    got = [tuple(line.split("\t")) for line in out.splitlines()]
    want = [(str(n), where, name) for n, where, name in EXPECTED]
    if rc != 0 or got != want:
        missing = [w for w in want if w not in got]
        extra = [g for g in got if g not in want]
        return [f"--list: exit {rc}; missing {missing}; unexpected {extra}"]
    return []


def check_gate(script, tmp):
    problems = []
    allow = os.path.join(tmp, "allow.txt")
    for case, text, want_rc, phrase in GATE_CASES:
        with open(allow, "w") as f:
            f.write(text)
        rc, out = run(script, "--allow", allow)
        if rc != want_rc or phrase not in out:
            problems.append(f"gate '{case}': exit {rc} (want {want_rc}), '{phrase}' {'in' if phrase in out else 'not in'}"
                            f" the output:\n{out}")
    rc, out = run(script, "--allow", allow, "--update")
    rc2, out2 = run(script, "--allow", allow)
    if rc != 0 or rc2 != 0:
        problems.append(f"--update then check: exit {rc} then {rc2}:\n{out}{out2}")
    return problems


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--script", default=os.path.join(HERE, "..", "..", "ci", "function_sizes.py"))
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        problems = check_listing(args.script) + check_gate(args.script, tmp)
    for line in problems:
        print(f"check_function_sizes: {line}")
    print(f"check_function_sizes: {len(EXPECTED)} functions, {len(GATE_CASES) + 1} gate cases, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
