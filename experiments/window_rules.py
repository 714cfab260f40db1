#!/usr/bin/env python3
"""Issue 44: what a narrower pool window would cost the plans, from a finished `gamma run`'s own files.

gamma run quantizes, per module, the candidates within K = 3 steps (by bytes) of HAWQ-V2's plans on
the estimate at the sizes it makes (solve/window.cpp; pool-only.json). Stage I and the other scorers
score that window only, so any narrower window is a subset of what they scored: each allocator is
solved at the run's size over the run's window and over the narrower one (gamma solve --allow), and
the table counts the modules whose type changes and the allocator's objective given up. A window's
cost is priced by the dry run's per-type seconds per weight (run/estimate.cpp pool_type_seconds, at
the reference's speed; the source's own type costs nothing). Stage I's scores on a narrower window
would differ a little (its masks compete over fewer candidates): this is the first-order effect.

  window_rules.py RUN_DIR SIZE ANCHOR_SIZES SCORES_GAMMA.json [--gamma BIN] [-o OUT.md]
e.g. window_rules.py run 922746880 922746880,876941728 scores-gamma-3.81-c0.2.json (the sizes:
gamma run's target and the mixes it compares with, as its log's "pool window" line counts them).
"""
import argparse
import json
import subprocess

# run/estimate.cpp pool_type_seconds (seconds per 1e9 weights at 2 threads) times its kPoolQuiet.
SEC_PER_G = {"IQ2_XXS": 479, "IQ2_XS": 995, "IQ2_S": 368, "Q2_K": 269, "IQ3_XXS": 239, "IQ3_S": 176, "IQ4_XS": 126,
             "Q4_K": 15, "Q4_1": 60, "Q5_K": 62, "Q5_1": 60, "Q6_K": 19, "Q8_0": 9}
IQ2 = ("IQ2_XXS", "IQ2_XS", "IQ2_S")
# (name, steps below the anchors, steps above, types allowed only within `limit` steps below the anchors, limit)
RULES = [("K = 3 either side (gamma run)", 3, 3, (), 0), ("2 below, 3 above", 2, 3, (), 0),
         ("2 either side", 2, 2, (), 0), ("K = 3, but IQ2 types only within 2 below", 3, 3, IQ2, 2),
         ("K = 3, but IQ2 types only within 1 below", 3, 3, IQ2, 1), ("K = 3, no IQ2 type", 3, 3, IQ2, -99)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run")
    ap.add_argument("size", type=int)
    ap.add_argument("anchor_sizes")
    ap.add_argument("scores_gamma")
    ap.add_argument("--gamma", default="build/cli/gamma")
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    run = a.run
    est = json.load(open(f"{run}/estimate/manifest.json"))
    n_of = {m["name"]: m["n_params"] for m in est["modules"]}
    src = {m["name"]: m["source_type"] for m in est["modules"]}
    ids = {m["name"]: [c["id"] for c in m["candidates"]] for m in est["modules"]}

    def solve(pool, args, size, allow=None, out="/tmp/window_rules_plan.json"):
        cmd = [a.gamma, "solve", pool, "--size", str(size), "-o", out] + args
        for n, ts in (allow or {}).items():
            cmd += ["--allow", "^" + n.replace(".", "\\.") + "$=" + ",".join(ts)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        p = json.load(open(out))
        return p["modules"], p["info"]["objective"]

    anchors = [solve(f"{run}/estimate", ["--scores", f"{run}/scores-hawq-estimate.json"], int(s))[0]
               for s in a.anchor_sizes.split(",")]
    run_window = json.load(open(f"{run}/pool-only.json"))["modules"]

    def price(w):
        return sum(n_of[n] * SEC_PER_G[t] * 0.6 / 1e9 for n, ts in w.items() for t in ts if t != src[n])

    def window(below, above, limited, limit):
        out = {}
        for n, cand in ids.items():
            idx = [cand.index(p[n]) for p in anchors]
            lo, hi = min(idx), max(idx)
            keep = []
            for t in run_window[n]:  # a subset of what the run scored
                i = cand.index(t)
                inside = lo - below <= i <= hi + above
                if t in limited:
                    inside = inside and i >= lo - limit if limit >= 0 else False
                if inside or t == src[n]:
                    keep.append(t)
            out[n] = keep or run_window[n]
        return out

    sc = f"{run}/{a.scores_gamma}"
    cal = ["--layer-scale", f"{run}/layers.json"]
    head = ["--fixed", "output.weight=Q4_K"]
    scorers = {"gamma-cal-output-Q4_K": ["--scores", sc, "--transform", "delta"] + cal + head,
               "gamma-cal": ["--scores", sc, "--transform", "delta"] + cal,
               "gamma-output-Q4_K": ["--scores", sc, "--transform", "delta"] + head,
               "gamma-fit-output-Q4_K": ["--scores", sc, "--transform", "delta-fit"] + head,
               "gamma-blend-output-Q4_K": ["--scores", sc, "--transform", "delta-fit", "--blend",
                                           f"{run}/scores-hawq.json"] + head,
               "hawq": ["--scores", f"{run}/scores-hawq.json"]}
    base = {v: solve(f"{run}/pool", args, a.size) for v, args in scorers.items()}
    full = price(run_window)
    lines = [f"Each allocator at {a.size} bytes over a narrower window against over the run's window ({run}; "
             f"anchors: HAWQ-V2 on the estimate at {a.anchor_sizes}). Cell: modules changed / share of the "
             "allocator's objective given up. Priced: reference seconds of quantizing (pool_type_seconds).", "",
             "| window | priced s | of the run's | " + " | ".join(scorers) + " |",
             "|---|---|---|" + "---|" * len(scorers)]
    for name, below, above, limited, limit in RULES:
        w = window(below, above, limited, limit)
        cells = []
        for v, args in scorers.items():
            plan, obj = solve(f"{run}/pool", args, a.size, w)
            bplan, bobj = base[v]
            changed = sum(1 for n in plan if plan[n] != bplan[n])
            cells.append(f"{changed} / {100 * abs(bobj - obj) / abs(bobj):.3f} %")
        lines.append(f"| {name} | {price(w):.0f} | {price(w) / full:.0%} | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
