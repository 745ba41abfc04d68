#!/usr/bin/env bash
# slow-net.sh: run a command (typically mpirun ... prophet ...) with the ranks' MPI traffic on a rate-limited
# network that takes wall time but no CPU: a private network namespace whose loopback carries OpenMPI's TCP
# transport under a kernel traffic shaper (tc netem). The namespace, and with it the shaper, vanishes when the
# command ends. Needs root (or CAP_SYS_ADMIN + CAP_NET_ADMIN) and iproute2; docs/scheduler.md compares it with the
# in-process emulation (comm.link_gbps).
#
#   ci/slow-net.sh [--rate 2gbit] [--delay 50us] -- mpirun --allow-run-as-root --oversubscribe -np 4 \
#       ./build/prophet train --config experiments/train/ablate-4rank.toml --set comm.link_gbps=0
#
# What it emulates: one shared link of RATE for all ranks together (every rank's packets queue on the same
# loopback), plus DELAY per packet. What it cannot: per-rank NICs, a topology, RDMA; the ranks still share the CPUs
# (TCP's own copies cost CPU time, unlike the in-process emulation).
# Exit 77 when the machine refuses the namespace (ctest reads it as skipped).
set -euo pipefail
rate=2gbit
delay=0us
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rate) rate="$2"; shift 2 ;;
    --delay) delay="$2"; shift 2 ;;
    --inside) inside=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "slow-net.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [[ $# -eq 0 ]]; then echo "slow-net.sh: no command given (see --help)" >&2; exit 2; fi
for tool in unshare ip tc; do
  command -v "$tool" >/dev/null || { echo "slow-net.sh: $tool not found (apt-get install iproute2 util-linux)" >&2; exit 4; }
done

if [[ "${inside:-0}" != 1 ]]; then
  if ! unshare --net --mount -- true 2>/dev/null; then
    echo "slow-net.sh: this machine refuses a private network namespace (needs root / CAP_SYS_ADMIN); use the" \
         "in-process emulation instead: --set comm.link_gbps=..." >&2
    exit 77  # ctest's SKIP_RETURN_CODE
  fi
  # a new network namespace (and mount namespace, so /sys shows it); this script again, inside it
  exec unshare --net --mount -- "$0" --inside --rate "$rate" --delay "$delay" -- "$@"
fi

# a normal MTU: loopback's 64 KiB packets would not fit the token bucket's burst
ip link set lo mtu 1500 up
# netem (rate + delay) where the kernel has it, else a token bucket (rate only)
if ! tc qdisc add dev lo root netem rate "$rate" delay "$delay" 2>/dev/null; then
  [[ "$delay" == 0us ]] || echo "slow-net.sh: no netem in this kernel: --delay ignored" >&2
  tc qdisc add dev lo root tbf rate "$rate" burst 256kb latency 200ms
fi
echo "slow-net.sh: loopback shaped: $(tc qdisc show dev lo | head -1)" >&2
# OpenMPI: TCP over the shaped loopback instead of shared memory
export OMPI_MCA_btl=tcp,self
export OMPI_MCA_btl_tcp_if_include=lo
export OMPI_MCA_oob_tcp_if_include=lo
"$@"
