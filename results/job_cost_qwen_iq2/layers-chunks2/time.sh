#!/usr/bin/env bash
# gamma layers on 4 and on 2 chunks, one after the other on the quiet machine, the same pool (its
# low candidates already in POOL/stream/ from go.sh), each from no teacher log-probs.
set -u
G=/work/main/build/cli/gamma
R=/root/runs/s880w/run
cd /root/runs/lc2
for c in 4 2; do
  rm -f tbase$c.kld
  /usr/bin/time -f "chunks $c: %e s wall, %M kB max RSS" -a -o time.txt $G layers $R/pool --teacher $R/teacher-f16.gguf \
    --calib $R/calib.txt -c 512 --chunks $c --kld-base tbase$c.kld -t 2 -q -o t-layers$c.json > t-layers$c.log 2>&1
  rm -f tbase$c.kld
done
