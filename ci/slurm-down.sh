#!/usr/bin/env bash
# slurm-down.sh: stop the one-node Slurm ci/slurm-up.sh started in DIR (default /tmp/prophet-slurm): slurmd,
# slurmctld and munged, by the pid files in DIR (never by name), then remove DIR. Idempotent.
#   ci/slurm-down.sh [--dir DIR] [--keep]     (--keep: leave DIR, e.g. to read the logs)
set -uo pipefail
dir=/tmp/prophet-slurm
keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,4p' "$0"; exit 0 ;;
    *) echo "slurm-down.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
stop() {  # pid file: TERM, then KILL after 10 s
  local file="$1" pid
  [[ -f "$file" ]] || return 0
  pid="$(cat "$file" 2>/dev/null)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null || true
}
stop "$dir/slurmd.pid"
stop "$dir/slurmctld.pid"
stop "$dir/munge/munged.pid"
[[ $keep == 1 ]] || rm -rf "$dir"
