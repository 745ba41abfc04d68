#!/usr/bin/python3
"""Robustness of the report against hostile stores (issue 26 items 5 and 6): names that are markdown, HTML or
matplotlib math, a store with corrupted pages, a store in a directory nobody may write.

  /usr/bin/python3 -m pytest report/test_reports_hostile.py --prophet build/prophet [--keep]   (what ctest runs)
  /usr/bin/python3 report/test_reports_hostile.py --prophet build/prophet [--keep]             (the same)

ctest runs it as report_scripts_hostile, a process of its own beside report_scripts (test_reports.py); running
test_reports.py as a script runs this file too.

Fixture (temp dir of its own, the `hostile` fixture, built once per session): four tiny sim sweeps renamed to
HOSTILE_NAMES on a cluster file with '$', '|' and '<i>' in its name, a read-only copy of that store (chattr +i),
and one `prophet report` on the copy. --prophet, --keep and the `prophet` fixture are declared in
report/conftest.py; the Checker is report_testing's.
"""
import os
import shutil
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import layout_check  # noqa: E402  (the plotted values of a drawn figure)
from report_testing import ROOT, Checker, nonempty, release_tmp, run  # noqa: E402

HOSTILE_NAMES = ["cost_$5_vs_$10", "<b>bold</b> <script>x()</script>", "two\n# heading", "a | b"]
HOSTILE_SWEEP = """[sweep]
name = "hostile-{i}"
engine = "sim"
clusters = ["{cluster}"]
traces = ["experiments/traces/tiny-e4-d4.toml"]
policies = ["static", "prophet"]
seeds = [1]
"""


def hostile_store(c, prophet, tmp):
    """A store of four tiny sim sweeps renamed to HOSTILE_NAMES (a sweep name is a file name: no '/' or newline,
    so the store is edited the way a user's own tool or an older prophet could have written it), on a cluster file
    whose name holds '$', '|' and '<i>'."""
    db = os.path.join(tmp, "hostile.db")
    cluster = os.path.join(tmp, "h100_$1|<i>.toml")
    shutil.copy(os.path.join(ROOT, "experiments", "clusters", "moetuner-h100-ep4.toml"), cluster)
    for i in range(len(HOSTILE_NAMES)):
        sweep = os.path.join(tmp, f"hostile-{i}.toml")
        with open(sweep, "w") as f:
            f.write(HOSTILE_SWEEP.format(i=i, cluster=cluster))
        r = run([prophet, "sweep", sweep, "--no-report", "--set", f"store.path={db}"], timeout=240)
        c.check(r.returncode == 0, f"hostile fixture: sweep {i}", r.stderr[-300:])
    import sqlite3
    con = sqlite3.connect(db)
    for i, name in enumerate(HOSTILE_NAMES):
        con.execute("UPDATE runs SET experiment = ? WHERE experiment = ?", (name, f"hostile-{i}"))
    con.commit()
    con.close()
    return db


def table_widths(text):
    """The number of cells of every markdown table line of `text` (an escaped \\| is no separator)."""
    return [line.replace("\\|", "").count("|") for line in text.splitlines() if line.startswith("|")]


def hostile_report(prophet, tmp, db):
    """`prophet report` on the hostile store, once for the hostile-name checks and the read-only ones: on its copy in
    a directory nobody may write (read_only_copy) where this machine allows one, else on the store itself. -> the
    run, REPORT.md's path, the figures' directory"""
    report, figs = os.path.join(tmp, "hostile-report", "REPORT.md"), os.path.join(tmp, "hostile-report", "figures")
    return run([prophet, "report", "--db", db, "--report", report, "--out", figs], timeout=600), report, figs


def check_hostile_names(c, db, reported):
    """Issue 26 item 5: names with '$' pairs (matplotlib math), raw HTML, a newline before '# heading' and '|'.
    `prophet report` exits 0 and draws every sim figure; REPORT.md keeps one heading level 1, shows the HTML as
    text, and every table row has its header's cells; fig_speedup draws the '$' name's bars under its literal name.
    db: the hostile store; reported: hostile_report's result."""
    r, report, figs = reported
    c.check(r.returncode == 0, "report on hostile names: exit 0", f"exit {r.returncode}: {r.stderr[-600:]}")
    for name in ("fig_speedup", "fig_layers", "fig_rb", "fig_iterations"):
        c.check(nonempty(os.path.join(figs, name + ".png")), f"report on hostile names draws {name}")
    text = open(report).read() if os.path.isfile(report) else ""
    c.check([ln for ln in text.splitlines() if ln.startswith("# ")] == ["# prophet report"],
            "hostile names: no heading made by a name", text[:300])
    c.check("<b>" not in text and "<script>" not in text and "&lt;script&gt;" in text,
            "hostile names: raw HTML shown as text")
    c.check("cost\\_" not in text and "cost_\\$5_vs_\\$10" in text, "hostile names: '$' escaped, '_' kept")
    blocks, widths = [], table_widths(text)
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            blocks.append(line)
        elif blocks:
            w = table_widths("\n".join(blocks))
            c.check(len(set(w)) == 1, f"hostile names: table of {len(blocks)} lines keeps its columns", blocks[:3])
            blocks = []
    c.check(len(widths) > 4, "hostile names: REPORT.md has tables", text[:300])
    _, _, bars, _ = layout_check.render("fig_speedup", db, figs, experiment=HOSTILE_NAMES[0])
    c.check(any(g.startswith(HOSTILE_NAMES[0] + "\n") for g in bars), "fig_speedup: bars under the literal '$' name",
            str(bars))


