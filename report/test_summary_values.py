#!/usr/bin/python3
"""report/summary.py's speedup headline on values that are not finite (issue 26 item 16): a NaN speedup is counted in
n and named as invalid, never dropped; an inf one is never printed as "infx static's speed". One row per case:
the points' speedups, then what the table and the sentence must say."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import summary as S  # noqa: E402

pd = S.pd
NAN, INF = float("nan"), float("inf")

CASES = [
    # speedups of the points, n, invalid, in the sentence, never in the sentence
    ([1.5, 1.7], 2, 0, "1.6", "n/a"),
    ([1.5, NAN], 2, 1, "1 of 2 points had no finite speedup", "infx"),
    ([INF, 2.0], 2, 1, "1 of 2 points had no finite speedup", "infx"),
    ([INF], 1, 1, "n/a", "infx"),
    ([NAN, NAN], 2, 2, "n/a", "nanx"),
]


def main():
    failures = 0
    for values, n, invalid, needle, banned in CASES:
        raw = pd.DataFrame({"experiment": "e", "backend": "sim", "cluster": "c1", "policy": "prophet",
                            "speedup_vs_static": values})
        table, frame = S.speedup_summary(raw)
        row = table.iloc[0]
        sentence = S._speedup_sentence("e", table[table["experiment"] == "e"], frame)
        problems = []
        if int(row["n"]) != n:
            problems.append(f"n = {row['n']}, expected {n}")
        if int(row.get("invalid", 0)) != invalid:
            problems.append(f"invalid = {row.get('invalid', 0)}, expected {invalid}")
        if needle not in sentence:
            problems.append(f"sentence lacks {needle!r}")
        if banned in sentence or "infx" in str(row["speedup over static"]):
            problems.append(f"sentence holds {banned!r}")
        status = "FAIL" if problems else "ok"
        print(f"{status}: {values}: {row['speedup over static']} n={row['n']} invalid={row.get('invalid')}: {sentence}"
              + ("" if not problems else "\n   " + "; ".join(problems)))
        failures += bool(problems)
    print(f"{len(CASES) - failures} of {len(CASES)} cases ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
