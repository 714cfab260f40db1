#!/usr/bin/env bash
# Issue 18: the IQ pool, on MODEL (qwen2.5-coder-1.5b, default, or smollm2-135m; the teacher
# is the source dequantized to F32: Q4_K_M for Qwen, Q4_1 for SmolLM2).
#   teacher -> imatrix on prose + code calibration -> a pool of every quantizable type (time per
#   type) -> the per-type table and the dominated types (gamma inspect POOL)
#   -> llama.cpp's K and IQ mixes (vendored llama-quantize, same teacher + imatrix)
#   -> at each mix size: static proxy, HAWQ-V2 over the default (Pareto) pool
#   -> KLD vs the teacher on wiki.test.raw and python-eval.txt (CHUNKS x 512, the same chunks
#      for every model; neither text is used for choosing anything here).
# IQ1_S / IQ1_M (1.56 / 1.75 bpw) are left out: below the range studied, and IQ1_S alone was
# on course for ~40 min of the 2 cores on Qwen (27 of ~300 MB written in 4 min, measured).
# Calibration (never test text): the first 40,000 bytes of war-and-peace.txt and the first
# 36,000 of python-calib.txt (its last 25 %, from byte 480,000, is held back for validation).
# The embedding and output head are choices too (solve --fixed; SmolLM2 ties them, Qwen does
# not): each FIXED variant (LABEL:TENSOR=TYPE,...) is tried at every size, and validation KLD
# (wiki.valid.tokens and the held-back end of python-calib.txt, VCHUNKS x 512 each) picks one
# per allocator and size before the test texts. CHOOSE_HEAD=LAYERS.json (gamma layers --head) adds
# the variant "hc": the head chosen by the solver from its measured cost (solve --choose-head).
# Resumable: every output is skipped when it exists; plans and evals go straight to
# results/iq_qwen/, which is committed. PHASES picks what runs (default all, in order).
set -euo pipefail
root=${GAMMA_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}  # GAMMA_ROOT: when running a copy of this script
G=$root/build/cli/gamma; B=$root/build/bin
MODEL=${MODEL:-qwen2.5-coder-1.5b}
case $MODEL in
  qwen2.5-coder-1.5b) tag=qwen; title="Qwen2.5-Coder-1.5B Q4_K_M"
    FIXED=${FIXED:-"o6e4:output.weight=Q6_K,token_embd.weight=Q4_K o5e4:output.weight=Q5_K,token_embd.weight=Q4_K o6e3:output.weight=Q6_K,token_embd.weight=IQ3_S"}
    DEF_MIXES="IQ3_M Q3_K_M IQ2_XS IQ2_M IQ3_XXS IQ3_S IQ4_XS IQ4_NL Q2_K Q3_K_S Q3_K_L Q4_K_S"
    HEADS="output.weight=Q3_K,IQ4_XS,Q4_K,Q5_K token_embd.weight=Q2_K,Q3_K,IQ3_S,IQ4_XS" ;;
  smollm2-135m) tag=smollm2; title="SmolLM2-135M-Instruct Q4_1"
    FIXED=${FIXED:-"eQ8_0:token_embd.weight=Q8_0 eQ5_1:token_embd.weight=Q5_1"}
    DEF_MIXES="IQ4_NL Q4_0 Q3_K_M IQ3_M"
    HEADS="token_embd.weight=Q4_1,Q5_1,Q8_0" ;;
  *) echo "MODEL must be qwen2.5-coder-1.5b or smollm2-135m" >&2; exit 2 ;;
esac
W=${WORK:-/tmp/gamma-$tag}; R=$root/results/iq_$tag
mkdir -p $W/mixes $W/models $W/scores $R/plans $R/evals
T=${THREADS:-2}; CH=${CHUNKS:-16}
PHASES=${PHASES:-"teacher imatrix pool table mixes hawq learn layers heads sizes"}
ALLOCS=${ALLOCS:-"static hawq gammad gamma"}
ALL_TYPES=IQ2_XXS,IQ2_XS,IQ2_S,Q2_K,IQ3_XXS,IQ3_S,Q3_K,IQ4_XS,IQ4_NL,Q4_0,Q4_K,Q4_1,Q5_0,Q5_K,Q5_1,Q6_K,Q8_0
MIXES=${MIXES:-$DEF_MIXES}
TEACHER=$W/teacher-f32.gguf; IMX=$W/imatrix-mix.gguf; POOL_ALL=$W/pool-all
txt=$root/../shared/data/text
now() { date +%s.%N; }
log() { echo "[$(date -u +%H:%M:%S)] $*"; }
has() { [[ " $PHASES " == *" $1 "* ]]; }
secs() { python3 -c "print(round($(now) - $1, 1))"; }
src=$($G fetch $MODEL)

