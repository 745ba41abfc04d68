#!/usr/bin/python3
"""Shared helpers for the report scripts (docs/reports.md).

Every figure script opens the store read-only (``file:...?mode=ro``), loads long-form frames with
``pandas.read_sql_query``, draws one figure with seaborn, saves it as PNG + PDF with fixed metadata (so rebuilding
gives byte-identical files) and prints the table behind the figure as markdown on stdout. A script whose data is
missing prints one line starting with ``NO_DATA_PREFIX`` and exits 0 without writing a figure.
"""
import argparse
import functools
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import urllib.parse
import zlib

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("SOURCE_DATE_EPOCH", "0")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import pandas as pd  # noqa: E402


def __getattr__(name):
    """C.plt and C.sns, imported on first use: a script that finds no data never draws, and pyplot + seaborn (with
    the scipy.stats it loads) are two thirds of a script's start-up (~2 s CPU of ~3 s)."""
    if name == "plt":
        import matplotlib.pyplot as plt
        return plt
    if name == "sns":
        import seaborn as sns
        return sns
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---- names from the store are text, never markup (issue 26 item 5) --------------------------------------------------
# Experiment, policy, cluster and trace names reach figures and REPORT.md as they were typed. matplotlib reads a pair of
# '$' as math ("cost_$5_vs_$10" failed to draw); Markdown reads raw HTML, a line starting with '#', '|' in a table
# row, backticks, '*', '[' ... as markup. The two functions below are the only places that make text literal.

def plain_text_figures():
    """Every figure draws text literally: no math text (no figure script uses it; names may hold '$')."""
    matplotlib.rcParams["text.parse_math"] = False


plain_text_figures()

_MD_ESCAPED = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r\n": " ", "\r": " ", "\n": " "}
_MD_BACKSLASHED = set("\\`*[]|$#~")


def md(text):
    """`text` as literal Markdown on one line (a table cell, a caption, a sentence): newlines become spaces (a name
    cannot start a heading or end a table row), < > & become entities (raw HTML shows as text), and \\ ` * [ ] | $
    # ~ get a backslash. Letters, digits, '_' and other punctuation stay as they are."""
    s = str(text).replace("\r\n", "\n")
    return "".join(_MD_ESCAPED.get(ch) or ("\\" + ch if ch in _MD_BACKSLASHED else ch) for ch in s)

NO_DATA_PREFIX = "no data:"
DEFAULT_DB = "results/prophet.db"
DEFAULT_OUT = "results/figures"
PNG_METADATA = {"Software": None}
PDF_METADATA = {"CreationDate": None, "Producer": None, "Creator": None}
SD_NOTE = "mean \u00b1 sd across seeds"

# Policy order and colours come from prophet's policy registry (`prophet policies --json`), so that every figure
# gives a policy the same colour and a new policy needs no edit here (docs/policies.md).
REGISTRY_ENV = "PROPHET_POLICIES_JSON"  # a file holding `prophet policies --json`'s output
BINARY_ENV = "PROPHET_BINARY"           # the prophet binary to ask (`prophet report` sets it to itself)


def parse_args(description, experiment=True, argv=None, extra=None):
    """--db, --out (and --experiment) for every figure script; extra(parser) adds a script's own options."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--db", default=DEFAULT_DB, help="store file, opened read-only (default %(default)s)")
    p.add_argument("--out", default=DEFAULT_OUT, help="output directory for PNG + PDF (default %(default)s)")
    if experiment:
        p.add_argument("--experiment", default=None, nargs="+",
                       help="only runs with this experiment name (several: any of them)")
    if extra is not None:
        extra(p)
    args = p.parse_args(argv)
    if experiment and args.experiment is not None and len(args.experiment) == 1:
        args.experiment = args.experiment[0]  # one name stays a string: messages and filters read as before
    return args


def no_data(name, why):
    """Report that a figure has no data and exit 0 without writing anything."""
    print(f"{NO_DATA_PREFIX} {name}: {why}; no figure written")
    sys.exit(0)


class _Store(sqlite3.Connection):
    """A store connection that knows its file, for the messages of database_error."""
    path = ""


def database_error(path, error):
    """A store that cannot be read (corrupt pages, not a SQLite file, unreadable): one line naming the file and
    SQLite's cause on stderr, exit 5. Reports never turn such a store into 'no data'."""
    print(f"database error: {path}: {error}; fix: check it with prophet db check --db {path}", file=sys.stderr)
    sys.exit(5)


