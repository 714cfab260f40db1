#!/usr/bin/env bash
# Produces: results/sweep_qwen/table.md, report.json and its PNGs (gamma report of issue 8's sweep).
# Each eval of results/sweep_qwen/evals (kept in its data.tar.xz) joined with its zero-shot results
# (NAME.mc100.json) into results/sweep_qwen/joined/ (git-ignored), every plan of plans/, and for the
# candidates' bpw the Qwen pool manifest kept in results/iq_qwen (the sweep's own pool was not kept;
# a candidate's bpw is its type's). A llama.cpp mix's linear bpw is read from its GGUF: MIXES names
# a directory of the mixes rebuilt from the teacher (llama-quantize TEACHER MIXES/Q2_K.gguf Q2_K, ...;
# the bpw is the recipe's, whatever the imatrix), each used only when its size is the measured one
# to 4 KiB (llama-quantize records the imatrix's path and datasets in the header; tensor data
# of another recipe would differ by megabytes).
#   MIXES=DIR bash experiments/sweep_report.sh [OUT_DIR]   (default results/sweep_qwen)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
R=$root/results/sweep_qwen; OUT=${1:-$R}
python3 "$root/experiments/kept.py" extract $R > /dev/null
python3 "$root/experiments/kept.py" extract $root/results/iq_qwen > /dev/null
mkdir -p $R/joined
runs=$(mktemp -p "$R" .runs.XXXXXX.json)
trap 'rm -f "$runs"' EXIT
(cd "$R" && python3 - ../iq_qwen/pool-all "${MIXES:-}") > "$runs" <<'PY'
import glob, json, os, sys
pool, mixes = sys.argv[1:3]
runs = []
for f in sorted(glob.glob("evals/*.json")):
    name = os.path.basename(f)[:-5]
    if ".mc" in name:
        continue
    e = json.load(open(f))
    mc = f"evals/{name}.mc100.json"
    if os.path.exists(mc):
        e["tasks"] = json.load(open(mc))["tasks"]
    if name.startswith("llama-") and mixes:
        g = os.path.join(mixes, name[6:] + ".gguf")
        if os.path.exists(g) and abs(os.path.getsize(g) - e["model"]["file_bytes"]) <= 4096:
            e["model"]["path"] = g
    with open(f"joined/{name}.json", "w") as out:
        json.dump(e, out, indent=1)
    r = {"eval": f"joined/{name}.json"}
    if name.startswith("llama-"):
        r.update(method="llama.cpp", label=name[6:])
    else:
        method, _, rest = name.partition("-")
        r.update(method=method, plan=f"plans/{name}.json")
        # Plans solved on a log-p transform name the transformed file the sweep wrote in its work
        # directory (WORK/scores/X-logp.json); its p, what r(p, choice) reads, are those of
        # results/X.json, which is kept.
        info = json.load(open(r["plan"])).get("info", {})
        info = json.loads(info) if isinstance(info, str) else info
        src = (info.get("scores") or {}).get("source", "")
        if src and not os.path.exists(src) and src.endswith("-logp.json"):
            kept_scores = os.path.join("..", os.path.basename(src)[:-len("-logp.json")] + ".json")
            if os.path.exists(kept_scores):
                r["scores"] = kept_scores
        if rest.startswith("size-"):
            r["label"] = "@" + rest[5:]
        elif method != "uniform":
            r["label"] = rest
    runs.append(r)
print(json.dumps({"schema": "gamma.runs", "version": 1, "pool": pool, "runs": runs}, indent=1))
PY
"$root/build/cli/gamma" report "$runs" -o "$OUT"
