#!/usr/bin/python3
"""The papers' tables and figures side by side with ours: one markdown section each (docs/paper-comparison.md).

    /usr/bin/python3 report/paper_sections.py --db results/paper.db [--out DIR] [--section table4 fig11 ...]
    /usr/bin/python3 report/paper_sections.py --db results/paper.db --doc docs/paper-comparison.md

Each section reads the store rows of one sweep (SWEEPS: the sweep name is the experiment), computes our value per
seed for every cell of the paper's layout (report/paper_values/*.toml), and prints the comparison (ours mean ± sd
over seeds · the paper's value · ours / paper, ⚑ beyond 15%), our values over dropless static (labelled; no paper
value), and the reconciliation paragraph (paper_compare.reconciliation). The compared numbers are from the simulator
(prophet sweep engine sim, or the serving replay on a simulated cluster); Tables IV / V add ours-only tables under
the cost model's Eq 6 and Eq 8 (paper-tables-model, engine model), each labelled with its model. The long-form
comparison goes to <out>/paper_<section>.csv.
"""
import argparse
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import paper_compare as P  # noqa: E402

# section -> (the sweep whose rows it reads, the sweep file that makes them)
SWEEPS = {
    "table4": ("paper-tables", "experiments/sweeps/paper-tables.toml"),
    "table5": ("paper-tables", "experiments/sweeps/paper-tables.toml"),
    "fig11": ("fig11-layers", "experiments/sweeps/fig11-layers.toml"),
    "fig12": ("fig12-iterations", "experiments/sweeps/fig12-iterations.toml"),
    "fig14": ("fig14-ablation", "experiments/sweeps/fig14-ablation.toml"),
    "fig15": ("fig15-broadcast", "experiments/sweeps/fig15-broadcast.toml"),
    "fig16": ("fig16-rb", "experiments/sweeps/fig16-rb.toml"),
    "moetuner": ("serving-moetuner", "experiments/sweeps/serving-moetuner.toml"),
}
TABLE_CLUSTER = {"table4": "hpnv-16", "table5": "lpwnv-8"}
SYSTEM_NAME = {"FasterMoE": "fastermoe", "Pro-Prophet": "prophet"}
TRACE_RE = re.compile(r"^paper-e(\d+)-k(\d+)-([a-z]+)$")  # paper-tables.toml's traces: D, k, model


def sim_label(experiment):
    return f"simulator (prophet sweep {experiment}, engine sim)"


def sweep_frame(con, experiment):
    """Finished sweep points of one experiment: policy, cluster, trace, seed, k, model, variant, time_ms (the
    simulated mean iteration time)."""
    df = C.sweep_points(con, experiment, ["mean_iteration_ms"])
    if df.empty or "mean_iteration_ms" not in df.columns:
        return C.pd.DataFrame()
    m = df["trace"].astype(str).str.extract(TRACE_RE)
    df["k"], df["model"] = m[1], m[2].str.upper()
    if "trace.top_k" in df.columns:
        df["k"] = df["k"].fillna(df["trace.top_k"].map(lambda v: str(int(v)) if v == v else None))
    df["variant"] = df["ablate.variant"] if "ablate.variant" in df.columns else None
    return df.rename(columns={"mean_iteration_ms": "time_ms"}).dropna(subset=["time_ms"])


def speedups(df, policy, base, keys, by="policy"):
    """Per setting (keys) and seed: time(base) / time(policy), i.e. policy's speedup over base."""
    a = df[df[by] == policy][keys + ["seed", "time_ms"]]
    b = df[df[by] == base][keys + ["seed", "time_ms"]].rename(columns={"time_ms": "base_ms"})
    m = a.merge(b, on=keys + ["seed"])
    return m.assign(speedup=m["base_ms"] / m["time_ms"])


def per_seed(frame, value="speedup"):
    return [float(v) for v in frame.sort_values("seed")[value]]


