#!/usr/bin/env bash
# Produces: results/sweep_qwen/ (evals/, plans/ in results/sweep_qwen/data.tar.xz) and results/{hawq,learn}_qwen1.5b_imatrix*.json.
# Issue 8's sweep on Qwen2.5-Coder-1.5B (teacher: the Q4_K_M source dequantized to F32), all
# through one imatrix pool (made by experiments/learn_qwen.sh, removed; git history), one solver and one shared teacher base file:
#   - llama.cpp's mixes (the vendored llama-quantize, same teacher + imatrix);
#   - at each mix's file size and at fixed linear-bpw budgets: GAMMA (Stage I scores learned
#     once at 3.0 bpw, re-solved per budget with --fill; as log p, and the EXTRA variants with
#     solve --transform size-log), the static proxy (-rel_err from the manifest), HAWQ-V2
#     (gamma hawq); uniform types;
#   - ablations at the Q3_K_M size: GAMMA scores as p (the paper's Stage II objective), tau
#     fixed at 1 (lr 0.005 and 0.05), size-log Stage II, the no-learning control, the
#     DNAS-style penalty and CE on the final logits (both solved as size-log, the main
#     variant), and scores learned at 3.75 and 2.75 instead of reused from 3.0.
# Per model: KLD / top-1 / PPL on wiki.test.raw (same CHUNKS for all), then arc_easy + piqa
# (--limit MC_LIMIT, same items) for every run.
# Resumable and cached by name: plans and evaluations are written (atomically) straight into
# results/sweep_qwen/{plans,evals}, which are committed, so a later session (or machine) skips
# everything already measured; only pool, teacher and GGUFs live in WORK. PHASES picks what
# runs (default all, in order).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
G=$root/build/cli/gamma; B=$root/build/bin
W=${WORK:-/tmp/gamma-qwen}; S=$W/sweep; R=$root/results/sweep_qwen
python3 "$root/experiments/kept.py" extract $R  # its evals/, plans/, ... are kept in $R/data.tar.xz
mkdir -p $S/models $S/mixes $W/scores $R/plans $R/evals
T=${THREADS:-2}; CH=${CHUNKS:-8}; MC_LIMIT=${MC_LIMIT:-100}
POOL=$W/pool-imx; TEACHER=$W/teacher-f32.gguf; IMX=$W/imatrix.gguf
PHASES=${PHASES:-"mixes hawq sizes budgets uniform ablations tasks"}
ABLATIONS=${ABLATIONS:-"p tau1 sizelog null at dnas ce lr"}
MIXES=${MIXES:-"Q3_K_M Q2_K Q3_K_S Q3_K_L Q4_K_S Q4_K_M"}
BUDGETS=${BUDGETS:-"2.75 3.25 3.75 3.0 3.5 4.0"}
# Stage I recipe of every learned score here (results/README.md): 200 steps x 4 of 28 layers,
# 2 x 256 tokens per step, Adam lr 0.01, tau annealed 1 -> 0.05.
RECIPE="--steps 200 --layers-per-step 4 --seqs 2 --calib-tokens 4096 --seq-len 256 --lr 0.01 --tau-end 0.05"
SCORES=$root/results/learn_qwen1.5b_imatrix_3.0bpw_tau0.05.json   # GAMMA, learned at 3.0
TAU1=$root/results/learn_qwen1.5b_imatrix_3.0bpw.json              # tau fixed at 1
HAWQ=$root/results/hawq_qwen1.5b_imatrix.json
FILL="--fill 0.995"  # scores learned at 3.0 reused at other budgets: spend the budget (cmd_solve.cpp)
BASE=$W/kld-base-$CH.bin
wiki=$root/../shared/data/text/wiki.test.raw
now() { date +%s.%N; }
log() { echo "[$(date -u +%H:%M:%S)] $*"; }
has() { [[ " $PHASES " == *" $1 "* ]]; }
ablation() { [[ " $ABLATIONS " == *" $1 "* ]]; }
evaluate() {  # GGUF NAME
  [ -f $R/evals/$2.json ] && return 0
  $G eval "$1" --teacher $TEACHER --kld-base $BASE --text $wiki --ctx 512 --chunks $CH -t $T -q -o $R/evals/$2.json
}
plan_eval() {  # NAME then solve/plan arguments
  local name=$1; shift
  [ -f $R/evals/$name.json ] && return 0
  log "$name"
  [ -f $R/plans/$name.json ] || "$@" -o $R/plans/$name.json
  $G emit $POOL $R/plans/$name.json -o $S/models/$name.gguf
  evaluate $S/models/$name.gguf $name
  rm -f $S/models/$name.gguf
}
mix_bytes() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['model']['file_bytes'])" $R/evals/llama-$1.json; }
learn() {  # OUT then gamma learn arguments (resumes from OUT.ckpt)
  local out=$1; shift
  [ -f $out ] && return 0
  log "learn -> $(basename $out)"
  $G learn $POOL --teacher $TEACHER -t $T -q -o $W/scores/$(basename $out) "$@"
  cp $W/scores/$(basename $out) $out
}

