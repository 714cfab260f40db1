#!/usr/bin/env bash
# Tabulates what experiments/sweep_qwen.sh has measured so far (results/sweep_qwen/{evals,plans}):
# writes WORK/sweep/runs.json (gamma.runs; each eval joined with its zero-shot results) and
# runs gamma report into results/sweep_qwen/ (table.md, report.json, PNGs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
W=${WORK:-/tmp/gamma-qwen}; S=$W/sweep; R=$root/results/sweep_qwen; MC_LIMIT=${MC_LIMIT:-100}
mkdir -p $S/joined
python3 - "$R" "$S" "$MC_LIMIT" "$W/pool-imx" <<'PY'
import json, os, sys, glob
R, S, lim, pool = sys.argv[1:5]
runs = []
for f in sorted(glob.glob(f"{R}/evals/*.json")):
    name = os.path.basename(f)[:-5]
    if ".mc" in name: continue
    e = json.load(open(f))
    mc = f"{R}/evals/{name}.mc{lim}.json"
    if os.path.exists(mc): e["tasks"] = json.load(open(mc))["tasks"]
    json.dump(e, open(f"{S}/joined/{name}.json", "w"), indent=1)
    r = {"eval": f"{S}/joined/{name}.json"}
    if name.startswith("llama-"):
        r.update(method="llama.cpp", label=name[6:])
    else:
        method, _, rest = name.partition("-")
        r.update(method=method, plan=f"{R}/plans/{name}.json")
        if rest.startswith("size-"): r["label"] = "@" + rest[5:]
        elif method != "uniform": r["label"] = rest
    runs.append(r)
json.dump({"schema": "gamma.runs", "version": 1, "pool": pool, "runs": runs}, open(f"{S}/runs.json", "w"), indent=1)
print(f"{len(runs)} runs")

# Total compute of the sweep, from the seconds each result file records (llama-quantize times
# live in WORK; they are kept in R/wall_time.json once seen). Not counted: gamma emit/solve
# (seconds each), the teacher, imatrix and pool (setup, results/README.md).
wt_path = f"{R}/wall_time.json"
old = json.load(open(wt_path)) if os.path.exists(wt_path) else {}
quant = dict(old.get("llama_quantize_seconds", {}))
for f in glob.glob(f"{S}/mixes/*.seconds"):
    quant[os.path.basename(f)[:-8]] = float(open(f).read())
evals = sum(json.load(open(f))["seconds"] for f in glob.glob(f"{R}/evals/*.json") if ".mc" not in f)
tasks = sum(json.load(open(f))["seconds"] for f in glob.glob(f"{R}/evals/*.mc*.json"))
root = os.path.dirname(os.path.dirname(R))
stage1 = {}
for f in sorted(glob.glob(f"{root}/results/learn_qwen1.5b_imatrix_*bpw*.json")) + [f"{root}/results/hawq_qwen1.5b_imatrix.json"]:
    if os.path.exists(f): stage1[os.path.basename(f)] = json.load(open(f))["stats"]["seconds"]
wt = {"evals_seconds": evals, "tasks_seconds": tasks, "llama_quantize_seconds": quant,
      "scores_seconds": stage1,
      "total_hours": (evals + tasks + sum(quant.values()) + sum(stage1.values())) / 3600}
json.dump(wt, open(wt_path + ".tmp", "w"), indent=1); os.replace(wt_path + ".tmp", wt_path)
print(f"total compute {wt['total_hours']:.2f} h")
PY
rm -f "$R"/*.png  # plots of runs no longer in the sweep
"$root/build/cli/gamma" report "$S/runs.json" -o "$R"