def read_only_uri(path):
    """The URI that opens `path` only to read it, as the C++ store does (lib/store/store_read_only.cpp): mode=ro, or
    immutable=1 where a WAL reader could not create its -shm file (the directory cannot be written, e.g. a read-only
    mount) and no -wal file holds pages the file lacks."""
    path = os.path.abspath(path)
    wal = path + "-wal"
    wal_pending = os.path.isfile(wal) and os.path.getsize(wal) > 0
    dir_writable = os.access(os.path.dirname(path), os.W_OK)
    return "file:" + urllib.parse.quote(path) + ("?mode=ro" if dir_writable or wal_pending else "?immutable=1")


def connect(path):
    """Open the store read-only; None when the file does not exist. A file that is no readable SQLite database
    exits 5 (database_error)."""
    if not os.path.isfile(path):
        return None
    try:
        con = sqlite3.connect(read_only_uri(path), uri=True, factory=_Store)
        con.path = path
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return con
    except sqlite3.DatabaseError as e:
        database_error(path, e)


def connect_or_exit(path, name):
    """connect(path), or the no-data line for figure `name` and exit 0 when there is no store."""
    con = connect(path)
    if con is None:
        no_data(name, f"no store at {path}")
    return con


def _missing_table(error):
    """True for SQLite's "no such table" (a store without bench rows, an older schema): read as empty."""
    return "no such table" in str(error)


def _query(con, sql, params=()):
    try:
        return pd.read_sql_query(sql, con, params=params)
    except (sqlite3.DatabaseError, pd.errors.DatabaseError) as e:
        if _missing_table(e):
            return pd.DataFrame()
        database_error(getattr(con, "path", "the store"), e.__cause__ or e)


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
    if isinstance(experiment, (list, tuple)):
        where.append(f"experiment IN ({_in_clause(experiment)})")
        args += list(experiment)
    elif experiment is not None:
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
    except sqlite3.DatabaseError as e:
        if not _missing_table(e):
            database_error(getattr(con, "path", "the store"), e)
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


