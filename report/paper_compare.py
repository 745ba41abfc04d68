#!/usr/bin/python3
"""Our values beside a paper's, in the paper's layout: the paper's numbers (report/paper_values/*.toml), the
comparison table (ours mean ± sd over seeds, the paper's value, ours / paper) and the reconciliation paragraph.

Nothing here reads the store: report/paper_sections.py computes our per-seed values and calls these.
A cell is flagged when ours / paper is outside [1 - FLAG, 1 + FLAG], or, for a text cell (a list of layers), when
ours differs from the paper's text. A paper range [lo, hi] is compared with its midpoint.
"""
import math
import os
import statistics
import tomllib

import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
VALUES_DIR = os.path.join(HERE, "paper_values")
FLAG = 0.15  # the brief's threshold: a cell more than 15% off the paper's gets a mechanism in the reconciliation
UNITS = ("x", "%")
DIRECTIONS = ("low", "high", "differs")  # ours below / above the paper's number; a text cell that differs
SECTION_KEYS = ("title", "source", "baseline", "unit", "rows", "columns", "values")


class PaperValueError(ValueError):
    pass


def _fail(path, section, field, value, allowed):
    raise PaperValueError(f"{os.path.basename(path)}: [{section}] {field} = {value!r}: {allowed}")


def _check_cell(path, name, r, c, v):
    if isinstance(v, bool):
        _fail(path, name, f"values[{r}][{c}]", v, "a number, [lo, hi], a text or \"\"")
    if isinstance(v, list):
        if len(v) != 2 or not all(isinstance(x, (int, float)) for x in v) or v[0] > v[1]:
            _fail(path, name, f"values[{r}][{c}]", v, "a range must be [lo, hi] with lo <= hi")
    elif not isinstance(v, (int, float, str)):
        _fail(path, name, f"values[{r}][{c}]", v, "a number, [lo, hi], a text or \"\"")


