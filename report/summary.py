#!/usr/bin/python3
"""The head of REPORT.md: per experiment in the store, its headline numbers in one short table each, and one
paragraph stating what they show, every number in it computed here from the store (no hand-written claims).

Headlines (each only where the store has the data):
  speedup     `prophet sweep` points' speedup_vs_static per policy (real: static median step / policy median step
              of the same seed; sim: static / policy mean iteration time), mean ± sd over the finite values, n
              over every point and `invalid` the points whose value is NaN or inf ("n/a" when none is finite); sim sweeps
              with several clusters get one row per cluster and policy, pooled over traces and seeds;
  validation  real sweep points' sim_error = (simulated - measured) / measured step time, with the config the
              simulator was calibrated on (validate_calibrated_on) beside the one it was validated on (the analytic
              cost model); and the held-out error of the per-op replay the sweep recorded after its last point;
  ablation    runs with ablate.variant: speedup of each variant over 'none' (fig_ablation's pairing);
  training    `prophet train` runs outside any sweep: final loss and median step time per policy.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

pd = C.pd


def _finite(series):
    """The finite values of a series: NaN (a failed or invalid measurement) and ±inf (a zero denominator) left out."""
    s = pd.to_numeric(series, errors="coerce")
    return s[s.abs() != float("inf")].dropna()


def _pm(series):
    """'mean ± sd' of a series' finite values (no sd for a single value); 'n/a' when it has none."""
    s = _finite(series)
    if s.empty:
        return "n/a"
    return C.mean_pm_sd(s.mean(), s.std(ddof=1) if len(s) > 1 else None)


def speedup_table(con, experiment):
    """One row per (experiment, setting, policy other than static): speedup mean ± sd, n, min, max; and the frame
    behind it (columns experiment, setting, policy, speedup_vs_static, backend)."""
    import fig_speedup  # its frame: model-engine ratios, calibrated planner scales only
    return speedup_summary(fig_speedup.speedup_frame(con, experiment))


def speedup_summary(df):
    """speedup_table's result from fig_speedup's frame (columns experiment, backend, cluster, policy,
    speedup_vs_static; optional point.ranks, ablate.variant)."""
    if df.empty:
        return pd.DataFrame(), df
    if "ablate.variant" in df.columns:
        df = df[df["ablate.variant"].isna()]
    df = df[df["policy"] != "static"].copy()
    if df.empty:
        return pd.DataFrame(), df
    ranks = df["point.ranks"] if "point.ranks" in df.columns else pd.Series(index=df.index, dtype=float)
    df["setting"] = [f"real, {int(r)} ranks" if b == "real" and r == r else (c if isinstance(c, str) else b)
                     for b, c, r in zip(df["backend"], df["cluster"], ranks)]
    rows = []
    for (exp, setting, policy), g in df.groupby(["experiment", "setting", "policy"], sort=False):
        v = g["speedup_vs_static"]
        finite = _finite(v)
        # n counts every point; invalid ones (NaN or inf) are counted apart, never dropped silently
        rows.append({"experiment": exp, "setting": setting, "policy": policy, "speedup over static": _pm(v),
                     "n": len(v), "invalid": len(v) - len(finite), "min": finite.min(), "max": finite.max()})
    t = pd.DataFrame(rows)
    order = {p: i for i, p in enumerate(C.policy_order(t["policy"]))}
    t = t.sort_values(["experiment", "setting", "policy"], key=lambda s: s.map(order) if s.name == "policy" else s)
    return t.reset_index(drop=True), df


def validation_table(con, experiment):
    """One row per (experiment, policy): sim_error mean ± sd (%), n, calibrated on, validated on."""
    df = C.sweep_points(con, experiment, ["sim_error", "sim_step_ms", "measured_step_ms"])
    if df.empty or "sim_error" not in df.columns or df["sim_error"].isna().all():
        return pd.DataFrame(), pd.DataFrame()
    df = df[df["sim_error"].notna()].copy()
    df["error_pct"] = 100 * df["sim_error"]
    cal = df["validate_calibrated_on"] if "validate_calibrated_on" in df.columns else \
        df.get("validate_cluster", pd.Series(index=df.index, dtype=object)).map(lambda p: f"cluster file {C.stem(p)}")
    df["calibrated on"] = cal.fillna("?")
    tc = df.get("point.train_config", pd.Series(index=df.index, dtype=object)).map(C.stem)
    df["validated on"] = [f"{t if isinstance(t, str) else '?'}, {int(r) if r == r else '?'} ranks"
                          for t, r in zip(tc, df.get("point.ranks", pd.Series(index=df.index, dtype=float)))]
    rows = []
    for (exp, policy), g in df.groupby(["experiment", "policy"], sort=False):
        rows.append({"experiment": exp, "policy": policy, "sim error %": _pm(g["error_pct"]),
                     "n": int(g["error_pct"].count()), "validated on": ", ".join(sorted(set(g["validated on"]))),
                     "calibrated on": "; ".join(sorted(set(g["calibrated on"])))})
    return pd.DataFrame(rows), df


