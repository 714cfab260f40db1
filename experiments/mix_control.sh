#!/bin/bash
# The fair control of a `gamma run` (issue 46, the protocol's "each mix's own per-tensor types
# emitted from gamma's pool"): for each llama.cpp mix the run built, a pool of exactly that mix's
# type per module (quantized from the run's source with the run's imatrix: the source's own type
# is its exact bytes, every other type is what llama-quantize writes), the plan of the mix's
# types (`gamma plan --from-gguf`), emitted, and `gamma compare` against the mix on each report
# text (paired per chunk, the run's teacher bases). mix vs control is what the source's exact
# bytes give; control vs gamma's file is what the allocation earns.
# Usage: mix_control.sh W MIX [MIX...]   (W: gamma run's work directory, holding llama-MIX.gguf)
# Env: G (gamma), TEXTS ("wiki python"), CHUNKS (16), T (threads, 2). Output: W/control/MIX.*
set -euo pipefail
G=${G:-build/cli/gamma}
W=$1; shift
D=$(cd "$(dirname "$0")/.." && pwd)/../shared/data/text
mkdir -p "$W/control"
src=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"]["path"])' "$W/pool/manifest.json")
# the run's teacher (teacher-f32.gguf, teacher-f16.gguf under --teacher-type f16, or an F32 source itself)
teacher=$(python3 -c 'import glob, json, os, sys; t = json.load(open(sorted(glob.glob(sys.argv[1] + "/run*.json"))[0]))["teacher"]; print(t if os.path.isabs(t) else os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), t))' "$W")
for MIX in "$@"; do
  C=$W/control/$MIX
  # gamma run removes a mix once measured (unless --keep-mixes): made again as the run made it.
  [ -f "$W/llama-$MIX.gguf" ] || "${LLAMA_BIN:-$(dirname "$G")/../bin}/llama-quantize" --imatrix "$W/imatrix.gguf" \
      "$teacher" "$W/llama-$MIX.gguf" "$MIX" "${T:-2}" > "$C-quantize.log" 2>&1
  [ -f "$C-only.json" ] || "$G" inspect "$W/llama-$MIX.gguf" --json | python3 -c '
import json, sys
m = json.load(sys.stdin)
mods = {t["name"]: [t["type"]] for t in m["linear"]}
json.dump({"schema": "gamma.pool.only", "version": 1, "modules": mods}, open(sys.argv[1], "w"), indent=1)
print(",".join(sorted({v[0] for v in mods.values()})))' "$C-only.json" > "$C-types.txt"
  [ -f "$C-pool/manifest.json" ] || "$G" pool "$src" --types "$(cat "$C-types.txt")" --only "$C-only.json" \
      --imatrix "$W/imatrix.gguf" -o "$C-pool" -t "${T:-2}" -q
  [ -f "$C-plan.json" ] || "$G" plan "$C-pool" --from-gguf "$W/llama-$MIX.gguf" -o "$C-plan.json" > /dev/null
  for text in ${TEXTS:-wiki python}; do
    case $text in wiki) f=$D/wiki.test.raw; b=$W/teacher-report-wiki.test-c512-n${CHUNKS:-16}.kld ;;
                  python) f=$D/python-eval.txt; b=$W/teacher-report-python-eval-c512-n${CHUNKS:-16}.kld ;; esac
    [ -f "$C-vs-mix-$text.json" ] || "$G" compare "$W/llama-$MIX.gguf" "$C-plan.json" --pool "$C-pool" \
        --teacher "$teacher" -f "$f" --chunks "${CHUNKS:-16}" --kld-base "$b" -t "${T:-2}" -q -o "$C-vs-mix-$text.json"
  done
  rm -rf "$C-pool"  # the candidates (the plan and the comparisons stay)
done
