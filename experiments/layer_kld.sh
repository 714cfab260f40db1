#!/usr/bin/env bash
# Produces: results/iq_qwen/layer_kld/ (in results/iq_qwen/data.tar.xz).
# Issue 19: each layer's end-to-end sensitivity, measured. From the source's own types (every
# linear module at its exact-copy candidate, Q4_K or Q6_K; heads at the source's Q6_K / Q4_K:
# the teacher up to rounding), one file per layer with that layer's seven modules at Q2_K; KLD
# vs the F32 teacher on the search's calibration chunks (calib-learn.txt, 4 x 512; never a
# test or validation text). Against the per-layer sums of Stage I's deltas and HAWQ-V2's
# prediction (experiments/layer_profile.py), it says which scorer's layer profile is the real one.
# Resumable: one JSON per layer in results/iq_qwen/layer_kld/.
#   WORK=/tmp/gamma-qwen [LAYERS="0 1 ..."] bash experiments/layer_kld.sh
set -euo pipefail
root=${GAMMA_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}; G=$root/build/cli/gamma
W=${WORK:-/tmp/gamma-qwen}; R=$root/results/iq_qwen/layer_kld; POOL=$W/pool-auto
python3 "$root/experiments/kept.py" extract $root/results/iq_qwen  # its evals/, plans/, ... are kept in $root/results/iq_qwen/data.tar.xz
# The teacher's logits on those chunks: gamma eval writes the file on first use; gamma search
# wrote the same one (same text, ctx, chunks) for its fitness, reused when present.
BASE=$W/kld-base-calib-4.bin
[ -f $BASE ] || [ ! -f $W/search/search-Q2_K-823.json.teacher.kld ] || cp $W/search/search-Q2_K-823.json.teacher.kld $BASE
mkdir -p $R
LAYERS=${LAYERS:-"base $(seq 0 27)"}
for l in $LAYERS; do
  [ -f $R/$l.json ] && continue
  python3 - $POOL/manifest.json $R/plan-$l.json $l <<'PY'
import json, os, sys
man, out, layer = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
mods = {}
for m in man["modules"]:
    src = min((c for c in m["candidates"] if c["id"] in ("Q4_K", "Q6_K")), key=lambda c: c["rel_err"])["id"]
    mods[m["name"]] = "Q2_K" if layer != "base" and m["layer"] == int(layer) else src
fixed = {f["name"]: f["source_type"] for f in man["fixed"]}
plan = {"schema": "gamma.plan", "version": 1, "model_fingerprint": man["model"]["fingerprint"],
        "method": "layer_kld", "info": {"layer_at_Q2_K": layer}, "modules": mods, "fixed": fixed}
json.dump(plan, open(out + ".tmp", "w"), indent=1)
os.replace(out + ".tmp", out)
PY
  $G emit $POOL $R/plan-$l.json -o /dev/shm/layer-kld.gguf > /dev/null
  $G eval /dev/shm/layer-kld.gguf --teacher $W/teacher-f32.gguf --kld-base $BASE --text $W/calib-learn.txt \
    --ctx 512 --chunks 4 -t ${THREADS:-2} -q -o $R/$l.json > /dev/null
  rm -f /dev/shm/layer-kld.gguf /dev/shm/layer-kld.tensor-types.txt $R/plan-$l.json
  echo "layer $l: KLD $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['kld']['mean'])" $R/$l.json)"
done