def load_values(path):
    """{section name: spec} of one paper_values/*.toml, checked: every key present, values rows x columns, units
    and mechanism directions from the allowed lists; errors name the file, section, field, value and what is
    allowed."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    out = {}
    for name, spec in data.items():
        if not isinstance(spec, dict):
            _fail(path, name, "(section)", spec, "each top-level key must be a table [name]")
        for key in SECTION_KEYS:
            if key not in spec:
                _fail(path, name, key, None, f"missing; every section has {', '.join(SECTION_KEYS)}")
        if spec["unit"] not in UNITS:
            _fail(path, name, "unit", spec["unit"], f"allowed: {', '.join(UNITS)}")
        rows, cols, values = spec["rows"], spec["columns"], spec["values"]
        if len(values) != len(rows) or any(len(v) != len(cols) for v in values):
            _fail(path, name, "values", f"{len(values)} rows", f"must be {len(rows)} rows x {len(cols)} columns")
        for r, row in enumerate(values):
            for c, v in enumerate(row):
                _check_cell(path, name, r, c, v)
        for i, m in enumerate(spec.get("mechanism", []) + spec.get("relative_mechanism", [])):
            for key in ("columns", "direction", "sweep", "text"):
                if key not in m:
                    _fail(path, name, f"mechanism[{i}].{key}", None, "missing; a mechanism has columns, direction, "
                                                                      "sweep, text")
            if m["direction"] not in DIRECTIONS:
                _fail(path, name, f"mechanism[{i}].direction", m["direction"], f"allowed: {', '.join(DIRECTIONS)}")
            allowed = cols if i < len(spec.get("mechanism", [])) else ["k=1", "k=2"]  # relative: k columns
            bad_rows = [r for r in m.get("rows", []) if r not in rows]
            if bad_rows:
                _fail(path, name, f"mechanism[{i}].rows", bad_rows, f"allowed: {', '.join(rows)}")
            bad = [c for c in m["columns"] if c not in allowed]
            if bad:
                _fail(path, name, f"mechanism[{i}].columns", bad, f"allowed: {', '.join(allowed)}")
        out[name] = spec
    return out


def load_all(values_dir=VALUES_DIR):
    """Every section of every paper_values/*.toml, by section name (a name in two files is an error)."""
    out = {}
    for fname in sorted(os.listdir(values_dir)):
        if not fname.endswith(".toml"):
            continue
        path = os.path.join(values_dir, fname)
        for name, spec in load_values(path).items():
            if name in out:
                _fail(path, name, "(section)", name, "a section name may appear in one file only")
            out[name] = dict(spec, file=os.path.relpath(path, os.path.dirname(HERE)))
    return out


def paper_number(v):
    """The number a paper cell is compared with: itself, a range's midpoint; None for text or ""."""
    if isinstance(v, list):
        return (v[0] + v[1]) / 2
    if isinstance(v, (int, float)):
        return float(v)
    return None


def paper_text(v, unit):
    if isinstance(v, list):
        return f"{v[0]:.2f}\u2013{v[1]:.2f}"
    if isinstance(v, (int, float)):
        return f"{v:.3g}" if unit == "%" else f"{v:.2f}"
    return v if v != "" else "-"


def summarize(samples):
    """(mean, sd, n) of per-seed values; a text sample list gives (the most common text, nan, n)."""
    samples = [s for s in samples if not (isinstance(s, float) and math.isnan(s))]
    if not samples:
        return None, float("nan"), 0
    if isinstance(samples[0], str):
        return max(set(samples), key=samples.count), float("nan"), len(samples)
    mean = statistics.fmean(samples)
    return mean, statistics.stdev(samples) if len(samples) > 1 else float("nan"), len(samples)


def ours_text(mean, sd, n, unit):
    if mean is None:
        return "-"
    if isinstance(mean, str):
        return f"{mean} ({n})"
    fmt = (lambda x: f"{x:.1f}") if unit == "%" else (lambda x: f"{x:.2f}")
    spread = "0" if sd != sd else "<0.001" if sd < 1e-3 else f"{sd:.2g}"  # the sd to 2 significant digits
    return f"{fmt(mean)} \u00b1 {spread} ({n})"


def compare(name, spec, ours, model):
    """The long comparison frame of one section: one row per (row, column) of the paper's layout with ours
    (mean, sd, n over seeds; ours maps (row, column) to the per-seed values), the paper's value, ratio = ours /
    paper, flagged and direction. model names the system model of our numbers (simulator, Eq 6, Eq 8)."""
    recs = []
    for r, row in enumerate(spec["rows"]):
        for c, col in enumerate(spec["columns"]):
            mean, sd, n = summarize(ours.get((row, col), []))
            pv = spec["values"][r][c]
            pn = paper_number(pv)
            ratio, flagged, direction = float("nan"), False, ""
            if pn is not None and isinstance(mean, float) and pn != 0:
                ratio = mean / pn
                flagged = abs(ratio - 1.0) > FLAG
                direction = ("low" if ratio < 1 else "high") if flagged else ""
            elif isinstance(pv, str) and pv != "" and isinstance(mean, str):
                flagged = mean.replace(" ", "") != pv.replace(" ", "")
                direction = "differs" if flagged else ""
            recs.append({"section": name, "row": row, "column": col, "model": model, "ours_mean": mean,
                         "ours_sd": sd, "n": n, "paper": paper_text(pv, spec["unit"]), "paper_value": pn,
                         "ratio": ratio, "flagged": flagged, "direction": direction})
    return pd.DataFrame(recs)


def _cell(rec, unit):
    text = ours_text(rec["ours_mean"], rec["ours_sd"], rec["n"], unit)
    if rec["paper"] != "-":
        text += f" \u00b7 paper {rec['paper']}"
    if rec["ratio"] == rec["ratio"]:
        text += f" \u00b7 {rec['ratio']:.2f}"
    return text + (" \u2691" if rec["flagged"] else "")


def layout_table(frame, spec, row_label="row"):
    """Markdown of a comparison frame in the paper's layout (its rows and columns), each cell
    'ours ± sd (n) · paper P · ratio', ⚑ when flagged."""
    cols = spec["columns"]
    lines = ["| " + " | ".join([row_label] + cols) + " |", "|" + "|".join("---" for _ in range(len(cols) + 1)) + "|"]
    for row in spec["rows"]:
        cells = []
        for col in cols:
            rec = frame[(frame["row"] == row) & (frame["column"] == col)]
            cells.append(_cell(rec.iloc[0], spec["unit"]) if not rec.empty else "-")
        lines.append("| " + " | ".join([row] + cells) + " |")
    return "\n".join(lines)


def ours_table(values, rows, columns, unit, row_label="row"):
    """Markdown of ours only (no paper value), rows x columns, from (row, column) -> per-seed values."""
    lines = ["| " + " | ".join([row_label] + columns) + " |",
             "|" + "|".join("---" for _ in range(len(columns) + 1)) + "|"]
    for row in rows:
        lines.append("| " + " | ".join([row] + [ours_text(*summarize(values.get((row, c), [])), unit)
                                                for c in columns]) + " |")
    return "\n".join(lines)


def compared_cells(frame):
    """How many cells of a comparison frame have both our value and the paper's."""
    return int((frame["ratio"].notna() | frame["direction"].eq("differs") |
                (frame["paper"].ne("-") & frame["paper_value"].isna() & frame["n"].gt(0))).sum())


def match_mechanisms(frame, spec):
    """Every flagged cell of frame under the first of spec's [[mechanism]] whose direction, columns and rows
    (optional) match it: ({mechanism index: [cell labels]}, [labels no mechanism covers])."""
    groups, uncovered = {}, []
    for _, rec in frame[frame["flagged"]].iterrows():
        label = f"{rec['row']} / {rec['column']}" + (f" ({rec['ratio']:.2f})" if rec["ratio"] == rec["ratio"]
                                                     else f" (ours {rec['ours_mean']}, paper {rec['paper']})")
        for i, m in enumerate(spec.get("mechanism", [])):
            if m["direction"] == rec["direction"] and (not m["columns"] or rec["column"] in m["columns"]) and \
                    (not m.get("rows") or rec["row"] in m["rows"]):
                groups.setdefault(i, []).append(label)
                break
        else:
            uncovered.append(label)
    return groups, uncovered


def reconciliation(frame, spec):
    """The reconciliation paragraph: every flagged cell (computed from frame), grouped under its mechanism
    (match_mechanisms); cells no mechanism covers are listed as such."""
    head = (f"**Reconciliation.** {int(frame['flagged'].sum())} of {compared_cells(frame)} compared cells differ "
            f"from the paper's by more than {FLAG:.0%} (\u2691)")
    if not frame["flagged"].any():
        return head + "."
    groups, uncovered = match_mechanisms(frame, spec)
    parts = [head + "."]
    for i, labels in groups.items():
        m = spec["mechanism"][i]
        word = {"low": "below", "high": "above", "differs": "different from"}[m["direction"]]
        parts.append(f"Ours {word} the paper's in {', '.join(labels)}: {m['text']} (shown by `{m['sweep']}`).")
    if uncovered:
        parts.append(f"No mechanism written yet for {', '.join(uncovered)}.")
    return " ".join(parts)