# ---------------------------------------------------------------------------------------------- the sections
def table_section(con, name, spec):
    """Tables IV / V: row = model, column = '<system> k=<k>'; over deepspeed (compared) and over static."""
    experiment = SWEEPS[name][0]
    df = sweep_frame(con, experiment)
    if df.empty:
        return None
    df = df[df["cluster"] == TABLE_CLUSTER[name]]
    ours, over_static = {}, {}
    for col in spec["columns"]:
        system, k = col.split(" k=")
        policy = SYSTEM_NAME[system]
        for base, out in (("deepspeed", ours), ("static", over_static)):
            s = speedups(df[df["k"] == k], policy, base, ["model"])
            for row in spec["rows"]:
                out[(row, col)] = per_seed(s[s["model"] == row])
    if not any(ours.values()) and not any(over_static.values()):
        return None
    # the baseline cancels in Pro-Prophet / FasterMoE: the paper's ratio of its own columns against ours per seed
    rel_spec = relative_spec(spec)
    rel = {}
    for k in ("1", "2"):
        s = speedups(df[df["k"] == k], "prophet", "fastermoe", ["model"])
        for row in spec["rows"]:
            rel[(row, f"k={k}")] = per_seed(s[s["model"] == row])
    for row in spec["rows"]:
        s = speedups(df, "static", "deepspeed", ["k", "model"])
        over_static[(row, "DeepSpeed-MoE k=1")] = per_seed(s[(s["model"] == row) & (s["k"] == "1")])
        over_static[(row, "DeepSpeed-MoE k=2")] = per_seed(s[(s["model"] == row) & (s["k"] == "2")])
    cols = spec["columns"] + ["DeepSpeed-MoE k=1", "DeepSpeed-MoE k=2"]
    extras = [("over dropless static (static = exact counts, nothing padded; the DeepSpeed-MoE columns: "
               "dropless static over DeepSpeed-MoE, i.e. what padding costs)", over_static, spec["rows"], cols,
               "model")]
    return ours, extras + model_tables(con, name, spec), sim_label(experiment), [(rel_spec, rel)]


MODEL_SWEEP = ("paper-tables-model", "experiments/sweeps/paper-tables-model.toml")


def model_tables(con, name, spec):
    """Tables IV / V under the cost model: per equation (balance.cost_eq = 6 or 8, each point planned and scored
    with it), the speedup over deepspeed in the paper's layout; [] without paper-tables-model runs."""
    df = C.sweep_points(con, MODEL_SWEEP[0], ["eq6_ms", "eq8_ms"])
    if df.empty or not {"balance.cost_eq", "eq6_ms", "eq8_ms"} <= set(df.columns):
        return []
    df = df[df["cluster"] == TABLE_CLUSTER[name]]
    m = df["trace"].astype(str).str.extract(TRACE_RE)
    df = df.assign(k=m[1], model=m[2].str.upper())
    out = []
    for eq in (6, 8):
        d = df[df["balance.cost_eq"] == eq].assign(time_ms=lambda x: x[f"eq{eq}_ms"])
        values = {}
        for col in spec["columns"]:
            system, k = col.split(" k=")
            s = speedups(d[d["k"] == k], SYSTEM_NAME[system], "deepspeed", ["model"])
            for row in spec["rows"]:
                values[(row, col)] = per_seed(s[s["model"] == row])
        if any(values.values()):
            out.append((f"over DeepSpeed-MoE under Eq {eq} (every policy planned and scored with Eq {eq})", values,
                        spec["rows"], spec["columns"], "model",
                        f"cost model Eq {eq}, prophet sweep {MODEL_SWEEP[0]}, engine model"))
    return out


def relative_spec(spec):
    """Pro-Prophet over FasterMoE in a table's layout: the paper's value is the ratio of its own two columns
    (derived, to 2 decimals), the mechanisms are the section's relative_mechanism entries."""
    values = [[round(r[1] / r[0], 2), round(r[3] / r[2], 2)] for r in spec["values"]]
    return dict(spec, title="Pro-Prophet over FasterMoE (the baseline cancels)", columns=["k=1", "k=2"],
                values=values, baseline="fastermoe",
                source="derived: the paper's Pro-Prophet column / its FasterMoE column",
                mechanism=spec.get("relative_mechanism", []))


