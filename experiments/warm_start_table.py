#!/usr/bin/env python3
"""Issue 19 item 5, warm start: does Stage I improve on the proxy it starts from? Stage I run
twice with the same recipe (clip layer loss, 337 steps at 3.25 bpw, deltas measured every 3rd
step), once from the uniform start (gamma-clip.json) and once from HAWQ-V2's plan at 3.25 bpw
(gamma-clip-hawq.json, `gamma learn --init-plan`, p = 0.5 on its type), each solved on its raw
deltas rescaled by `gamma layers` (allocator gammal-TAG-Q2_K of experiments/iq_sweep.sh), beside
HAWQ-V2 itself and HAWQ-V2 layer-scaled, at each size, o4e2 head. Columns: validation sum
(wiki.valid + held-back python, 8 x 512 each), wiki.test / python-eval (16 x 512) KLD vs the
teacher; then how far each plan is from HAWQ-V2's (modules that differ) and how alike the runs'
per-module Q4_K -> Q2_K loss changes are (Spearman).

  warm_start_table.py results/iq_qwen [--sizes Q2_K IQ3_XS] [-o results/iq_qwen/warm_start.md]
"""
import argparse
import json
import os

from rank_stats import spearman
from table_out import emit_table

ALLOCS = [("HAWQ-V2 (the start)", "hawq-size-{s}-o4e2"),
          ("HAWQ-V2, layer-scaled", "hawq-cal-size-{s}-o4e2"),
          ("GAMMA from the uniform start", "gammal-clip-Q2_K-size-{s}-o4e2"),
          ("GAMMA from HAWQ-V2's plan", "gammal-clip-hawq-Q2_K-size-{s}-o4e2")]


def kld(d, name, tag):
    p = os.path.join(d, "evals", f"{name}.{tag}.json")
    if not os.path.exists(p):
        return None
    e = json.load(open(p))["kld"]
    return {"mean": e["mean"], "stderr": e["stderr"]}


def change(scores, hawq=False):
    """Per module, the Q4_K -> Q2_K loss change: measured (delta) or HAWQ-V2's (-score)."""
    mods = json.load(open(scores))["modules"]
    if hawq:
        return {n: m["score"]["Q4_K"] - m["score"]["Q2_K"] for n, m in mods.items()}
    return {n: m["delta"]["Q2_K"] - m["delta"]["Q4_K"] for n, m in mods.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--sizes", nargs="+", default=["Q2_K", "IQ3_XS"])
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    fmt = lambda x: "–" if x is None else f"{x['mean']:.4f} ± {x['stderr']:.4f}"
    lines = ["| size | allocator | validation sum | wiki.test | python-eval | modules unlike HAWQ-V2's plan |",
             "|---|---|---|---|---|---|"]
    out = {"schema": "gamma.warm_start", "version": 1, "rows": []}
    for s in a.sizes:
        ref = os.path.join(a.dir, "plans", f"hawq-size-{s}-o4e2.json")
        ph = json.load(open(ref))["modules"] if os.path.exists(ref) else None
        for what, pat in ALLOCS:
            n = pat.format(s=s)
            c = {t: kld(a.dir, n, t) for t in ("wv", "pv", "wiki", "py")}
            if not any(c.values()):
                continue
            vsum = c["wv"]["mean"] + c["pv"]["mean"] if c["wv"] and c["pv"] else None
            plan = os.path.join(a.dir, "plans", n + ".json")
            differ = None
            if ph and os.path.exists(plan):
                p = json.load(open(plan))["modules"]
                differ = sum(p[k] != ph[k] for k in p)
            out["rows"].append({"size": s, "allocator": what, "name": n, "valid_sum": vsum,
                                "kld": c, "modules_unlike_hawq": differ})
            lines.append(f"| {s} | {what} | {'–' if vsum is None else f'{vsum:.4f}'} | {fmt(c['wiki'])} | "
                         f"{fmt(c['py'])} | {'–' if differ is None else differ} |")
    runs = {"uniform start": os.path.join(a.dir, "gamma-clip.json"),
            "HAWQ-V2 start": os.path.join(a.dir, "gamma-clip-hawq.json")}
    ch = {k: change(p) for k, p in runs.items() if os.path.exists(p)}
    hq = os.path.join(a.dir, "hawq.json")
    if os.path.exists(hq):
        ch["HAWQ-V2"] = change(hq, hawq=True)
    names = list(ch)
    common = sorted(set.intersection(*(set(v) for v in ch.values()))) if ch else []
    rho = [[spearman([ch[x][m] for m in common], [ch[y][m] for m in common]) for y in names] for x in names]
    out["delta_spearman"] = {"names": names, "modules": len(common), "rho": rho}
    lines += ["", f"Per-module Q4_K -> Q2_K loss change, Spearman over {len(common)} modules:", "",
              "| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines += [f"| {x} | " + " | ".join(f"{v:.3f}" for v in row) + " |" for x, row in zip(names, rho)]
    emit_table(lines, out, a.out)


if __name__ == "__main__":
    main()
