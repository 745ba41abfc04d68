#!/bin/sh
# calibrated_sweep_fixture.sh PROPHET DIR: runs tests/fixtures/calibrated-sweep.toml from the repository root into
# DIR (removed first, so a re-run never resumes an old store): DIR/store.db, DIR/clusters/, DIR/REPORT.md, the
# sweep's --json stdout in DIR/out.json and its stderr in DIR/err.txt (also printed when the sweep fails).
# The ctest fixture calibrated_sweep runs it once for the SweepCalibrated.* cases (tests/CMakeLists.txt); they run it
# themselves, into a directory of their own, where ctest did not.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 PROPHET DIR" >&2; exit 2; }
prophet=$1
dir=$2
cd "$(dirname "$0")/../.."
rm -rf "$dir"
mkdir -p "$dir"
if ! "$prophet" sweep tests/fixtures/calibrated-sweep.toml --json --set "store.path=$dir/store.db" \
    >"$dir/out.json" 2>"$dir/err.txt"; then
    cat "$dir/err.txt" >&2
    exit 1
fi
