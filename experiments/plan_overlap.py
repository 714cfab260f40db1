#!/usr/bin/env python3
"""How far apart GAMMA's and HAWQ-V2's plans are at each size of the goal table (issue 19: why
the two tie from 3.45 bpw up): the modules whose types differ, their share of the linear
weights, and the mean |Δ bpw| per weight between the two plans. Plans are the variants each
allocator chose on validation (results/iq_qwen/goal_table.json, experiments/goal_table.py).

  plan_overlap.py results/iq_qwen POOL-ALL/manifest.json [-o results/iq_qwen/plan_overlap.md]
"""
import argparse
import os

from table_out import emit_table
import kept


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("manifest", help="a pool manifest holding every type either plan uses")
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    man = kept.load_json(a.manifest)
    bpw = {m["name"]: {c["type"]: c["bpw"] for c in m["candidates"]} for m in man["modules"]}
    npar = {m["name"]: m["n_params"] for m in man["modules"]}
    total = sum(npar.values())
    rows = kept.load_json(os.path.join(a.dir, "goal_table.json"))["rows"]
    lines = ["| size | GAMMA's plan | HAWQ-V2's plan | modules that differ | share of weights | mean abs Δ bpw | GAMMA − HAWQ-V2 KLD, wiki / py |",
             "|---|---|---|---|---|---|---|"]
    out = {"schema": "gamma.plan_overlap", "version": 1, "rows": []}
    for r in rows:
        g, h = r.get("GAMMA"), r.get("HAWQ-V2")
        if not g or not h:
            continue
        pg = kept.load_json(os.path.join(a.dir, "plans", g["variant"] + ".json"))["modules"]
        ph = kept.load_json(os.path.join(a.dir, "plans", h["variant"] + ".json"))["modules"]
        if set(pg) != set(ph):
            raise SystemExit(f"{r['size']}: the two plans cover different modules")
        diff = [k for k in pg if pg[k] != ph[k]]
        share = sum(npar[k] for k in diff) / total
        moved = sum(npar[k] * abs(bpw[k][pg[k]] - bpw[k][ph[k]]) for k in pg) / total
        dk = [g[t][0] - h[t][0] for t in ("wiki", "py")]
        lines.append(f"| {r['size']} | {g['variant']} | {h['variant']} | {len(diff)} / {len(pg)} | {100 * share:.1f} % | "
                     f"{moved:.3f} | {dk[0]:+.4f} / {dk[1]:+.4f} |")
        out["rows"].append({"size": r["size"], "gamma": g["variant"], "hawq": h["variant"], "modules_differ": len(diff),
                            "modules": len(pg), "weight_share": share, "mean_abs_dbpw": moved, "dkld": dk})
    emit_table(lines, out, a.out)


if __name__ == "__main__":
    main()