def ablation_table(con, experiment):
    import fig_ablation
    df = fig_ablation.ablation_frame(con, experiment)
    if df.empty or "speedup_vs_none" not in df.columns:
        return pd.DataFrame(), pd.DataFrame()
    rows = []
    for (exp, variant), g in df.groupby(["experiment", "variant"], sort=False):
        rows.append({"experiment": exp, "variant": variant, "speedup over none": _pm(g["speedup_vs_none"]),
                     "n": int(g["speedup_vs_none"].count())})
    t = pd.DataFrame(rows)
    order = {v: i for i, v in enumerate(fig_ablation.VARIANTS)}
    t["_o"] = t["variant"].map(order).fillna(len(order))
    return t.sort_values(["experiment", "_o"]).drop(columns="_o").reset_index(drop=True), df


def training_table(con, experiment, sweep_experiments):
    """`prophet train` runs of experiments that no sweep made: final loss and median step ms per policy."""
    runs = C.load_runs(con, command="train", experiment=experiment)
    runs = runs[~runs["experiment"].isin(sweep_experiments)] if not runs.empty else runs
    if runs.empty:
        return pd.DataFrame()
    met = C.load_metrics(con, runs["run_id"], keys=["loss", "step_ms"])
    met = met[(met["layer"] == -1) & (met["rank"] == -1)]
    if met.empty:
        return pd.DataFrame()
    params = C.load_params(con, runs["run_id"], keys=["balance.policy"])
    per_run = []
    for rid, g in met.groupby("run_id"):
        loss = g[g["key"] == "loss"].sort_values("step")["value"]
        ms = g[g["key"] == "step_ms"].sort_values("step")["value"]
        per_run.append({"run_id": rid, "final_loss": loss.iloc[-1] if len(loss) else float("nan"),
                        "step_ms": (ms.iloc[1:] if len(ms) > 1 else ms).median(), "steps": len(loss)})
    pr = pd.DataFrame(per_run).merge(runs[["run_id", "experiment"]], on="run_id")
    pr["policy"] = pr["run_id"].map(params.get("balance.policy", pd.Series(dtype=object))).fillna("?")
    rows = []
    for (exp, policy), g in pr.groupby(["experiment", "policy"], sort=False):
        rows.append({"experiment": exp, "policy": policy, "final loss": _pm(g["final_loss"]),
                     "median step ms": _pm(g["step_ms"]), "runs": len(g), "steps": int(g["steps"].max())})
    return pd.DataFrame(rows)


def _speedup_sentence(exp, g, raw):
    """One sentence per experiment of the speedup table."""
    real = raw[(raw["experiment"] == exp)]["backend"].eq("real").all()
    parts = []
    for _, r in g.iterrows():
        where = "" if g["setting"].nunique() == 1 else f" on {r['setting']}"
        d = raw[(raw["experiment"] == exp) & (raw["policy"] == r["policy"]) & (raw["setting"] == r["setting"])]
        v = _finite(d["speedup_vs_static"])
        n = len(d)
        invalid = f" ({n - len(v)} of {n} points had no finite speedup: NaN or inf, left out)" if len(v) < n else ""
        if v.empty:
            parts.append(f"{r['policy']}{where} has no speedup over static to report (n/a: all {n} points NaN or inf)")
            continue
        spread = " (its sd spans 1.0)" if len(v) > 1 and abs(v.mean() - 1) <= v.std(ddof=1) else ""
        parts.append(f"{r['policy']}{where} ran at {r['speedup over static']}x static's speed, faster than static "
                     f"in {int((v > 1).sum())} of {n} points{spread}{invalid}")
    kind = "real training" if real else "the simulator"
    text = f"In {exp} ({kind}), " + "; ".join(parts[:6])
    if len(parts) > 6:
        text += f"; and {len(parts) - 6} more settings in the table"
    return text + "."


def _paper_sentence(exp, raw):
    """For sim sweeps over the paper's traces: how our prophet speedups compare with the paper's."""
    import fig_speedup
    d = raw[(raw["experiment"] == exp) & (raw["policy"] == "prophet")]
    if d.empty:
        return ""
    m = d["trace"].astype(str).str.extract(fig_speedup.TRACE_RE)
    d = d.assign(k=m[1], model=m[2]).dropna(subset=["model"])
    pairs = []
    for (cluster, model, k), g in d.groupby(["cluster", "model", "k"]):
        paper = fig_speedup.PAPER_TABLES.get(cluster, (None, {}))[1].get(model)
        if paper:
            pairs.append((g["speedup_vs_static"].mean(), paper[1 if k == "1" else 3]))
    if not pairs:
        return ""
    ours, theirs = [p[0] for p in pairs], [p[1] for p in pairs]
    return (f"Against the paper's prophet speedups for the same {len(pairs)} (cluster, model, k) settings "
            f"({C.fmt3(min(theirs))}-{C.fmt3(max(theirs))}x over DeepSpeed-MoE), {exp}'s simulated ones span "
            f"{C.fmt3(min(ours))}-{C.fmt3(max(ours))}x over static.")


