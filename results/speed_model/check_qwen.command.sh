#!/bin/bash
# Waits for the mixes up to Q4_K_M, stops the rest, then checks the speed model file by file.
cd $W
while ! grep -q "llama-Q4_K_M.gguf" <(ls) || pgrep -f "llama-Q4_K_M.gguf Q4_K_M" >/dev/null; do sleep 5; done
pkill -f make.sh; pkill -f llama-quantize; sleep 2; rm -f llama-IQ3_M.gguf*
S=$HOME/.cache/gamma/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
build/bin/gamma speed $S uni-*.gguf llama-*.gguf gamma-*.gguf --bench --llama-bin build/bin -o check.json > check.txt 2> check.err
echo done >> check.txt