if has teacher && [ ! -f $TEACHER ]; then log "teacher"; $G dequantize "$src" -o $TEACHER --type f32; fi
{ head -c 40000 $txt/war-and-peace.txt; echo; head -c 36000 $txt/python-calib.txt; } > $W/calib-mix.txt
# Stage I's and gamma layers' calibration text (never test or validation text).
{ head -c 100000 $txt/war-and-peace.txt; echo; head -c 100000 $txt/python-calib.txt; } > $W/calib-learn.txt
if has imatrix && [ ! -f $IMX ]; then
  log "imatrix (prose + code calibration)"
  t0=$(now)
  $B/llama-imatrix -m "$src" -f $W/calib-mix.txt -c 512 --chunks 32 -t $T -o $W/imatrix-mix.tmp.gguf > $W/imatrix-mix.log 2>&1
  mv $W/imatrix-mix.tmp.gguf $IMX; secs $t0 > $W/imatrix-mix.seconds
fi
# Every session's pool and mixes must come from the same imatrix: its sha256 is recorded in
# results/ (the file itself is generated, not committed) and a different one is said loudly.
if [ -f $IMX ]; then
  got=$(sha256sum $IMX | cut -d' ' -f1)
  if [ -f $R/imatrix-mix.sha256 ]; then
    [ "$got" = "$(cat $R/imatrix-mix.sha256)" ] || log "WARNING: imatrix $got differs from the recorded $(cat $R/imatrix-mix.sha256)"
  else
    echo "$got" > $R/imatrix-mix.sha256
  fi
fi
admitted() {  # MODEL -> the types of ALL_TYPES that fit at least one of its linear modules (gamma inspect)
  $G inspect --json "$1" | python3 -c "
import json, sys
fit = {t for m in json.load(sys.stdin)['linear'] for t in m['candidates']}
if 'IQ2_S' in fit:  # inspect lists no imatrix-only type; they have IQ2_S's 256-wide blocks
    fit |= {'IQ2_XXS', 'IQ2_XS'}
print(','.join(t for t in sys.argv[1].split(',') if t in fit))" $ALL_TYPES
}
if has pool && [ ! -f $POOL_ALL/manifest.json ]; then
  log "pool of every type"
  $G pool "$src" --types $(admitted "$src") --imatrix $IMX -t $T -q -o $POOL_ALL
fi
if has table; then
  $G inspect $POOL_ALL --json > $R/types.json.tmp && mv $R/types.json.tmp $R/types.json
  $G inspect $POOL_ALL > $R/types.md.tmp && mv $R/types.md.tmp $R/types.md
