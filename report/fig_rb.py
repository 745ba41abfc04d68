#!/usr/bin/python3
"""Balance degree RB per layer (the paper's Fig 16) from `prophet sweep` runs, engine sim (bars, mean ± sd across seeds).

RB of layer l = std(static) / std(policy) of the per-device computed tokens H_i, mean over iterations (metric
layer_rb_vs_static, layer = l, step 0; static is 1 by definition and not drawn). The table adds, per layer, the
ratio prophet RB / fastermoe RB (of the means across seeds) when both policies are present (the paper: up to
11.01x). One panel per experiment / cluster / trace.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
from fig_layers import draw_layer_panels, layer_frame  # noqa: E402

NAME = "fig_rb"
KEY = "layer_rb_vs_static"


def main(argv=None):
    args = C.parse_args(__doc__.splitlines()[0], argv=argv)
    con = C.connect_or_exit(args.db, NAME)
    df, _ = layer_frame(con, args.experiment, KEY)
    if not df.empty:
        df = df[df["policy"] != "static"]
    if df.empty:
        C.no_data(NAME, "no finished non-static `prophet sweep` runs with per-layer layer_rb_vs_static" +
                  (f" in experiment {args.experiment}" if args.experiment else ""))
    df = df.rename(columns={KEY: "rb"})
    df, fig, nrows, nseeds = draw_layer_panels(df, "rb", "RB = std(static) / std(policy)")
    cap = (f"Balance degree RB per layer = std(static) / std(policy) of the per-device computed tokens (mean over "
           f"iterations). Bars: {C.SD_NOTE} (errorbar='sd', up to {nseeds} seeds; grid values pooled). Dashed line: "
           "static (RB = 1). Table: prophet_over_fastermoe = mean prophet RB / mean fastermoe RB per layer. Data: "
           "prophet sweep (engine sim), metric layer_rb_vs_static.")
    C.add_caption(fig, cap)
    fig.tight_layout(rect=(0, 0.06 if nrows > 1 else 0.1, 1, 1))
    C.save_figure(fig, args.out, NAME)
    by = ["experiment", "cluster", "trace", "layer"]
    t = C.mean_sd(df, by + ["policy"], "rb")
    t["policy"] = t["policy"].astype(str)
    pols = set(t["policy"])
    if {"prophet", "fastermoe"} <= pols:
        p = t[t["policy"] == "prophet"][by + ["rb_mean"]].rename(columns={"rb_mean": "p"})
        f = t[t["policy"] == "fastermoe"][by + ["rb_mean"]].rename(columns={"rb_mean": "f"})
        r = p.merge(f, on=by, how="inner")
        r["prophet_over_fastermoe"] = r["p"] / r["f"].where(r["f"] > 0)
        t = t.merge(r[by + ["prophet_over_fastermoe"]], on=by, how="left")
    t = t.sort_values(["experiment", "cluster", "trace", "layer", "policy"]).reset_index(drop=True)
    C.print_result(NAME, cap, t)


if __name__ == "__main__":
    main()