def sweep_points(con, experiment=None, metric_keys=(), keep_perturbed=False):
    """Finished `prophet sweep` runs with their params and step-0 summary metrics, one row per run.

    Adds readable columns: policy, cluster, trace (file stems), seed. Points simulated on a perturbed truth (any
    truth.*_scale other than 1.0: a sweep's truth_scale / uncertainty) are left out unless keep_perturbed (only
    fig_speedup draws their band).
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
    if not keep_perturbed:
        df = df[nominal_truth(df)]
    return df.reset_index()


def truth_columns(df):
    """The truth.*_scale params of sweep points (a sweep's truth_scale / uncertainty; docs/sweep.md)."""
    return [c for c in df.columns if str(c).startswith("truth.") and str(c).endswith("_scale")]


def nominal_truth(df):
    """Boolean mask: rows simulated on the cluster file as written (every truth scale 1.0 or absent)."""
    scales = df[truth_columns(df)].apply(pd.to_numeric, errors="coerce")
    return (scales.isna() | (scales == 1.0)).all(axis=1)


def plan_settings(con, run_ids):
    """`prophet plan` runs' settings: a frame run_id, setting ("trace / cluster", the stems of input.trace and
    input.cluster, "?" for a missing one)."""
    params = load_params(con, run_ids, keys=["input.trace", "input.cluster"]).reset_index()
    params["setting"] = (params.get("input.trace").map(stem).fillna("?") + " / " +
                         params.get("input.cluster").map(stem).fillna("?"))
    return params[["run_id", "setting"]]


def load_plan_policy_metrics(con, name, args, like, metric_re, missing):
    """`prophet plan` runs' per-policy summary metrics plan.<policy>.<metric> (layer and rank -1) as a wide frame:
    run_id, setting ("trace / cluster" stems), policy, one column per metric matching `metric_re` (a regex group
    body). Ends the script with the no-data message when there are no plan runs or no such metric (`missing`)."""
    runs = load_runs(con, command="plan", experiment=args.experiment)
    if runs.empty:
        no_data(name, "no finished `prophet plan` runs")
    met = load_metrics(con, runs["run_id"], like=like)
    met = met[(met["layer"] == -1) & (met["rank"] == -1)]
    parts = met["key"].str.extract(rf"^plan\.(?P<policy>.+)\.(?P<metric>{metric_re})$")
    met = met.join(parts).dropna(subset=["policy", "metric"])
    if met.empty:
        no_data(name, missing)
    met = met.merge(plan_settings(con, runs["run_id"]), on="run_id", how="left")
    wide = met.pivot_table(index=["run_id", "setting", "policy"], columns="metric", values="value").reset_index()
    wide.columns.name = None
    return wide


def stem(path):
    if not isinstance(path, str):
        return path
    base = os.path.basename(path)
    return base[:-5] if base.endswith(".toml") else base


def _registry_text():
    """`prophet policies --json`'s text: from $PROPHET_POLICIES_JSON, else by running $PROPHET_BINARY, prophet on
    PATH or build/prophet beside report/; None when none of them is there (a store alone)."""
    path = os.environ.get(REGISTRY_ENV)
    if path:
        with open(path, encoding="utf-8") as f:
            return f.read()
    here = os.path.dirname(os.path.abspath(__file__))
    for binary in (os.environ.get(BINARY_ENV), shutil.which("prophet"), os.path.join(here, "..", "build", "prophet")):
        if binary and os.access(binary, os.X_OK):
            done = subprocess.run([binary, "policies", "--json"], capture_output=True, text=True, timeout=60)
            if done.returncode == 0:
                return done.stdout
    return None


@functools.lru_cache(maxsize=1)
def registry_policies():
    """The registry's policy names in report order ([] when no registry could be read)."""
    text = _registry_text()
    if text is None:
        return []
    return [row["name"] for row in json.loads(text)["policies"]]


def policy_order(policies):
    """The given policies in the registry's order; names it does not know (or all, without a registry) sorted."""
    known = registry_policies()
    present = [p for p in known if p in set(policies)]
    return present + sorted(p for p in set(policies) if p not in known and isinstance(p, str))


# Colours for the registry's rows after tab10's ten, each at least 0.26 (RGB distance) from every other one and from
# tab10's (Dark2 put flow's orange 0.20 from deepspeed's and the external policy's purple 0.13 from prophet-oracle's)
REGISTRY_EXTRA_COLOURS = [(0.0, 0.4, 0.4), (0.0, 0.0, 0.0), (0.9, 0.0, 0.9), (0.0, 0.0, 0.5), (0.5, 0.0, 0.0),
                          (1.0, 0.84, 0.0), (0.5, 0.9, 0.1), (0.3, 0.0, 0.5)]


def palette(policies):
    """One colour per policy, the same in every figure: its registry row's (tab10, then REGISTRY_EXTRA_COLOURS); a
    name outside the registry (or every name, without one) gets a colour fixed by its name."""
    import seaborn as sns
    base = sns.color_palette("tab10", 10) + REGISTRY_EXTRA_COLOURS
    colors = {p: base[i % len(base)] for i, p in enumerate(registry_policies())}
    extra = sns.color_palette("Set2", 8)
    return {p: colors[p] if p in colors else extra[zlib.crc32(str(p).encode()) % len(extra)] for p in policies}


def setup_style():
    import matplotlib.pyplot as plt
    import seaborn as sns
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.1)
    plt.rcParams["axes.formatter.useoffset"] = False
    plt.rcParams["svg.hashsalt"] = "prophet"
    plain_text_figures()


def add_caption(fig, text):
    """Put the caption under the figure (and return it for the markdown table)."""
    import textwrap
    width_chars = max(40, int(fig.get_figwidth() * 15))
    fig.text(0.01, 0.005, textwrap.fill(text, width_chars), ha="left", va="bottom", fontsize=8, color="0.25")
    return text


# The directory save_figure last wrote to: print_result writes the full table as <name>.csv there, beside the figure
# (every script saves its figure before printing its table).
_last_out_dir = None


def tight_crop(fig):
    """The box (inches) savefig(bbox_inches="tight") crops to, padded as it pads, measured once for both formats: with
    "tight" every savefig draws the figure twice (once to measure, once to write), so PNG + PDF drew it four times.
    A figure drawn since its last change (layout_check measured its text) is not drawn again."""
    if fig.stale:
        fig.canvas.draw()
    return fig.get_tightbbox(fig.canvas.get_renderer()).padded(matplotlib.rcParams["savefig.pad_inches"])


