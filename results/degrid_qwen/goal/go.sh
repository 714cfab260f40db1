#!/usr/bin/env bash
# Issue 47's goal table on Qwen2.5-Coder-1.5B against the de-gridded teacher, one run resumed on
# whatever machine a session gets: the teacher is made again from its seed (its sha256 checked
# against teacher.sha256), the work directory's small files (the imatrix, the estimate, the
# scores, Stage I's checkpoint, every evaluation) come back from state.tar.xz, and `gamma run`
# resumes from them; the big files (teacher, candidates, activations) are made again, the same
# bytes. `save.sh` packs the state after a session's part.
#   GAMMA=path/to/gamma bash go.sh
# WORK (default /work/runs/degrid-goal) must stay the same across sessions: the manifests in the
# state name the teacher and the imatrix by their absolute paths there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
G=${GAMMA:-$here/../../../build/cli/gamma}
work=${WORK:-/work/runs/degrid-goal}
mkdir -p "$work"
cd "$work"
src=$("$G" fetch qwen2.5-coder-1.5b)
if [ ! -f teacher-dither1.gguf ]; then
  "$G" dequantize --dither 1 "$src" -o teacher-dither1.partial.gguf
  mv teacher-dither1.partial.gguf teacher-dither1.gguf
fi
sha=$(sha256sum teacher-dither1.gguf | cut -d' ' -f1)
if [ -f "$here/teacher.sha256" ]; then
  [ "$sha" = "$(cat "$here/teacher.sha256")" ] || { echo "go.sh: teacher-dither1.gguf is $sha, not $(cat "$here/teacher.sha256")" >&2; exit 1; }
else
  echo "$sha" > "$here/teacher.sha256"
fi
if [ ! -d run ] && [ -f "$here/state.tar.xz" ]; then
  mkdir run.partial && tar -xJf "$here/state.tar.xz" -C run.partial && mv run.partial run
fi
exec "$G" run teacher-dither1.gguf --size IQ2_M,Q2_K_S,Q2_K,IQ3_XXS,IQ3_XS,Q3_K_S,IQ3_S,IQ3_M,Q3_K_M --stream-pool \
  --text wiki,python --valid-text wiki,python --chunks 16 --valid-chunks 8 --each-scorer --no-front -w run -t 2
