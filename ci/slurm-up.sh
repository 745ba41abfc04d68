#!/usr/bin/env bash
# slurm-up.sh: start a real one-node Slurm (Debian's slurm-wlm + munge) on this machine, for the Slurm sweep test
# and demos (docs/cluster.md). Everything lives under one directory (default /tmp/prophet-slurm): the generated
# munge key and socket, slurm.conf, state, spool, logs and pid files; nothing in /etc is changed. The node is this
# host (`hostname -s`) with CPUs = nproc and RealMemory from /proc/meminfo; one partition "debug".
#
#   ci/slurm-up.sh [--dir DIR] [--install]
#   . DIR/env          # exports SLURM_CONF (sbatch/squeue/scancel read it), then: sbatch ..., squeue ...
#   ci/slurm-down.sh [--dir DIR]
#
# --install: apt-get install slurm-wlm munge first when missing (as root; needs Debian's archive).
# Made for a sandbox VM without systemd and with restricted cgroups: ProctrackType=proctrack/linuxproc,
# TaskPlugin=task/none, no cgroup plugin, SlurmUser/SlurmdUser root, no accounting database.
# Exit 0: slurmctld and slurmd run and the node is idle. Exit 77 (ctest: skipped), with the reason, where the
# tools are missing or the daemons cannot start here. Idempotent: a running instance in DIR is stopped first.
set -euo pipefail
dir=/tmp/prophet-slurm
install=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --install) install=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "slurm-up.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
here="$(cd "$(dirname "$0")" && pwd)"
skip() { echo "slurm-up.sh: SKIP: $*" >&2; exit 77; }

if [[ $install == 1 ]] && ! command -v slurmctld >/dev/null; then
  [[ $(id -u) == 0 ]] || skip "--install needs root"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends slurm-wlm munge; } >&2 ||
    skip "apt-get install slurm-wlm munge failed"
fi
for tool in slurmctld slurmd munged sbatch squeue sinfo scontrol; do
  command -v "$tool" >/dev/null || skip "$tool not found (apt-get install slurm-wlm munge, or ci/slurm-up.sh --install)"
done
[[ $(id -u) == 0 ]] || skip "the daemons run as root here (SlurmdUser=root); run as root"

[[ -f "$dir/env" ]] && "$here/slurm-down.sh" --dir "$dir" >/dev/null 2>&1 || true
mkdir -p "$dir"/{state,spool,munge}
chmod 0700 "$dir/munge"
host="$(hostname -s)"
cpus="$(nproc)"
mem_mb=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 ))
# Slurm's usual ports, or (taken: another Slurm runs here) the first free pair from 16817 on
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
ctld_port="${PROPHET_SLURMCTLD_PORT:-6817}"
slurmd_port="${PROPHET_SLURMD_PORT:-6818}"
if [[ -z "${PROPHET_SLURMCTLD_PORT:-}" ]] && ! { port_free "$ctld_port" && port_free "$slurmd_port"; }; then
  for ((p = 16817; p < 16917; p += 2)); do
    if port_free "$p" && port_free "$((p + 1))"; then ctld_port=$p; slurmd_port=$((p + 1)); break; fi
  done
fi

# munge: a generated key; the socket in DIR (slurm finds it through AuthInfo)
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 0400 "$dir/munge/munge.key"
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" \
  >/dev/null 2>&1 || skip "munged does not start: $(tail -2 "$dir/munge/munged.log" 2>/dev/null)"

cat >"$dir/slurm.conf" <<CONF
# written by ci/slurm-up.sh: a one-node Slurm for tests (no systemd, no cgroups, no accounting)
ClusterName=prophet
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CryptoType=crypto/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
MaxArraySize=10001
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
echo "export SLURM_CONF=$dir/slurm.conf" >"$dir/env"
export SLURM_CONF="$dir/slurm.conf"

slurmctld -c >"$dir/slurmctld.stdout" 2>&1 || skip "slurmctld does not start: $(tail -3 "$dir/slurmctld.log" 2>/dev/null)"
slurmd >"$dir/slurmd.stdout" 2>&1 || skip "slurmd does not start: $(tail -3 "$dir/slurmd.log" 2>/dev/null)"
# the node registers within a few seconds; 60 s bound for a loaded machine
for _ in $(seq 60); do
  state="$(sinfo -h -n "$host" -o %T 2>/dev/null || true)"
  [[ "$state" == idle* ]] && { echo "slurm-up.sh: one-node Slurm up in $dir (node $host, $cpus CPUs, ${mem_mb} MB); . $dir/env" >&2; exit 0; }
  sleep 1
done
echo "slurm-up.sh: node $host never became idle (state '${state:-none}'); slurmd log:" >&2
tail -5 "$dir/slurmd.log" >&2 || true
"$here/slurm-down.sh" --dir "$dir" >/dev/null 2>&1 || true
exit 77
