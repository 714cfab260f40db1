#!/bin/bash
# Qwen files for the speed model's check without a pool: the source, uniform files of eight types and three llama.cpp
# mixes, all by the vendored llama-quantize from the source's F32 teacher and an imatrix of 16 chunks of
# war-and-peace.txt (the types' speed does not depend on the imatrix). W: work directory; G: the gamma checkout.
set -e
G=${G:-$PWD}; B=$G/build/bin; TEXT=${TEXT:-$G/../shared/data/text}; cd "$W"
S=$($G/build/cli/gamma fetch qwen2.5-coder-1.5b | tail -n 1)
T=teacher-f32.gguf; I=imatrix.gguf
[ -f $T ] || $G/build/cli/gamma dequantize $S -o $T --type f32 > teacher.log 2>&1
[ -f $I ] || $B/llama-imatrix -m $T -f $TEXT/war-and-peace.txt -o $I --chunks 16 -c 512 -t 2 > imatrix.log 2>&1
for t in Q2_K Q3_K Q4_0 Q4_K Q6_K Q8_0 IQ4_XS IQ3_S; do
  [ -f uni-$t.gguf ] || $B/llama-quantize --pure --imatrix $I $T uni-$t.gguf $t 2 > uni-$t.log 2>&1
done
for m in Q2_K Q3_K_M Q4_K_M; do
  [ -f llama-$m.gguf ] || $B/llama-quantize --imatrix $I $T llama-$m.gguf $m 2 > llama-$m.log 2>&1
done
ln -sf $S source.gguf
rm -f $T
echo done
