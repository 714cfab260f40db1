#!/usr/bin/env bash
# Produces: results/zeroshot_qwen/evals/, gamma-*.choice (in results/zeroshot_qwen/data.tar.xz).
# Issue 24 item 4: the paper's six-task zero-shot table on Qwen2.5-Coder-1.5B (the teacher is
# the Q4_K_M source dequantized to F32). Models: the teacher, uniform Q3_K (gamma plan
# --uniform over the sweep's pool), llama.cpp's mix nearest 3.0 and 3.5 bpw of linear weights
# (Q2_K, 3.11; IQ3_XS, 3.45; the vendored llama-quantize, the sweep's teacher and imatrix), and
# gamma's best file at each of those mixes' bytes, gamma-MIX (the GAMMA allocator and head with
# the lowest validation KLD among the sweep's choices at that size; gamma-bpwB takes the sweep's
# B-bpw size instead). Tasks: ../shared/data/tasks, the first LIMIT
# items of each (the same items for every model), acc and acc_norm with standard errors.
# Resumable per (model, task): every result is results/zeroshot_qwen/evals/MODEL.TASK.json,
# skipped when present; a model file is built only while it still has a task to run.
#   WORK=/tmp/gamma-qwen [MODELS="teacher ..."] [TASKS="piqa ..."] bash experiments/zeroshot_qwen.sh
set -euo pipefail
root=${GAMMA_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
G=$root/build/cli/gamma; B=$root/build/bin
W=${WORK:-/tmp/gamma-qwen}; R=$root/results/zeroshot_qwen; IQ=$root/results/iq_qwen
python3 "$root/experiments/kept.py" extract $R  # its evals/, plans/, ... are kept in $R/data.tar.xz
python3 "$root/experiments/kept.py" extract $IQ  # its evals/, plans/, ... are kept in $IQ/data.tar.xz
T=${THREADS:-2}; LIMIT=${LIMIT:-500}
TASKS=${TASKS:-"arc_easy arc_challenge piqa hellaswag winogrande boolq"}
MODELS=${MODELS:-"teacher uniform-Q3_K llama-Q2_K gamma-Q2_K llama-IQ3_XS gamma-IQ3_XS"}
mkdir -p $R/evals $W/zs
log() { echo "[$(date -u +%H:%M:%S)] $*"; }

# gamma's best at a fixed budget: among the sweep's GAMMA allocators (gamma*, not hawq or static),
# the per-allocator choice with the lowest validation sum.
best_choice() {
  python3 - "$IQ" "$1" <<'PY'
import glob, json, os, sys
iq, size = sys.argv[1:3]
best = None
for c in glob.glob(f"{iq}/plans/gamma*-size-{size}.choice"):
    n = open(c).read().strip()
    try:
        k = sum(json.load(open(f"{iq}/evals/{n}.{t}.json"))["kld"]["mean"] for t in ("wv", "pv"))
    except FileNotFoundError:
        continue
    if best is None or k < best[0]:
        best = (k, n)
if best is None:
    sys.exit(f"no validated GAMMA choice at {size}")
print(best[1])
PY
}

model_file() {  # NAME -> path of its GGUF, built if missing
  local name=$1 f=$W/zs/$1.gguf
  case $name in
    teacher) echo $W/teacher-f32.gguf; return ;;
  esac
  if [ ! -f $f ]; then
    case $name in
      uniform-*)
        $G plan $W/pool-all --uniform ${name#uniform-} -o $R/plan-$name.json > /dev/null
        $G emit $W/pool-all $R/plan-$name.json -o $f > /dev/null ;;
      llama-*)
        $B/llama-quantize --imatrix $W/imatrix-mix.gguf $W/teacher-f32.gguf $f.partial ${name#llama-} $T > $W/zs/$name.log 2>&1
        mv $f.partial $f ;;
      gamma-*)
        local n; n=$(best_choice ${name#gamma-})
        echo "$n" > $R/$name.choice
        local pool=$W/pool-all
        [[ $n == gammad* ]] && pool=$W/pool-auto
        $G emit $pool $IQ/plans/$n.json -o $f > /dev/null ;;
      *) echo "unknown model $name" >&2; exit 2 ;;
    esac
  fi
  echo $f
}

for m in $MODELS; do
  todo=""
  for t in $TASKS; do [ -f $R/evals/$m.$t.json ] || todo="$todo $t"; done
  [ -n "$todo" ] || continue
  f=$(model_file $m)
  for t in $todo; do
    log "$m $t"
    $G eval $f --tasks $t --limit $LIMIT -t $T -q -o $R/evals/$m.$t.json > /dev/null
  done
  [ $m = teacher ] || rm -f $W/zs/$m.gguf
done
python3 $root/experiments/zeroshot_table.py $R -o $R/table.md