fi
evaluate() {  # GGUF NAME: KLD vs the teacher on both test texts
  local f
  for f in wiki.test.raw:wiki python-eval.txt:py; do
    local text=${f%%:*} tag=${f##*:}
    [ -f $R/evals/$2.$tag.json ] && continue
    $G eval "$1" --teacher $TEACHER --kld-base $W/kld-base-$tag-$CH.bin --text $txt/$text --ctx 512 --chunks $CH \
      -t $T -q -o $R/evals/$2.$tag.json > /dev/null
  done
}
if has mixes; then
  for m in $MIXES; do
    [ -f $R/evals/llama-$m.py.json ] && continue
    if [ ! -f $W/mixes/$m.gguf ]; then
      log "llama-quantize $m"; t0=$(now)
      $B/llama-quantize --imatrix $IMX $TEACHER $W/mixes/$m.partial.gguf $m $T > $W/mixes/$m.log 2>&1
      mv $W/mixes/$m.partial.gguf $W/mixes/$m.gguf; secs $t0 > $R/evals/llama-$m.quantize-seconds
    fi
    log "eval llama $m"; evaluate $W/mixes/$m.gguf llama-$m
  done
fi

# 2. HAWQ-V2 traces over the pool (once).
if has hawq && [ ! -f $R/hawq.json ]; then
  log "gamma hawq"
  $G hawq $POOL_ALL --teacher $TEACHER --calib $W/calib-mix.txt --samples 4 --seqs 4 --calib-tokens 4096 --seq-len 256 \
    -t $T -q -o $W/scores/hawq.json
  cp $W/scores/hawq.json $R/hawq.json
fi
# 2b. GAMMA scores (issue 19's Stage I: hard samples, sub-layer forcing, layer visits) over
# the default pool (`--types auto`: its files are pool-all's, linked, so nothing is quantized
# twice), learned once at GAMMA_BPW and re-solved at every size (4 x 256 tokens per step;
# bench/bench_learn, 3.0x the default recipe's token-layers per second). Every MEASURE-th step
# also measures each candidate's loss change in the sampled assignment (solved as `gammad`,
# --transform delta). The default schedule, 1 + 28 x VISIT steps (each layer visited once for
# VISIT = 12 steps, measured at step 0 and 4 times in its visit, 1,024 tokens each) on 16k
# tokens, fits a 3-hour session beside the pool and the evals (~35 min, 2 cores); VISIT=32
# MEASURE=4 ran at ~5 s a step beside the evals, 75 min, too long for one session here. Calibration: prose + code
# as for HAWQ and the imatrix (calib-mix.txt is a prefix of it, too short for 16k tokens),
# never the validation texts that choose (python-calib's held-back part starts at 480,000).
# More data (issue 19): EPOCHS > 1 visits every layer EPOCHS times, each visit on other
# calibration sequences; GAMMA_TAG names the run (scores gamma-TAG.json, allocator gammad-TAG).
# Candidate sets (issue 24): GAMMA_TYPES=IQ2_XS,Q4_K (with a GAMMA_TAG) learns over those types
# alone, in pool-TAG (pool-all's files, linked); gammad-TAG then solves over that pool.
# Warm start (issue 19): GAMMA_INIT=hawq or static starts Stage I on that allocator's plan at
# GAMMA_BPW over the learning pool's types (gamma learn --init-plan, p = 0.5 on its choice).
# Layer loss (issue 19): GAMMA_LOSS=rel|clip (gamma learn --layer-loss): Qwen's first token
# holds ~98 % of the hidden states' energy from layer 2 to 26, so plain MSE measures mostly
# that token; rel weighs every token by the teacher's inverse mean square there, clip only a
# token above 10x the median token's.
POOL_AUTO=$W/pool-auto
tag_pool() {  # TAG -> the pool its Stage I learned over
  if [ -f $W/pool-$1/manifest.json ]; then echo $W/pool-$1; else echo $POOL_AUTO; fi
}
# The data target (issue 19: >= 64k tokens, every layer in >= 200 steps): LEARN_CALIB names the
# calibration files (default calib-learn.txt, ~55k tokens, too short for 64k distinct ones: its
# sequences would overlap), SEQS the sequences per step, VISIT_SEQS those a visit holds.
# python-calib-learn.txt is python-calib.txt before its held-back validation part.
head -c 480000 $txt/python-calib.txt > $W/python-calib-learn.txt
LEARN_CALIB=${LEARN_CALIB:-$W/calib-learn.txt}; SEQS=${SEQS:-4}; VISIT_SEQS=${VISIT_SEQS:-0}
VISIT=${VISIT:-12}; MEASURE=${MEASURE:-3}; CALIB_TOKENS=${CALIB_TOKENS:-16384}; EPOCHS=${EPOCHS:-1}
LEARN_STEPS=${LEARN_STEPS:-$((1 + 28 * VISIT * EPOCHS))}; GAMMA_BPW=${GAMMA_BPW:-3.25}
GNAME=gamma${GAMMA_TAG:+-$GAMMA_TAG}
if has learn && [ ! -f $R/$GNAME.json ]; then
  LPOOL=$POOL_AUTO; LTYPES=auto
  if [ -n "${GAMMA_TYPES:-}" ]; then
    [ -n "${GAMMA_TAG:-}" ] || { echo "GAMMA_TYPES needs a GAMMA_TAG" >&2; exit 2; }
    LPOOL=$W/pool-$GAMMA_TAG; LTYPES=$GAMMA_TYPES
  fi
  if [ ! -f $LPOOL/manifest.json ]; then
    mkdir -p $LPOOL
    for f in $POOL_ALL/cand-*; do ln -sf "$f" $LPOOL/; done
    $G pool "$src" --types $LTYPES --imatrix $IMX -t $T -q -o $LPOOL
  fi
  INIT_ARGS=""
  if [ -n "${GAMMA_INIT:-}" ]; then
    [ -n "${GAMMA_TAG:-}" ] || { echo "GAMMA_INIT needs a GAMMA_TAG" >&2; exit 2; }
    case $GAMMA_INIT in
      hawq) iargs="--scores $R/hawq.json" ;;
      static) iargs="--score-from-manifest" ;;
      *) echo "GAMMA_INIT must be hawq or static" >&2; exit 2 ;;
    esac
    ltypes=$(python3 -c "import json,sys; print(','.join(json.load(open(sys.argv[1]))['types']))" $LPOOL/manifest.json)
    $G solve --pool $POOL_ALL $iargs --allow ".*=$ltypes" --bpw $GAMMA_BPW -o $R/plans/init-$GNAME.json > /dev/null
    INIT_ARGS="--init-plan $R/plans/init-$GNAME.json"
  fi
  log "gamma learn ($LEARN_STEPS steps at $GAMMA_BPW bpw${GAMMA_INIT:+, from $GAMMA_INIT})"
  GAMMA_PROGRESS=1 $G learn $LPOOL --teacher $TEACHER --calib $LEARN_CALIB \
    --calib-tokens $CALIB_TOKENS --seq-len 256 --seqs $SEQS --visit-seqs $VISIT_SEQS --bpw $GAMMA_BPW --steps $LEARN_STEPS --layers-per-step 1 \
    --estimator st --forcing sublayer --visit-steps $VISIT --measure-every $MEASURE --lr 0.05 --tau 1 --tau-end 0.05 \
    --checkpoint-every 8 $INIT_ARGS ${GAMMA_LOSS:+--layer-loss $GAMMA_LOSS} -t $T -o $W/scores/$GNAME.json  # GAMMA_PROGRESS=1: a progress line every few seconds
  cp $W/scores/$GNAME.json $R/$GNAME.json
