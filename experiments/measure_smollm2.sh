#!/usr/bin/env bash
# Produces: results/measure_smollm2.json.
# Issue 19, a first look at Stage I's measured loss changes (gamma learn --measure-every,
# solved with --transform delta) on SmolLM2-135M, beside HAWQ-V2, the static proxy and
# Stage I's size-log p from the same run, at linear budgets between IQ4_NL (4.5) and Q4_1
# (5.0, the source's type, exact against the teacher). Validation text only
# (wiki.valid.tokens, 8 x 512): this chooses, it reports nothing.
#   experiments/measure_smollm2.sh [WORK]   -> results/measure_smollm2.json
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
G=$root/build/cli/gamma; W=${1:-/tmp/gamma-measure-smollm2}; txt=$root/../shared/data/text
mkdir -p $W/plans $W/evals
src=$($G fetch smollm2-135m)
[ -f $W/teacher.gguf ] || $G dequantize "$src" -o $W/teacher.gguf > /dev/null
[ -f $W/pool/manifest.json ] || $G pool "$src" --types Q4_0,IQ4_NL,Q4_1,Q5_1,Q8_0 -t 2 -q -o $W/pool > /dev/null
cal="--calib $txt/war-and-peace.txt --calib-tokens 8192 --seq-len 256 --seqs 4 -t 2 -q --cache-dir $W/act"
t0=$(date +%s.%N)
[ -f $W/hawq.json ] || $G hawq $W/pool --teacher $W/teacher.gguf $cal --samples 4 -o $W/hawq.json > /dev/null
t1=$(date +%s.%N)
[ -f $W/gamma.json ] || $G learn $W/pool --teacher $W/teacher.gguf $cal --bpw 4.75 --steps 481 --layers-per-step 1 \
  --visit-steps 16 --forcing sublayer --estimator st --measure-every 2 --lr 0.05 --tau-end 0.05 -o $W/gamma.json > /dev/null
t2=$(date +%s.%N)
rows=()
for bpw in 4.55 4.65 4.75 4.85; do
  for a in static hawq gamma-sizelog gamma-delta; do
    case $a in
      static) args="--score-from-manifest" ;;
      hawq) args="--scores $W/hawq.json" ;;
      gamma-sizelog) args="--scores $W/gamma.json --transform size-log --fill 0.995" ;;
      gamma-delta) args="--scores $W/gamma.json --transform delta" ;;
    esac
    n=$a-$bpw
    [ -f $W/plans/$n.json ] || $G solve --pool $W/pool $args --bpw $bpw -o $W/plans/$n.json > /dev/null
    if [ ! -f $W/evals/$n.json ]; then
      $G emit $W/pool $W/plans/$n.json -o $W/$n.gguf > /dev/null
      $G eval $W/$n.gguf --teacher $W/teacher.gguf --kld-base $W/kld-base-valid.bin --text $txt/wiki.valid.tokens \
        --ctx 512 --chunks 8 -t 2 -q -o $W/evals/$n.json > /dev/null
      rm -f $W/$n.gguf
    fi
    rows+=("$a:$bpw:$W/evals/$n.json")
  done
done
python3 - "$root/results/measure_smollm2.json" "$(python3 -c "print(round($t1-$t0,1), round($t2-$t1,1))")" "${rows[@]}" <<'PY'
import json, sys, os
out, times, rows = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
res = {"command": "experiments/measure_smollm2.sh", "text": "wiki.valid.tokens 8x512 (validation)",
       "teacher": "SmolLM2-135M-Instruct Q4_1 dequantized to F32 (Q4_1 candidates are exact)",
       "pool": "Q4_0,IQ4_NL,Q4_1,Q5_1,Q8_0 (no imatrix)", "hawq_seconds": float(times[0]), "learn_seconds": float(times[1]),
       "rows": []}
for r in rows:
    a, bpw, f = r.split(":", 2)
    e = json.load(open(f))
    res["rows"].append({"allocator": a, "bpw": float(bpw), "file_bytes": e["model"]["file_bytes"],
                        "kld": e["kld"]["mean"], "kld_err": e["kld"].get("stderr", e["kld"].get("err"))})
json.dump(res, open(out + ".tmp", "w"), indent=1); os.replace(out + ".tmp", out)
for r in res["rows"]: print(f'{r["allocator"]:14s} {r["bpw"]:.2f} {r["file_bytes"]:>10d} {r["kld"]:.5f} ± {r["kld_err"]}')
PY
