#!/bin/bash
# Issue 44: how llama.cpp's stages of gamma's job scale from 2 to 16 threads, on one machine with
# 16 cores (the lent GPU machine's CPU), on a random model of Qwen2.5-Coder-1.5B's shape.
set -u
cd build-dev16
O=${OUT:-/tmp/out}; mkdir -p $O
exec > >(tee $O/log.txt) 2>&1
lscpu | head -30; nproc; free -g | head -2
B=$PWD/bin; M=/tmp/m
mkdir -p $M
t0=$(date +%s%N)
python3 make_model.py meta.pkl $M/m28.gguf 28 && python3 make_model.py meta.pkl $M/m7.gguf 7 && python3 make_model.py meta.pkl $M/m2.gguf 2 || exit 1
echo "models made in $(( ($(date +%s%N) - t0) / 1000000 )) ms"; ls -la $M
# The binaries were built on the 2-core Xeon for its AVX-512 flags; a CPU without them is told by SIGILL.
if ! $B/llama-perplexity -m $M/m2.gguf -f wiki.test.raw -c 128 --chunks 1 -t 2 > /dev/null 2>&1; then
  echo "prebuilt binaries do not run here; building portable"
  mkdir -p /tmp/src && tar -xJf llama-src.tar.xz -C /tmp/src
  cmake -S /tmp/src/llama.cpp -B /tmp/lb -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF > /dev/null && \
  cmake --build /tmp/lb -j16 --target llama-quantize llama-perplexity llama-imatrix > /dev/null || exit 1
  B=/tmp/lb/bin
fi
run() {  # label threads command...
  local label=$1 t=$2; shift 2
  local s=$(date +%s%N)
  timeout 200 "$@" > $O/$label-t$t.out 2>&1; local rc=$?
  echo "RESULT $label t=$t rc=$rc ms=$(( ($(date +%s%N) - s) / 1000000 ))"
}
for t in 16 2; do
  run perplexity-28L-4x512 $t $B/llama-perplexity -m $M/m28.gguf -f wiki.test.raw -c 512 --chunks 4 -t $t
  run imatrix-28L-4x512 $t $B/llama-imatrix -m $M/m28.gguf -f calib.txt -c 512 --chunks 4 -t $t -o $M/im-$t.gguf
done
for t in 16 2; do
  for ty in Q4_K IQ3_S; do
    run quantize-7L-$ty $t $B/llama-quantize --imatrix $M/im-16.gguf --token-embedding-type f16 --output-tensor-type f16 $M/m7.gguf $M/q.gguf $ty $t
  done
  run quantize-2L-IQ2_XS $t $B/llama-quantize --imatrix $M/im-16.gguf --token-embedding-type f16 --output-tensor-type f16 $M/m2.gguf $M/q.gguf IQ2_XS $t
done
grep RESULT $O/log.txt > $O/results.txt