def save_figure(fig, out_dir, name):
    """Write <name>.png and <name>.pdf with deterministic metadata; returns both paths."""
    global _last_out_dir
    os.makedirs(out_dir, exist_ok=True)
    _last_out_dir = out_dir
    png = os.path.join(out_dir, name + ".png")
    pdf = os.path.join(out_dir, name + ".pdf")
    crop = tight_crop(fig)
    fig.savefig(png, dpi=150, metadata=PNG_METADATA, bbox_inches=crop)
    fig.savefig(pdf, metadata=PDF_METADATA, bbox_inches=crop)
    import matplotlib.pyplot as plt
    plt.close(fig)
    print(f"wrote {png} and {pdf}", file=sys.stderr)
    return png, pdf


def fmt3(v):
    """A number for people: 3 significant digits (1.00, 0.0123), no exponent from 1e-4 to 1e6 (1234.5 -> 1235, 123.4
    -> 123); integers and text as they are; NaN as '-'."""
    if isinstance(v, bool) or v is None:
        return "-" if v is None else str(v)
    if isinstance(v, int) or (hasattr(v, "dtype") and getattr(v.dtype, "kind", "") in "iu"):
        return str(v)
    if isinstance(v, float) or hasattr(v, "dtype"):
        v = float(v)
        if v != v:
            return "-"
        if 100 <= abs(v) < 1e6:
            return f"{v:.0f}"
        if v == 0 or 1e-4 <= abs(v) < 100:
            return f"{v:#.3g}".rstrip(".")  # keeps 3 significant digits: 1.00, 0.0120
        return f"{v:.3g}"
    return str(v)


def mean_pm_sd(mean, sd):
    """'1.23 ± 0.041': the mean to 3 significant digits, the sd to 2; '1.23' without an sd."""
    if sd is None or sd != sd:
        return fmt3(mean)
    return f"{fmt3(mean)} \u00b1 {sd:.0f}" if abs(sd) >= 100 else f"{fmt3(mean)} \u00b1 {sd:.2g}"


def people_frame(df):
    """Merge every X_mean / X_sd column pair into one 'X' column of 'mean ± sd' text, keeping column order."""
    cols = [str(c) for c in df.columns]
    out = {}
    for c in cols:
        if c.endswith("_sd") and c[:-3] + "_mean" in cols:
            continue
        if c.endswith("_mean") and c[:-5] + "_sd" in cols:
            out[c[:-5]] = [mean_pm_sd(m, s) for m, s in zip(df[c], df[c[:-5] + "_sd"])]
        else:
            out[c] = list(df[c])
    return pd.DataFrame(out, columns=list(out))


MAX_COLUMNS = 8  # wider tables are split, the key (text) columns repeated in each part
MAX_ROWS = 24    # longer tables are cut in the report; the CSV beside the figure has every row


def _one_table(df):
    cols = [md(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(md(fmt3(v)) for v in row) + " |")
    return "\n".join(lines)


def markdown_table(df, index=False, max_rows=None):
    """A frame as GitHub markdown (no tabulate dependency), rounded for people (fmt3); more than MAX_COLUMNS
    columns: several tables, each repeating the leading text columns; more than max_rows rows: the first max_rows
    and a line saying how many were left out."""
    if index:
        df = df.reset_index()
    note = ""
    if max_rows is not None and len(df) > max_rows:
        note = f"\n\n_{len(df) - max_rows} more rows in the CSV file beside the figure._"
        df = df.head(max_rows)
    cols = list(df.columns)
    if len(cols) <= MAX_COLUMNS:
        return _one_table(df) + note
    keys = []
    for c in cols:
        if df[c].dtype == object and len(keys) < 3 and len(keys) == cols.index(c):
            keys.append(c)
    rest = [c for c in cols if c not in keys]
    width = max(1, MAX_COLUMNS - len(keys))
    parts = [_one_table(df[keys + rest[i:i + width]]) for i in range(0, len(rest), width)]
    return "\n\n".join(parts) + note


def print_result(name, caption, table):
    """stdout protocol read by build_report.py: caption line, blank line, the markdown table (mean/sd pairs
    merged, rounded, long tables cut); the full table goes to <name>.csv beside the figure."""
    if _last_out_dir is not None:
        table.to_csv(os.path.join(_last_out_dir, name + ".csv"), index=False)
    print(f"caption: {md(caption)}")
    print()
    print(markdown_table(people_frame(table), max_rows=MAX_ROWS))


def mean_sd(df, by, value):
    """Mean, sd and count of value grouped by the columns in by."""
    g = df.groupby(by, dropna=False)[value]
    t = g.agg(["mean", "std", "count"]).reset_index()
    return t.rename(columns={"mean": f"{value}_mean", "std": f"{value}_sd", "count": "n"})
