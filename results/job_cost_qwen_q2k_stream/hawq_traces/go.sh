#!/usr/bin/env bash
# HAWQ-V2's traces on the Q2_K job's estimate, F32 teacher then F16 teacher, each from an empty
# activation cache, nothing else running: what the teacher's type changes in their time (issue 44).
cd /work/runs/hawqtt
G=/work/main/build/cli/gamma
for tt in f32 f16; do
  if [ $tt = f32 ]; then W=/work/runs/q2k/run; else W=/work/runs/q2ks/run; fi
  rm -rf cache-$tt; mkdir -p cache-$tt
  GAMMA_CACHE=/work/runs/hawqtt/cache-$tt /usr/bin/time -v -o time-$tt.txt $G hawq $W/estimate --teacher $W/teacher-$tt.gguf \
    --calib $W/calib.txt --samples 4 --seqs 4 --calib-tokens 4096 --seq-len 256 -t 2 -o /work/runs/hawqtt/hawq-$tt.json > log-$tt.txt 2>&1
  echo "exit $?" >> log-$tt.txt
done
