#!/usr/bin/env bash
# The main job on the default model: fetch -> teacher -> pool -> plan -> emit -> check with
# llama.cpp. Usage: scripts/run.sh [MODEL_NAME] [BPW]   (default: smollm2-135m 4.75)
# Work files go to $WORK (default ./gamma-run); every step resumes from its output.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
name=${1:-smollm2-135m}
bpw=${2:-4.75}
work=${WORK:-$PWD/gamma-run}
bash "$root/scripts/build.sh" >/dev/null
G="$root/build/cli/gamma"
mkdir -p "$work"
model=$("$G" fetch "$name")
echo "model: $model"
[ -f "$work/teacher.gguf" ] || "$G" dequantize "$model" -o "$work/teacher.gguf" --type f32
case "$name" in
  smollm2-135m) types=Q4_0,Q4_1,Q5_0,Q5_1,Q8_0 ;;   # 576-wide rows: 32-wide blocks only
  *)            types=Q2_K,Q3_K,Q4_K,Q5_K,Q6_K ;;
esac
"$G" pool "$model" --types "$types" -o "$work/pool"
if "$G" --help | grep -q "^  learn" && "$G" --help | grep -q "^  solve"; then
  [ -f "$work/scores.json" ] || "$G" learn "$work/pool" --teacher "$work/teacher.gguf" --bpw "$bpw" --steps 300 --layers-per-step 6 -o "$work/scores.json"
  "$G" solve --scores "$work/scores.json" --pool "$work/pool" --bpw "$bpw" -o "$work/plan.json"
else
  # Until Stage I and II exist: the uniform type nearest the budget from below.
  "$G" plan "$work/pool" --uniform Q5_0 -o "$work/plan.json"
fi
"$G" emit "$work/pool" "$work/plan.json" -o "$work/model.gguf"
echo "check: llama-perplexity on wiki.test.raw (-c 512 --chunks 8), gamma's model vs the source"
for m in "$work/model.gguf" "$model"; do
  printf '%s: ' "$(basename "$m")"
  "$root/build/bin/llama-perplexity" -m "$m" -f "$root/../shared/data/text/wiki.test.raw" -c 512 --chunks 8 \
    -t "$(nproc)" 2>&1 | grep -o "Final estimate.*" || { echo "llama-perplexity failed"; exit 1; }
done
