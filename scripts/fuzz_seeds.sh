#!/usr/bin/env bash
# Seed corpora for scripts/fuzz.sh from real files gamma reads and writes: the stories260K
# model (../shared/data), and from it an imatrix, a pool manifest, a plan, scores, an eval
# result and a Stage I checkpoint (a learn run killed mid-way), made by build/ (the normal
# build). Writes DIR/<target>/ (default build/fuzz-seeds).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
G=$root/build/cli/gamma; B=$root/build/bin
D=${1:-$root/build/fuzz-seeds}
src=$root/../shared/data/models/stories260K.gguf
txt=$root/../shared/data/text
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
mkdir -p "$D"/{fuzz_gguf,fuzz_imatrix,fuzz_manifest,fuzz_plan,fuzz_scores,fuzz_eval,fuzz_checkpoint}
head -c 20000 "$txt/war-and-peace.txt" > "$w/calib.txt"
"$B/llama-imatrix" -m "$src" -f "$w/calib.txt" -c 128 --chunks 4 -t 2 -o "$w/imatrix.gguf" > /dev/null 2>&1
"$G" pool "$src" --types Q8_0,Q4_0,IQ4_NL --imatrix "$w/imatrix.gguf" -q -o "$w/pool" > /dev/null
"$G" solve "$w/pool" --score-from-manifest --bpw 8 -o "$w/plan.json" > /dev/null
"$G" emit "$w/pool" "$w/plan.json" -o "$w/mixed.gguf" > /dev/null
"$G" learn "$w/pool" --teacher "$src" --bpw 8 --steps 0 --seq-len 32 --calib-tokens 256 -t 2 -q \
  --cache-dir "$w/act" -o "$w/scores.json" > /dev/null
( GAMMA_TEST_KILL_AT_STEP=3 "$G" learn "$w/pool" --teacher "$src" --bpw 8 --steps 6 --checkpoint-every 2 --seq-len 32 \
  --calib-tokens 256 -t 2 -q --cache-dir "$w/act" -o "$w/killed.json" > /dev/null 2>&1 || true ) 2>/dev/null  # SIGKILL at step 3: the checkpoint of step 2
"$G" eval "$w/mixed.gguf" --teacher "$src" --text "$txt/wiki.valid.tokens" --ctx 128 --chunks 2 -t 2 -q --no-cache \
  -o "$w/eval.json" > /dev/null
cp "$src" "$w/mixed.gguf" "$D/fuzz_gguf/"
cp "$w/imatrix.gguf" "$D/fuzz_imatrix/"
cp "$w/pool/manifest.json" "$D/fuzz_manifest/"
cp "$w/plan.json" "$D/fuzz_plan/"
cp "$w/scores.json" "$D/fuzz_scores/"
cp "$w/eval.json" "$D/fuzz_eval/"
cp "$w/killed.json.ckpt" "$D/fuzz_checkpoint/"
ls "$D"/* | wc -l >&2
