#!/usr/bin/env bash
# go.sh on a machine that has nothing: the goal run's work directory made again from issue 47's
# state (../../degrid_qwen/goal/state.tar.xz: scores, layers.json, the streamed pool's manifest,
# every run-SIZE.json and evaluation), its teacher made again from the seed (sha256 checked), the
# validation-chosen free files emitted again from their plans (sha256 checked against the files the
# goal run evaluated), and a speed table this machine's kind made for the same teacher (SPEED: a
# speed.json or .json.xz; `gamma solve` refuses one made on another ggml build or CPU signature).
# Then go.sh for the sizes given. W is the goal run's own path: the manifests name the teacher there.
#   SPEED=../goal_auto_speed/epyc-2026-12-05/speed.json.xz bash fresh.sh Q2_K_S IQ3_XXS
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
G=${G:-/work/main/build/cli/gamma}
W=/work/runs/degrid-goal
state=$here/../../degrid_qwen/goal
mkdir -p "$W"
cd "$W"
G=$G bash "$state/workdir.sh" "$state/state.tar.xz"
for MIX in "$@"; do
  j=$(ls run/run-*.json | while read -r f; do python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[1]) if j['target']['size']==sys.argv[2] else None" "$f" "$MIX"; done | grep -v None)
  plan=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['chosen']['plan'])" "$j")
  free=run/$(basename "$(dirname "$plan")" | sed 's/^at-/gamma-/')-$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['chosen']['name'])" "$j").gguf
  [ -f "$free" ] && continue
  "$G" emit run/pool "$plan" -o "${free%.gguf}.partial.gguf" -t 2 > /dev/null
  want=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['model']['sha256'])" "${free%.gguf}.report-wiki.test-c512-n16.json")
  [ "$(sha256sum "${free%.gguf}.partial.gguf" | cut -c1-64)" = "$want" ] || { echo "fresh.sh: $free is not the evaluated file" >&2; exit 1; }
  mv "${free%.gguf}.partial.gguf" "$free"
  echo "[$(date -u +%H:%M:%S)] $free emitted, the evaluated bytes"
done
W=$W G=$G bash "$here/go.sh" "$@"
