#!/usr/bin/python3
"""The summary's speedup intervals and words (report/significance.py, summary.py), what-the-policies-did
(report/policy_activity.py) and the analytic model's per-op gap (report/analytic_gap.py), on hand-made frames; no
binary, no store.

  /usr/bin/python3 report/test_significance.py      (from anywhere; pytest collects the test_ functions too)

Each test_ function checks one behaviour with plain asserts; main() runs them all and prints
"N passed, M failed".
"""
import math
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import analytic_gap as G  # noqa: E402
import common as C  # noqa: E402
import policy_activity as A  # noqa: E402
import significance as S  # noqa: E402
import summary  # noqa: E402

pd = C.pd
T975_DF2 = 4.302652729911275  # Student's t, 97.5th percentile, 2 degrees of freedom (printed tables: 4.303)


def speedup_raw(ratios, policy="prophet", experiment="exp", backend="real"):
    """A speedup frame as summary.speedup_table returns it: one row per point of one policy and setting."""
    return pd.DataFrame({"experiment": experiment, "setting": "real, 2 ranks", "policy": policy,
                         "speedup_vs_static": ratios, "backend": backend})


def sentence(ratios, activity=None):
    raw = speedup_raw(ratios)
    g = pd.DataFrame([{"experiment": "exp", "setting": "real, 2 ranks", "policy": "prophet"}])
    return summary._speedup_sentence("exp", g, raw, activity)


def test_interval_is_the_t_interval_of_the_log_ratios():
    ratios = [1.10, 1.20, 1.15]
    logs = [math.log(x) for x in ratios]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    centre, low, high = S.speedup_interval(ratios)
    assert abs(centre - math.exp(mean)) < 1e-12, centre
    assert abs(low - math.exp(mean - T975_DF2 * sd / math.sqrt(3))) < 1e-9, low
    assert abs(high - math.exp(mean + T975_DF2 * sd / math.sqrt(3))) < 1e-9, high


def test_interval_of_the_reciprocals_is_the_reciprocal_interval():
    centre, low, high = S.speedup_interval([1.10, 1.20, 1.15, 0.98])
    c2, l2, h2 = S.speedup_interval([1 / 1.10, 1 / 1.20, 1 / 1.15, 1 / 0.98])
    assert abs(c2 * centre - 1) < 1e-12 and abs(l2 * high - 1) < 1e-9 and abs(h2 * low - 1) < 1e-9


def test_one_point_has_no_interval():
    centre, low, high = S.speedup_interval([1.3])
    assert centre == 1.3 and low != low and high != high
    assert S.verdict(low, high) == ""


def test_verdict_table():
    cases = [((0.95, 1.05), S.NO_DIFFERENCE), ((1.0, 1.2), S.NO_DIFFERENCE), ((0.8, 1.0), S.NO_DIFFERENCE),
             ((1.01, 1.2), S.FASTER), ((0.7, 0.99), S.SLOWER), ((float("nan"), float("nan")), ""),
             # the minimum effect size: wholly within [1 / 1.01, 1.01] is the same within 1%, 1.0 inside or not
             ((1.00001, 1.00001), S.SAME), ((0.99995, 0.99997), S.SAME), ((0.995, 1.005), S.SAME),
             ((1 / 1.01, 1.01), S.SAME), ((1.005, 1.0101), S.FASTER), ((0.98, 0.999), S.SLOWER),
             ((0.98, 1.005), S.NO_DIFFERENCE)]
    for (low, high), want in cases:
        assert S.verdict(low, high) == want, (low, high, S.verdict(low, high), want)


def test_summary_calls_an_interval_spanning_one_no_measurable_difference():
    text = sentence([0.97, 1.04, 1.01])
    assert "no measurable difference" in text, text
    assert "faster" not in text and "slower" not in text, text


def test_summary_calls_a_zero_width_tiny_speedup_the_same_within_one_percent():
    text = sentence([1.00001, 1.00001, 1.00001])  # simulated seeds with no spread (main-sim on lpwnv-8)
    assert "same within 1%" in text, text
    assert "faster" not in text and "slower" not in text, text


def test_summary_calls_an_interval_above_one_faster():
    text = sentence([1.10, 1.12, 1.11])
    assert "faster" in text and "no measurable difference" not in text, text


def test_summary_calls_an_interval_below_one_slower():
    text = sentence([0.90, 0.91, 0.89])
    assert "slower" in text and "no measurable difference" not in text, text


def test_phrase_shows_a_bound_near_one_with_enough_digits():
    cases = [((1.2, 1.1, 1.3), "1.20x as fast as static (95% CI 1.10-1.30: faster)"),
             ((1.01, 1.0004, 1.02), "1.01x as fast as static (95% CI 1.0004-1.02: faster)"),
             ((0.99, 0.98, 0.9996), "0.99x as fast as static (95% CI 0.98-0.9996: slower)"),
             ((1.00004, 1.00003, 1.00005), "same within 1% (1.00x, 95% CI 1.00-1.00)"),
             ((1.0, 0.9, 1.1), "no measurable difference (1.00x, 95% CI 0.900-1.10)")]
    for (centre, low, high), want in cases:
        got = S.speedup_phrase("prophet", "static", centre, low, high)
        assert got.endswith(want), (got, want)


def placement_rows(rows):
    return pd.DataFrame(rows, columns=["step", "layer", "expert", "replica", "rank"])


HOME_E4_D2 = [(0, 0, 0), (1, 0, 0), (2, 0, 1), (3, 0, 1)]  # (expert, replica, rank) of static, E = 4, D = 2


def layer_rows(step, layer, copies):
    return [(step, layer, e, r, k) for e, r, k in copies]