def layer_speedups(con, experiment, key):
    """Per (trace, k, seed, layer, policy): the per-layer metric `key` of one sweep's runs (step 0)."""
    df = sweep_frame(con, experiment)
    if df.empty:
        return df
    met = C.load_metrics(con, df["run_id"], keys=[key])
    met = met[(met["layer"] >= 0) & (met["step"] == 0)][["run_id", "layer", "value"]]
    return df[["run_id", "policy", "trace", "k", "seed"]].merge(met, on="run_id")


def fig11_section(con, name, spec):
    """Fig 11: per seed, the lowest and highest per-layer speedup (layer_moe_ms ratio) over every layer and k."""
    experiment = SWEEPS[name][0]
    d = layer_speedups(con, experiment, "layer_moe_ms").rename(columns={"value": "time_ms"})
    if d.empty:
        return None
    ours, extra = {}, {}
    bases = {"Pro-Prophet over DeepSpeed-MoE": "deepspeed", "Pro-Prophet over FasterMoE": "fastermoe",
             "Pro-Prophet over dropless static": "static", "FasterMoE over dropless static": "static"}
    for row, base in bases.items():
        policy = "fastermoe" if row.startswith("FasterMoE") else "prophet"
        s = speedups(d, policy, base, ["trace", "layer"])
        g = s.groupby("seed")["speedup"]
        target = ours if row in spec["rows"] else extra
        target[(row, "lowest layer")] = [float(v) for v in g.min()]
        target[(row, "highest layer")] = [float(v) for v in g.max()]
    extra_rows = [r for r in bases if r not in spec["rows"]]
    return ours, [("over dropless static", extra, extra_rows, spec["columns"], "speedup")], sim_label(experiment)


def fig12_section(con, name, spec):
    """Fig 12: per seed, the mean iteration time of the base over prophet's (all iterations of the sweep)."""
    experiment = SWEEPS[name][0]
    df = sweep_frame(con, experiment)
    if df.empty:
        return None
    col = spec["columns"][0]
    rows = {"Pro-Prophet over FasterMoE": "fastermoe", "Pro-Prophet over DeepSpeed-MoE": "deepspeed",
            "Pro-Prophet over dropless static": "static"}
    ours, extra = {}, {}
    for row, base in rows.items():
        (ours if row in spec["rows"] else extra)[(row, col)] = per_seed(speedups(df, "prophet", base, ["trace"]))
    return ours, [("over dropless static", extra, [r for r in rows if r not in spec["rows"]], [col], "speedup")], \
        sim_label(experiment)


def fig14_section(con, name, spec):
    """Fig 14: each ablation step over the step before, per k and seed; 'average' = the mean over k per seed."""
    experiment = SWEEPS[name][0]
    df = sweep_frame(con, experiment)
    if df.empty or df["variant"].isna().all():
        return None
    steps = dict(zip(spec["rows"], [("planner", "none"), ("planner+scheduler", "planner"),
                                    ("full", "planner+scheduler")]))
    ours = {}
    for row, (variant, before) in steps.items():
        s = speedups(df, variant, before, ["k"], by="variant")
        for k in ("1", "2"):
            ours[(row, f"k={k}")] = per_seed(s[s["k"] == k])
        avg = s.groupby("seed")["speedup"].mean()
        ours[(row, "average")] = [float(v) for v in avg] if s["k"].nunique() == 2 else []
    extra = {}
    for variant in ("planner", "scheduler", "planner+scheduler", "full"):
        s = speedups(df, variant, "none", ["k"], by="variant")
        for k in ("1", "2"):
            extra[(variant, f"k={k}")] = per_seed(s[s["k"] == k])
    return ours, [("each variant over 'none' (dropless static, no scheduler; the paper's first step)", extra,
                   ["planner", "scheduler", "planner+scheduler", "full"], ["k=1", "k=2"], "variant")], \
        sim_label(experiment)