# 1. llama.cpp's mixes.
if has mixes; then
  for m in $MIXES; do
    [ -f $R/evals/llama-$m.json ] && continue
    if [ ! -f $S/mixes/$m.gguf ]; then
      log "llama-quantize $m"; t0=$(now)
      $B/llama-quantize --imatrix $IMX $TEACHER $S/mixes/$m.partial.gguf $m $T > $S/mixes/$m.log 2>&1
      mv $S/mixes/$m.partial.gguf $S/mixes/$m.gguf; python3 -c "print($(now)-$t0)" > $S/mixes/$m.seconds
    fi
    log "eval llama $m"; evaluate $S/mixes/$m.gguf llama-$m
  done
fi
# 2. HAWQ-V2 traces (once).
if has hawq && [ ! -f $HAWQ ]; then
  log "gamma hawq"
  $G hawq $POOL --teacher $TEACHER --samples 4 --seqs 4 --calib-tokens 4096 --seq-len 256 -t $T -q -o $W/scores/hawq.json
  cp $W/scores/hawq.json $HAWQ
fi
# 3. Every allocator at each mix's file size, then at fixed linear-bpw budgets.
# EXTRA="NAME:SCORES:TRANSFORM ..." adds GAMMA variants (solve --transform) to every budget;
# LOGP_RUNS=0 drops the plain log p variant.
EXTRA=${EXTRA:-"gammat1sl:$TAU1:size-log"}
alloc() {  # SUFFIX and solve budget arguments
  local sfx=$1; shift
  local spec
  for spec in $EXTRA; do
    IFS=: read -r xn xs xt <<< "$spec"
    plan_eval $xn-$sfx $G solve --scores $xs --transform $xt --pool $POOL "$@" $FILL
  done
  [ "${LOGP_RUNS:-1}" = 0 ] || plan_eval gammalogp-$sfx $G solve --scores $SCORES --transform log --pool $POOL "$@" $FILL
  plan_eval static-$sfx $G solve --score-from-manifest --pool $POOL "$@"
  [ -f $HAWQ ] && plan_eval hawq-$sfx $G solve --scores $HAWQ --pool $POOL "$@"
  return 0
}
if has sizes; then
  for m in $MIXES; do [ -f $R/evals/llama-$m.json ] && alloc size-$m --size $(mix_bytes $m); done
fi
if has budgets; then
  for b in $BUDGETS; do alloc $b --bpw $b; done
fi
if has uniform; then
  for t in Q2_K Q3_K Q4_K; do plan_eval uniform-$t $G plan $POOL --uniform $t; done