def test_static_steps_table():
    replicated = HOME_E4_D2 + [(0, 1, 1)]
    moved = [(0, 0, 1), (1, 0, 0), (2, 0, 0), (3, 0, 1)]
    cases = [
        ("static from step 0", layer_rows(0, 0, HOME_E4_D2) + layer_rows(0, 1, HOME_E4_D2), [True] * 4),
        ("a replica from step 2 on in layer 1",
         layer_rows(0, 0, HOME_E4_D2) + layer_rows(0, 1, HOME_E4_D2) + layer_rows(2, 1, replicated),
         [True, True, False, False]),
        ("a replica at step 1, static again at 2",
         layer_rows(0, 0, HOME_E4_D2) + layer_rows(1, 0, replicated) + layer_rows(2, 0, HOME_E4_D2),
         [True, False, True, True]),
        ("an owner moved, no replica", layer_rows(0, 0, moved), [False] * 4),
        ("no row before step 2", layer_rows(2, 0, HOME_E4_D2), [False, False, True, True]),
    ]
    for name, rows, want in cases:
        got = A.static_steps(placement_rows(rows), [0, 1, 2, 3], 4, 2)
        assert got == want, (name, got, want)


def activity_steps(policy, replicas, static, max_mean, seed=1):
    n = len(replicas)
    return pd.DataFrame({"experiment": "exp", "setting": "real, 2 ranks", "policy": policy, "seed": seed,
                         "step": range(n), "replicas": replicas, "static": static, "max_mean_load": max_mean,
                         "trans_ms": 1.0, "agg_ms": 2.0, "trans_exposed_ms": 0.25, "agg_exposed_ms": 0.5})


def test_activity_table_counts_steps():
    frame = pd.concat([activity_steps("static", [0] * 4, [True] * 4, [1.6, 1.5, 1.5, 1.4]),
                       activity_steps("prophet", [0, 2, 2, 1], [True, False, False, False], [1.5, 1.2, 1.1, 1.3])])
    t = A.activity_table(frame).set_index("policy")
    assert list(t.index) == ["static", "prophet"], list(t.index)
    p = t.loc["prophet"]
    assert (p["steps"], p["static steps"], p["replica steps"]) == (4, 1, 3), p
    assert p["replica steps %"] == 75.0 and p["median replicas"] == 1.5, p
    assert abs(p["median max/mean"] - 1.25) < 1e-12 and abs(p["balancedness"] - 0.8) < 1e-12, p
    assert p["Trans+Agg ms"] == 3.0 and p["exposed ms"] == 0.75, p
    assert t.loc["static", "static steps"] == 4


def test_summary_states_no_speedup_for_a_policy_that_stayed_static():
    activity = A.activity_table(activity_steps("prophet", [0] * 3, [True] * 3, [1.2] * 3))
    text = sentence([1.10, 1.12, 1.11], activity)
    assert "no speedup is stated" in text and "all 3 steps" in text, text
    assert "faster" not in text and "x as fast" not in text, text


def test_summary_gives_the_mechanism_beside_the_speedup():
    activity = A.activity_table(pd.concat([activity_steps("static", [0] * 3, [True] * 3, [1.5] * 3),
                                           activity_steps("prophet", [2] * 3, [False] * 3, [1.2] * 3)]))
    text = sentence([1.10, 1.12, 1.11], activity)
    assert "faster" in text and "replicated in 3 of 3 steps" in text, text
    assert "max/mean load 1.20 (static 1.50)" in text, text


RECORDED = {"fec": 6.0, "bec": 9.0, "attn": 2.0, "gate": 0.5, "trans": 1.5, "agg": 1.25, "trans_wait": 0.25,
            "layout": 0.75, "allreduce": 1.0, "dispatch": 1.0}  # trainer kinds, ms per step and rank
SIMULATED = {"fec": 5.0, "bec": 10.0, "fnec": 1.5, "trans": 1.5, "agg": 1.25, "trans_exposed": 0.5,
             "optimizer": 0.75, "dispatch_a2a": 0.5}  # simulator kinds, ms per step and device


def test_analytic_gap_groups_table():
    cases = [  # schedule, measured step, simulated step, {group: (measured, analytic)}
        ("blockwise", 25.0, 22.0, {"expert compute": (15.0, 15.0), "non-expert compute": (2.5, 1.5),
                                   "Trans/Agg holding up the step": (0.25, 0.5), "planning": (0.0, 0.0),
                                   "counts exchange (layout; not in the analytic model)": (0.75, 0.0),
                                   "step tail (all-reduce, optimizer, stats)": (1.0, 0.75),
                                   G.REST: (5.5, 4.25)}),
        ("none", 25.0, 22.0, {"Trans/Agg holding up the step": (3.0, 0.5), G.REST: (2.75, 4.25)}),
    ]
    for schedule, measured, simulated, want in cases:
        got = {g: (m, a) for g, m, a in G.point_groups(RECORDED, measured, SIMULATED, simulated, schedule)}
        assert abs(sum(m for m, _ in got.values()) - measured) < 1e-12, (schedule, got)
        assert abs(sum(a for _, a in got.values()) - simulated) < 1e-12, (schedule, got)
        for group, pair in want.items():
            assert got[group] == pair, (schedule, group, got[group], pair)


def main():
    tests = [(name, f) for name, f in sorted(globals().items()) if name.startswith("test_") and callable(f)]
    failed = 0
    for name, f in tests:
        try:
            f()
            print(f"PASS {name}")
        except Exception:  # noqa: BLE001
            failed += 1
            print(f"FAIL {name}\n{traceback.format_exc()}")
    print(f"{len(tests) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
