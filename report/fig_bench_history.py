#!/usr/bin/python3
"""Throughput across commits from ci/bench-regress.sh: the history kept in git and the store's bench runs.

Two sources, drawn together: results/baselines/history.jsonl (--history; one line per landed change, appended by
`ci/bench-regress.sh --append-history`: each row's median over repeats) and every bench-regress run in the store
(--db; each row's figure per repeat). Timing rows are figures divided by the reference measured in the same
repeat (cblas_sgemm called directly: planner "ref kFLOP per plan", lower is better; training "tokens per ref
GFLOP", higher is better); instruction rows are instructions per plan (callgrind, lower is better). Throughput is
shown relative to each row's first point, so 1.0 is the first commit and above 1 is faster: first / x for rows
where lower is better, x / first otherwise. One point per commit or run (history first, then store runs, in
recording order; '+' marks a dirty tree), mean ± sd across a store run's repeats (errorbar='sd').
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

NAME = "fig_bench_history"
DEFAULT_HISTORY = "results/baselines/history.jsonl"


def history_rows(path):
    """(runs, bench) frames of history.jsonl: one run per line, one bench row per timing and instruction row"""
    import pandas as pd
    runs, bench = [], []
    if path and os.path.isfile(path):
        with open(path) as f:
            for i, text in enumerate(f):
                if not text.strip():
                    continue
                line = json.loads(text)
                run_id = f"history:{i}"
                runs.append({"run_id": run_id, "started_ms": i, "git_sha": line.get("commit"), "git_dirty": 0})
                for name, t in line.get("timings", {}).items():
                    bench.append({"run_id": run_id, "name": name, "rep": 0,
                                  "counters": json.dumps({"normalized": t["value"], "better": t["better"]})})
                for name, value in line.get("instructions", {}).items():
                    bench.append({"run_id": run_id, "name": name, "rep": 0,
                                  "counters": json.dumps({"normalized": value, "better": "lower"})})
    return pd.DataFrame(runs), pd.DataFrame(bench)


def main(argv=None):
    import pandas as pd
    args = C.parse_args(__doc__.splitlines()[0], experiment=False, argv=argv,
                        extra=lambda p: p.add_argument("--history", default=DEFAULT_HISTORY,
                                                       help="history.jsonl kept in git (default %(default)s)"))
    h_runs, h_bench = history_rows(args.history)
    con = C.connect(args.db)
    s_runs = pd.DataFrame() if con is None else C._query(
        con, "SELECT run_id, started_ms, git_sha, git_dirty, status FROM runs "
             "WHERE command = 'bench-regress' ORDER BY started_ms, run_id")
    s_bench = pd.DataFrame() if con is None else C._query(
        con, "SELECT b.run_id, b.name, b.rep, b.counters FROM bench b JOIN runs r ON r.run_id = b.run_id "
             "WHERE r.command = 'bench-regress' AND b.name NOT LIKE 'exact: %'")
    if h_runs.empty and s_runs.empty:
        C.no_data(NAME, f"no ci/bench-regress.sh runs (no lines in {args.history}, none in {args.db})")
    if not s_runs.empty:
        s_runs["started_ms"] = s_runs["started_ms"] + len(h_runs)  # after the history, in recording order
    runs = pd.concat([h_runs, s_runs], ignore_index=True)
    bench = pd.concat([h_bench, s_bench], ignore_index=True)
    if bench.empty:
        C.no_data(NAME, "bench-regress runs without timing rows")
    counters = bench["counters"].map(lambda s: json.loads(s) if s else {})
    bench["normalized"] = counters.map(lambda c: c.get("normalized"))
    bench["better"] = counters.map(lambda c: c.get("better", "lower"))
    bench = bench.dropna(subset=["normalized"])
    if bench.empty:
        C.no_data(NAME, "no normalized timing figures")
    runs = runs.sort_values("started_ms", kind="stable").reset_index(drop=True)
    runs["commit"] = [f"{i}:{(sha or 'nogit')[:8]}{'+' if dirty else ''}"
                      for i, (sha, dirty) in enumerate(zip(runs["git_sha"], runs["git_dirty"]))]
    bench = bench.merge(runs[["run_id", "commit", "started_ms"]], on="run_id")
    first_run = bench.sort_values("started_ms").groupby("name")["run_id"].first()
    first = bench[bench["run_id"] == bench["name"].map(first_run)].groupby("name")["normalized"].mean()
    lower = bench["better"] == "lower"
    bench["relative"] = bench["name"].map(first) / bench["normalized"]
    bench.loc[~lower, "relative"] = 1.0 / bench.loc[~lower, "relative"]

    C.setup_style()
    import matplotlib.pyplot as plt
    import seaborn as sns
    order = list(runs["commit"][runs["run_id"].isin(bench["run_id"])])
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(order) + 4), 4.4))
    sns.pointplot(data=bench, x="commit", y="relative", hue="name", order=order, errorbar="sd", dodge=0.3,
                  scale=0.7, errwidth=1.0, ax=ax)
    ax.axhline(1.0, color="0.3", lw=0.8, ls="--")
    ax.set_xlabel("bench-regress run: index:commit")
    ax.set_ylabel("throughput relative to the first run")
    ax.set_title("Planner and training throughput across commits")
    plt.setp(ax.get_xticklabels(), rotation=35, ha="right")
    ax.legend(title="benchmark row", fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    cap = ("Throughput relative to each row's first point (1.0, dashed; above is faster), each timing first divided "
           "by the reference measured in the same repeat (cblas_sgemm called directly); mean \u00b1 sd across "
           "repeats (errorbar='sd'). Data: ci/bench-regress.sh: results/baselines/history.jsonl (one line per "
           "landed change), then the store's bench table.")
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    C.save_figure(fig, args.out, NAME)
    t = bench.groupby(["commit", "name"], sort=False)["relative"].agg(["mean", "std", "count"]).reset_index()
    t["_o"] = t["commit"].map({c: i for i, c in enumerate(order)})
    t = t.sort_values(["_o", "name"]).drop(columns="_o").rename(
        columns={"mean": "relative_mean", "std": "relative_sd", "count": "repeats"}).reset_index(drop=True)
    C.print_result(NAME, cap, t)


if __name__ == "__main__":
    main()
