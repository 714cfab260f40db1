#!/bin/bash
# The probe against a real file, separated: head6-Q8_0.gguf (head_check.command.sh: the Q8_0 probe's exact types,
# real data, llama-quantize's writer) and the same file with every linear module's data tiled from its first 64
# rows as gamma's probes are (tile_file.py), measured beside the source in ROUNDS rounds.
set -e
G=${G:-$PWD}; B=$G/build/bin; cd "$W"
[ -f tiled-Q8_0.gguf ] || python3 $G/results/speed_model/tile_file.py head6-Q8_0.gguf tiled-Q8_0.gguf
: > tile-bench.txt
for r in $(seq ${ROUNDS:-3}); do
  $B/llama-bench -m source.gguf -t 2 -r 2 -o jsonl 2>/dev/null | sed "s/^/$r source /" >> tile-bench.txt
  for f in head6-Q8_0 tiled-Q8_0; do
    $B/llama-bench -m $f.gguf -t 2 -r 2 -o jsonl 2>/dev/null | sed "s/^/$r $f /" >> tile-bench.txt
  done
done
$B/llama-bench -m source.gguf -t 2 -r 2 -o jsonl 2>/dev/null | sed "s/^/end source /" >> tile-bench.txt
echo done >> tile-bench.txt