def fig15_section(con, name, spec):
    """Fig 15: prophet's speedup over top2 / top3 per k and seed; over deepspeed and static beside it."""
    experiment = SWEEPS[name][0]
    df = sweep_frame(con, experiment)
    if df.empty:
        return None
    ours, extra = {}, {}
    for row in spec["rows"]:
        k = row.split("=")[1]
        dk = df[df["k"] == k]
        for col in spec["columns"]:
            ours[(row, col)] = per_seed(speedups(dk, "prophet", col.split()[-1], ["trace"]))
        for base, label in (("deepspeed", "over DeepSpeed-MoE"), ("static", "over dropless static")):
            extra[(row, label)] = per_seed(speedups(dk, "prophet", base, ["trace"]))
    return ours, [("Pro-Prophet over DeepSpeed-MoE and dropless static", extra, spec["rows"],
                   ["over DeepSpeed-MoE", "over dropless static"], "k")], sim_label(experiment)


def fig16_section(con, name, spec):
    """Fig 16: per k and seed, prophet RB / fastermoe RB per layer: its largest value and the layers below 1
    (numbered from 1, as the paper's)."""
    experiment = SWEEPS[name][0]
    d = layer_speedups(con, experiment, "layer_rb_vs_static")
    if d.empty:
        return None
    d = d[np.isfinite(d["value"]) & (d["value"] > 0)]  # RB 0: no finite RB in the layer (policy std 0)
    p = d[d["policy"] == "prophet"].rename(columns={"value": "rb_p"})
    f = d[d["policy"] == "fastermoe"].rename(columns={"value": "rb_f"})[["k", "seed", "layer", "rb_f"]]
    m = p.merge(f, on=["k", "seed", "layer"])
    m["ratio"] = m["rb_p"] / m["rb_f"]
    ours = {}
    cols = spec["columns"]
    for row in spec["rows"]:
        mk = m[m["k"] == row.split("=")[1]]
        ours[(row, cols[0])] = [float(v) for v in mk.groupby("seed")["ratio"].max()]
        ours[(row, cols[1])] = [", ".join(str(int(l) + 1) for l in sorted(g[g["ratio"] < 1]["layer"])) or "none"
                                for _, g in mk.groupby("seed")]
    return ours, [], sim_label(experiment)


MOETUNER_ROWS = {  # row -> (kind, how): tail = mean-of-max summed over layers; mean = mean over ranks
    "end-to-end speedup": ("forward", "speedup"),
    "token-processing tail latency reduction": ("expert", "tail"),
    "token-processing mean latency reduction": ("expert_ms", "mean"),
    "all-to-all tail latency reduction": ("a2a", "tail"),
    "all-to-all mean latency reduction": ("a2a_ms", "mean"),
}


def moetuner_runs(con, experiment):
    """MoETuner's serving runs: one row per run with policy, seed, sample (in / out), platform and, per row of
    MOETUNER_ROWS, the run's time (ms)."""
    from fig_serving_tail import COMMANDS
    runs = C.pd.concat([C.load_runs(con, command=c, experiment=experiment) for c in COMMANDS], ignore_index=True)
    if runs.empty:
        return runs
    params = C.load_params(con, runs["run_id"], keys=["balance.policy", "serve.eval_mixture",
                                                      "serve.sim_cluster_name"])
    df = runs.set_index("run_id").join(params)
    mix = df.get("serve.eval_mixture", C.pd.Series("[]", index=df.index))
    df["sample"] = ["in" if m is None or str(m).replace(" ", "") in ("[]", "nan") else "out" for m in mix]
    sim = df.get("serve.sim_cluster_name", C.pd.Series(None, index=df.index, dtype=object)).astype(str)
    df["platform"] = ["single node (8xH100)" if "H100" in s else "multi node (16xH200)" if "H200" in s
                      else "CPU ranks (measured)" for s in sim]
    df["policy"] = df["balance.policy"].astype(str)
    met = C.load_metrics(con, df.index, keys=["tail.forward.mean_of_max", "tail.expert.mean_of_max",
                                              "tail.a2a.mean_of_max", "expert_ms", "a2a_ms"])
    tails = met[(met["layer"] == -1) & met["key"].str.startswith("tail.")]
    for key in ("forward", "expert", "a2a"):
        df[key] = tails[tails["key"] == f"tail.{key}.mean_of_max"].groupby("run_id")["value"].first()
    per_rank = met[(met["rank"] >= 0) & met["key"].isin(["expert_ms", "a2a_ms"])]
    # mean over ranks per (batch, layer), summed over layers, mean over batches
    mean_rank = per_rank.groupby(["run_id", "key", "step", "layer"])["value"].mean().groupby(
        ["run_id", "key", "step"]).sum().groupby(["run_id", "key"]).mean().unstack()
    for key in ("expert_ms", "a2a_ms"):
        df[key] = mean_rank[key] if key in mean_rank.columns else float("nan")
    return df.reset_index()


