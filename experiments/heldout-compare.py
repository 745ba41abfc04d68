#!/usr/bin/python3
"""heldout-compare.py: the wide held-out campaign's acceptance checks over several replays, side by side.

Each argument is LABEL=FILE, FILE the output of
    prophet validate --store DB --experiment validate-heldout-wide --cluster CLUSTER --json --no-record
(one campaign's runs replayed with one calibration). Prints, per replay, the acceptance checks of issue 25 under
two statistics of a run's steps (1.., step 0 the warm-up is left out by prophet validate):
  median: the error of the simulated median step against the measured median step (the acceptance's statistic);
  mean:   the same of the means (a few slow early steps weigh in);
then one line per held-out point with its measured median (ms) and its median error in every replay, so the same
points under two calibrations, or two campaigns under one, can be compared.
"""
import json
import statistics
import sys


def load(path):
    with open(path) as f:
        report = json.load(f)
    points = {}
    for p in report["points"]:
        if not p["held_out"]:
            continue
        kv = dict(item.split("=") for item in p["config"].split())
        key = (int(kv["C"]), int(kv["E"]), int(kv["K"]), int(kv["L"]), p["schedule"], kv["link"], p["policy"])
        points[key] = p
    return report, points


def checks(errors):
    within = sum(abs(e) <= 0.10 for e in errors)
    return (f"within 10%: {within:2d}/{len(errors)}  MAPE {statistics.mean(abs(e) for e in errors):5.1%}  "
            f"bias {statistics.mean(errors):+5.1%}  max {max(abs(e) for e in errors):5.1%}")


def main(args):
    if not args or any("=" not in a for a in args):
        sys.exit("usage: heldout-compare.py LABEL=VALIDATE_JSON [LABEL=VALIDATE_JSON ...]")
    replays = []
    for arg in args:
        label, path = arg.split("=", 1)
        report, points = load(path)
        replays.append((label, report, points))
    for label, report, points in replays:
        total = report["total"]
        print(f"{label}:")
        print(f"  median  {checks([p['error_median'] for p in points.values()])}  "
              f"tau {total['kendall_tau']:.2f} over {total['tau_pairs']} pairs")
        print(f"  mean    {checks([p['error_mean'] for p in points.values()])}")
    keys = sorted(set().union(*(points.keys() for _, _, points in replays)))
    print("\nC   E K L schedule  link policy   | " + " | ".join(f"{label:>16}" for label, _, _ in replays))
    for key in keys:
        cells = []
        for _, _, points in replays:
            p = points.get(key)
            cells.append(f"{p['measured_median_ms']:6.2f} {p['error_median']:+7.1%}" if p else f"{'-':>16}")
        C, E, K, L, schedule, link, policy = key
        print(f"{C:<3} {E} {K} {L} {schedule:<9} {link:<4} {policy:<8} | " + " | ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:])
