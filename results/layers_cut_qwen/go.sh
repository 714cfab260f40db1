#!/bin/bash
# gamma layers on Qwen2.5-Coder-1.5B, the binary before (d637026: whole files) and after (each
# layer's file cut at its layer), one after the other on a quiet machine, the same stored pool
# (Q2_K,Q4_K,Q6_K), F16 teacher, teacher log-probs and text (4 x 512).
cd /root/runs/lay
C=/work/shared/data/text/war-and-peace.txt
for v in old new; do
  G=/work/main/build/cli/gamma; [ $v = old ] && G=/tmp/old/build/cli/gamma
  mkdir -p $v
  /usr/bin/time -v $G layers pool --teacher teacher-f16.gguf --calib $C -c 512 --chunks 4 --kld-base base.kld -t 2 -o $v/layers.json > $v/log.txt 2>&1
done
