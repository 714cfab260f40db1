#!/usr/bin/env python3
"""The control for Stage I: the scores gamma learn starts from (its "tilt" init at tau = 1),
with no step taken: every module gets the same p, p_b ~ exp(-beta (bpw_b - bpw_0)), beta
putting the expected bpw on the target. Solved with --transform size-log it shows what the
size weighting alone does, so that what learning adds can be told apart.
Usage: experiments/null_scores.py LEARNED_SCORES.json POOL_MANIFEST -o OUT.json
"""
import argparse, json, math, os
ap = argparse.ArgumentParser()
ap.add_argument("scores"); ap.add_argument("manifest"); ap.add_argument("-o", "--output", required=True)
a = ap.parse_args()
s = json.load(open(a.scores))
man = {e["name"]: e for e in json.load(open(a.manifest))["modules"]}
target = s["target_bpw"]
N = sum(e["n_params"] for e in man.values())
def probs(e, beta):
    b = [c["bpw"] for c in e["candidates"]]
    z = [math.exp(-beta * (x - b[0])) for x in b]
    return {c["id"]: v / sum(z) for c, v in zip(e["candidates"], z)}
def bhat(beta):
    return sum(e["n_params"] * sum(p * c["bpw"] for p, c in zip(probs(e, beta).values(), e["candidates"])) for e in man.values()) / N
lo, hi = -50.0, 50.0
for _ in range(200):
    mid = (lo + hi) / 2
    if bhat(mid) > target: lo = mid
    else: hi = mid
beta = (lo + hi) / 2
for name, m in s["modules"].items():
    p = probs(man[name], beta)
    m["p"] = p; m["score"] = dict(p); m["logits"] = {k: math.log(v) for k, v in p.items()}
s["method"] = "gamma-null"
s["final"] = {"bpw_expected": bhat(beta), "steps": 0}
s.pop("curve", None)
s["hyperparameters"] = {"init": "tilt", "tau": 1.0, "steps": 0, "beta": beta}
json.dump(s, open(a.output + ".tmp", "w")); os.replace(a.output + ".tmp", a.output)
print(f"{a.output}: tilt beta {beta:.4f}, b-hat {bhat(beta):.4f}")
