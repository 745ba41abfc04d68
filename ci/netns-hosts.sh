#!/usr/bin/env bash
# netns-hosts.sh: run a command (typically mpirun ... prophet train ...) across N emulated "hosts" on this machine:
# N network namespaces h0..h(N-1), each with its own hostname (UTS namespace) and one NIC (veth) into a bridge in
# a switch namespace, the NIC's egress shaped by tc (netem rate + delay, else a token bucket): the slow link
# between hosts. Ranks on the same host talk over that host's unshaped loopback. The command runs on h0 with
# OpenMPI set up to launch h1.. through a launch agent that enters their namespace instead of ssh, over TCP only:
#   OMPI_MCA_plm_rsh_agent=<agent>          OMPI_MCA_orte_default_hostfile=<h0 slots=S, h1 slots=S, ...>
#   OMPI_MCA_btl=tcp,self                   OMPI_MCA_btl_tcp_if_include / oob_tcp_if_include=10.213.0.0/24
# so `mpirun -np N*S --map-by node|slot ...` places its ranks on the hosts (--map-by slot: h0 first). Only the
# hosts' own addresses are included: every host has a 127.0.0.1, where a rank would reach its own host's peer
# instead of the intended one; traffic to the own host's address still takes the kernel's unshaped loopback path.
#
#   ci/netns-hosts.sh [--hosts 2] [--slots 2] [--rate 200mbit] [--delay 0us] -- mpirun --allow-run-as-root \
#       -np 4 ./build/prophet train --config experiments/train/skewed-4rank.toml --json
#
# Addresses: 10.213.0.1.. inside the namespaces this script creates (nothing else is touched but /etc/netns/<ns>,
# which `ip netns exec` mounts over /etc/hosts so the hosts resolve each other's names). Everything is removed
# when the command ends. Needs root and iproute2 (ip, tc, bridge support) and util-linux (unshare).
# At the end it prints the bytes each host's NIC sent and received (kernel counters; JSON to $PROPHET_NETNS_STATS
# when set). Exit 77 (ctest: skipped), with the reason, where the machine refuses namespaces, veths or bridges;
# otherwise the command's exit code. Bound the command yourself (timeout -s KILL): this script does not.
set -euo pipefail
hosts=2
slots=2
rate=200mbit
delay=0us
while [[ $# -gt 0 ]]; do
  case "$1" in
    --hosts) hosts="$2"; shift 2 ;;
    --slots) slots="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --delay) delay="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "netns-hosts.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ $# -gt 0 ]] || { echo "netns-hosts.sh: no command given (see --help)" >&2; exit 2; }
[[ "$hosts" =~ ^[0-9]+$ && $hosts -ge 2 && $hosts -le 32 ]] || { echo "netns-hosts.sh: --hosts must be 2..32" >&2; exit 2; }
skip() { echo "netns-hosts.sh: SKIP: $*" >&2; exit 77; }
for tool in ip tc unshare; do
  command -v "$tool" >/dev/null || skip "$tool not found (apt-get install iproute2 util-linux)"
done
[[ $(id -u) == 0 ]] || skip "network namespaces need root"

