#!/usr/bin/env bash
# Beside the job: the chosen file on python-eval.txt, and gamma-cal-output-Q4_K (4th in the race)
# on both validation (8 x 512, the race's finalists' text) and wiki.test.raw (8 x 512, the report's).
cd /root/runs/q2kn
T=/work/shared/data/text
G=./b/cli/gamma
$G eval run/gamma-752880576-gamma-cal-output-Q5_K.gguf -f $T/python-eval.txt --teacher run/teacher-f16.gguf --chunks 16 -c 512 -t 2 -o python-eval-gamma.json
$G emit run/pool run/at-752880576/plan-gamma-cal-output-Q4_K.json -o cal-q4k.gguf -t 2
$G eval cal-q4k.gguf -f $T/wiki.valid.tokens --teacher run/teacher-f16.gguf --chunks 8 -c 512 -t 2 -o cal-q4k-valid.json
$G eval cal-q4k.gguf -f $T/wiki.test.raw --teacher run/teacher-f16.gguf --chunks 8 -c 512 -t 2 -o cal-q4k-test.json
$G eval cal-q4k.gguf -f $T/python-eval.txt --teacher run/teacher-f16.gguf --chunks 16 -c 512 -t 2 -o cal-q4k-python.json
echo done
