#!/bin/bash
# The speed model with probes against llama-bench (issue 45): W holds the files of make_smollm2_files.command.sh or
# make_qwen_pure_files.command.sh; the source first (the reference). The reference, every type's probe and the files
# are measured in the same ROUNDS round-robin rounds (each file's fastest), nothing else running on the cores.
set -e
G=${G:-$PWD}; cd "$W"
$G/build/cli/gamma speed source.gguf uni-*.gguf llama-*.gguf --bench --rounds ${ROUNDS:-3} -t 2 \
  --llama-bin $G/build/bin -o ${OUT:-check}.json > ${OUT:-check}.txt 2> ${OUT:-check}.err
echo done >> ${OUT:-check}.txt
