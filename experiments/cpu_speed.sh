#!/usr/bin/env bash
# Produces: results/cpu_speed_qwen.json.
# Issue 17: does naming the instruction sets (cmake/cpu.cmake, GAMMA_CPU=auto) instead of
# ggml's -march=native cost speed? llama-perplexity and `gamma eval` on the Qwen2.5-Coder-1.5B
# Q4_K_M source (wiki.test.raw, CHUNKS x 512 tokens, 2 threads), alternating the two builds,
# best of REPS. BEFORE: a directory with llama-perplexity and gamma of a -DGAMMA_CPU=native
# build (the old default); AFTER: this checkout's build. Writes results/cpu_speed_qwen.json.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BEFORE=${BEFORE:?set BEFORE to a directory with a native build: llama-perplexity and cli/gamma}
AFTER=${AFTER:-$root/build}
T=${THREADS:-2}; CH=${CHUNKS:-4}; REPS=${REPS:-3}
text=$root/../shared/data/text/wiki.test.raw
model=$("$AFTER/cli/gamma" fetch qwen2.5-coder-1.5b)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# tok/s over the whole command (model load, tokenization and scoring included), the same
# measure for both programs.
rate() { awk -v t0="$1" -v t1="$(date +%s.%N)" -v n=$((CH * 512)) 'BEGIN { printf "%.2f", n / (t1 - t0) }'; }
tool() {  # DIR
  local t0; t0=$(date +%s.%N)
  "$1/llama-perplexity" -m "$model" -f "$text" -c 512 --chunks $CH -t $T > "$tmp/ppl.log" 2>&1
  grep -q "Final estimate" "$tmp/ppl.log" || { echo "llama-perplexity failed: $(tail -n 3 "$tmp/ppl.log")" >&2; exit 1; }
  rate "$t0"
}
ev() {  # GAMMA
  local t0; t0=$(date +%s.%N)
  "$1" eval "$model" --text "$text" --ctx 512 --chunks $CH -t $T -q -o "$tmp/e.json" > /dev/null
  rate "$t0"
}
declare -A best=()
keep() { best[$1]=$(awk -v a="${best[$1]:-0}" -v b="$2" 'BEGIN { print (b > a ? b : a) }'); }
for r in $(seq $REPS); do
  keep tool_before "$(tool "$BEFORE")"; keep tool_after "$(tool "$AFTER/bin")"
  keep eval_before "$(ev "$BEFORE/cli/gamma")"; keep eval_after "$(ev "$AFTER/cli/gamma")"
  echo "rep $r: llama-perplexity ${best[tool_before]} -> ${best[tool_after]} tok/s; gamma eval ${best[eval_before]} -> ${best[eval_after]} tok/s" >&2
done
python3 - "$root/results/cpu_speed_qwen.json" <<PY
import json, sys, re
flags = open("/proc/cpuinfo").read()
m = re.search(r"^model name\s*:\s*(.*)$", flags, re.M)
out = {"schema": "gamma.bench.cpu_speed", "version": 1,
       "machine": {"cpu": m.group(1) if m else "?", "amx": " amx_int8" in flags, "threads": $T},
       "model": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "text": "wiki.test.raw", "ctx": 512, "chunks": $CH,
       "reps": $REPS, "best_of_reps": True, "measure": "chunks x 512 / wall seconds of the whole command",
       "before": "GAMMA_CPU=native (ggml's -march=native, the old default)",
       "after": "GAMMA_CPU=auto (this CPU's extensions named, AMX off)",
       "llama_perplexity_tok_s": {"before": ${best[tool_before]}, "after": ${best[tool_after]}},
       "gamma_eval_tok_s": {"before": ${best[eval_before]}, "after": ${best[eval_after]}}}
for k in ("llama_perplexity_tok_s", "gamma_eval_tok_s"):
    out[k]["after_over_before"] = round(out[k]["after"] / out[k]["before"], 4)
json.dump(out, open(sys.argv[1] + ".tmp", "w"), indent=1)
import os; os.replace(sys.argv[1] + ".tmp", sys.argv[1])
print(json.dumps(out, indent=1))
PY
