#!/bin/bash
# The probe against a real file, separated: head6-Q8_0.gguf (head_check.command.sh: the Q8_0 probe's exact types,
# real data, llama-quantize's writer), the same file with every linear module's data tiled from its first 64 rows
# as gamma's probes were until 2026-12-08 (tile_file.py), and tiled with each row's blocks shuffled as they are
# since (tile_file.py --shuffle), measured beside the source in ROUNDS rounds (OUT: tile-bench.txt).
set -e
G=${G:-$PWD}; B=$G/build/bin; cd "$W"
[ -f tiled-Q8_0.gguf ] || python3 $G/results/speed_model/tile_file.py head6-Q8_0.gguf tiled-Q8_0.gguf
[ -f shuffled-Q8_0.gguf ] || python3 $G/results/speed_model/tile_file.py --shuffle head6-Q8_0.gguf shuffled-Q8_0.gguf
O=${OUT:-tile-bench.txt}
: > $O
for r in $(seq ${ROUNDS:-3}); do
  $B/llama-bench -m source.gguf -t 2 -r 2 -o jsonl 2>/dev/null | sed "s/^/$r source /" >> $O
  for f in ${FILES:-head6-Q8_0 tiled-Q8_0 shuffled-Q8_0}; do
    $B/llama-bench -m $f.gguf -t 2 -r 2 -o jsonl 2>/dev/null | sed "s/^/$r $f /" >> $O
  done
done
$B/llama-bench -m source.gguf -t 2 -r 2 -o jsonl 2>/dev/null | sed "s/^/end source /" >> $O
echo done >> $O
