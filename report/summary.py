#!/usr/bin/python3
"""The head of REPORT.md: per experiment in the store, its headline numbers in one short table each, and one
paragraph stating what they show, every number in it computed here from the store (no hand-written claims).

Headlines (each only where the store has the data):
  speedup     `prophet sweep` points' speedup_vs_static per policy (real: static median step / policy median step
              of the same seed; sim: static / policy mean iteration time), mean ± sd over the finite values, n
              over every point and `invalid` the points whose value is NaN or inf ("n/a" when none is
              finite), the 95% interval over the finite values and its verdict (significance.py); sim
              sweeps with several clusters get one row per cluster and policy, pooled over traces and seeds;
  activity    real sweeps: what each policy did in its children's steps (policy_activity.py); a policy that never
              left static's placement is said to, instead of given a speedup;
  validation  real sweep points' sim_error = (simulated - measured) / measured step time, with the config the
              simulator was calibrated on (validate_calibrated_on) beside the one it was validated on (the analytic
              cost model); and the held-out error of the per-op replay the sweep recorded after its last point;
  ablation    runs with ablate.variant: speedup of each variant over 'none' (fig_ablation's pairing);
  training    `prophet train` runs outside any sweep: final loss and median step time per policy.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import analytic_gap as G  # noqa: E402
import common as C  # noqa: E402
import policy_activity as A  # noqa: E402
import significance as S  # noqa: E402

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
        centre, low, high = S.speedup_interval(finite)
        # n counts every point; invalid ones (NaN or inf) are counted apart, never dropped silently
        rows.append({"experiment": exp, "setting": setting, "policy": policy, "speedup over static": _pm(v),
                     "95% CI (geo. mean)": S.interval_text(centre, low, high), "verdict": S.verdict(low, high),
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
    df["calibrated on"] = cal.fillna("?").astype(str).str.replace('\\"', '"', regex=False)  # TOML-escaped quotes
    # the schedule the analytic model simulated: the child's schedule.mode (its train config's, not a point param)
    child = df.get("child_run_id", pd.Series(index=df.index, dtype=object))
    sched = C.load_params(con, child.dropna(), keys=["schedule.mode"]).get("schedule.mode", pd.Series(dtype=object))
    df["schedule"] = child.map(sched).fillna("none")
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
        centre, low, high = S.speedup_interval(g["speedup_vs_none"])
        rows.append({"experiment": exp, "variant": variant, "speedup over none": _pm(g["speedup_vs_none"]),
                     "95% CI (geo. mean)": S.interval_text(centre, low, high), "verdict": S.verdict(low, high),
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


def _activity_row(activity, exp, setting, policy):
    """The policy_activity table's row of (exp, setting, policy), or None."""
    if activity is None or activity.empty:
        return None
    m = activity[(activity["experiment"] == exp) & (activity["setting"] == setting) & (activity["policy"] == policy)]
    return None if m.empty else m.iloc[0]


def _speedup_part(exp, r, raw, activity, where):
    """One policy's clause: its speedup with the 95% interval in words and, for real runs, what it did; a policy
    whose every step placed the experts as static does gets that said instead of a speedup."""
    d = raw[(raw["experiment"] == exp) & (raw["policy"] == r["policy"]) & (raw["setting"] == r["setting"])]
    did = _activity_row(activity, exp, r["setting"], r["policy"])
    if did is not None and A.all_static(did):
        return A.activity_sentence(did) + f"{where}: no speedup is stated"
    v, n = _finite(d["speedup_vs_static"]), len(d)
    if v.empty:
        return f"{r['policy']}{where} has no speedup over static to report (n/a: all {n} points NaN or inf)"
    centre, low, high = S.speedup_interval(v)
    text = S.speedup_phrase(r["policy"], "static", centre, low, high) + where
    if len(v) < n:
        text += f" ({n - len(v)} of {n} points had no finite speedup: NaN or inf, left out)"
    if did is not None:
        text += ": " + A.activity_sentence(did, _activity_row(activity, exp, r["setting"], "static"))
    return text


def _speedup_sentence(exp, g, raw, activity=None):
    """One sentence per experiment of the speedup table (activity: policy_activity.activity_table of real runs)."""
    real = raw[(raw["experiment"] == exp)]["backend"].eq("real").all()
    parts = []
    for _, r in g.iterrows():
        where = "" if g["setting"].nunique() == 1 else f" on {r['setting']}"
        parts.append(_speedup_part(exp, r, raw, activity, where))
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
    sched = ", ".join(sorted(set(raw[raw["experiment"] == exp]["schedule"].astype(str))))
    return (f"The analytic simulator (cost model, each run's schedule: {sched}; fig_validation), calibrated on [{cal}] "
            f"and validated "
            f"on [{val}], predicted the measured step time of "
            f"{len(d)} runs of {exp} with an error of {_pm(d)}% (range {C.fmt3(d.min())}% to {C.fmt3(d.max())}%; "
            f"negative: simulated faster than measured).")