def moetuner_section(con, name, spec):
    """MoETuner's headline: moetuner against static, same seed, sample and platform; in-sample compared with the
    paper, out-of-sample and the measured CPU ranks beside it."""
    experiment = SWEEPS[name][0]
    df = moetuner_runs(con, experiment)
    if df.empty:
        return None

    def values(sample, platform):
        out = {}
        d = df[(df["sample"] == sample) & (df["platform"] == platform)]
        for row, (col, how) in MOETUNER_ROWS.items():
            s = d[d["policy"] == "moetuner"][["seed", col]].merge(
                d[d["policy"] == "static"][["seed", col]].rename(columns={col: "base"}), on="seed")
            v = (s["base"] / s[col] - 1.0) if how == "speedup" else (1.0 - s[col] / s["base"])
            out[row] = [float(x) * 100 for x in v]
        return out
    ours = {}
    for col in spec["columns"]:
        for row, v in values("in", col).items():
            ours[(row, col)] = v
    extra_cols = ["single node (8xH100), out-of-sample", "multi node (16xH200), out-of-sample",
                  "CPU ranks (measured), in-sample"]
    extra = {}
    for col in extra_cols:
        platform, sample = col.rsplit(", ", 1)
        for row, v in values("in" if sample == "in-sample" else "out", platform).items():
            extra[(row, col)] = v
    return ours, [("out-of-sample (profiled on data A, measured on data B) and the CPU ranks' own wall times "
                   "(serving-moetuner runs 4 ranks: on fewer than 4 cores they are oversubscribed, a correctness "
                   "run whose times are not evidence)", extra,
                   spec["rows"], extra_cols, "metric")], \
        f"simulator (the serving replay on MoETuner's simulated nodes, prophet sweep {experiment})"


# sweeps the reconciliation paragraphs cite: name -> (sweep file, its grid keys with short column names, what it shows)
MECHANISM_SWEEPS = {
    "paper-mechanisms": ("experiments/sweeps/paper-mechanisms.toml",
                         {"trace.tokens_per_iteration": "tokens", "trace.zipf_s": "zipf_s"},
                         "against tokens per iteration and Zipf skew: a replica's Trans / Agg is fixed by the expert's "
                         "size while the compute it saves grows with the tokens; the skew sets how much there is to "
                         "save"),
    "paper-planner-knobs": ("experiments/sweeps/paper-planner-knobs.toml",
                            {"balance.alpha": "alpha", "plan.bandwidth_scale": "plan bw x"},
                            "against the planners' knobs: Eq 7's balance threshold alpha (3: the authors' code) and "
                            "the bandwidth the planners believe (x4: four times the simulated cluster's)"),
}