def _validation_sentence(exp, g, raw):
    d = raw[raw["experiment"] == exp]["error_pct"]
    cal = "; ".join(sorted(set(raw[raw["experiment"] == exp]["calibrated on"])))
    val = ", ".join(sorted(set(raw[raw["experiment"] == exp]["validated on"])))
    return (f"The analytic simulator (cost model, schedule none; fig_validation), calibrated on [{cal}] and validated "
            f"on [{val}], predicted the measured step time of "
            f"{len(d)} runs of {exp} with an error of {_pm(d)}% (range {C.fmt3(d.min())}% to {C.fmt3(d.max())}%; "
            f"negative: simulated faster than measured).")


def _replay_sentence(con, exp):
    """The newest per-op replay validation a real sweep named `exp` recorded after its last point (a validate run
    with param validate.sweep), as one sentence; "" when there is none."""
    df = C._query(con, "SELECT e.data FROM events e JOIN runs r USING (run_id) JOIN params p USING (run_id) "
                       "WHERE r.command = 'validate' AND e.kind = 'validation' AND p.key = 'validate.sweep' AND "
                       "p.value = ? ORDER BY r.started_ms DESC, e.id DESC LIMIT 1", (json.dumps(exp),))
    if df.empty:
        return ""
    t = json.loads(df["data"].iloc[0])["total"]
    if not t.get("heldout_points"):
        return ""
    return (f"Replayed op by op with the per-op model (fig_validation_replay), {t['heldout_points']} held-out runs "
            f"of {exp} came out {100 * t['heldout_mape']:.1f}% off the measured median step on average (MAPE; "
            f"bias {100 * t['heldout_bias']:+.1f}%, max {100 * t['heldout_max_abs']:.1f}%).")


def _ablation_sentence(exp, raw):
    d = raw[(raw["experiment"] == exp) & (raw["variant"] != "none")]
    if d.empty:
        return ""
    best = d.groupby("variant")["speedup_vs_none"].mean().sort_values(ascending=False)
    v = best.index[0]
    return (f"In {exp}'s ablation, the best variant was {v} at {_pm(d[d['variant'] == v]['speedup_vs_none'])}x "
            f"'none' (n = {int((d['variant'] == v).sum())}).")


def build(con, experiment=None):
    """The summary as markdown lines (empty when the store has no headline data) and the produced CSV frames
    {name: frame} (summary_*.csv)."""
    sp, sp_raw = speedup_table(con, experiment)
    va, va_raw = validation_table(con, experiment)
    ab, ab_raw = ablation_table(con, experiment)
    sweeps = C.load_runs(con, command="sweep", experiment=experiment)
    tr = training_table(con, experiment, set(sweeps["experiment"]) if not sweeps.empty else set())
    sentences = []
    if not sp.empty:
        for exp, g in sp.groupby("experiment", sort=False):
            sentences.append(_speedup_sentence(exp, g, sp_raw))
            sentences.append(_paper_sentence(exp, sp_raw))
    if not va.empty:
        for exp, g in va.groupby("experiment", sort=False):
            sentences.append(_validation_sentence(exp, g, va_raw))
            sentences.append(_replay_sentence(con, exp))
    if not ab.empty:
        for exp in ab["experiment"].unique():
            sentences.append(_ablation_sentence(exp, ab_raw))
    if not tr.empty:
        for exp, g in tr.groupby("experiment", sort=False):
            sentences.append(f"{exp} trained {int(g['runs'].sum())} runs of up to {int(g['steps'].max())} steps "
                             f"(final loss and step time per policy in the table).")
    sentences = [s for s in sentences if s]
    if not sentences:
        return [], {}
    lines = ["## Summary", "", " ".join(sentences), ""]
    tables = {}
    for title, t, name, note in (
            ("Speedup over static", sp, "summary_speedup",
             "mean ± sd over seeds (and traces, pooled, for a simulated cluster); min / max over the same points; n "
             "counts every point, invalid those whose speedup is NaN or inf (left out of the mean; n/a: none finite)"),
            ("Simulator validation (held out where 'calibrated on' says so)", va, "summary_validation",
             "sim error = (simulated - measured) / measured step time, mean ± sd over runs"),
            ("Ablation", ab, "summary_ablation", "speedup of each variant over 'none' of the same seed, mean ± sd"),
            ("Training runs", tr, "summary_training", "final loss and median step time (first step left out)")):
        if t.empty:
            continue
        tables[name] = t
        lines += [f"### {title}", "", f"_{note}._", ""]
        for exp, g in t.groupby("experiment", sort=False):
            lines += [f"**{exp}**", "", C.markdown_table(g.drop(columns="experiment"), max_rows=C.MAX_ROWS), ""]
    return lines, tables
