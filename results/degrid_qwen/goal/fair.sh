#!/usr/bin/env bash
# The protocol's fair control beside go.sh's table: each llama.cpp mix's own per-tensor types
# emitted from gamma's pool (`gamma plan --from-gguf` + `gamma emit`, the same candidates gamma's
# plans take), compared with the mix tensor by tensor (same_tensors.py). On the de-gridded teacher
# no type is exact, so the pool and llama-quantize quantize the same F32 weights with the same
# imatrix: where every tensor comes out with the mix's bytes, the control is the mix itself and
# the table's mix column is what the allocation alone earns. A mix go.sh's run no longer holds
# is made again into fair/ by the same llama-quantize command `gamma run` uses.
#   GAMMA=path/to/gamma bash fair.sh [MIX ...]     (default: the table's nine)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
G=${GAMMA:-$here/../../../build/cli/gamma}
bin=$(cd "$(dirname "$G")/../bin" && pwd)
work=${WORK:-/work/runs/degrid-goal}
mixes=${*:-IQ2_M Q2_K_S Q2_K IQ3_XXS IQ3_XS Q3_K_S IQ3_S IQ3_M Q3_K_M}
cd "$work"
mkdir -p fair
mix_file() { if [ -f "run/llama-$1.gguf" ]; then echo "run/llama-$1.gguf"; else echo "fair/llama-$1.gguf"; fi; }
for m in $mixes; do
  f=$(mix_file "$m")
  if [ ! -f "$f" ] && [ ! -f "fair/$m.same.json" ]; then
    "$bin/llama-quantize" --imatrix run/imatrix.gguf teacher-dither1.gguf "fair/llama-$m.partial.gguf" "$m" 2 > "fair/llama-$m.log" 2>&1
    mv "fair/llama-$m.partial.gguf" "fair/llama-$m.gguf"
  fi
done
# A streamed pool of every type llama.cpp's mixes from IQ2_M to Q3_K_M put on a linear module (its
# estimate only: emit makes each candidate from the teacher when a plan takes it, so a type no
# mix takes costs nothing but its estimate). One pool for every mix, so a candidate two mixes
# share is quantized once.
if [ ! -f fair/pool/manifest.json ]; then
  "$G" pool teacher-dither1.gguf --stream --types "${FAIR_TYPES:-IQ2_XXS,IQ2_XS,IQ2_S,IQ3_XXS,IQ3_S,IQ4_NL,IQ4_XS,Q2_K,Q3_K,Q4_K,Q5_K,Q6_K,Q8_0}" \
    --imatrix run/imatrix.gguf -o fair/pool -t 2 -q
fi
for m in $mixes; do
  [ -f "fair/$m.same.json" ] && continue
  "$G" plan fair/pool --from-gguf "$(mix_file "$m")" -o "fair/plan-$m.json"
  "$G" emit fair/pool "fair/plan-$m.json" -o "fair/gamma-$m.gguf" -t 2
  same=0
  python3 "$here/same_tensors.py" "$(mix_file "$m")" "fair/gamma-$m.gguf" > "fair/$m.same.partial.json" || same=$?
  [ "$same" -le 1 ] || { echo "fair.sh: same_tensors.py failed on $m" >&2; exit 1; }
  mv "fair/$m.same.partial.json" "fair/$m.same.json"
  # Where every tensor is the mix's bytes the two files are one model to llama.cpp: neither is
  # kept (the mix can be made again by the command above). Otherwise both stay, to be evaluated.
  if [ "$same" -eq 0 ]; then rm -f "fair/gamma-$m.gguf" "fair/llama-$m.gguf"; fi
done
