#!/usr/bin/env bash
# Produces: results/iq_qwen/report/.
# gamma report over the IQ sweep's chosen plans (results/iq_qwen/plans/*.choice) and their
# wiki.test.raw evals, with llama.cpp's mixes as points: KLD vs size, the allocation cosine of
# every pair of plans across budgets and allocators, and Pearson r(p, choice) for the plans
# solved on Stage I's scores (gamma.json's p). Writes results/iq_qwen/report/.
# The pool's manifest is the one kept in the archive (pool-all/manifest.json); paths in the runs
# file are relative to results/iq_qwen, so report.json is the same from any clone.
#   bash experiments/iq_report.sh [OUT_DIR]   (default results/iq_qwen/report)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
R=$root/results/iq_qwen; OUT=${1:-$R/report}
python3 "$root/experiments/kept.py" extract $R  # its evals/, plans/, pool-all/, ... are kept in $R/data.tar.xz
runs=$(mktemp -p "$R" .iq-runs.XXXXXX.json)
trap 'rm -f "$runs"' EXIT
(cd "$R" && python3 - . pool-all) > "$runs" <<'PY'
import glob, json, os, sys
R, pool = sys.argv[1:3]
runs = []
for f in sorted(glob.glob(f"evals/llama-*.wiki.json")):
    runs.append({"method": "llama.cpp", "label": os.path.basename(f)[6:-10], "eval": f})
for c in sorted(glob.glob(f"plans/*-size-*.choice")):
    name = open(c).read().strip()
    alloc, size = os.path.basename(c)[:-7].split("-size-")
    ev = f"evals/{name}.wiki.json"
    if not os.path.exists(ev):
        continue
    r = {"method": alloc, "label": f"{alloc}@{size}", "plan": f"plans/{name}.json", "eval": ev}
    if alloc.startswith("gamma"):  # gamma, gammad, gammab: gamma.json; gammad-TAG, gammal-TAG-LOW: gamma-TAG.json
        tag = alloc.split("-", 1)[1] if "-" in alloc else ""
        if alloc.startswith("gammal-"):
            tag = tag.rsplit("-", 1)[0]
        r["scores"] = f"gamma-{tag}.json" if tag else "gamma.json"
    runs.append(r)
print(json.dumps({"schema": "gamma.runs", "version": 1, "pool": pool, "runs": runs}, indent=1))
PY
$root/build/cli/gamma report "$runs" --log-y --no-heatmaps -o "$OUT"
