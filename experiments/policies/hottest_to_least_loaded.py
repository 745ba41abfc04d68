#!/usr/bin/python3
"""A prophet external policy (schema v1, docs/policies.md): replicate the hottest experts onto the least-loaded
devices. Run: prophet plan --set balance.policy=external --set balance.external="/usr/bin/python3 THIS_FILE"."""
import json
import sys


def plan(counts, max_replicas):
    """counts: [D][E] tokens device d routes to expert e -> [E] lists of devices holding e, the owner first."""
    D, E = len(counts), len(counts[0])
    holders = [[e // (E // D)] for e in range(E)]  # the static owners; replicas are added below
    load = [sum(counts[d][e] for e in range(E) if holders[e][0] == d) for d in range(D)]
    replicas = [0] * D
    for e in sorted(range(E), key=lambda x: -sum(row[x] for row in counts))[:max(1, E // 8)]:
        free = [d for d in range(D) if d not in holders[e] and replicas[d] < max_replicas]
        if not free:
            continue
        d = min(free, key=lambda x: load[x])  # under the owner rule d then computes its own tokens for e
        holders[e].append(d)
        replicas[d] += 1
        load[d] += counts[d][e]
        load[holders[e][0]] -= counts[d][e]
    return holders


hello = json.loads(sys.stdin.readline())
cap = hello["memory"]["max_replicas_per_device"] or 1  # 0 = no cap: take one replica per device
print(json.dumps({"type": "ready", "schema": 1}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    if request["type"] == "plan":
        reply = {"type": "placement", "experts": plan(request["counts"], cap)}
    elif request["type"] == "plan_window":  # offline: the [L][E] weight, spread evenly over the devices
        D = hello["cluster"]["devices"]
        reply = {"type": "placements", "layers": [plan([[w / D for w in row]] * D, cap) for row in request["weight"]]}
    else:  # "bye"
        break
    print(json.dumps(reply), flush=True)