def mechanism_lines(con):
    """The evidence the reconciliation paragraphs cite: speedups over dropless static (and static over DeepSpeed-MoE)
    per cluster, k and grid value of each MECHANISM_SWEEPS sweep in the store; [] when none has runs."""
    lines = []
    for experiment, (path, grid, what) in MECHANISM_SWEEPS.items():
        df = sweep_frame(con, experiment)
        if df.empty or not all(g in df.columns for g in grid):
            continue
        rows = []
        for setting, g in df.groupby(["cluster", "k"] + list(grid)):
            row = dict(zip(["cluster", "k"] + list(grid.values()), setting))
            for label, policy, base in (("fastermoe / static", "fastermoe", "static"),
                                        ("prophet / static", "prophet", "static"),
                                        ("static / deepspeed", "static", "deepspeed")):
                row[label] = P.ours_text(*P.summarize(per_seed(speedups(g, policy, base, ["trace"]))), "x")
            rows.append(row)
        t = C.pd.DataFrame(rows)
        for col in grid.values():
            t[col] = t[col].map(lambda v: f"{v:g}")
        lines += [f"### Mechanisms: `{experiment}`", "",
                  f"Ours: {sim_label(experiment)} (`prophet sweep {path}`), MoE-GPT-M dims; speedup over dropless "
                  f"static, and static over DeepSpeed-MoE (what padding costs), mean \u00b1 sd over seeds (n), {what}.",
                  "", C.markdown_table(t), ""]
    return lines


BUILDERS = {"table4": table_section, "table5": table_section, "fig11": fig11_section, "fig12": fig12_section,
            "fig14": fig14_section, "fig15": fig15_section, "fig16": fig16_section, "moetuner": moetuner_section}


def render(name, spec, built, out_dir=None, tally=None):
    """Markdown lines of one section (and <out_dir>/paper_<name>.csv with the long comparison frame); tally (a
    list) gets one (title, compared, flagged, without mechanism) per comparison table."""
    head = [f"### {spec['title']}", "",
            f"Paper: {spec['source']}; values over {spec['baseline']} (`{spec['file']}`)."]
    if built is None:
        experiment, path = SWEEPS[name]
        return head + ["", f"No data: no finished runs of `{experiment}` in this store (`prophet sweep {path}`).", ""]
    ours, extras, model = built[:3]
    derived = built[3] if len(built) > 3 else []
    frame = P.compare(name, spec, ours, model)
    frames = [frame]
    if tally is not None:
        tally.append((spec["title"].split(":")[0], frame, spec))
    lines = head + [f"Ours: {model}; mean \u00b1 sd over seeds (n). Cell: ours \u00b7 paper \u00b7 ours / paper; "
                    f"\u2691 more than {P.FLAG:.0%} off.", "", P.layout_table(frame, spec), "",
                    P.reconciliation(frame, spec), ""]
    for sub_spec, sub_ours in derived:
        sub = P.compare(f"{name}: {sub_spec['title']}", sub_spec, sub_ours, model)
        frames.append(sub)
        if tally is not None:
            tally.append((f"{spec['title'].split(':')[0]}, {sub_spec['title'].split(' (')[0]}", sub, sub_spec))
        lines += [f"{sub_spec['title']} ({sub_spec['source']}; ours: {model}):", "",
                  P.layout_table(sub, sub_spec), "", P.reconciliation(sub, sub_spec), ""]
    for extra in extras:  # (title, values, rows, columns, row label[, its model when not the section's])
        title, values, rows, cols, label = extra[:5]
        lines += [f"Ours only, {title} ({extra[5] if len(extra) > 5 else model}):", "",
                  P.ours_table(values, rows, cols, spec["unit"], label), ""]
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        C.pd.concat(frames, ignore_index=True).to_csv(os.path.join(out_dir, f"paper_{name}.csv"), index=False)
    return lines


