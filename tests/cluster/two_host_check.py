"""two_host_check.py WORK: the checks of two_host_train_test.sh on its outputs in WORK (one/blind/aware .out: the
--json lines of `prophet train`; blind/aware .nic: the NIC counters ci/netns-hosts.sh wrote). Exit 1 naming the
first check that fails."""
import json
import sys

work = sys.argv[1]


def fail(message):
    print("two_host_train_test: FAIL:", message, file=sys.stderr)
    sys.exit(1)


def run(name):
    lines = [json.loads(line) for line in open(f"{work}/{name}.out") if line.startswith("{")]
    losses = [line["loss"] for line in lines if "step" in line and "loss" in line]
    summaries = [line for line in lines if line.get("summary")]
    if not summaries:
        fail(f"{name}: no summary line")
    return losses, summaries[-1]["traffic"]


def nic_tx(name):
    return sum(host["tx_bytes"] for host in json.load(open(f"{work}/{name}.nic")).values())


one, one_t = run("one")
blind, blind_t = run("blind")
aware, aware_t = run("aware")
if len(one) != 4 or one != blind:
    fail(f"losses differ: one host {one}, two hosts {blind}")
if blind_t["hosts"] != ["h0", "h0", "h1", "h1"]:
    fail(f"ranks not on two hosts: {blind_t['hosts']}")
pairs = {(p["src"], p["dst"]): p["bytes"] for p in blind_t["host_bytes"]}
if not (pairs.get(("h0", "h1"), 0) > 0 and pairs.get(("h1", "h0"), 0) > 0):
    fail(f"no traffic recorded between the hosts: {blind_t['host_bytes']}")
if one_t["cross_host_bytes"] != 0:
    fail(f"one host but cross-host bytes {one_t['cross_host_bytes']}")
b, a = blind_t["cross_host_bytes"], aware_t["cross_host_bytes"]
print(f"two_host_train_test: losses {blind}; bytes between the hosts (prophet): host-blind {b}, host-aware {a}; "
      f"NIC tx bytes: host-blind {nic_tx('blind')}, host-aware {nic_tx('aware')}", file=sys.stderr)
if not a < b:
    fail(f"host-aware moved {a} bytes across hosts, host-blind {b}")
if not nic_tx("aware") < nic_tx("blind"):
    fail(f"host-aware NICs sent {nic_tx('aware')} bytes, host-blind {nic_tx('blind')}")
