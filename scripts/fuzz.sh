#!/usr/bin/env bash
# Fuzz every reader of untrusted files (fuzz/): build the libFuzzer targets with clang in
# build-fuzz/ (llama.cpp's readers instrumented too), seed each from real files, run each for
# RUNS executions or SECONDS seconds, whichever ends first, and write the figures (executions,
# time, coverage, crashes) to OUT (default results/fuzz.json). Crashers are kept under
# build-fuzz/crashes/; each one fixed becomes a test in tests/ (its bytes inline).
#   RUNS=1000000 SECONDS_MAX=1800 TARGETS="fuzz_gguf ..." bash scripts/fuzz.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
llama_dir=$(bash "$root/scripts/setup.sh" | tail -n 1)
B=$root/build-fuzz
RUNS=${RUNS:-1000000}; SECONDS_MAX=${SECONDS_MAX:-1800}
TARGETS=${TARGETS:-"fuzz_gguf fuzz_gguf_header fuzz_imatrix fuzz_manifest fuzz_plan fuzz_scores fuzz_eval fuzz_checkpoint"}
OUT=${OUT:-$root/results/fuzz.json}
SEEDS=${SEEDS:-$root/build/fuzz-seeds}  # real files: scripts/fuzz_seeds.sh writes them
flags="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=all -fno-omit-frame-pointer"
CC=clang CXX=clang++ cmake -S "$root" -B "$B" -DCMAKE_BUILD_TYPE=Release -DGAMMA_FUZZ=ON -DGAMMA_LLAMA_DIR="$llama_dir" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DGAMMA_SKIP_STAGES="decoder;learn;hawq;report;run" >/dev/null
cmake --build "$B" -j "${JOBS:-$(nproc)}" --target $TARGETS gguf_seeds
mkdir -p "$B/crashes"
# fuzz_gguf_header's seeds: small GGUFs of the layouts beyond llama (fuzz/gguf_seeds.cpp).
mkdir -p "$SEEDS/fuzz_gguf_header" && "$B/fuzz/gguf_seeds" "$SEEDS/fuzz_gguf_header"
results=()
for t in $TARGETS; do
  corpus=$B/corpus/$t; mkdir -p "$corpus"
  [ -d "$SEEDS/$t" ] && cp -n "$SEEDS/$t"/* "$corpus"/ 2>/dev/null || true
  log=$B/$t.log
  start=$(date +%s)
  set +e
  (cd "$B/crashes" && "$B/fuzz/$t" "$corpus" -runs=$RUNS -max_total_time=$SECONDS_MAX -print_final_stats=1 \
      -artifact_prefix="$B/crashes/$t-" -rss_limit_mb=4096 -timeout=30 > "$log" 2>&1)
  rc=$?
  set -e
  secs=$(( $(date +%s) - start ))
  results+=("$(python3 - "$log" "$t" "$rc" "$secs" "$B/crashes" <<'PY'
import json, re, sys, os
log, t, rc, secs, crashes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
text = open(log, errors="replace").read()
def last(pat, cast=int):
    m = re.findall(pat, text)
    return cast(m[-1]) if m else None
print(json.dumps({"target": t, "exit_code": rc, "seconds": secs,
                  "executions": last(r"stat::number_of_executed_units:\s*(\d+)"),
                  "execs_per_second": last(r"stat::average_exec_per_sec:\s*(\d+)"),
                  "coverage_edges": last(r"cov: (\d+)"), "features": last(r"ft: (\d+)"),
                  "corpus_units": last(r"corp: (\d+)"),
                  "crashes": sorted(f for f in os.listdir(crashes) if f.startswith(t + "-"))}))
PY
)")
  echo "$t: rc $rc, $secs s, $(tail -n 1 <<<"${results[-1]}")" >&2
done
printf '%s\n' "${results[@]}" | python3 -c "
import json, sys, platform
rows = [json.loads(l) for l in sys.stdin if l.strip()]
json.dump({'schema': 'gamma.fuzz', 'version': 1, 'command': 'scripts/fuzz.sh', 'runs_asked': $RUNS,
           'seconds_max': $SECONDS_MAX, 'sanitizers': 'address,undefined (gamma and llama.cpp)', 'targets': rows},
          open('$OUT.tmp', 'w'), indent=1)"
mv "$OUT.tmp" "$OUT"
echo "$OUT" >&2
