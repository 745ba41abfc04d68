#!/usr/bin/python3
""".ci/run fails when any part of the README's test command fails, and only then goes on to the lint.

The README's test command is one `&&` list (install && configure && build && ctest). Under `set -e` bash stops at
a failing last command of such a list but not at an earlier one, so a build that did not compile once ran no test,
went on to the lint and exited 0. This copies .ci/run into throw-away trees whose CMake project fails to configure,
fails to build, has a failing test, or passes; ci/install-deps.sh there does nothing and ci/lint.py only leaves a
mark. Each tree's exit code and whether the lint ran are checked. A few seconds of CPU (cmake, ninja, ctest).

Usage: check_ci_run.py --source DIR
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HEAD = "cmake_minimum_required(VERSION 3.16)\nproject(ci_run_check NONE)\nenable_testing()\n"
# name -> (the project's CMakeLists.txt, whether .ci/run must succeed)
CASES = {
    "configure fails": (HEAD + 'message(FATAL_ERROR "broken on purpose")\n', False),
    "build fails": (HEAD + "add_custom_target(broken ALL COMMAND false)\n", False),
    "a test fails": (HEAD + "add_test(NAME fails COMMAND false)\n", False),
    "all pass": (HEAD + "add_test(NAME passes COMMAND true)\n", True),
}
LINT = "import pathlib\npathlib.Path('lint-ran').write_text('yes')\n"


def tree(root, cmakelists, source):
    """A project at root with the real .ci/run, a no-op ci/install-deps.sh and a ci/lint.py that leaves a mark."""
    os.makedirs(os.path.join(root, ".ci"))
    os.makedirs(os.path.join(root, "ci"))
    shutil.copy(os.path.join(source, ".ci", "run"), os.path.join(root, ".ci", "run"))
    deps = os.path.join(root, "ci", "install-deps.sh")
    with open(deps, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(deps, 0o755)
    with open(os.path.join(root, "ci", "lint.py"), "w") as f:
        f.write(LINT)
    with open(os.path.join(root, "CMakeLists.txt"), "w") as f:
        f.write(cmakelists)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    problems = []
    for name, (cmakelists, passes) in CASES.items():
        with tempfile.TemporaryDirectory(prefix="ci-run-check-") as root:
            tree(root, cmakelists, args.source)
            r = subprocess.run(["bash", os.path.join(root, ".ci", "run")], capture_output=True, text=True,
                               timeout=300)
            linted = os.path.exists(os.path.join(root, "lint-ran"))
            if (r.returncode == 0) != passes or linted != passes:
                lint = "ran" if linted else "did not run"
                problems.append(f"{name}: .ci/run exited {r.returncode} and the lint {lint}"
                                f" (want {'0 and the lint' if passes else 'non-zero and no lint'}); its last lines: "
                                f"{(r.stdout + r.stderr).strip().splitlines()[-3:]}")
    for line in problems:
        print(f"check_ci_run: {line}")
    print(f"check_ci_run: {len(CASES)} cases, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
