#!/usr/bin/env python3
"""Per-type table of a pool built with every candidate type (issue 18): for each type, the
modules it fits, its real bits per weight (block scales included), the imatrix-weighted
relative error of the weights (parameter-weighted mean and median over modules), the pool's
wall time for it, and whether another type dominates it: no more bytes and no more error on
at least --share of the modules both fit. The types no other dominates are the Pareto set,
the default candidate set for models of this row width.

  type_table.py POOL/manifest.json --model NAME -o results/iq_qwen/types   (writes .json, .md)
"""
import argparse
import json
import os
import statistics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("manifest")
    ap.add_argument("--model", required=True)
    ap.add_argument("--share", type=float, default=0.9, help="share of modules on which a dominating type must win")
    ap.add_argument("-o", "--out", required=True, help="output path without extension")
    a = ap.parse_args()
    m = json.load(open(a.manifest))
    pool_dir = os.path.dirname(os.path.abspath(a.manifest))
    seconds = {}  # each part's sidecar (cand-TYPE.json) records the seconds it took
    for t in m["types"]:
        side = os.path.join(pool_dir, f"cand-{t}.json")
        if os.path.exists(side):
            seconds[t] = json.load(open(side)).get("seconds")
    per = {}  # type -> {module: (bpw, rel_err, n_params)}
    for e in m["modules"]:
        for c in e["candidates"]:
            if "@" in c["id"] or c["type"] == "F16":
                continue
            per.setdefault(c["type"], {})[e["name"]] = (c["bpw"], c["rel_err"], e["n_params"])
    n_modules = len(m["modules"])
    rows = []
    for t, mods in per.items():
        params = sum(v[2] for v in mods.values())
        rows.append({
            "type": t,
            "modules": len(mods),
            "bpw": sum(v[0] * v[2] for v in mods.values()) / params,
            "rel_err_mean": sum(v[1] * v[2] for v in mods.values()) / params,
            "rel_err_median": statistics.median(v[1] for v in mods.values()),
            "exact_copies": sum(1 for v in mods.values() if v[1] == 0.0),
            "pool_seconds": seconds.get(t),
        })
    rows.sort(key=lambda r: r["bpw"])
    for r in rows:
        A = per[r["type"]]
        r["dominated_by"] = []
        for o in rows:
            if o["type"] == r["type"]:
                continue
            B = per[o["type"]]
            both = [k for k in A if k in B]
            if not both:
                continue
            wins = sum(1 for k in both if B[k][0] <= A[k][0] and B[k][1] <= A[k][1])
            if wins >= a.share * len(both) and len(both) >= a.share * len(A):
                r["dominated_by"].append(o["type"])
    pareto = [r["type"] for r in rows if not r["dominated_by"]]
    out = {"schema": "gamma.type_table", "version": 1, "model": a.model, "manifest": os.path.abspath(a.manifest),
           "imatrix": m.get("imatrix"), "n_modules": n_modules, "share": a.share, "types": rows, "pareto": pareto}
    with open(a.out + ".json.tmp", "w") as f:
        json.dump(out, f, indent=1)
    os.replace(a.out + ".json.tmp", a.out + ".json")
    lines = [f"Per-type pool figures, {a.model} ({n_modules} linear modules; error: imatrix-weighted "
             f"relative error of the weights vs the teacher; dominated: another type has no more bytes and "
             f"no more error on >= {a.share:.0%} of the modules)", "",
             "| type | modules | bpw | mean rel. err | median rel. err | exact copies | pool s | dominated by |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s = "–" if r["pool_seconds"] is None else f"{r['pool_seconds']:.0f}"
        d = ", ".join(r["dominated_by"]) or "**Pareto**"
        lines.append(f"| {r['type']} | {r['modules']} | {r['bpw']:.3f} | {r['rel_err_mean']:.5f} | "
                     f"{r['rel_err_median']:.5f} | {r['exact_copies']} | {s} | {d} |")
    lines += ["", "Pareto set: " + ",".join(pareto)]
    with open(a.out + ".md.tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(a.out + ".md.tmp", a.out + ".md")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
