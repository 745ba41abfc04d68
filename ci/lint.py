#!/usr/bin/python3
"""Lints the C++/CUDA code changed since the lint base (ci/lint-base), the step .ci/run runs after the tests:

  format   git clang-format --diff BASE over lib/ cmd/ tests/ bench/ fuzz/ (.clang-format): only changed lines
  tidy     clang-tidy (.clang-tidy) on every changed .cpp of lib/ and cmd/ that build/compile_commands.json
           compiles, diagnostics kept to the changed lines of .cpp and .h files (--line-filter); two at a time
  sizes    ci/function_sizes.py: no function over 100 lines outside its allowlist, the count over 60 not rising

Usage: ci/lint.py [--build DIR] [--base COMMIT] [--fix] [--only format|tidy|sizes]
  --fix    rewrite the changed lines in place (clang-format, then clang-tidy's fixes) instead of failing
Exit codes: 0 clean, 1 findings (each printed), 2 usage or a missing tool, compile database or base commit.
Only lines changed since the base are judged, so the older code needs no mass reformat; move ci/lint-base forward
once a round's branches are merged and the tree is clean at the new base.
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
FORMAT_DIRS = ["lib", "cmd", "tests", "bench", "fuzz"]
FORMAT_EXCLUDE = [":(exclude)tests/infra/function_sizes_fixture",  # the scanner's fixture keeps its odd layout
                  ":(exclude)tests/fixtures"]  # data files (engine JSON dumps) stay as the engines write them
TIDY_DIRS = ("lib/", "cmd/")
HEADER_EXTS = (".h", ".hpp")


def fail(message):
    print(f"lint: {message}", file=sys.stderr)
    sys.exit(2)


def git(*args, check=True):
    p = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    if check and p.returncode != 0:
        fail(f"git {' '.join(args)} failed: {p.stderr.strip()}")
    return p.stdout


def read_base():
    with open(os.path.join(ROOT, "ci", "lint-base")) as f:
        words = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    if len(words) != 1 or not re.fullmatch(r"[0-9a-f]{40}", words[0]):
        fail("ci/lint-base must hold one 40-hex commit after its comment lines")
    return words[0]


def changed_lines(base, paths):
    """{path: [[first, last], ...]} of the lines added or changed since base (working tree included)"""
    out = git("diff", "-U0", "--no-color", "--diff-filter=AMR", base, "--", *paths)
    lines, current = {}, None
    for line in out.splitlines():
        if line.startswith("+++ "):
            current = line[6:] if line.startswith("+++ b/") else None
        elif line.startswith("@@") and current:
            m = re.match(r"@@ -\S+ \+(\d+)(?:,(\d+))? @@", line)
            first, count = int(m.group(1)), int(m.group(2) or "1")
            if count > 0:
                lines.setdefault(current, []).append([first, first + count - 1])
    return lines


def run_format(base, fix):
    args = ["clang-format", "--force" if fix else "--diff", base, "--", *FORMAT_DIRS, *FORMAT_EXCLUDE]
    p = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    out = p.stdout.strip()
    if p.returncode not in (0, 1) or "error:" in p.stderr:
        fail(f"git clang-format failed: {p.stderr.strip()}")
    if fix:
        print(f"lint: format: {out or 'nothing to change'}")
        return 0
    if out.startswith("diff ") or "\n@@" in out:
        print(out)
        print("lint: format: the changed lines above differ from .clang-format's style; fix: ci/lint.py --fix "
              "--only format")
        return 1
    print("lint: format: clean")
    return 0


def tidy_one(build, line_filter, path, fix):
    cmd = ["clang-tidy", "-p", build, "--quiet", f"--line-filter={line_filter}", path]
    if fix:
        cmd.insert(1, "--fix")
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    return path, p.returncode, p.stdout


UNITY_INCLUDE = re.compile(r'^#include "(.+)"$', re.MULTILINE)


def unity_sources(entries):
    """CMake's unity batches (PROPHET_UNITY_CMD) stand in the database for the files they include
    (.../Unity/unity_N_cxx.cxx); each file gets its batch's command, so clang-tidy judges it on its own"""
    found = []
    for entry in entries:
        if "/Unity/unity_" in entry["file"]:
            with open(entry["file"]) as f:
                for source in UNITY_INCLUDE.findall(f.read()):
                    found.append({**entry, "file": source, "command": entry["command"].replace(entry["file"], source)})
    return found


