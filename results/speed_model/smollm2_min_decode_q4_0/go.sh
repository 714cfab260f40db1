#!/usr/bin/env bash
# Issue 45: the default job (SmolLM2-135M, its budget 95,044,832 bytes) under a speed budget:
# at least as fast as llama.cpp's Q4_0 of this model (by the speed table), reported on both test
# texts (16 x 512), validation as the default job (wiki.valid.tokens, 8 x 512).
cd /work/runs/sm45
date +%s > start.epoch
/usr/bin/time -v -o time.txt ./b/cli/gamma run smollm2-135m --size 95044832 --min-decode Q4_0 -w run -t 2 \
  --text wiki,python --chunks 16 --valid-chunks 8 --bench-rounds 3 "$@" > run.log 2>&1
echo "exit $?" >> run.log
date +%s > end.epoch
