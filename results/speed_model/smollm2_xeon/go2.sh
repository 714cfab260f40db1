#!/usr/bin/env bash
cd /work/runs/spx
R=/work/runs/sm45/run
F="$R/llama-Q4_0.gguf $R/llama-Q3_K_M.gguf $R/llama-Q3_K_L.gguf $R/gamma-95044832-tg139.08830259658217-gamma-cal.gguf"
/work/main/build/cli/gamma speed $F --reference /root/.cache/gamma/models/SmolLM2-135M-Instruct.Q4_1.gguf -t 2 \
    --llama-bin /work/main/build/bin --bench --rounds 3 -o check-C.json > check-C.log 2>&1
