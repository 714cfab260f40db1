#!/usr/bin/env bash
# Issue 7's figures on Qwen2.5-Coder-1.5B (teacher: the Q4_K_M source dequantized to F32):
# gamma eval vs llama-perplexity on the same model, text and chunks (PPL on the source; KLD,
# top-1 for a uniform Q3_K against the teacher through one shared base file), and zero-shot
# arc_easy / piqa. Needs experiments/foundation_qwen.sh's work dir. Resumable per step.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
G=$root/build/cli/gamma; B=$root/build/bin
W=${WORK:-/tmp/gamma-qwen}; cd "$W"
T=${THREADS:-2}; KCHUNKS=${KLD_CHUNKS:-8}; LIMIT=${LIMIT:-100}
wiki=$root/../shared/data/text/wiki.test.raw
out=$root/results
src=$($G fetch qwen2.5-coder-1.5b)

# PPL of the source, 40 chunks: gamma vs llama-perplexity (foundation_qwen.sh ran the latter).
[ -f eval-source.json ] || $G eval "$src" --text $wiki --ctx 512 --chunks 40 -t $T -q -o eval-source.json

# KLD of a uniform Q3_K vs the F32 teacher: gamma writes the base file, llama-perplexity reads it.
[ -f q3k.gguf ] || { $G plan pool --uniform Q3_K -o plan-q3k.json; $G emit pool plan-q3k.json -o q3k.gguf; }
[ -f eval-q3k.json ] || $G eval q3k.gguf --teacher teacher-f32.gguf --kld-base kld-base-$KCHUNKS.bin --text $wiki \
  --ctx 512 --chunks $KCHUNKS -t $T -q -o eval-q3k.json
grep -q "Mean    KLD" lp-q3k-kld.log 2>/dev/null || $B/llama-perplexity -m q3k.gguf --kl-divergence-base kld-base-$KCHUNKS.bin \
  --kl-divergence -c 512 --chunks $KCHUNKS -t $T > lp-q3k-kld.log 2>&1

# Zero-shot multiple choice on the source.
[ -f eval-mc-$LIMIT.json ] || $G eval "$src" --tasks arc_easy,piqa --limit $LIMIT -t $T -q -o eval-mc-$LIMIT.json

# Speed vs llama-perplexity on the same model, chunks and threads (best of 2 alternating runs).
[ -f bench-eval.json ] || $root/build/bench/bench_eval --model "$src" --text $wiki --ctx 512 --chunks 3 --threads $T --reps 2 > bench-eval.json

python3 - "$out/eval_qwen.json" "$LIMIT" <<'PY'
import json, re, sys
def grab(pat, s):
    m = re.search(pat, s); return float(m[1]) if m else None
lp_src = open("source.gguf.ppl.log").read() if __import__("os").path.exists("source.gguf.ppl.log") else ""
lp_kld = open("lp-q3k-kld.log").read()
es, eq, mc = (json.load(open(f)) for f in ("eval-source.json", "eval-q3k.json", f"eval-mc-{sys.argv[2]}.json"))
r = {"model": "Qwen2.5-Coder-1.5B-Instruct Q4_K_M; teacher = its F32 dequantization",
     "ppl_source_wiki_c512_chunks40": {"gamma": [es["perplexity"]["ppl"], es["perplexity"]["ppl_stderr"]],
                                        "llama_perplexity": [grab(r"PPL = ([0-9.]+)", lp_src), grab(r"\+/- ([0-9.]+)", lp_src)],
                                        "gamma_seconds": es["perplexity"].get("seconds")},
     "kld_q3k_uniform_vs_teacher": {"chunks": eq["settings"]["chunks"],
        "gamma": {"mean": eq["kld"]["mean"], "median": eq["kld"]["median"], "p99": eq["kld"]["p99"],
                  "top1": eq["kld"]["top1"]},
        "llama_perplexity": {"mean": grab(r"Mean    KLD:\s+([0-9.]+)", lp_kld), "median": grab(r"Median  KLD:\s+([0-9.]+)", lp_kld),
                             "p99": grab(r"99.0%   KLD:\s+([0-9.]+)", lp_kld), "top1_pct": grab(r"Same top p:\s+([0-9.]+)", lp_kld)}},
     "tasks": {k: {x: v[x] for x in ("n", "acc", "acc_stderr", "acc_norm", "acc_norm_stderr", "seconds") if x in v}
               for k, v in mc["tasks"].items()},
     "tasks_wall_seconds": mc["seconds"],
     "speed_vs_llama_perplexity": json.load(open("bench-eval.json"))}
json.dump(r, open(sys.argv[1], "w"), indent=1)
print(json.dumps(r, indent=1))
PY