def run_tidy(base, build, fix):
    database = os.path.join(build, "compile_commands.json")
    if not os.path.isfile(database):
        fail(f"no {database}: configure the build first (cmake -S . -B build ...; it exports compile commands)")
    with open(database) as f:
        entries = json.load(f)
    entries += unity_sources(entries)
    compiled = {os.path.realpath(entry["file"]) for entry in entries}
    with tempfile.TemporaryDirectory(prefix="lint-db-") as directory:
        with open(os.path.join(directory, "compile_commands.json"), "w") as f:
            json.dump(entries, f)
        return tidy_sources(base, directory, compiled, fix)


def tidy_sources(base, build, compiled, fix):
    lines = changed_lines(base, ["lib", "cmd"])
    sources = sorted(p for p in lines if p.endswith(".cpp") and p.startswith(TIDY_DIRS) and
                     os.path.realpath(os.path.join(ROOT, p)) in compiled)
    skipped = sorted(p for p in lines if p.endswith((".cpp", ".cu")) and p not in sources)
    if skipped:
        print(f"lint: tidy: not in the compile database (other configuration or CUDA), skipped: {' '.join(skipped)}")
    kept = [p for p in lines if p.endswith(".cpp") or p.endswith(HEADER_EXTS)]
    line_filter = json.dumps([{"name": os.path.join(ROOT, p), "lines": lines[p]} for p in kept])
    findings, seen = 0, set()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for path, rc, out in pool.map(lambda p: tidy_one(build, line_filter, p, fix), sources):
            blocks = re.split(r"\n(?=\S+:\d+:\d+: (?:warning|error):)", out.strip()) if out.strip() else []
            new = [b for b in blocks if b not in seen]  # a header's finding repeats in every file including it
            seen.update(new)
            findings += sum(1 for b in new if re.match(r"\S+:\d+:\d+: (warning|error):", b))
            if new:
                print("\n".join(new))
            if rc != 0 and not new:
                print(f"lint: tidy: clang-tidy exited {rc} on {path} without a finding:\n{out}")
                findings += 1
    print(f"lint: tidy: {len(sources)} changed file(s), {findings} finding(s)")
    return 1 if findings and not fix else 0


def run_sizes():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "ci", "function_sizes.py")], cwd=ROOT,
                       capture_output=True, text=True)
    tail = [line for line in p.stdout.splitlines() if line.startswith("function_sizes:")]
    print("\n".join(tail) + (p.stderr.strip() and "\n" + p.stderr.strip()))
    if p.returncode == 2:
        sys.exit(2)
    return 1 if p.returncode else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--base", help="lint base commit (default: ci/lint-base)")
    ap.add_argument("--fix", action="store_true", help="rewrite the changed lines instead of failing")
    ap.add_argument("--only", choices=["format", "tidy", "sizes"])
    args = ap.parse_args()
    if git("rev-parse", "--is-inside-work-tree", check=False).strip() != "true":
        fail("not a git work tree: the lint judges the lines changed since ci/lint-base")
    base = args.base or read_base()
    if subprocess.run(["git", "cat-file", "-e", base + "^{commit}"], cwd=ROOT).returncode != 0:
        fail(f"lint base {base} is not in this clone (a shallow clone? git fetch --unshallow)")
    failed = 0
    if args.only in (None, "format"):
        failed += run_format(base, args.fix)
    if args.only in (None, "tidy"):
        failed += run_tidy(base, os.path.abspath(args.build), args.fix)
    if args.only in (None, "sizes"):
        failed += run_sizes()
    print(f"lint: {'clean' if not failed else f'{failed} step(s) with findings'} (base {base[:12]})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