tag="p$$"
sw="pn-sw-$tag"
work="$(mktemp -d /tmp/prophet-netns.XXXXXX)"
namespaces=("$sw")
cleanup() {
  for ns in "${namespaces[@]}"; do
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  rmdir /etc/netns 2>/dev/null || true  # only when empty: another user's entries stay
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$sw" 2>/dev/null || skip "ip netns add refused (no CAP_SYS_ADMIN or no network namespaces here)"
ip -n "$sw" link add br0 type bridge 2>/dev/null || skip "no bridge support in this kernel"
ip -n "$sw" link set br0 up
ip -n "$sw" link set lo up

hostfile="$work/hostfile"
: >"$hostfile"
hosts_text="127.0.0.1 localhost"
for ((i = 0; i < hosts; i++)); do hosts_text+=$'\n'"10.213.0.$((i + 1)) h$i"; done
for ((i = 0; i < hosts; i++)); do
  ns="pn-h$i-$tag"
  namespaces+=("$ns")
  ip netns add "$ns"
  ip link add "vh$i-$tag" type veth peer name eth0 netns "$ns" 2>/dev/null ||
    skip "cannot create a veth pair into a namespace"
  ip link set "vh$i-$tag" netns "$sw"
  ip -n "$sw" link set "vh$i-$tag" master br0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "10.213.0.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  # the host's NIC: egress shaped (the slow link); netem where the kernel has it, else a token bucket
  if ! ip netns exec "$ns" tc qdisc add dev eth0 root netem rate "$rate" delay "$delay" 2>/dev/null; then
    [[ "$delay" == 0us ]] || echo "netns-hosts.sh: no netem in this kernel: --delay ignored" >&2
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 64kb latency 400ms ||
      skip "tc cannot shape the link (no netem or tbf qdisc)"
  fi
  mkdir -p "/etc/netns/$ns"
  printf '%s\n' "$hosts_text" >"/etc/netns/$ns/hosts"
  echo "h$i slots=$slots" >>"$hostfile"
done

# the launch agent: mpirun calls it as `agent [ssh options] HOST COMMAND...`, like ssh
agent="$work/netns-agent"
cat >"$agent" <<AGENT
#!/bin/sh
# launch agent of ci/netns-hosts.sh: runs COMMAND on HOST (h<i>) by entering its namespaces instead of ssh
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host="\$1"; shift
case "\$host" in h[0-9]|h[0-9][0-9]) ;; *) echo "netns-agent: unknown host \$host" >&2; exit 255 ;; esac
exec ip netns exec "pn-\$host-$tag" unshare --uts /bin/sh -c "hostname \$host; exec \$*"
AGENT
chmod +x "$agent"
# a reachability check before MPI: h0 connects to a closed port of the last host ("refused" = it answered)
probe="$(ip netns exec "pn-h0-$tag" timeout 5 bash -c "echo >/dev/tcp/10.213.0.$hosts/9" 2>&1 || true)"
[[ "$probe" == *"Connection refused"* ]] ||
  skip "h0 cannot reach h$((hosts - 1)) through the bridge (${probe:-no answer}; bridged veths filtered here?)"
echo "netns-hosts.sh: $hosts hosts x $slots slots, 10.213.0.0/24, each NIC $(ip netns exec "pn-h0-$tag" tc qdisc show dev eth0 | head -1 | cut -d' ' -f2-)" >&2

export OMPI_MCA_plm_rsh_agent="$agent"
export OMPI_MCA_orte_default_hostfile="$hostfile"
export OMPI_MCA_btl=tcp,self
export OMPI_MCA_btl_tcp_if_include=10.213.0.0/24
export OMPI_MCA_oob_tcp_if_include=10.213.0.0/24
export PROPHET_NETNS_HOSTS="$hosts"
rc=0
ip netns exec "pn-h0-$tag" unshare --uts /bin/sh -c 'hostname h0; exec "$@"' sh "$@" || rc=$?
# what crossed each host's NIC (the slow link), from the kernel's counters: stderr, and JSON to
# $PROPHET_NETNS_STATS when set ({"h0": {"tx_bytes": N, "rx_bytes": M}, ...})
stats="{"
for ((i = 0; i < hosts; i++)); do
  tx="$(ip netns exec "pn-h$i-$tag" cat /sys/class/net/eth0/statistics/tx_bytes)"
  rx="$(ip netns exec "pn-h$i-$tag" cat /sys/class/net/eth0/statistics/rx_bytes)"
  echo "netns-hosts.sh: h$i eth0: tx $tx bytes, rx $rx bytes" >&2
  stats+="$([[ $i == 0 ]] || echo ,)\"h$i\": {\"tx_bytes\": $tx, \"rx_bytes\": $rx}"
done
[[ -z "${PROPHET_NETNS_STATS:-}" ]] || echo "$stats}" >"$PROPHET_NETNS_STATS"
exit $rc