# the text above the list of settings where prophet is slower than fastermoe (prophet_below_fastermoe)
BELOW_NOTE = (
    "Pro-Prophet slower than FasterMoE by more than 0.5% under the same model (setting: cluster, trace, grid values "
    "(fastermoe time / prophet time)). Mechanisms: on 2xLPWNV (E = 8) Eq 7 with the authors' alpha = 3 stops prophet "
    "while the layer is still unbalanced (its threshold alpha * I / E is 3/8 of the tokens at k = 1, 3/4 at k = 2), "
    "where FasterMoE keeps shadowing while its model improves (`prophet plan` on the 65536-token, Zipf s = 2 version "
    "of paper-e8-k1-m with the topology-aware lpwnv-8: Eq 8 prophet 147 ms, fastermoe 95 ms; with balance.alpha = "
    "0.5 prophet 97 ms, and ahead in the simulator column, 97 against fastermoe's 125); the same on 4xHPNV at 65536 tokens and k = 2: after the hottest "
    "expert's replicas the spread is under alpha * I / E and prophet stops at that one expert (14 replicas) while "
    "FasterMoE shadows two or three (`prophet plan` on paper-e16-k2-m with 65536 tokens, hpnv-16: Eq 8 prophet 107.4 "
    "ms, fastermoe 77.6; with balance.alpha = 0.5 prophet 81.2, and 81.2 against fastermoe's 99.6 in the simulator "
    "column); in paper-planner-knobs' lpwnv-8, k = 2, alpha = 0.5 setting both planners believe 4x the bandwidth and "
    "prophet, replicating more (12.7 replicas per layer against 7.0 in `prophet plan`), pays more of that error; "
    "elsewhere (hpnv-16, S and DS at k = 2) prophet plans from the "
    "previous iteration's counts and FasterMoE from the current one's (prophet-oracle ties fastermoe exactly there: "
    "`prophet plan` on paper-e16-k2-s / hpnv-16 with plan.topology_aware = false, the paper's flat Eqs that "
    "paper-tables-model runs: Eq 6 12.064 ms and Eq 8 8.711 ms for both, prophet 12.128 / 8.942). Per layer, Fig 11's layer 0 (the reconciliation "
    "below):")


def sections_with_data(con, experiments=None):
    """The sections whose sweep has finished runs in the store (and is among experiments, when given)."""
    names = []
    for name, (experiment, _) in SWEEPS.items():
        if experiments is not None and experiment not in experiments:
            continue
        if not C.load_runs(con, experiment=experiment).empty:
            names.append(name)
    return names


def build(con, sections=None, out_dir=None, values_dir=P.VALUES_DIR):
    """The markdown lines of the requested sections (all by default), in SWEEPS' order."""
    specs = P.load_all(values_dir)
    names = [n for n in SWEEPS if sections is None or n in sections]
    lines = ["## The papers' tables and figures beside ours", "",
             "Every number of ours is simulated (the sim engine's mean iteration time, or the serving replay); "
             "speedups are stated over DeepSpeed-MoE (padded to the largest count, the paper's baseline) as the paper "
             "does, and over dropless static (exact counts) in the labelled tables. No constant is fitted to the "
             "papers' numbers.", ""]
    body, tally = [], []
    for name in names:
        body += render(name, specs[name], BUILDERS[name](con, name, specs[name]), out_dir, tally)
    below = prophet_below_fastermoe(con) if names else []
    if not names:
        note = []
    elif below:
        note = [BELOW_NOTE, ""] + below + [""]
    else:
        note = ["Pro-Prophet is at least as fast as FasterMoE (within 0.5%) in every setting of these sweeps under "
                "each model.", ""]
    return lines + overview(tally) + note + body + (mechanism_lines(con) if names else [])


def prophet_below_fastermoe(con, tolerance=0.005):
    """Settings where prophet's mean time is above fastermoe's by more than tolerance, under one model: the sim
    sweeps' mean iteration time and, per equation, paper-tables-model's eqN_ms. One text line per sweep with any."""
    out = []
    sims = ["paper-tables", "fig11-layers", "fig12-iterations", "fig16-rb", *MECHANISM_SWEEPS]
    for experiment in dict.fromkeys(sims):
        df = sweep_frame(con, experiment)
        if df.empty:
            continue
        grid = [c for c in df.columns if c.startswith(("trace.", "balance.", "plan.")) and df[c].nunique() > 1
                and c not in ("balance.policy", "trace.seed")]
        out += _below(df, ["cluster", "trace"] + grid, f"{experiment} (simulator)", tolerance)
    df = C.sweep_points(con, MODEL_SWEEP[0], ["eq6_ms", "eq8_ms"])
    if not df.empty and "balance.cost_eq" in df.columns:
        for eq in (6, 8):
            d = df[df["balance.cost_eq"] == eq].assign(time_ms=lambda x: x[f"eq{eq}_ms"])
            out += _below(d, ["cluster", "trace"], f"{MODEL_SWEEP[0]} (Eq {eq})", tolerance)
    return out


