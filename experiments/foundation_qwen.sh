#!/usr/bin/env bash
# Issue 4's figures on Qwen2.5-Coder-1.5B (the teacher is the Q4_K_M source dequantized to F32):
# fetch -> dequantize -> 5-type pool (timed against llama-quantize making one uniform type
# from the same teacher) -> uniform Q4_K and random mixed plans -> emit -> llama-perplexity
# (wiki.test.raw, -c 512 --chunks 40) -> the recipe through llama-quantize, types compared.
# Resumable: each step skips when its output exists. Writes results/foundation_qwen.json.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
G=$root/build/cli/gamma; B=$root/build/bin
W=${WORK:-/tmp/gamma-qwen}; mkdir -p "$W"; cd "$W"
T=${THREADS:-2}
data=$root/../shared/data
now() { date +%s.%N; }
secs() { python3 -c "print(round($2-$1,1))"; }

src=$($G fetch qwen2.5-coder-1.5b)
[ -f teacher-f32.gguf ] || $G dequantize "$src" -o teacher-f32.gguf --type f32

if [ ! -f pool/manifest.json ]; then
  t0=$(now); GAMMA_THREADS=$T $G pool "$src" --types Q2_K,Q3_K,Q4_K,Q5_K,Q6_K -o pool; t1=$(now)
  echo "$(secs $t0 $t1)" > pool.seconds
fi
if [ ! -f lq-q4k.seconds ]; then
  t0=$(now); $B/llama-quantize --pure teacher-f32.gguf lq-pure-q4k.gguf Q4_K $T > lq-pure-q4k.log 2>&1; t1=$(now)
  echo "$(secs $t0 $t1)" > lq-q4k.seconds
fi

$G plan pool --uniform Q4_K -o plan-q4k.json
[ -f q4k.gguf ] || $G emit pool plan-q4k.json -o q4k.gguf
# A random mixed plan: every module at a random candidate (seeded).
python3 - <<'PY'
import json, random
random.seed(4)
m = json.load(open("pool/manifest.json"))
p = json.load(open("plan-q4k.json"))
p["method"] = "random"; p["info"] = {"seed": 4}
for e in m["modules"]:
    p["modules"][e["name"]] = random.choice(e["candidates"])["id"]
p.pop("fixed", None)
json.dump(p, open("plan-random.json", "w"), indent=1)
PY
[ -f random.gguf ] || $G emit pool plan-random.json -o random.gguf

ppl() {  # PPL of a model on wiki.test.raw, -c 512 --chunks 40 (log kept, so reruns skip it)
  grep -q "Final estimate" "$1.ppl.log" 2>/dev/null ||
    $B/llama-perplexity -m "$1" -f $data/text/wiki.test.raw -c 512 --chunks 40 -t $T > "$1.ppl.log" 2>&1
  grep "Final estimate" "$1.ppl.log"
}
# The recipe reproduces the allocation through llama-quantize from the teacher.
recipe() {
  [ -f lq-$1.gguf ] || $B/llama-quantize --tensor-type-file $1.tensor-types.txt teacher-f32.gguf lq-$1.gguf Q4_K_M $T > lq-$1.log 2>&1
  $G inspect --json $1.gguf > $1.inspect.json
  $G inspect --json lq-$1.gguf > lq-$1.inspect.json
}
ppl q4k.gguf; ppl random.gguf
recipe random; recipe q4k
[ "${SOURCE_PPL:-1}" = 0 ] || { ln -sf "$src" source.gguf; ppl source.gguf; }

python3 - "$root/results/foundation_qwen.json" <<'PY'
import json, re, sys, os
def types(f):
    j = json.load(open(f)); return {t["name"]: t["type"] for t in j["tensors"]}
def ppl(f):
    if not os.path.exists(f): return None
    m = re.search(r"PPL = ([0-9.]+) \+/- ([0-9.]+)", open(f).read()); return [float(m[1]), float(m[2])] if m else None
out = {"model": "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (teacher: its F32 dequantization)",
       "threads": int(os.environ.get("THREADS", "2")),
       "pool_seconds": float(open("pool.seconds").read()),
       "llama_quantize_uniform_q4k_seconds": float(open("lq-q4k.seconds").read())}
out["pool_over_one_llama_quantize"] = round(out["pool_seconds"] / out["llama_quantize_uniform_q4k_seconds"], 2)
out["pool_bytes"] = sum(os.path.getsize("pool/" + f) for f in os.listdir("pool") if f.endswith(".gguf"))
out["source_q4_k_m"] = {"file_bytes": 1117320768, "ppl_wiki_c512_chunks40": ppl("source.gguf.ppl.log")}
for x in ["q4k", "random"]:
    a, b = types(x + ".inspect.json"), types("lq-" + x + ".inspect.json")
    out[x] = {"file_bytes": os.path.getsize(x + ".gguf"), "ppl_wiki_c512_chunks40": ppl(x + ".gguf.ppl.log"),
              "llama_quantize_recipe_types_equal": a == b,
              "mismatched_modules": [k for k in a if a[k] != b.get(k)]}
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(json.dumps(out, indent=1))
PY
