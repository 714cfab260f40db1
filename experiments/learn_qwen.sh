#!/usr/bin/env bash
# Issue 6's Qwen2.5-Coder-1.5B run: importance matrix (llama-imatrix on the Q4_K_M source over
# war-and-peace, never the evaluation text) -> Q2_K..Q6_K pool with it -> gamma learn at 3.0 bpw
# against the F32 teacher (the source dequantized). Resumable: every step is skipped when its
# output exists, and gamma learn resumes from its checkpoint. Needs foundation_qwen.sh's work dir
# (the teacher). Writes results/learn_qwen1.5b_imatrix_3.0bpw.json (the scores, with curves).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
G=$root/build/cli/gamma; B=$root/build/bin
W=${WORK:-/tmp/gamma-qwen}; cd "$W"
T=${THREADS:-2}; BPW=${BPW:-3.0}; STEPS=${STEPS:-300}; K=${LAYERS_PER_STEP:-4}
CHUNKS=${IMATRIX_CHUNKS:-32}
txt=$root/../shared/data/text
src=$($G fetch qwen2.5-coder-1.5b)
now() { date +%s.%N; }

if [ ! -f imatrix.gguf ]; then
  t0=$(now)
  $B/llama-imatrix -m "$src" -f $txt/war-and-peace.txt -c 512 --chunks $CHUNKS -t $T -o imatrix.tmp.gguf > imatrix.log 2>&1
  mv imatrix.tmp.gguf imatrix.gguf; python3 -c "print($(now)-$t0)" > imatrix.seconds
fi
if [ ! -f pool-imx/manifest.json ]; then
  t0=$(now)
  $G pool "$src" --types Q2_K,Q3_K,Q4_K,Q5_K,Q6_K --imatrix imatrix.gguf -t $T -o pool-imx
  python3 -c "print($(now)-$t0)" > pool-imx.seconds
fi
out=$root/results/learn_qwen1.5b_imatrix_${BPW}bpw.json
$G learn pool-imx --teacher teacher-f32.gguf --bpw $BPW --steps $STEPS --layers-per-step $K \
  --calib-tokens 4096 --seq-len 256 -t $T -o scores-imx-$BPW.json 2> learn-imx-$BPW.progress
cp scores-imx-$BPW.json "$out"
python3 - "$out" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); f = s["final"]
print(f"target {s['target_bpw']}  b_hat {f['bpw_expected']:.4f}  steps {f['steps']}  "
      f"s/step {s['stats']['seconds_per_step']:.1f}  peak RSS {s['stats']['peak_rss_bytes']/2**30:.2f} GiB")
PY
