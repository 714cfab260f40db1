#!/bin/bash
# Issue 45's goal on Qwen2.5-Coder-1.5B: at each llama.cpp mix's size, gamma's plan held to the
# mix's speed (`gamma solve --min-decode MIX.gguf`: at least as fast as the mix by the same speed
# table), beside the plan without the speed budget, the mix's own per-tensor types re-made from
# gamma's pool (`gamma plan --from-gguf`: the fair control) and the mix itself; every plan with the
# mix's own output and embedding types, the layer-calibrated GAMMA scores of the IQ sweep
# (results/iq_qwen/gamma-clip-cal.json) over the gridded teacher's 17-type pool. Measured: llama-bench
# tg128/pp512 in round-robin rounds (`gamma speed --bench`, each file's fastest; PAUSE=PGID stops a
# background job meanwhile) and KLD vs the teacher on both test texts (gamma eval, 16 x 512, one
# teacher base file per text, per-chunk means for paired errors). Resumable; the GGUFs are removed
# once measured. Table: experiments/speed_goal_table.py W.
#   experiments/speed_goal.sh W MIX...        e.g. W Q3_K_M Q2_K Q3_K_S
#   HEAD="output.weight=Q5_K token_embd.weight=IQ3_S" TAG=-h: gamma's plans with that head instead
#   of the mix's (files MIX-h-free, MIX-h-speed; the control stays the mix's types)
set -euo pipefail
W=$1; shift
G=${G:-build/cli/gamma}; B=${B:-build/bin}
P=${POOL:-/work/runs/iqq/pool-all}; T=${TEACHER:-/work/runs/iqq/teacher-f32.gguf}; IM=${IMATRIX:-/work/runs/iqq/imatrix-mix.gguf}
SRC=${SRC:-$HOME/.cache/gamma/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf}
S=${SCORES:-results/iq_qwen/gamma-clip-cal.json}
txt=$(dirname "$0")/../../shared/data/text
log() { echo "[$(date -u +%H:%M:%S)] $*"; }
pause() { if [ -n "${PAUSE:-}" ]; then kill -STOP -- "-$PAUSE" 2>/dev/null || true; fi; }
resume() { if [ -n "${PAUSE:-}" ]; then kill -CONT -- "-$PAUSE" 2>/dev/null || true; fi; }
trap resume EXIT
mkdir -p "$W/evals"
[ -f "$W/speed.json" ] || $G speed --pool "$P" --reference "$SRC" --llama-bin "$B" -o "$W/speed.json"
for MIX in "$@"; do
  M=$W/llama-$MIX.gguf
  X=$MIX${TAG:-}  # gamma's plans' names
  if [ -f "$W/$X-bench.json" ] && [ -f "$W/evals/$X-speed.py.json" ]; then continue; fi
  log "$MIX"
  if [ ! -f "$M" ]; then
    $B/llama-quantize --imatrix "$IM" "$T" "$M.partial" "$MIX" 2 > "$W/llama-$MIX.log" 2>&1
    mv "$M.partial" "$M"
  fi
  SIZE=$(stat -c %s "$M")
  [ -f "$W/$MIX-control.json" ] || $G plan "$P" --from-gguf "$M" -o "$W/$MIX-control.json" > /dev/null
  if [ -n "${HEAD:-}" ]; then
    fixed=(); for f in $HEAD; do fixed+=(--fixed "$f"); done
  else
    read -r -a fixed < <(python3 -c '
import json, sys
f = json.load(open(sys.argv[1]))["fixed"]
print(" ".join(f"--fixed {k}={v}" for k, v in sorted(f.items()) if k in ("output.weight", "token_embd.weight")))' "$W/$MIX-control.json")
  fi
  for v in free speed; do
    extra=(); [ $v = speed ] && extra=(--min-decode "$M")
    [ -f "$W/$X-$v.json" ] || $G solve "$P" --scores "$S" --size "$SIZE" "${fixed[@]}" --speed "$W/speed.json" "${extra[@]}" \
      -o "$W/$X-$v.json" > "$W/$X-$v.solve.txt"
  done
  for v in $MIX-control $X-free $X-speed; do
    # needed unless measured already: by the bench (a new TAG re-benches the control) and the evals
    if [ ! -f "$W/$v.gguf" ] && { [ ! -f "$W/$X-bench.json" ] || [ ! -f "$W/evals/$v.py.json" ]; }; then
      $G emit "$P" "$W/$v.json" -o "$W/$v.gguf" > /dev/null
    fi
  done
  if [ ! -f "$W/$X-bench.json" ]; then
    pause
    $G speed "$SRC" "$M" "$W/$MIX-control.gguf" "$W/$X-free.gguf" "$W/$X-speed.gguf" --bench --rounds "${ROUNDS:-2}" \
      --llama-bin "$B" -o "$W/$X-bench.json" 2> "$W/$X-bench.log"
    resume
  fi
  for t in wiki py; do
    text=$([ $t = wiki ] && echo wiki.test.raw || echo python-eval.txt)
    for v in $MIX-mix $MIX-control $X-free $X-speed; do
      f=$W/$v.gguf; [ $v = $MIX-mix ] && f=$M
      [ -f "$W/evals/$v.$t.json" ] || $G eval "$f" --teacher "$T" --kld-base "$W/kld-base-$t.bin" --text "$txt/$text" \
        --ctx 512 --chunks 16 -t 2 -q -o "$W/evals/$v.$t.json" > /dev/null
    done
  done
  rm -f "$M" "$W/$MIX-control.gguf" "$W/$X-free.gguf" "$W/$X-speed.gguf"
done
log "done: python3 experiments/speed_goal_table.py $W"
