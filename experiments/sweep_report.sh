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
PY
rm -f "$R"/*.png  # plots of runs no longer in the sweep
"$root/build/cli/gamma" report "$S/runs.json" -o "$R"
