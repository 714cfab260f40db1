#!/bin/bash
# The speed model against llama-bench on Qwen: every file measured in 2 round-robin rounds.
cd $W
S=$HOME/.cache/gamma/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
build/bin/gamma speed $S uni-*.gguf llama-*.gguf gamma-*.gguf --bench --rounds 2 --llama-bin build/bin -o check3.json > check3.txt 2> check3.err
echo done >> check3.txt
