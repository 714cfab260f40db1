#!/usr/bin/env bash
# Issue 45's speed/quality front at one mix's size, from a finished `gamma run --min-decode mix`
# (go.sh): the run's validation-chosen variant at that size (its scores, transform, layer scale and
# head, read from its plan) solved again by `gamma solve` at several decode budgets, each a factor
# of the mix's own speed by the run's speed table (0: no budget), emitted from the run's pool,
# evaluated on both test texts (16 x 512, the run's teacher base files: the same chunks as every
# other row), and measured by llama-bench beside the mix in the same rounds (`gamma speed --bench`,
# each file's fastest of 2 rounds).
#   W=/work/runs/speed-q3k bash front.sh Q3_K_M 0 0.9 1.0 1.05 1.1 1.2
# NO_BENCH=1: the files and their evaluations only (the bench wants the cores to itself; run again
# without it when they are free).
# FROM=SIZE: at a size the run did not make (no run.json for MIX), the run at SIZE's chosen
# variant (its scores, transform, layer scale and head) is solved at MIX's size: the method's
# reuse of one Stage I for every budget. The mix is then built as the run builds one (the
# vendored llama-quantize from the run's teacher with its imatrix) and evaluated on both texts.
# PLAN=file: that plan's variant instead of a run's chosen one (its recipe: scores, transform, layer
# scale, head), for a work directory made again from a state that kept the recipe's plan at another
# budget but not the chosen file's own (try 3's at Q3_K_M).
set -euo pipefail
G=${GAMMA:-/work/runs/speed-q3k/b/cli/gamma}
W=${W:-/work/runs/speed-q3k}; R=run
txt=${TEXT:-/work/shared/data/text}
MIX=$1; shift
cd "$W"
mkdir -p front
# One size: run.json; several: run-SIZE.json each.
if [ -n "${PLAN:-}" ]; then
  plan=$PLAN
else
  j=
  for size in "$MIX" "${FROM:-}"; do
    [ -n "$j" ] || [ -z "$size" ] || j=$(for f in $R/run.json $R/run-*.json; do [ -f "$f" ] || continue; python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[1]) if j['target']['size']==sys.argv[2] else None" "$f" "$size"; done | { grep -v None || true; } | tail -1)
  done
  [ -n "$j" ] || { echo "front.sh: no run at the size of $MIX: name one with FROM=SIZE" >&2; exit 1; }
  plan=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['chosen']['plan'])" "$j")
fi
read -r -a how < <(python3 - "$plan" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); i = p["info"]; a = []
a += ["--scores", i["scores"]["source"]] if i["scores"]["source"] != "manifest" else ["--score-from-manifest"]
if i.get("transform"): a += ["--transform", i["transform"]]
if i.get("layer_scale"): a += ["--layer-scale", i["layer_scale"]["file"]]
if i.get("blend"): a += ["--blend", i["blend"]["source"]]
for k in ("output.weight", "token_embd.weight"):
    if k in p["fixed"]: a += ["--fixed", f"{k}={p['fixed'][k]}"]
print(" ".join(a))
PY
)
M=$R/llama-$MIX.gguf
[ -f "$M" ] || { "$(dirname "$G")/../bin/llama-quantize" --imatrix $R/imatrix.gguf teacher-dither1.gguf $R/llama-$MIX.partial.gguf $MIX 2 \
    > $R/llama-$MIX.log 2>&1 && mv $R/llama-$MIX.partial.gguf "$M"; }
for t in wiki.test python-eval; do
  text=$([ $t = wiki.test ] && echo wiki.test.raw || echo python-eval.txt)
  [ -f $R/llama-$MIX.report-$t-c512-n16.json ] || $G eval "$M" --teacher teacher-dither1.gguf --kld-base $R/teacher-report-$t-c512-n16.kld \
      --text $txt/$text --ctx 512 --chunks 16 -t 2 -q -o $R/llama-$MIX.report-$t-c512-n16.json > /dev/null
done
size=$(stat -c %s "$M")
echo "[$(date -u +%H:%M:%S)] $MIX: $size bytes, the run's choice $plan: ${how[*]}"
# The mix's speed by the table: the budget "as fast as the mix" resolves to it.
[ -f front/$MIX-x1.json ] || $G solve $R/pool "${how[@]}" --size "$size" --speed $R/speed.json --min-decode "$M" -o front/$MIX-x1.json > front/$MIX-x1.solve.txt
mix_tps=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['info']['speed']['min_decode_tps'])" front/$MIX-x1.json)
files=("$M")
for f in "$@"; do
  name=$MIX-x$f
  if [ ! -f front/$name.json ]; then
    if [ "$f" = 0 ]; then budget=(); else budget=(--min-decode "$(python3 -c "print($mix_tps * $f)")"); fi
    $G solve $R/pool "${how[@]}" --size "$size" --speed $R/speed.json "${budget[@]}" -o front/$name.json > front/$name.solve.txt 2>&1 || { cat front/$name.solve.txt; continue; }
  fi
  [ -f front/$name.gguf ] || { $G emit $R/pool front/$name.json -o front/$name.partial.gguf -t 2 > /dev/null && mv front/$name.partial.gguf front/$name.gguf; }
  for t in wiki.test python-eval; do
    text=$([ $t = wiki.test ] && echo wiki.test.raw || echo python-eval.txt)
    [ -f front/$name.$t.json ] || $G eval front/$name.gguf --teacher teacher-dither1.gguf --kld-base $R/teacher-report-$t-c512-n16.kld \
        --text $txt/$text --ctx 512 --chunks 16 -t 2 -q -o front/$name.$t.json > /dev/null
  done
  files+=(front/$name.gguf)
  echo "[$(date -u +%H:%M:%S)] $name done"
done
[ -n "${NO_BENCH:-}" ] || [ -f front/$MIX-bench.json ] || $G speed "${files[@]}" --bench --rounds 2 -t 2 -o front/$MIX-bench.json > front/$MIX-bench.log 2>&1
[ -n "${NO_BENCH:-}" ] || echo "[$(date -u +%H:%M:%S)] bench done"
