#!/usr/bin/env bash
# SmolLM2 speed model: the same five files checked twice back to back, the other job stopped.
cd /work/runs/spx
R=/work/runs/sm45/run
F="$R/llama-Q4_0.gguf $R/llama-Q3_K_M.gguf $R/llama-Q3_K_L.gguf $R/gamma-95044832-tg139.08830259658217-gamma-cal.gguf"
for k in A B; do
  /work/main/build/cli/gamma speed $F --reference /root/.cache/gamma/models/SmolLM2-135M-Instruct.Q4_1.gguf -t 2 \
    --llama-bin /work/main/build/bin --bench --rounds 3 -o check-$k.json > check-$k.log 2>&1
done
echo done > done
