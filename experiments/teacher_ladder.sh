#!/usr/bin/env bash
# Issue 47: llama.cpp's standard mixes against one teacher, smallest to largest: each built by
# the vendored llama-quantize from TEACHER with IMATRIX, its KLD vs TEACHER on wiki.test.raw and
# python-eval.txt (16 x 512, the same chunks for every file); beside them the perplexity of the
# teacher and of each file in EXTRA (e.g. the quantized source). Skips what OUT already holds.
#   experiments/teacher_ladder.sh TEACHER IMATRIX OUT [EXTRA.gguf...]
#   MIXES="Q2_K Q4_K_M" overrides the list (GAMMA, LLAMA_QUANTIZE: other binaries); table: experiments/teacher_ladder.py OUT
set -euo pipefail
root=${GAMMA_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
G=${GAMMA:-$root/build/cli/gamma}; Q=${LLAMA_QUANTIZE:-$root/build/bin/llama-quantize}; T=${THREADS:-2}; CH=16
txt=$root/../shared/data/text
teacher=$1 imatrix=$2 out=$3; shift 3
MIXES=${MIXES:-"IQ2_M Q2_K IQ3_XXS IQ3_XS Q3_K_S IQ3_S IQ3_M Q3_K_M Q3_K_L IQ4_XS IQ4_NL Q4_0 Q4_K_S Q4_1 Q4_K_M Q5_K_S Q5_1 Q5_K_M Q6_K Q8_0"}
mkdir -p "$out/models" "$out/evals"
eval_file() {  # NAME GGUF: KLD vs the teacher (and PPL) on both test texts
  for t in wiki py; do
    text=$([ $t = wiki ] && echo wiki.test.raw || echo python-eval.txt)
    [ -f "$out/evals/$1.$t.json" ] && continue
    $G eval "$2" --teacher "$teacher" --kld-base "$out/kld-base-$t.bin" --text "$txt/$text" --ctx 512 --chunks $CH \
      -t $T -q -o "$out/evals/$1.$t.json" > /dev/null
  done
}
for t in wiki py; do  # the teacher against itself: its perplexity (KLD 0)
  text=$([ $t = wiki ] && echo wiki.test.raw || echo python-eval.txt)
  [ -f "$out/evals/teacher.$t.json" ] || $G eval "$teacher" --text "$txt/$text" --ctx 512 --chunks $CH -t $T -q \
    -o "$out/evals/teacher.$t.json" > /dev/null
done
for f in "$@"; do
  n=$(basename "$f" .gguf)
  echo "[$(date -u +%H:%M:%S)] $n"
  eval_file "$n" "$f"
done
for mix in $MIXES; do
  m=$out/models/$mix.gguf
  if [ ! -f "$out/evals/$mix.py.json" ]; then
    echo "[$(date -u +%H:%M:%S)] $mix"
    [ -f "$m" ] || $Q --imatrix "$imatrix" "$teacher" "$m.partial" "$mix" "$T" > "$out/models/$mix.log" 2>&1
    [ -f "$m" ] || mv "$m.partial" "$m"
    eval_file "$mix" "$m"
  fi
  [ -f "$m" ] && stat -c %s "$m" > "$out/evals/$mix.bytes"
  rm -f "$m"  # the evals and size are what the table needs; the file is rebuilt on demand
done
echo "[$(date -u +%H:%M:%S)] done: python3 $root/experiments/teacher_ladder.py $out"