fi
# 4. Ablations of GAMMA at the Q3_K_M size (and at budget 3.75 for score reuse).
if has ablations && [ -f $R/evals/llama-Q3_K_M.json ]; then
  sz=$(mix_bytes Q3_K_M)
  if ablation p; then plan_eval gamma-size-Q3_K_M $G solve --scores $SCORES --pool $POOL --size $sz $FILL; fi
  if ablation tau1; then plan_eval gammatau1-size-Q3_K_M $G solve --scores $TAU1 --transform log --pool $POOL --size $sz $FILL; fi
  if ablation lr; then  # tau fixed at 1 (as the paper) but lr 0.05: can p peak in 200 steps?
    LR=$root/results/learn_qwen1.5b_imatrix_3.0bpw_lr0.05.json
    learn $LR --bpw 3.0 --steps 200 --layers-per-step 4 --seqs 2 --calib-tokens 4096 --seq-len 256 --lr 0.05
    plan_eval gammalr-size-Q3_K_M $G solve --scores $LR --pool $POOL --size $sz $FILL
    plan_eval gammalrlogp-size-Q3_K_M $G solve --scores $LR --transform log --pool $POOL --size $sz $FILL
    # and at the budgets: Σ p (the paper's Stage II) at the one it was learned for, size-log at all
    plan_eval gammalr-3.0 $G solve --scores $LR --pool $POOL --bpw 3.0
    for b in 3.0 2.75 3.25 3.5 3.75 4.0; do
      plan_eval gammalrsl-$b $G solve --scores $LR --transform size-log --pool $POOL --bpw $b $FILL
    done
  fi
  if ablation sizelog; then  # Stage II on size-weighted log p (solve --transform size-log)
    plan_eval gammat1sl-size-Q3_K_M $G solve --scores $TAU1 --transform size-log --pool $POOL --size $sz $FILL
    plan_eval gammasl-size-Q3_K_M $G solve --scores $SCORES --transform size-log --pool $POOL --size $sz $FILL
    LR=$root/results/learn_qwen1.5b_imatrix_3.0bpw_lr0.05.json
    [ -f $LR ] && plan_eval gammalrsl-size-Q3_K_M $G solve --scores $LR --transform size-log --pool $POOL --size $sz $FILL
  fi
  if ablation null; then  # control: Stage I's starting point (no step), size-log: what the weighting alone does
    NULL=$root/results/gamma_null_3.0bpw.json
    [ -f $NULL ] || $G learn $POOL --teacher $TEACHER --bpw 3.0 --steps 0 --tau 1 --calib-tokens 4096 --seq-len 256 \
      -t $T -q -o $NULL  # gamma learn's starting scores, no step taken
    plan_eval gammanull-size-Q3_K_M $G solve --scores $NULL --transform size-log --pool $POOL --size $sz $FILL
  fi
  if ablation dnas; then
    DNAS=$root/results/learn_qwen1.5b_imatrix_3.0bpw_dnas.json
    learn $DNAS --bpw 3.0 $RECIPE --penalty dnas
    plan_eval gammadnas-size-Q3_K_M $G solve --scores $DNAS --transform size-log --pool $POOL --size $sz $FILL
  fi
  if ablation ce; then  # every layer every step (chained): fewer, smaller steps; lr x steps as the recipe's
    CE=$root/results/learn_qwen1.5b_imatrix_3.0bpw_ce.json
    learn $CE --bpw 3.0 --objective ce --steps 40 --seqs 1 --calib-tokens 4096 --seq-len 256 --lr 0.05 --tau-end 0.05
    plan_eval gammace-size-Q3_K_M $G solve --scores $CE --transform size-log --pool $POOL --size $sz $FILL
  fi
  if ablation at; then  # scores learned at the budget itself vs reused from 3.0 (gammasl-B)
    for b in ${AT_BUDGETS:-3.75 2.75}; do
      AT=$root/results/learn_qwen1.5b_imatrix_${b}bpw_tau0.05.json
      learn $AT --bpw $b $RECIPE
      plan_eval gammaatsl-$b $G solve --scores $AT --transform size-log --pool $POOL --bpw $b $FILL
    done
  fi
fi
# 5. Zero-shot tasks (same items for all): the main allocators at each mix size, then at each
# budget, then every other run measured above.
task_eval() {  # NAME: emit its plan (a llama.cpp mix is used as made), run arc_easy + piqa
  local name=$1 g
  [ -f $R/evals/$name.mc$MC_LIMIT.json ] && return 0
  [ -f $R/evals/$name.json ] || return 0
  if [[ $name == llama-* ]]; then
    g=$S/mixes/${name#llama-}.gguf
    [ -f $g ] || return 0  # a mix measured in an earlier session and not re-made here
  else
    g=$S/models/$name.gguf
    $G emit $POOL $R/plans/$name.json -o $g >/dev/null
  fi
  log "tasks $name"
  $G eval $g --tasks arc_easy,piqa --limit $MC_LIMIT -t $T -q -o $R/evals/$name.mc$MC_LIMIT.json
  [[ $name == llama-* ]] || rm -f $g
}
if has tasks && [ "$MC_LIMIT" -gt 0 ]; then
  for m in $MIXES; do
    task_eval llama-$m
    for meth in hawq static gammasl; do task_eval $meth-size-$m; done
  done
  for b in $BUDGETS; do for meth in hawq static gammasl gammaatsl; do task_eval $meth-$b; done; done
  for f in $R/evals/*.json; do n=$(basename $f .json); [[ $n == *.mc* ]] || task_eval $n; done
fi
log "sweep done"
