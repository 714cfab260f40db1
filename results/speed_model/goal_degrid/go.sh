#!/usr/bin/env bash
# Issue 45's goal on the de-gridded teacher (issue 47's), from the finished goal run's work directory
# (results/degrid_qwen/goal: its streamed window pool, GAMMA's scores, gamma layers, imatrix, mixes'
# evaluations) and the speed table `gamma run --min-decode mix` made there (run/speed.json; the run
# itself then refused: its window pool was chosen for byte targets only). At each mix's size:
#   free  = the validation-chosen GAMMA file of that run (gamma-cal, its head), as it is;
#   speed = the same scorer and head solved with `--min-decode MIX.gguf` (as fast as the mix by the
#           same speed table), emitted from the same pool;
# then llama-bench of mix, free and speed in the same round-robin rounds (`gamma speed --bench`,
# each file's fastest; the mix is the reference) and KLD of the speed file on both test texts
# (16 x 512, the teacher's base files of the run, so the same chunks as every other row).
#   W=/work/runs/speed-degrid bash go.sh Q3_K_M Q2_K ...
set -euo pipefail
G=${G:-/work/main/build/cli/gamma}
W=${W:-/work/runs/speed-degrid}; R=$W/run; D=/work/runs/degrid-goal/run
txt=/work/shared/data/text
cd "$W"
mkdir -p goal
for MIX in "$@"; do
  j=$(ls $R/run-*.json | while read f; do python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[1]) if j['target']['size']==sys.argv[2] else None" "$f" "$MIX"; done)
  plan=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['chosen']['plan'])" "$j")
  free=$D/$(basename "$(dirname "$plan")" | sed 's/^at-/gamma-/')-$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['chosen']['name'])" "$j").gguf
  read -r -a fixed < <(python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["fixed"]; print(" ".join(f"--fixed {k}={f[k]}" for k in ("output.weight","token_embd.weight")))' "$W/$plan")
  M=$R/llama-$MIX.gguf
  if [ ! -f "$M" ]; then  # as gamma run builds it; the bytes its evaluations measured (sha256 checked)
    # The same relative paths as gamma run's command: llama-quantize writes the imatrix's path into the file.
    /work/main/build/bin/llama-quantize --imatrix run/imatrix.gguf teacher-dither1.gguf run/llama-$MIX.partial.gguf $MIX 2 > goal/llama-$MIX.log 2>&1
    want=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['model']['sha256'])" $R/llama-$MIX.report-wiki.test-c512-n16.json)
    [ "$(sha256sum $R/llama-$MIX.partial.gguf | cut -c1-64)" = "$want" ] || { echo "go.sh: llama-$MIX is not the evaluated file" >&2; exit 1; }
    mv $R/llama-$MIX.partial.gguf "$M"
  fi
  size=$(stat -c %s "$M")
  echo "[$(date -u +%H:%M:%S)] $MIX: $size bytes, free $free, ${fixed[*]}"
  [ -f goal/$MIX-speed.json ] || $G solve $R/pool --scores $R/scores-gamma-3.26-c0.2.json --transform delta --layer-scale $R/layers.json \
      --size "$size" "${fixed[@]}" --speed $R/speed.json --min-decode "$M" -o goal/$MIX-speed.json > goal/$MIX-speed.solve.txt
  [ -f goal/$MIX-speed.gguf ] || { $G emit $R/pool goal/$MIX-speed.json -o goal/$MIX-speed.partial.gguf -t 2 > /dev/null && mv goal/$MIX-speed.partial.gguf goal/$MIX-speed.gguf; }
  [ -f goal/$MIX-bench.json ] || $G speed "$M" "$free" goal/$MIX-speed.gguf --bench --rounds 2 -t 2 -o goal/$MIX-bench.json > goal/$MIX-bench.log 2>&1
  for t in wiki.test python-eval; do
    text=$([ $t = wiki.test ] && echo wiki.test.raw || echo python-eval.txt)
    [ -f goal/$MIX-speed.$t.json ] || $G eval goal/$MIX-speed.gguf --teacher $W/teacher-dither1.gguf --kld-base $R/teacher-report-$t-c512-n16.kld \
        --text $txt/$text --ctx 512 --chunks 16 -t 2 -q -o goal/$MIX-speed.$t.json > /dev/null
  done
  echo "[$(date -u +%H:%M:%S)] $MIX done"
done
