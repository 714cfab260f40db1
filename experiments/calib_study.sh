#!/usr/bin/env bash
# Produces: results/calib_qwen/ (learn-*.json; *.seconds, evals/, plans/ in results/calib_qwen/data.tar.xz).
# Issue 19 item 4 / issue 20 item 5: which calibration text, for a code model (Qwen2.5-Coder-1.5B)?
# Three calibrations, the same amount of text each, never a validation or test text:
#   prose = war-and-peace.txt, code = python-calib.txt (its held-back end, from byte 480,000, is
#   validation), both = about half of each: the IQ sweep's own calib-mix.txt (40,000 + 36,000
#   bytes) for the imatrix, so its imatrix and pool are reused, and calib-learn.txt for Stage I.
# A. The imatrix (what llama.cpp users calibrate): llama-imatrix (32 x 512 tokens) on each
#    text -> a K-type pool (Q2_K..Q6_K) and llama.cpp's Q2_K and Q3_K_M mixes from it ->
#    the mixes and the static proxy at llama.cpp Q2_K's size (o5e2 head, the sweep's choice).
# B. Stage I (gamma learn, the IQ sweep's recipe: hard samples, sub-layer forcing, visits of 12
#    steps, loss changes measured every 3rd step) on each text over one pool (the `both`
#    imatrix's K types), solved on the measured deltas at the same size.
# Every file is measured on validation (wiki.valid.tokens + valid-py.txt, 8 x 512 each: what
# chooses) and on the test texts (wiki.test.raw + python-eval.txt, 16 x 512: what is reported).
# Needs the IQ sweep's work dir (teacher, imatrix-mix, pool-all, KLD base files). Resumable:
# every output is skipped when it exists. PHASES: imatrix learn (default both, in order).
set -euo pipefail
root=${GAMMA_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
G=$root/build/cli/gamma; B=$root/build/bin
W=${WORK:-/tmp/gamma-qwen}; C=$W/calib; R=$root/results/calib_qwen
python3 "$root/experiments/kept.py" extract $R  # its evals/, plans/, ... are kept in $R/data.tar.xz
python3 "$root/experiments/kept.py" extract $root/results/iq_qwen  # its evals/, plans/, ... are kept in $root/results/iq_qwen/data.tar.xz
txt=${GAMMA_SHARED_DATA:-$root/../shared/data}/text
T=${THREADS:-2}; CH=16; VCH=8
PHASES=${PHASES:-"imatrix learn"}
CALIBS=${CALIBS:-"prose code both"}
KTYPES=Q2_K,Q3_K,Q4_K,Q5_K,Q6_K
HEAD="--fixed output.weight=Q5_K --fixed token_embd.weight=Q2_K"
TEACHER=$W/teacher-f32.gguf
mkdir -p $C/mixes $C/models $C/scores $R/plans $R/evals
log() { echo "[$(date -u +%H:%M:%S)] $*"; }
has() { [[ " $PHASES " == *" $1 "* ]]; }
now() { date +%s.%N; }
secs() { python3 -c "print(round($(now) - $1, 1))"; }
src=$($G fetch qwen2.5-coder-1.5b)
size=$(python3 -c "import json; print(json.load(open('$root/results/iq_qwen/evals/llama-Q2_K.wiki.json'))['model']['file_bytes'])")

text_of() {  # CALIB BYTES -> a calibration file of that many bytes (both: half of each)
  local f=$C/text-$1-$2.txt
  if [ ! -f $f ]; then
    case $1 in
      prose) head -c $2 $txt/war-and-peace.txt ;;
      code) head -c $2 $txt/python-calib.txt ;;
      both) head -c $(($2 / 2)) $txt/war-and-peace.txt; echo; head -c $(($2 / 2)) $txt/python-calib.txt ;;
    esac > $f.tmp && mv $f.tmp $f
  fi
  echo $f
}
measure() {  # GGUF NAME: KLD vs the teacher on the validation and the test texts
  local f
  for f in $txt/wiki.valid.tokens:wv:$VCH $W/valid-py.txt:pv:$VCH $txt/wiki.test.raw:wiki:$CH $txt/python-eval.txt:py:$CH; do
    IFS=: read -r text tag n <<< "$f"
    [ -f $R/evals/$2.$tag.json ] && continue
    $G eval "$1" --teacher $TEACHER --kld-base $W/kld-base-$tag-$n.bin --text $text --ctx 512 --chunks $n \
      -t $T -q -o $R/evals/$2.$tag.json > /dev/null
  done
}
done_all() { for t in wv pv wiki py; do [ -f $R/evals/$1.$t.json ] || return 1; done; }