fi
# Layer scale (issue 19): each layer's measured KLD with its modules at LOW (gamma layers, on
# calib-learn.txt 4 x 512, the pool-auto source types as reference), one file per LOW in
# LAYER_LOWS (default Q2_K); allocator gammal-TAG-LOW solves Stage I's deltas (gamma-TAG.json),
# raw or fitted (--transform delta / delta-fit, as gammad), rescaled to it (--layer-scale).
if has layers; then
  for low in ${LAYER_LOWS:-Q2_K}; do
    [ -f $R/layers-$low.json ] && continue
    log "gamma layers at $low"
    $G layers $POOL_AUTO --teacher $TEACHER --calib $W/calib-learn.txt -c 512 --chunks 4 --low $low \
      --kld-base $W/kld-base-calib-4.bin --tmp-dir /dev/shm -t $T -o $R/layers-$low.json
  done
fi
# Head costs: the layers at HEAD_LOW (default IQ3_S) again, and each head tensor alone at each of
# HEADS' types, the rest at the source's (gamma layers --head), for the "hc" variant: CHOOSE_HEAD=
# $R/layers-HEAD_LOW-heads.json.
if has heads; then
  low=${HEAD_LOW:-IQ3_S}
  if [ ! -f $R/layers-$low-heads.json ]; then
    log "gamma layers at $low with the head's types"
    $G layers $POOL_AUTO --teacher $TEACHER --calib $W/calib-learn.txt -c 512 --chunks 4 --low $low \
      $(for h in $HEADS; do echo --head $h; done) --kld-base $W/kld-base-calib-4.bin --tmp-dir /dev/shm -t $T \
      -o $R/layers-$low-heads.json
  fi
