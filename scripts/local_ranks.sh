#!/usr/bin/env bash
# Runs a layer-sharded `gamma learn|hawq` as N local processes:
#   scripts/local_ranks.sh N learn POOL --teacher T.gguf -o SCORES.json [flags...]
# Each rank gets --world-size N --rank R and one fresh file:// rendezvous; ranks 1.. write
# their output to SCORES.json.rankR.log. Exits with the first failing rank's status (a dead
# rank ends the others' next collective at once), else 0.
set -uo pipefail
[ $# -ge 2 ] && [[ $1 =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 N learn|hawq ARGS..." >&2; exit 2; }
n=$1; shift
G=${GAMMA:-$(cd "$(dirname "$0")/.." && pwd)/build/cli/gamma}
out=""; prev=""
for a in "$@"; do { [ "$prev" = "-o" ] || [ "$prev" = "--output" ]; } && out=$a; prev=$a; done
[ -n "$out" ] || { echo "$0: -o SCORES.json is required" >&2; exit 2; }
rdv=$(mktemp -d)/rendezvous
trap 'rm -rf "$(dirname "$rdv")"' EXIT
pids=()
for ((r = 1; r < n; r++)); do
  "$G" "$@" --world-size "$n" --rank "$r" --rendezvous "file://$rdv" > "$out.rank$r.log" 2>&1 & pids+=($!)
done
"$G" "$@" --world-size "$n" --rank 0 --rendezvous "file://$rdv"; rc=$?
for p in "${pids[@]}"; do wait "$p" || { r=$?; [ $rc -eq 0 ] && rc=$r; }; done
exit $rc
