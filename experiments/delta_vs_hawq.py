#!/usr/bin/env python3
# Produces: results/iq_qwen/delta_vs_hawq.json, results/iq_qwen/delta_vs_hawq_e3v3.json.
"""Issue 19: how Stage I's measured loss changes (SCORES.json "delta") rank the modules against
HAWQ-V2's predicted ones: per module, the loss change of going from the best to the cheapest
candidate both scores cover, Spearman rho over modules (and within each kind), and the share of
modules whose candidates the two order the same (Kendall-style agreement within a module).

  delta_vs_hawq.py GAMMA.json HAWQ.json -o OUT.json
"""
import argparse, json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rank_stats import spearman  # noqa: E402


ap = argparse.ArgumentParser()
ap.add_argument("gamma")
ap.add_argument("hawq")
ap.add_argument("-o", "--out", required=True)
a = ap.parse_args()
g, h = json.load(open(a.gamma)), json.load(open(a.hawq))
cheap, pair = "Q2_K", "Q4_K"  # both in every Qwen module's candidates (256-wide rows)
rows, kinds, agree, pairs = [], {}, 0, 0
for name, m in g["modules"].items():
    d, hs = m["delta"], h["modules"][name]["score"]
    common = [c for c in d if c in hs]
    if cheap not in common or pair not in common:
        continue
    dg = d[cheap] - d[pair]            # measured: loss change Q4_K -> Q2_K
    dh = hs[pair] - hs[cheap]          # HAWQ: predicted loss change (scores are -loss)
    kind = name.split(".")[2]
    rows.append((name, kind, dg, dh))
    kinds.setdefault(kind, []).append((dg, dh))
    for i in range(len(common)):
        for j in range(i + 1, len(common)):
            ci, cj = common[i], common[j]
            pairs += 1
            agree += (d[ci] < d[cj]) == (hs[ci] > hs[cj])
res = {"command": "experiments/delta_vs_hawq.py " + " ".join(os.path.relpath(p) for p in (a.gamma, a.hawq)),
       "what": f"per module, loss change {pair} -> {cheap}: measured (Stage I delta) vs predicted (HAWQ-V2)",
       "modules": len(rows), "spearman_all": spearman([r[2] for r in rows], [r[3] for r in rows]),
       "spearman_within_kind": {k: spearman([x[0] for x in v], [x[1] for x in v]) for k, v in sorted(kinds.items())},
       "candidate_order_agreement": agree / pairs if pairs else None,
       "delta_n_per_module": sorted({m.get("delta_n") for m in g["modules"].values()}),
       "stats": g.get("stats", {}), "final": g.get("final", {})}
json.dump(res, open(a.out + ".tmp", "w"), indent=1)
os.replace(a.out + ".tmp", a.out)
print(json.dumps({k: v for k, v in res.items() if k not in ("stats", "final")}, indent=1))