fi
# 3. Every allocator at each mix's file size (and at each of BPWS): one plan per tied-embedding type, the one with
# the lowest validation KLD (both texts, summed) evaluated on the test texts.
VCH=${VCHUNKS:-8}
tail -c +480001 $txt/python-calib.txt > $W/valid-py.txt
valid_kld() {  # GGUF NAME -> sum of the mean KLD on the two validation texts
  local f
  for f in $txt/wiki.valid.tokens:wv $W/valid-py.txt:pv; do
    local text=${f%%:*} t=${f##*:}
    [ -f $R/evals/$2.$t.json ] || $G eval "$1" --teacher $TEACHER --kld-base $W/kld-base-$t-$VCH.bin --text $text \
      --ctx 512 --chunks $VCH -t $T -q -o $R/evals/$2.$t.json > /dev/null
  done
  python3 -c "import json,sys; print(sum(json.load(open(f))['kld']['mean'] for f in sys.argv[1:]))" \
    $R/evals/$2.wv.json $R/evals/$2.pv.json
}
# A size is a mix's file (NAME: its measured bytes) or bpwB (BPWS="2.75 3.0 ..."): the file of
# B bits per weight in the linear modules with llama.cpp's default non-linear types, i.e. the
# static plan's bytes at --bpw B without --fixed; every allocator then solves at those bytes.
mix_bytes() {
  if [[ $1 == bpw* ]]; then
    [ -f $R/plans/size-$1.json ] || $G solve --pool $POOL_ALL --score-from-manifest --bpw ${1#bpw} -o $R/plans/size-$1.json > /dev/null
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['info']['predicted']['file_bytes'])" $R/plans/size-$1.json
  else
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['model']['file_bytes'])" $R/evals/llama-$1.wiki.json
  fi
}
SIZES="$MIXES $(for b in ${BPWS:-}; do echo bpw$b; done)"
[ -n "${CHOOSE_HEAD:-}" ] && FIXED="$FIXED hc:choose"
head_args() { if [ "$1" = choose ]; then echo --choose-head $CHOOSE_HEAD; else for f in ${1//,/ }; do echo --fixed $f; done; fi; }
if has sizes; then
  for m in $SIZES; do
    [[ $m == bpw* ]] || [ -f $R/evals/llama-$m.wiki.json ] || continue
    sz=$(mix_bytes $m)
    for a in $ALLOCS; do
      case $a in
        static) args="--score-from-manifest"; pool=$POOL_ALL ;;
        hawq) [ -f $R/hawq.json ] || continue; args="--scores $R/hawq.json"; pool=$POOL_ALL ;;
        gamma) [ -f $R/gamma.json ] || continue; args="--scores $R/gamma.json --transform size-log"; pool=$POOL_AUTO ;;
        gammad) [ -f $R/gamma.json ] || continue; args="--scores $R/gamma.json"; pool=$POOL_AUTO ;;  # + a transform below
        gammad-*) [ -f $R/gamma-${a#gammad-}.json ] || continue; args="--scores $R/gamma-${a#gammad-}.json"; pool=$(tag_pool ${a#gammad-}) ;;
        # gammab[-TAG]: Stage I's deltas blended with HAWQ-V2's (gamma solve --blend: the geometric
        # mean of the two costs per candidate), over the candidates both score.
        gammab) [ -f $R/gamma.json ] && [ -f $R/hawq.json ] || continue; args="--scores $R/gamma.json --blend $R/hawq.json"; pool=$POOL_AUTO ;;
        gammab-*) [ -f $R/gamma-${a#gammab-}.json ] && [ -f $R/hawq.json ] || continue
          args="--scores $R/gamma-${a#gammab-}.json --blend $R/hawq.json"; pool=$(tag_pool ${a#gammab-}) ;;
        *-cal) [ -f $R/$a.json ] || continue; args="--scores $R/$a.json"; pool=$POOL_ALL ;;  # experiments/layer_calibrate.py
        gammal-*) tl=${a#gammal-}; tag=${tl%-*}; low=${tl##*-}  # gammal-TAG-LOW: gamma layers' scale
          [ -f $R/gamma-$tag.json ] && [ -f $R/layers-$low.json ] || continue
          args="--scores $R/gamma-$tag.json --layer-scale $R/layers-$low.json"; pool=$(tag_pool $tag) ;;  # + a transform below
        *) args="--scores $R/$a.json --transform size-log"; pool=$POOL_ALL ;;  # other scores learned on pool-all
      esac
      # Variants: every FIXED head; GAMMA's measured loss changes also raw (--transform delta,
      # label HEAD) or fitted per module as a line in rel_err (--transform delta-fit, fit-HEAD).
      # Also over the K types alone (K_ALLOCS="static hawq": those allocators, label k-HEAD, the
      # same pool with --allow): a score is one number per candidate, and whether the IQ and K
      # grids' errors cost alike is a question validation answers, as for the head.
      vargs=(); vlabel=(); vspec=()
      for v in $FIXED; do
        if [[ $a == gammad* || $a == gammal* || $a == gammab* ]]; then  # GAMMAD_TRANSFORMS="delta": the raw deltas only (one variant)
          for tr in ${GAMMAD_TRANSFORMS:-delta delta-fit}; do
            vargs+=("$args --transform $tr"); vspec+=("${v#*:}")
            if [ $tr = delta ]; then vlabel+=("${v%%:*}"); else vlabel+=("fit-${v%%:*}"); fi
          done
        else vargs+=("$args"); vlabel+=("${v%%:*}"); vspec+=("${v#*:}"); fi
        if [[ " ${K_ALLOCS:-} " == *" $a "* ]] && [[ ${v#*:} != *IQ* ]] && [[ ${v#*:} != choose ]]; then
          vargs+=("$args --allow .*=Q2_K,Q3_K,Q4_K,Q5_K,Q6_K"); vlabel+=("k-${v%%:*}"); vspec+=("${v#*:}")
        fi
      done
      best=""; bestk=""; nv=${#vargs[@]}
      for i in "${!vargs[@]}"; do
        n=$a-size-$m-${vlabel[$i]}; spec=${vspec[$i]}
        [ -f $R/plans/$n.json ] || $G solve --pool $pool ${vargs[$i]} --size $sz $(head_args $spec) \
          -o $R/plans/$n.json > /dev/null
        # One variant (a head fixed from the validation choices at the neighbouring sizes): nothing
        # to choose, so no validation evals.
        # VALIDATE=1 measures it anyway (to compare allocators on validation).
        if [ $nv = 1 ] && [ -z "${VALIDATE:-}" ]; then best=$n; bestk="none (one variant)"; break; fi
        # A plan equal to one measured already (e.g. the head the solver chose is a FIXED one): the
        # same file, so its evals are that file's.
        [ -f $R/evals/$n.wv.json ] || python3 -c "
import glob, json, os, shutil, sys
R, a, m, n = sys.argv[1:5]
def key(p):
    j = json.load(open(p))
    return j['modules'], j['fixed']
mine = key(f'{R}/plans/{n}.json')
for p in glob.glob(f'{R}/plans/{a}-size-{m}-*.json'):
    o = os.path.basename(p)[:-5]
    if o != n and all(os.path.exists(f'{R}/evals/{o}.{t}.json') for t in ('wv', 'pv')) and key(p) == mine:
        for t in ('wv', 'pv', 'wiki', 'py'):
            if os.path.exists(f'{R}/evals/{o}.{t}.json'):
                shutil.copy(f'{R}/evals/{o}.{t}.json', f'{R}/evals/{n}.{t}.json')
        print(f'{n}: the same file as {o}', file=sys.stderr)
        break" $R $a $m $n
        [ -f $R/evals/$n.wv.json ] && [ -f $R/evals/$n.pv.json ] || $G emit $pool $R/plans/$n.json -o $W/models/$n.gguf > /dev/null
        valid_kld $W/models/$n.gguf $n > /dev/null  # the pick below reads every variant's evals
        rm -f $W/models/$n.gguf
      done
      # Validation picks among every variant of this allocator measured at this size, this run's
      # and earlier runs' (FIXED may name only the new ones).
      if [ "$bestk" != "none (one variant)" ]; then
        read best bestk < <(python3 $root/experiments/pick.py $R $a-size-$m-)
      fi
      log "$a at $m size: $best (validation KLD sum $bestk)"
      echo "$best" > $R/plans/$a-size-$m.choice
      # NO_TEST=1: validation only (goal_table.py reads a family's test evals only for the
      # allocator validation picks; rerun without it where that is this one).
      if [ ! -f $R/evals/$best.py.json ] && [ -z "${NO_TEST:-}" ]; then
        $G emit $pool $R/plans/$best.json -o $W/models/$best.gguf > /dev/null
        evaluate $W/models/$best.gguf $best
        rm -f $W/models/$best.gguf
      fi
    done
  done
fi
log "done: $PHASES"
