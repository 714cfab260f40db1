#!/usr/bin/env python3
"""The race's choice at Q2_K's size (gamma-cal-output-Q4_K) solved over the window gamma run now
makes by default (IQ2 types only within 1 step below HAWQ-V2's anchors on the estimate), from
the cut-file job's own scores: its plan written for gamma emit (first-order: Stage I's scores are
the run's, learned over the wider window)."""
import json, subprocess, sys
run, size, anchors, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
G = "/root/runs/q2kn/b/cli/gamma"
est = json.load(open(f"{run}/estimate/manifest.json"))
ids = {m["name"]: [c["id"] for c in m["candidates"]] for m in est["modules"]}
src = {m["name"]: m["source_type"] for m in est["modules"]}
IQ2 = ("IQ2_XXS", "IQ2_XS", "IQ2_S")
def solve(pool, args, size, allow, o):
    cmd = [G, "solve", pool, "--size", str(size), "-o", o] + args
    for n, ts in allow.items():
        cmd += ["--allow", "^" + n.replace(".", "\\.") + "$=" + ",".join(ts)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.load(open(o))["modules"]
anc = [solve(f"{run}/estimate", ["--scores", f"{run}/scores-hawq-estimate.json"], int(s), {}, "/tmp/anc.json") for s in anchors.split(",")]
win = json.load(open(f"{run}/pool-only.json"))["modules"]
w = {}
for n, cand in ids.items():
    lo = min(cand.index(p[n]) for p in anc)
    w[n] = [t for t in win[n] if t == src[n] or t not in IQ2 or cand.index(t) >= lo - 1]
sc = f"{run}/scores-gamma-2.92-c0.2.json"
args = ["--scores", sc, "--transform", "delta", "--layer-scale", f"{run}/layers.json", "--fixed", "output.weight=Q4_K"]
new = solve(f"{run}/pool", args, size, w, out)
old = json.load(open(f"{run}/at-{size}/plan-gamma-cal-output-Q4_K.json"))["modules"]
print("modules changed:", sum(new[n] != old[n] for n in new), [(n, old[n], new[n]) for n in new if new[n] != old[n]])