if has imatrix; then
  for c in $CALIBS; do
    imx=$C/imatrix-$c.gguf; pool=$C/pool-$c
    if [ $c = both ] && [ ! -f $imx ]; then  # the sweep's imatrix and its K candidates
      ln -sf $W/imatrix-mix.gguf $imx; mkdir -p $pool
      for t in ${KTYPES//,/ }; do ln -sf $W/pool-all/cand-$t.gguf $W/pool-all/cand-$t.json $pool/; done
    fi
    if [ ! -f $imx ]; then
      log "imatrix $c"; t0=$(now)
      $B/llama-imatrix -m "$src" -f $(text_of $c 76000) -c 512 --chunks 32 -t $T -o $imx.tmp.gguf > $C/imatrix-$c.log 2>&1
      mv $imx.tmp.gguf $imx; secs $t0 > $R/imatrix-$c.seconds
    fi
    if [ ! -f $pool/manifest.json ]; then
      log "K pool $c"; t0=$(now)
      $G pool "$src" --types $KTYPES --imatrix $imx -t $T -q -o $pool; secs $t0 > $R/pool-$c.seconds
    fi
    for m in Q2_K Q3_K_M; do
      n=imx-$c-llama-$m
      done_all $n && continue
      if [ ! -f $C/mixes/$n.gguf ]; then
        log "llama-quantize $m ($c imatrix)"
        $B/llama-quantize --imatrix $imx $TEACHER $C/mixes/$n.partial.gguf $m $T > $C/mixes/$n.log 2>&1
        mv $C/mixes/$n.partial.gguf $C/mixes/$n.gguf
      fi
      log "eval $n"; measure $C/mixes/$n.gguf $n; rm -f $C/mixes/$n.gguf
    done
    n=imx-$c-static-size-Q2_K-o5e2
    if ! done_all $n; then
      [ -f $R/plans/$n.json ] || $G solve --pool $pool --score-from-manifest --size $size $HEAD -o $R/plans/$n.json > /dev/null
      $G emit $pool $R/plans/$n.json -o $C/models/$n.gguf > /dev/null
      log "eval $n"; measure $C/models/$n.gguf $n; rm -f $C/models/$n.gguf
    fi
  done
fi

if has learn; then
  pool=$C/pool-both
  [ -f $pool/manifest.json ] || { echo "run PHASES=imatrix CALIBS=both first" >&2; exit 1; }
  for c in $CALIBS; do
    s=$C/scores/learn-$c.json
    if [ ! -f $R/learn-$c.json ]; then
      log "gamma learn ($c calibration)"
      GAMMA_PROGRESS=1 $G learn $pool --teacher $TEACHER --calib $(text_of $c 200000) \
        --calib-tokens 16384 --seq-len 256 --seqs 4 --bpw 3.25 --steps 337 --layers-per-step 1 \
        --estimator st --forcing sublayer --visit-steps 12 --measure-every 3 --lr 0.05 --tau 1 --tau-end 0.05 \
        --checkpoint-every 8 -t $T -o $s
      cp $s $R/learn-$c.json
    fi
    n=learn-$c-gammad-size-Q2_K-o5e2
    if ! done_all $n; then
      [ -f $R/plans/$n.json ] || $G solve --pool $pool --scores $R/learn-$c.json --transform delta --size $size $HEAD \
        -o $R/plans/$n.json > /dev/null
      $G emit $pool $R/plans/$n.json -o $C/models/$n.gguf > /dev/null
      log "eval $n"; measure $C/models/$n.gguf $n; rm -f $C/models/$n.gguf
    fi
  done
fi
log "done: $PHASES"
