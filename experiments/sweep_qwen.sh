#!/usr/bin/env bash
# Issue 8's sweep on Qwen2.5-Coder-1.5B (teacher: the Q4_K_M source dequantized to F32), all
# through one imatrix pool (learn_qwen.sh's), one solver and one shared teacher base file:
#   llama.cpp mixes (the vendored llama-quantize, same teacher + imatrix), and at each mix's
#   file size and at 2.75..4.0 linear bpw: GAMMA (Stage I scores learned once at 3.0 bpw,
#   re-solved per budget with --fill; scores p as in the paper, and log p) and the static proxy (-rel_err from the manifest); uniform types.
# Per model: KLD / top-1 / PPL on wiki.test.raw (same CHUNKS for all), then arc_easy + piqa
# (--limit MC_LIMIT, same items) for the size-matched set. Resumable: each output is skipped
# when present; emitted GGUFs are deleted after evaluation (recipes kept).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
G=$root/build/cli/gamma; B=$root/build/bin
W=${WORK:-/tmp/gamma-qwen}; S=$W/sweep; mkdir -p $S/plans $S/evals $S/models $S/mixes
T=${THREADS:-2}; CH=${CHUNKS:-8}; MC_LIMIT=${MC_LIMIT:-100}
POOL=$W/pool-imx; TEACHER=$W/teacher-f32.gguf; IMX=$W/imatrix.gguf
# Stage I scores learned once at 3.0 bpw with tau annealed to 0.05 (peaked p; see results/README.md)
SCORES=${SCORES:-$W/scores-imx-3.0-tau.json}
# The same scores as log p (the learned order among a module's non-argmax candidates).
LOGP=$W/scores-imx-3.0-tau-logp.json
[ -f $LOGP ] || python3 -c "
import json, math, sys
s = json.load(open(sys.argv[1]))
for m in s['modules'].values(): m['score'] = {k: math.log(max(v, 1e-300)) for k, v in m['p'].items()}
s['method'] = 'gamma-logp'; json.dump(s, open(sys.argv[2], 'w'))" $SCORES $LOGP
FILL="--fill 0.995"  # scores learned at 3.0 reused at other budgets: spend the budget (cmd_solve.cpp)
BASE=$W/kld-base-$CH.bin
wiki=$root/../shared/data/text/wiki.test.raw
MIXES=${MIXES:-"Q3_K_M Q2_K Q3_K_S Q3_K_L Q4_K_S Q4_K_M"}
BUDGETS=${BUDGETS:-"2.75 3.0 3.5 4.0 3.25 3.75"}
now() { date +%s.%N; }
log() { echo "[$(date -u +%H:%M:%S)] $*"; }

evaluate() {  # GGUF NAME
  [ -f $S/evals/$2.json ] && return 0
  $G eval "$1" --teacher $TEACHER --kld-base $BASE --text $wiki --ctx 512 --chunks $CH -t $T -q -o $S/evals/$2.json
}
plan_eval() {  # NAME then solve/plan arguments
  local name=$1; shift
  [ -f $S/evals/$name.json ] && return 0
  [ -f $S/plans/$name.json ] || "$@" -o $S/plans/$name.json
  $G emit $POOL $S/plans/$name.json -o $S/models/$name.gguf
  evaluate $S/models/$name.gguf $name
  rm -f $S/models/$name.gguf
}
mix_bytes() { stat -c %s $S/mixes/$1.gguf; }

# 1. Each llama.cpp mix, then GAMMA and the static proxy at its file size.
for m in $MIXES; do
  if [ ! -f $S/mixes/$m.gguf ]; then
    log "llama-quantize $m"; t0=$(now)
    $B/llama-quantize --imatrix $IMX $TEACHER $S/mixes/$m.partial.gguf $m $T > $S/mixes/$m.log 2>&1
    mv $S/mixes/$m.partial.gguf $S/mixes/$m.gguf; python3 -c "print($(now)-$t0)" > $S/mixes/$m.seconds
  fi
  log "eval $m"; evaluate $S/mixes/$m.gguf llama-$m
  sz=$(mix_bytes $m)
  log "gamma @ $m size"; plan_eval gamma-size-$m $G solve --scores $SCORES --pool $POOL --size $sz $FILL
  log "gamma log p @ $m size"; plan_eval gammalogp-size-$m $G solve --scores $LOGP --pool $POOL --size $sz $FILL
  log "static @ $m size"; plan_eval static-size-$m $G solve --score-from-manifest --pool $POOL --size $sz
done
# 2. Fixed linear-bpw budgets and uniform types.
for b in $BUDGETS; do
  log "gamma @ $b"; plan_eval gamma-$b $G solve --scores $SCORES --pool $POOL --bpw $b $FILL
  log "gamma log p @ $b"; plan_eval gammalogp-$b $G solve --scores $LOGP --pool $POOL --bpw $b $FILL
  log "static @ $b"; plan_eval static-$b $G solve --score-from-manifest --pool $POOL --bpw $b
done
for t in Q2_K Q3_K Q4_K; do log "uniform $t"; plan_eval uniform-$t $G plan $POOL --uniform $t; done
# 3. Zero-shot tasks for the size-matched set (same items for all; MC_LIMIT=0 skips them).
[ "$MC_LIMIT" -gt 0 ] || { log "sweep done (no tasks)"; exit 0; }
for m in $MIXES; do
  for name in llama-$m gamma-size-$m static-size-$m; do
    [ -f $S/evals/$name.mc$MC_LIMIT.json ] && continue
    [ -f $S/evals/$name.json ] || continue
    log "tasks $name"
    if [ $name = llama-$m ]; then g=$S/mixes/$m.gguf; else g=$S/models/$name.gguf; $G emit $POOL $S/plans/$name.json -o $g >/dev/null; fi
    $G eval $g --tasks arc_easy,piqa --limit $MC_LIMIT -t $T -q -o $S/evals/$name.mc$MC_LIMIT.json
    [ $name = llama-$m ] || rm -f $g
  done
done
log "sweep done"
