#!/usr/bin/python3
"""95% confidence intervals of speedups, and the words a report uses for them (docs/reports.md "Significance").

A speedup point is already paired: a real sweep divides static's median step time by the policy's for the same
seed (and grid values), a simulated one static's mean iteration time by the policy's for the same trace, cluster
and seed. The interval is Student's t on the natural logs of those n paired ratios (n - 1 degrees of freedom),
back-transformed: a 95% interval for the geometric-mean speedup. Logs because a ratio's error is multiplicative
(1.25x and 0.8x are the same distance from 1) and so the interval of static over policy is the reciprocal of
policy over static's. With one point there is no interval. A deterministic simulator gives identical ratios and
so a zero-width interval: the spread over seeds is then the spread over routing draws, and nothing else.

Words: an interval wholly inside the minimum effect size, [1 / 1.01, 1.01] (MIN_EFFECT), is "same within 1%": a
difference that small is not one a reader should act on, even when the interval excludes 1.0 (a deterministic
simulator's zero-width 1.00001 [1.00001, 1.00001]). Otherwise an interval wholly above 1.0 is "faster", wholly
below "slower", one that contains 1.0 "no measurable difference", never faster or slower.
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

LEVEL = 0.95
# the minimum effect size: a speedup within a factor 1.01 of 1.0 either way (symmetric in logs, so the verdict of static
# over a policy is the mirror of the policy's over static) is no difference worth a word
MIN_EFFECT = 0.01
FASTER, SLOWER, NO_DIFFERENCE = "faster", "slower", "no measurable difference"
SAME = f"same within {MIN_EFFECT:.0%}"


def speedup_interval(ratios, level=LEVEL):
    """(geometric mean, low, high) of paired speedup ratios; low = high = NaN with fewer than 2 finite positive
    ratios (the geometric mean is still given for one)."""
    r = np.asarray([x for x in ratios if x is not None and np.isfinite(x) and x > 0], dtype=float)
    if len(r) == 0:
        return float("nan"), float("nan"), float("nan")
    logs = np.log(r)
    centre = float(np.exp(logs.mean()))
    if len(r) < 2:
        return centre, float("nan"), float("nan")
    from scipy import stats  # here, not at the top: ~1 s of start-up that a script without data never needs
    half = float(stats.t.ppf(0.5 + level / 2, len(r) - 1) * logs.std(ddof=1) / math.sqrt(len(r)))
    return centre, float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))


def verdict(low, high):
    """SAME when the interval lies within [1 / (1 + MIN_EFFECT), 1 + MIN_EFFECT]; else FASTER when it lies above
    1.0, SLOWER below it, NO_DIFFERENCE when it contains 1.0; "" without an interval (NaN bounds)."""
    if not (low == low and high == high):
        return ""
    if 1.0 / (1.0 + MIN_EFFECT) <= low and high <= 1.0 + MIN_EFFECT:
        return SAME
    if low > 1.0:
        return FASTER
    if high < 1.0:
        return SLOWER
    return NO_DIFFERENCE


def interval_text(centre, low, high):
    """'1.12 [1.08, 1.16]' (geometric mean and 95% interval, 3 significant digits); '1.12 (n = 1, no interval)'."""
    if not (low == low and high == high):
        return f"{C.fmt3(centre)} (n = 1, no interval)" if centre == centre else "-"
    return f"{C.fmt3(centre)} [{C.fmt3(low)}, {C.fmt3(high)}]"


def _num(x, digits):
    return C.fmt3(x) if digits == 3 else f"{x:.{digits}g}"


def _digits(low, high, word):
    """Significant digits that show a faster / slower interval apart from 1 (3 unless a bound rounds to 1.00, as
    1.01 [1.004, 1.02] would; at most 8)."""
    digits = 3
    while word in (FASTER, SLOWER) and digits < 8 and "1" in (f"{low:.{digits}g}", f"{high:.{digits}g}"):
        digits += 1
    return digits


def speedup_phrase(policy, baseline, centre, low, high):
    """How the summary words one speedup: 'prophet ran 1.12x as fast as static (95% CI 1.08-1.16: faster)', or
    'fastermoe against static: no measurable difference (0.99x, 95% CI 0.93-1.05)', 'eplb against static: same
    within 1% (1.00x, 95% CI 1.00-1.00)'; one point: no verdict."""
    word = verdict(low, high)
    if not word:
        return f"{policy} ran at {C.fmt3(centre)}x {baseline}'s speed (one point: no interval, no verdict)"
    d = _digits(low, high, word)
    ci = f"95% CI {_num(low, d)}-{_num(high, d)}"
    if word in (NO_DIFFERENCE, SAME):
        return f"{policy} against {baseline}: {word} ({_num(centre, d)}x, {ci})"
    return f"{policy} ran {_num(centre, d)}x as fast as {baseline} ({ci}: {word})"


def interval_columns(df, by, value):
    """Per group of `by`: the 95% interval of the paired ratios in column `value` as text and its verdict, columns
    '95% CI (geo. mean)' and 'verdict' (for a figure's table beside its mean ± sd)."""
    rows = []
    for key, g in df.groupby(by, dropna=False):
        centre, low, high = speedup_interval(g[value])
        key = key if isinstance(key, tuple) else (key,)
        rows.append(dict(zip(by, key), **{"95% CI (geo. mean)": interval_text(centre, low, high),
                                          "verdict": verdict(low, high)}))
    return C.pd.DataFrame(rows, columns=list(by) + ["95% CI (geo. mean)", "verdict"])
