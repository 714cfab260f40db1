#!/usr/bin/env python3
"""Stage I diagnostics on Qwen: how each learned scores file ranks modules, against HAWQ-V2.

For every module, HAWQ's benefit per weight of Q4_K over Q2_K (trace x perturbation drop, /
n_params) measures its sensitivity; a Stage I run ranks modules by 1 - p(Q2_K) (the learned
wish for more than the cheapest type). Spearman's rho between the two (over all modules and within each kind), how peaked p is, the
argmax types, b-hat, and per-kind means. Writes results/stage1_diagnostics_qwen.json.
Usage: experiments/stage1_diagnostics.py POOL_MANIFEST HAWQ.json SCORES.json... -o OUT.json
"""
import argparse, json, os, statistics
from collections import Counter, defaultdict

from rank_stats import spearman

ap = argparse.ArgumentParser()
ap.add_argument("manifest"); ap.add_argument("hawq"); ap.add_argument("scores", nargs="+")
ap.add_argument("-o", "--output", required=True)
a = ap.parse_args()
n = {e["name"]: e["n_params"] for e in json.load(open(a.manifest))["modules"]}
h = json.load(open(a.hawq))["modules"]
names = sorted(h)
benefit = [(h[k]["score"]["Q4_K"] - h[k]["score"]["Q2_K"]) / n[k] for k in names]
kind = {k: k.split(".")[2] for k in names}  # blk.N.KIND
kinds = sorted(set(kind.values()))
out = {"schema": "gamma.stage1_diagnostics", "version": 1, "hawq": os.path.basename(a.hawq),
       "hawq_benefit_per_weight_by_kind": {kd: statistics.fmean(b for k, b in zip(names, benefit) if kind[k] == kd) for kd in kinds},
       "runs": []}
for f in a.scores:
    s = json.load(open(f))
    m = s["modules"]
    wish = [1 - m[k]["p"]["Q2_K"] for k in names]
    hp = s.get("hyperparameters", {})
    out["runs"].append({
        "scores": os.path.basename(f),
        "settings": {k: hp.get(k) for k in ("steps", "lr", "tau", "tau_end", "layers_per_step", "batch", "penalty", "objective")},
        "target_bpw": s.get("target_bpw"), "b_hat": s.get("final", {}).get("bpw_expected"),
        "spearman_vs_hawq": spearman(wish, benefit),
        # the same within each kind, across the 28 layers: not explained by module size
        "spearman_vs_hawq_within_kind": {kd: spearman(*zip(*[(w, b) for k, w, b in zip(names, wish, benefit) if kind[k] == kd])) for kd in kinds},
        "mean_max_p": statistics.fmean(max(m[k]["p"].values()) for k in names),
        "argmax_types": dict(Counter(max(m[k]["p"], key=m[k]["p"].get) for k in names)),
        "wish_by_kind": {kd: statistics.fmean(w for k, w in zip(names, wish) if kind[k] == kd) for kd in kinds},
    })
tmp = a.output + ".tmp"
json.dump(out, open(tmp, "w"), indent=1); os.replace(tmp, a.output)
for r in out["runs"]:
    wk = statistics.fmean(r["spearman_vs_hawq_within_kind"].values())
    print(f"{r['scores']:48s} rho {r['spearman_vs_hawq']:+.3f} (within kinds {wk:+.3f})  mean max p {r['mean_max_p']:.3f}  b {r['b_hat']}  argmax {r['argmax_types']}")