def _below(df, keys, label, tolerance):
    t = df[df["policy"].isin(["prophet", "fastermoe"])].groupby(keys + ["policy"])["time_ms"].mean().unstack()
    if not {"prophet", "fastermoe"} <= set(t.columns):
        return []
    worse = t[t["prophet"] > t["fastermoe"] * (1 + tolerance)]
    if worse.empty:
        return []
    def name(key, v):  # grid values as key=value, cluster and trace as they are
        text = f"{v:g}" if isinstance(v, float) else str(v)
        return text if key in ("cluster", "trace") else f"{key.split('.', 1)[1]}={text}"
    cells = [", ".join(name(k, v) for k, v in zip(keys, i if isinstance(i, tuple) else (i,)))
             + f" ({r['fastermoe'] / r['prophet']:.2f})" for i, r in worse.iterrows()]
    return [f"- {label}: {len(cells)} of {len(t)} settings: " + "; ".join(cells)]


def overview(tally):
    """One row per comparison table: cells compared, flagged (>15% off) and flagged without a mechanism."""
    if not tally:
        return []
    rows = ["| comparison | cells compared | flagged (>15%) | without a mechanism |", "|---|---|---|---|"]
    for title, frame, spec in tally:
        rows.append(f"| {title} | {P.compared_cells(frame)} | {int(frame['flagged'].sum())} | "
                    f"{len(P.match_mechanisms(frame, spec)[1])} |")
    return ["Overview (computed from this store; the sections below give every cell):", "", "\n".join(rows), ""]


# the commands that make docs/paper-comparison.md (its preamble repeats them)
DOC_COMMANDS = [f"build/prophet sweep {path} --set store.path=results/paper.db --no-report"
                for path in dict.fromkeys([p for _, p in SWEEPS.values()] + [MODEL_SWEEP[1]] +
                                          [m[0] for m in MECHANISM_SWEEPS.values()])
                ] + ["/usr/bin/python3 report/paper_sections.py --db results/paper.db --doc docs/paper-comparison.md"]


def doc_preamble(db):
    """docs/paper-comparison.md's head: what it is, the commands, the machine, the load, the commit."""
    import platform
    import subprocess
    commit = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "?"
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return ["# The papers' tables and figures beside ours", "",
            "Generated by report/paper_sections.py from the sweeps' store rows (do not edit by hand; docs/reports.md). "
            "Commands (one store; every sweep is the sim engine except serving-moetuner, which runs real CPU ranks "
            "and replays them on simulated nodes):", "", "```", *DOC_COMMANDS, "```", "",
            f"Machine: {platform.node() or '?'} ({os.cpu_count()} cores, {platform.machine()}), load average "
            f"{load} when this file was written (simulated times do not depend on the load; the CPU-rank column of "
            "the MoETuner section does). Commit "
            f"{commit}; store `{db}`.", ""]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", default=C.DEFAULT_DB)
    p.add_argument("--out", default=None, help="directory for paper_<section>.csv (default: none written)")
    p.add_argument("--section", nargs="+", default=None, choices=list(SWEEPS), help="only these sections")
    p.add_argument("--doc", default=None, help="write the sections with the commands and the machine to this file "
                                               "(docs/paper-comparison.md) instead of stdout")
    args = p.parse_args(argv)
    con = C.connect(args.db)
    if con is None:
        print(f"no store at {args.db}", file=sys.stderr)
        return 5
    lines = build(con, args.section, args.out)
    if args.doc:
        with open(args.doc, "w") as f:
            f.write("\n".join(doc_preamble(args.db) + lines[1:]) + "\n")
        print(f"wrote {args.doc}")
    else:
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
