#!/usr/bin/env bash
# two_host_train_test.sh: `prophet train` on 4 ranks across two emulated hosts (ci/netns-hosts.sh: two network
# namespaces, 2 ranks each, joined by a tc-shaped link; OpenMPI over TCP with a namespace launch agent):
#   1. the losses equal those of the same 4 ranks on one host (bit for bit: the same ranks compute the same sums;
#      only the transport differs);
#   2. the run records its traffic per rank pair and per host pair (--json summary "traffic", and the store's
#      "traffic" event), and the bytes between h0 and h1 are > 0;
#   3. a host-aware placement (comm.replicas_within_host = true) moves fewer bytes across the slow link than the
#      host-blind one, both counted by prophet (expert-parallel bytes between the hosts) and by the kernel (bytes
#      the hosts' NICs sent). Policy top2 replicates the two hottest experts of a layer to every rank; host-aware
#      keeps only the copies on the owner's host. The model (C = 64, F = 512: 256 KiB of parameters per expert,
#      sent by Trans and summed back by Agg for every remote replica, against 256 B per routed token) is one where
#      replicas cost more bytes than the tokens they keep local.
# Exit 77 (skipped) where namespaces are refused. Every mpirun is bounded by timeout -s KILL.
#   tests/cluster/two_host_train_test.sh PROPHET_BINARY
set -euo pipefail
prophet="$(realpath "$1")"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"
work="$(mktemp -d /tmp/prophet-two-host.XXXXXX)"
trap 'rm -rf "$work"' EXIT
fail() { echo "two_host_train_test: FAIL: $*" >&2; exit 1; }

train=(train --config experiments/train/skewed-4rank.toml --json --set train.steps=4 --set model.F=512
       --set balance.policy=top2 --set store.path="$work/store.db")
mpirun=(mpirun --allow-run-as-root -np 4)

# one host
timeout -s KILL 180 "${mpirun[@]}" --oversubscribe "$prophet" "${train[@]}" >"$work/one.out" 2>"$work/one.err" ||
  fail "one host: exit $?: $(tail -3 "$work/one.err")"
# two hosts, host-blind and host-aware; ranks 0,1 on h0 and 2,3 on h1 (--map-by slot)
two_hosts() {  # NAME, extra train args...
  local name="$1" rc=0
  shift
  PROPHET_NETNS_STATS="$work/$name.nic" timeout -s KILL 240 ci/netns-hosts.sh --rate 500mbit -- \
    timeout -s KILL 180 "${mpirun[@]}" --map-by slot "$prophet" "${train[@]}" "$@" >"$work/$name.out" \
    2>"$work/$name.err" || rc=$?
  [[ $rc == 77 ]] && { tail -1 "$work/$name.err" >&2; exit 77; }
  [[ $rc == 0 ]] || fail "$name: exit $rc: $(tail -5 "$work/$name.err")"
}
two_hosts blind
two_hosts aware --set comm.replicas_within_host=true

/usr/bin/python3 "$repo/tests/cluster/two_host_check.py" "$work"
# the store has the traffic event of every run (3 runs)
events="$(sqlite3 "$work/store.db" "SELECT count(*) FROM events WHERE kind = 'traffic'")"
[[ "$events" == 3 ]] || fail "store has $events traffic events, expected 3"
echo "two_host_train_test: PASS" >&2
