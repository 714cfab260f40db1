#!/usr/bin/env bash
# Produces: results/speed_{qwen,qwen_bpw,smollm2}.{json,md}.
# Issue 18, item 5: what a type mix costs in speed. llama-bench (the vendored build) prompt
# processing (pp512) and decode (tg128) of gamma's mixed files beside llama.cpp's standard
# mixes of about the same size, THREADS threads, REPS repetitions each, one after the other
# on an otherwise idle machine (PAUSE="PID ..." process groups are stopped for the duration:
# a background sweep must not share the cores with a timing).
#   FILES="label=path.gguf ..." OUT=results/speed_smollm2 bash experiments/speed_bench.sh
# Writes OUT.json (llama-bench's own JSON per file, plus the label and file size) and OUT.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${LLAMA_BIN:-$root/build/bin}
T=${THREADS:-2}; REPS=${REPS:-3}
: "${FILES:?FILES=\"label=path ...\"}"; : "${OUT:?OUT=results/speed_NAME}"
tmp=$(mktemp -d); trap 'rm -rf $tmp; for p in ${PAUSE:-}; do kill -CONT -- -$p 2>/dev/null || true; done' EXIT
for p in ${PAUSE:-}; do kill -STOP -- -"$p"; done
i=0
for f in $FILES; do
  label=${f%%=*}; path=${f#*=}
  "$B/llama-bench" -m "$path" -p 512 -n 128 -t "$T" -r "$REPS" -o json > "$tmp/$i.json" 2> "$tmp/$i.log" \
    || { echo "llama-bench failed on $path: $(tail -n 1 "$tmp/$i.log")" >&2; exit 1; }
  echo "$label" > "$tmp/$i.label"; stat -c %s "$path" > "$tmp/$i.bytes"
  echo "$label: $(python3 -c "import json,sys; print(', '.join(f\"{'pp' if r['n_prompt'] else 'tg'} {r['avg_ts']:.1f} tok/s\" for r in json.load(open(sys.argv[1]))))" "$tmp/$i.json")" >&2
  i=$((i + 1))
done
python3 - "$tmp" "$i" "$OUT" "$T" "$REPS" <<'PY'
import json, os, sys, platform
tmp, n, out, threads, reps = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
rows = []
for i in range(n):
    runs = json.load(open(f"{tmp}/{i}.json"))
    r = {"label": open(f"{tmp}/{i}.label").read().strip(), "file_bytes": int(open(f"{tmp}/{i}.bytes").read())}
    for x in runs:
        k = "pp512" if x["n_prompt"] else "tg128"
        r[k] = {"tok_s": x["avg_ts"], "stddev": x["stddev_ts"]}
    r["cpu"] = runs[0].get("cpu_info", "")
    rows.append(r)
doc = {"schema": "gamma.speed", "version": 1, "threads": threads, "repetitions": reps,
       "command": "experiments/speed_bench.sh (llama-bench -p 512 -n 128)", "rows": rows}
json.dump(doc, open(out + ".json.tmp", "w"), indent=1)
os.replace(out + ".json.tmp", out + ".json")
PY
python3 "$(dirname "$0")/speed_table.py" "$OUT.json" -o "$OUT.md"