def _replay_sentence(con, exp):
    """The newest per-op replay validation a real sweep named `exp` recorded after its last point (a validate run
    with param validate.sweep), as one sentence; "" when there is none."""
    data = G.replay_validation(con, exp)
    if data is None:
        return ""
    t = data["total"]
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
    centre, low, high = S.speedup_interval(d[d["variant"] == v]["speedup_vs_none"])
    return (f"In {exp}'s ablation, the variant with the highest mean speedup was {v}: "
            f"{S.speedup_phrase(v, 'none', centre, low, high)} (n = {int((d['variant'] == v).sum())}).")


def build(con, experiment=None):
    """The summary as markdown lines (empty when the store has no headline data) and the produced CSV frames
    {name: frame} (summary_*.csv)."""
    sp, sp_raw = speedup_table(con, experiment)
    va, va_raw = validation_table(con, experiment)
    ab, ab_raw = ablation_table(con, experiment)
    sweeps = C.load_runs(con, command="sweep", experiment=experiment)
    tr = training_table(con, experiment, set(sweeps["experiment"]) if not sweeps.empty else set())
    activity = A.activity_table(A.activity_frame(con, experiment))
    if not sp.empty and not activity.empty:  # a policy that never left static's placement has no speedup verdict
        for i, r in sp.iterrows():
            did = _activity_row(activity, r["experiment"], r["setting"], r["policy"])
            if did is not None and A.all_static(did):
                sp.loc[i, "verdict"] = "placements = static's"
    sentences = []
    if not sp.empty:
        for exp, g in sp.groupby("experiment", sort=False):
            sentences.append(_speedup_sentence(exp, g, sp_raw, activity))
            sentences.append(_paper_sentence(exp, sp_raw))
    gap = G.gap_table(con, experiment) if not va.empty else pd.DataFrame()
    if not va.empty:
        for exp, g in va.groupby("experiment", sort=False):
            sentences.append(_validation_sentence(exp, g, va_raw))
            sentences.append(_replay_sentence(con, exp))
            sentences.append(G.gap_sentence(exp, gap) if not gap.empty else "")
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
    lines = ["## Summary", "", C.md(" ".join(sentences)), ""]  # the sentences quote names: literal text
    tables = {}
    for title, t, name, note in (
            ("Speedup over static", sp, "summary_speedup",
             "mean ± sd over seeds (and traces, pooled, for a simulated cluster); min / max over the same points; n "
             "counts every point, invalid those whose speedup is NaN or inf (left out of the mean; n/a: none finite); "
             "95% CI: Student's t on the log of the paired per-seed ratios, as a geometric mean [low, high] "
             "(docs/reports.md \"Significance\"); verdict: same within 1% when the interval lies within a factor "
             "1.01 of 1.0, else faster / slower only when it excludes 1.0"),
            ("What the policies did (real runs)", activity, "summary_activity",
             "every recorded step of every seed: steps whose placement is static's in every layer, steps with any "
             "replica, medians per step of replicas, max/mean load (balancedness = mean/max), Trans+Agg and their "
             "exposed part in ms (docs/reports.md)"),
            ("Simulator validation (held out where 'calibrated on' says so)", va, "summary_validation",
             "sim error = (simulated - measured) / measured step time, mean ± sd over runs"),
            ("Where the analytic model's time goes", gap, "summary_analytic_gap",
             "per op group, ms per step (1..) and rank, mean over the validated runs: measured = the run's recorded "
             "ops (its per-op replay's own times), analytic = the same run's analytic simulation; the last group is "
             "each side's step minus the others (docs/reports.md)"),
            ("Ablation", ab, "summary_ablation", "speedup of each variant over 'none' of the same seed, mean ± sd; "
                                                 "95% CI and verdict as for the speedups above"),
            ("Training runs", tr, "summary_training", "final loss and median step time (first step left out)")):
        if t.empty:
            continue
        tables[name] = t
        lines += [f"### {title}", "", f"_{note}._", ""]
        for exp, g in t.groupby("experiment", sort=False):
            lines += [f"**{C.md(exp)}**", "", C.markdown_table(g.drop(columns="experiment"), max_rows=C.MAX_ROWS), ""]
    return lines, tables