def corrupt_pages(src, dst, table="metrics"):
    """A copy of store `src` whose `table` pages (SQLite's dbstat) are overwritten with a byte pattern, the schema
    and the runs intact, as a failing disk would leave it: opening works, reading the table fails."""
    import sqlite3
    con = sqlite3.connect(src)
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    pages = [p for (p,) in con.execute("SELECT pageno FROM dbstat WHERE name = ?", (table,))]
    con.close()
    shutil.copy(src, dst)
    with open(dst, "r+b") as f:
        for p in pages:
            f.seek((p - 1) * page_size)
            f.write(bytes((i * 151) % 256 for i in range(page_size)))
    return pages


def check_corrupt_store(c, prophet, tmp, db):
    """Issue 26 item 6: a store with corrupted pages fails `prophet report` with exit 5 naming SQLite's cause,
    never a report of 'no data' figures."""
    bad = os.path.join(tmp, "corrupt.db")
    run(["sqlite3", db, "PRAGMA wal_checkpoint(TRUNCATE)"], timeout=60)
    c.check(len(corrupt_pages(db, bad)) > 0, "corrupt store: metrics pages found to damage")
    r = run([prophet, "report", "--db", bad, "--report", os.path.join(tmp, "corrupt", "REPORT.md"), "--out",
             os.path.join(tmp, "corrupt", "figures")], timeout=600)
    c.check(r.returncode == 5 and "database error" in r.stderr and "malformed" in r.stderr,
            "report on a store with corrupted pages: exit 5 naming the cause",
            f"exit {r.returncode}: {r.stderr[-500:]}")


def read_only_copy(tmp, db):
    """A copy of store `db` in a directory nobody may write (chattr +i: root too; plain modes do not stop root) ->
    (its path, how it was locked: "chattr" or "chmod"), or (None, None) when chattr is refused and we are root."""
    ro_dir = os.path.join(tmp, "read-only")
    os.makedirs(ro_dir)
    ro = os.path.join(ro_dir, "store.db")
    run(["sqlite3", db, "PRAGMA wal_checkpoint(TRUNCATE)"], timeout=60)
    shutil.copy(db, ro)
    if run(["chattr", "+i", ro, ro_dir], timeout=30).returncode == 0:
        return ro, "chattr"
    if os.geteuid() == 0:
        return None, None
    os.chmod(ro, 0o444)
    os.chmod(ro_dir, 0o555)
    return ro, "chmod"


def unlock(ro, how):
    """undo read_only_copy's lock (so that the temp dir can be removed)"""
    if how == "chattr":
        run(["chattr", "-i", ro, os.path.dirname(ro)], timeout=30)
    elif how == "chmod":
        os.chmod(os.path.dirname(ro), 0o755)


def check_read_only_store(c, prophet, tmp, ro, reported):
    """Issue 26 item 6: a store in a directory nobody may write (read_only_copy) is read by `report` (hostile_report's
    run on it), `runs`, `db check` and `db merge` (as a shard), none saying "make it writable"."""
    if ro is None:
        print("SKIP read-only store: chattr +i refused here and root ignores directory modes")
        return
    r, report, _ = reported
    c.check(r.returncode == 0 and "writable" not in r.stderr, "read-only store: report exits 0",
            f"exit {r.returncode}: {r.stderr[-400:]}")
    cmds = [("runs", [prophet, "runs", "--db", ro]),
            ("db check", [prophet, "db", "check", "--db", ro]),
            ("db merge of a read-only shard", [prophet, "db", "merge", ro, "--into", os.path.join(tmp, "m.db")])]
    for what, cmd in cmds:
        r = run(cmd, timeout=600)
        c.check(r.returncode == 0 and "writable" not in r.stderr, f"read-only store: {what} exits 0",
                f"exit {r.returncode}: {r.stderr[-400:]}")
    c.check(nonempty(report), "read-only store: REPORT.md written elsewhere")
    c.check(sorted(os.listdir(os.path.dirname(ro))) == ["store.db"], "read-only store: nothing created beside it",
            str(os.listdir(os.path.dirname(ro))))


@pytest.fixture(scope="session")
def hostile(prophet, request):
    """a store whose sweep, cluster and policy names are hostile (hostile_store), its read-only copy, and one
    `prophet report` on that copy (hostile_report: the report the hostile-name checks and the read-only checks both
    read); its own directory, independent of the shared fixture, so ctest can run these tests in a process of their
    own (report_scripts_hostile) beside the rest"""
    tmp = tempfile.mkdtemp(prefix="prophet-report-hostile-")
    c = Checker()
    store = hostile_store(c, prophet, tmp)
    ro, how = read_only_copy(tmp, store)
    try:
        reported = hostile_report(prophet, tmp, ro or store)
        check_hostile_names(c, store, reported)
        yield {"store": store, "checks": c, "tmp": tmp, "ro": ro, "reported": reported}
    finally:
        unlock(ro, how)
    release_tmp(request, tmp)


def test_hostile_names(hostile):
    hostile["checks"].assert_passed()


def test_corrupt_store(prophet, hostile):
    c = Checker()
    check_corrupt_store(c, prophet, hostile["tmp"], hostile["store"])
    c.assert_passed()


def test_read_only_store(prophet, hostile):
    c = Checker()
    check_read_only_store(c, prophet, hostile["tmp"], hostile["ro"], hostile["reported"])
    c.assert_passed()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-p", "no:cacheprovider", *sys.argv[1:]]))
