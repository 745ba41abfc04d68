#!/usr/bin/python3
"""Shared helpers for the report scripts (docs/reports.md).

Every figure script opens the store read-only (``file:...?mode=ro``), loads long-form frames with
``pandas.read_sql_query``, draws one figure with seaborn, saves it as PNG + PDF with fixed metadata (so rebuilding
gives byte-identical files) and prints the table behind the figure as markdown on stdout. A script whose data is
missing prints one line starting with ``NO_DATA_PREFIX`` and exits 0 without writing a figure.
"""
import argparse
import os
import sqlite3
import sys
import urllib.parse

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("SOURCE_DATE_EPOCH", "0")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

NO_DATA_PREFIX = "no data:"
DEFAULT_DB = "results/prophet.db"
DEFAULT_OUT = "results/figures"
PNG_METADATA = {"Software": None}
PDF_METADATA = {"CreationDate": None, "Producer": None, "Creator": None}
SD_NOTE = "mean \u00b1 sd across seeds"

# Fixed policy order and colours so that every figure uses the same colour for a policy.
POLICY_ORDER = ["static", "fastermoe", "prophet", "prophet-oracle", "eplb", "moetuner", "moetuner-joint", "top2",
                "top3", "exhaustive"]


def parse_args(description, experiment=True, argv=None, extra=None):
    """--db, --out (and --experiment) for every figure script; extra(parser) adds a script's own options."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--db", default=DEFAULT_DB, help="store file, opened read-only (default %(default)s)")
    p.add_argument("--out", default=DEFAULT_OUT, help="output directory for PNG + PDF (default %(default)s)")
    if experiment:
        p.add_argument("--experiment", default=None, help="only runs with this experiment name")
    if extra is not None:
        extra(p)
    return p.parse_args(argv)


def no_data(name, why):
    """Report that a figure has no data and exit 0 without writing anything."""
    print(f"{NO_DATA_PREFIX} {name}: {why}; no figure written")
    sys.exit(0)


def connect(path):
    """Open the store read-only; None when the file does not exist or is not a SQLite database."""
    if not os.path.isfile(path):
        return None
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True)
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return con
    except sqlite3.DatabaseError:
        return None


def connect_or_exit(path, name):
    """connect(path), or the no-data line for figure `name` and exit 0 when there is no store."""
    con = connect(path)
    if con is None:
        no_data(name, f"no store at {path}")
    return con


def _query(con, sql, params=()):
    try:
        return pd.read_sql_query(sql, con, params=params)
    except (sqlite3.DatabaseError, pd.errors.DatabaseError):  # missing table: treat as empty
        return pd.DataFrame()


def load_frame(name, args, loader, missing):
    """Open args.db read-only and return loader(con, args.experiment); print the no-data line and exit 0 when the
    store is missing or the frame is empty (missing: what was not found)."""
    con = connect_or_exit(args.db, name)
    df = loader(con, args.experiment)
    if df.empty:
        no_data(name, missing + (f" in experiment {args.experiment}" if args.experiment else ""))
    return df


def load_runs(con, command=None, experiment=None, status="finished"):
    """Runs as a frame (one row per run), optionally filtered."""
    where, args = [], []
    if command is not None:
        where.append("command = ?")
        args.append(command)
    if experiment is not None:
        where.append("experiment = ?")
        args.append(experiment)
    if status is not None:
        where.append("status = ?")
        args.append(status)
    sql = ("SELECT run_id, parent_id, experiment, command, status, started_ms, seed, world_size, backend, simulated "
           "FROM runs")
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY started_ms, run_id"
    return _query(con, sql, args)


# Statuses in the order a reader wants them: how many counted, then how many did not and why.
RUN_STATUSES = ["finished", "failed", "lost", "killed", "interrupted", "resumed", "running"]


def runs_status_line(con):
    """Every run of the store by status, in one line: "runs: 40 finished, 2 failed, 1 lost".

    Failed and lost runs (a process that died without recording its end: `prophet db check --repair`) are always
    named when there are any, so a report never drops them silently; unknown statuses come last, by name. A store
    without a runs table reads "runs: none"."""
    try:
        counts = dict(con.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall())
    except sqlite3.DatabaseError:
        counts = {}
    parts = [f"{counts.pop(status)} {status}" for status in RUN_STATUSES if status in counts]
    parts += [f"{n} {status}" for status, n in sorted(counts.items())]
    return "runs: " + (", ".join(parts) if parts else "none")


def _toml_value(v):
    """A params value is TOML text: strip string quotes, parse numbers and booleans."""
    if v is None:
        return None
    s = str(v)
    if len(s) >= 2 and s[0] == '"' and s[-1] == '"':
        return s[1:-1]
    if s in ("true", "false"):
        return s == "true"
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s


def _in_clause(run_ids):
    return ",".join("?" * len(run_ids))


def load_params(con, run_ids, keys=None):
    """Params pivoted to one column per key (index run_id), values parsed from TOML text."""
    run_ids = list(run_ids)
    if not run_ids:
        return pd.DataFrame(index=pd.Index([], name="run_id"))
    frames = []
    for i in range(0, len(run_ids), 500):
        chunk = run_ids[i:i + 500]
        sql = f"SELECT run_id, key, value FROM params WHERE run_id IN ({_in_clause(chunk)})"
        args = list(chunk)
        if keys:
            sql += f" AND key IN ({_in_clause(keys)})"
            args += list(keys)
        frames.append(_query(con, sql, args))
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if df.empty:
        return pd.DataFrame(index=pd.Index(run_ids, name="run_id"))
    df["value"] = df["value"].map(_toml_value)
    wide = df.pivot(index="run_id", columns="key", values="value")
    wide.columns.name = None
    for c in wide.columns:
        converted = pd.to_numeric(wide[c], errors="coerce")
        if converted.notna().sum() == wide[c].notna().sum():
            wide[c] = converted
    return wide


def load_metrics(con, run_ids, keys=None, like=None):
    """Metrics as a long frame: run_id, key, step, layer, rank, value (NaN for is_nan rows)."""
    run_ids = list(run_ids)
    cols = ["run_id", "key", "step", "layer", "rank", "value"]
    if not run_ids:
        return pd.DataFrame(columns=cols)
    frames = []
    for i in range(0, len(run_ids), 500):
        chunk = run_ids[i:i + 500]
        sql = f"SELECT {', '.join(cols)}, is_nan FROM metrics WHERE run_id IN ({_in_clause(chunk)})"
        args = list(chunk)
        if keys:
            sql += f" AND key IN ({_in_clause(keys)})"
            args += list(keys)
        if like:
            sql += " AND key LIKE ?"
            args.append(like)
        frames.append(_query(con, sql, args))
    df = pd.concat(frames, ignore_index=True)
    if df.empty:
        return pd.DataFrame(columns=cols)
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    df.loc[df["is_nan"] == 1, "value"] = float("nan")
    return df[cols].sort_values(["run_id", "key", "step", "layer", "rank"]).reset_index(drop=True)


def summary_wide(metrics, keys, step=0):
    """Global (layer = rank = -1) metrics at one step, one column per key, index run_id."""
    m = metrics[(metrics["key"].isin(keys)) & (metrics["step"] == step) & (metrics["layer"] == -1) &
                (metrics["rank"] == -1)]
    if m.empty:
        return pd.DataFrame(columns=list(keys))
    w = m.pivot_table(index="run_id", columns="key", values="value", aggfunc="first")
    w.columns.name = None
    return w


def sweep_points(con, experiment=None, metric_keys=()):
    """Finished `prophet sweep` runs with their params and step-0 summary metrics, one row per run.

    Adds readable columns: policy, cluster, trace (file stems), seed.
    """
    runs = load_runs(con, command="sweep", experiment=experiment)
    if runs.empty:
        return pd.DataFrame()
    params = load_params(con, runs["run_id"])
    df = runs.set_index("run_id").join(params, how="left")
    if metric_keys:
        met = load_metrics(con, runs["run_id"], keys=list(metric_keys))
        df = df.join(summary_wide(met, metric_keys), how="left")
    df["policy"] = df.get("balance.policy", pd.Series(index=df.index, dtype=object))
    df["cluster"] = df.get("point.cluster", pd.Series(index=df.index, dtype=object)).map(stem)
    df["trace"] = df.get("point.trace", pd.Series(index=df.index, dtype=object)).map(stem)
    if "point.seed" in df.columns:
        df["seed"] = df["point.seed"]
    return df.reset_index()


def stem(path):
    if not isinstance(path, str):
        return path
    base = os.path.basename(path)
    return base[:-5] if base.endswith(".toml") else base


def policy_order(policies):
    present = [p for p in POLICY_ORDER if p in set(policies)]
    return present + sorted(p for p in set(policies) if p not in POLICY_ORDER and isinstance(p, str))


def palette(policies):
    base = sns.color_palette("tab10", len(POLICY_ORDER))
    colors = dict(zip(POLICY_ORDER, base))
    extra = sns.color_palette("Set2", 8)
    out, k = {}, 0
    for p in policies:
        if p in colors:
            out[p] = colors[p]
        else:
            out[p] = extra[k % len(extra)]
            k += 1
    return out


def setup_style():
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.1)
    plt.rcParams["axes.formatter.useoffset"] = False
    plt.rcParams["svg.hashsalt"] = "prophet"


def add_caption(fig, text):
    """Put the caption under the figure (and return it for the markdown table)."""
    import textwrap
    width_chars = max(40, int(fig.get_figwidth() * 15))
    fig.text(0.01, 0.005, textwrap.fill(text, width_chars), ha="left", va="bottom", fontsize=8, color="0.25")
    return text


def save_figure(fig, out_dir, name):
    """Write <name>.png and <name>.pdf with deterministic metadata; returns both paths."""
    os.makedirs(out_dir, exist_ok=True)
    png = os.path.join(out_dir, name + ".png")
    pdf = os.path.join(out_dir, name + ".pdf")
    fig.savefig(png, dpi=150, metadata=PNG_METADATA, bbox_inches="tight")
    fig.savefig(pdf, metadata=PDF_METADATA, bbox_inches="tight")
    plt.close(fig)
    print(f"wrote {png} and {pdf}", file=sys.stderr)
    return png, pdf


def _fmt(v):
    if isinstance(v, float):
        if v != v:
            return "nan"
        return f"{v:.4g}"
    return str(v)


def markdown_table(df, index=False):
    """A frame as a GitHub markdown table (no tabulate dependency)."""
    if index:
        df = df.reset_index()
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(_fmt(v) for v in row) + " |")
    return "\n".join(lines)


def print_result(name, caption, table):
    """stdout protocol read by build_report.py: caption line, blank line, the markdown table."""
    print(f"caption: {caption}")
    print()
    print(markdown_table(table))


def mean_sd(df, by, value):
    """Mean, sd and count of value grouped by the columns in by."""
    g = df.groupby(by, dropna=False)[value]
    t = g.agg(["mean", "std", "count"]).reset_index()
    return t.rename(columns={"mean": f"{value}_mean", "std": f"{value}_sd", "count": "n"})
