#!/usr/bin/python3
"""Readability check of the figures: draws each figure script's figure in this process and measures its text.

  /usr/bin/python3 report/layout_check.py --db STORE --out DIR fig_speedup fig_train ...

For every figure it finds pairs of overlapping text boxes among the tick labels of all panels, the legend entries
and the panel titles (matplotlib's renderer measures each box in display pixels, turned with rotated text; boxes
touching by less than TOLERANCE_PX are not counted), and it returns the drawn bars (gid -> height) and lines (label -> (x, y)) so that a
test can compare plotted values with the store. Exit status: 0 when no figure has an overlap, 1 otherwise.
Used by test_reports.py and test_reports_hostile.py.
"""
import argparse
import importlib
import io
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common as C  # noqa: E402

TOLERANCE_PX = 1.0  # boxes must overlap by more than this in both directions to count


def text_corners(text, renderer):
    """The 4 corners (display pixels) of the text's box, turned with the text: the axis-aligned extent of rotated
    text covers its neighbours' even when the slanted strips are apart. The turned box has the same centre as the
    extent and the size of the text laid out flat."""
    box = text.get_window_extent(renderer)
    angle = text.get_rotation()
    if angle % 180 == 0:
        return [(box.x0, box.y0), (box.x1, box.y0), (box.x1, box.y1), (box.x0, box.y1)]
    text.set_rotation(0)
    flat = text.get_window_extent(renderer)
    text.set_rotation(angle)
    cx, cy = (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2
    c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    return [(cx + dx * c - dy * s, cy + dx * s + dy * c)
            for dx, dy in ((-flat.width / 2, -flat.height / 2), (flat.width / 2, -flat.height / 2),
                           (flat.width / 2, flat.height / 2), (-flat.width / 2, flat.height / 2))]


def text_items(fig):
    """(description, box corners in display pixels) of every visible, non-empty tick label, legend entry and
    title."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    items = []

    def add(what, text):
        if text.get_visible() and text.get_text().strip():
            items.append((f"{what} '{text.get_text()}'", text_corners(text, renderer)))

    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        name = f"panel {i} ({ax.get_title() or ax.get_label()})".replace("\n", " ")
        for axis, lim, which in ((ax.xaxis, ax.get_xlim(), "x"), (ax.yaxis, ax.get_ylim(), "y")):
            lo, hi = min(lim), max(lim)
            eps = 1e-9 * max(1.0, abs(hi - lo))
            locs = axis.get_majorticklocs()
            for loc, tick in zip(locs, axis.get_major_ticks(len(locs))):
                if lo - eps <= loc <= hi + eps:  # ticks outside the view are not drawn
                    add(f"{name} {which} tick", tick.label1)
        add(f"{name} title", ax.title)
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    for j, leg in enumerate(legends):
        for t in leg.get_texts():
            add(f"legend {j} entry", t)
    return items


def boxes_overlap(a, b):
    """Whether two convex quadrilaterals (corner lists) overlap by more than TOLERANCE_PX along every separating
    axis (the edge normals of both: the separating axis theorem)."""
    for poly in (a, b):
        for i in range(4):
            (x0, y0), (x1, y1) = poly[i], poly[(i + 1) % 4]
            nx, ny = y0 - y1, x1 - x0
            norm = math.hypot(nx, ny) or 1.0
            pa = [(x * nx + y * ny) / norm for x, y in a]
            pb = [(x * nx + y * ny) / norm for x, y in b]
            if min(max(pa), max(pb)) - max(min(pa), min(pb)) <= TOLERANCE_PX:
                return False
    return True


def overlaps(items):
    """Pairs (a, b) of descriptions whose boxes overlap."""
    out = []
    for i in range(len(items)):
        a_name, a = items[i]
        for b_name, b in items[i + 1:]:
            if boxes_overlap(a, b):
                out.append((a_name, b_name))
    return out


def plotted_values(fig):
    """Bars with a gid (gid -> height) and labelled lines (label -> (xdata, ydata)) of every panel."""
    bars, lines = {}, {}
    for ax in fig.axes:
        for p in ax.patches:
            if p.get_gid():
                bars[p.get_gid()] = p.get_height()
        for ln in ax.get_lines():
            if not ln.get_label().startswith("_"):
                lines.setdefault(ln.get_label(), (list(ln.get_xdata()), list(ln.get_ydata())))
    return bars, lines


def render(name, db, out, experiment=None, outcome=None):
    """Run figure script `name` in this process; returns (status, overlaps, bars, lines) with status 'drawn' or
    'no data' (the script exited without a figure). A dict `outcome` receives what the script's process would have
    shown: "exit" (its exit status: main's return value or sys.exit's code, 0 for None) and "stdout"."""
    captured = {}
    original = C.save_figure

    def capture(fig, out_dir, fig_name):
        captured["overlaps"] = overlaps(text_items(fig))
        captured["values"] = plotted_values(fig)
        return original(fig, out_dir, fig_name)

    C.save_figure = capture
    argv = ["--db", db, "--out", out] + (["--experiment", experiment] if experiment else [])
    try:
        module = importlib.import_module(name)
        printed = io.StringIO()
        stdout, sys.stdout = sys.stdout, printed
        try:
            code = module.main(argv)
        except SystemExit as e:
            code = e.code
        finally:
            sys.stdout = stdout
    finally:
        C.save_figure = original
    if outcome is not None:
        outcome.update({"exit": code or 0, "stdout": printed.getvalue()})
    if "overlaps" not in captured:
        return "no data", [], {}, {}
    bars, lines = captured["values"]
    return "drawn", captured["overlaps"], bars, lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("figures", nargs="+")
    args = p.parse_args(argv)
    bad = 0
    for name in args.figures:
        status, found, _, _ = render(name, args.db, args.out)
        print(f"{name}: {status}, {len(found)} overlapping text pairs")
        for a, b in found[:10]:
            print(f"  {a}  overlaps  {b}")
        bad += bool(found)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
