#!/usr/bin/env bash
# Every table of results/ regenerated from what is kept there: results/**/*.md (and the JSON each
# generator writes beside its table) and the tables results/README.md copies from a generator; the
# tables results/README.md writes by hand are checked number by number against the files each names
# (experiments/readme_numbers.py).
# Each generator reads results/ through experiments/kept.py (a study's evals/, plans/, ... inside
# its results/STUDY/data.tar.xz), writes into a temporary directory, and the output is compared
# byte for byte with the committed file; a difference is printed as a diff and the script exits 1.
# Tables that cannot be regenerated from the kept files are listed with the reason, at the end.
#   bash experiments/tables.sh          (no build, no network; Python 3 only; ~1 min)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/experiments"
R=$root/results
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0

check() {  # check RESULT_PATH...: each regenerated $T/PATH against $R/PATH
  for p in "$@"; do

    if cmp -s "$T/$p" "$R/$p"; then
      echo "same      results/$p"
    else
      echo "DIFFERS   results/$p"
      diff -u "$R/$p" "$T/$p" | head -40
      fail=1
    fi
  done
}

check_prefix() {  # check_prefix PATH: the committed file is the regenerated table plus prose added by hand
  if [ "$(head -c "$(stat -c %s "$T/$1")" "$R/$1")" = "$(cat "$T/$1")" ]; then
    echo "same      results/$1 (the generated part; the notes after it are prose)"
  else
    echo "DIFFERS   results/$1"; diff -u "$R/$1" "$T/$1" | head -40; fail=1
  fi
}

gen() {  # gen OUT_DIR_UNDER_T COMMAND...: run a generator, its stdout discarded
  mkdir -p "$T/$1"; shift
  if ! "$@" > "$T/.stdout" 2> "$T/.stderr"; then
    echo "FAILED    $*"; tail -5 "$T/.stderr"; fail=1
  fi
}

gen degrid_smollm2 python3 teacher_ladder.py "$R/degrid_smollm2/ladder" -o "$T/degrid_smollm2/ladder.md"
check degrid_smollm2/ladder.md degrid_smollm2/ladder.json
gen degrid_smollm2 python3 teacher_ladder.py "$R/degrid_smollm2/ladder-grid" -o "$T/degrid_smollm2/ladder-grid.md"
check degrid_smollm2/ladder-grid.md degrid_smollm2/ladder-grid.json
gen degrid_smollm2 python3 degrid_types.py "$R/degrid_smollm2" -o "$T/degrid_smollm2/types.md"
check degrid_smollm2/types.md degrid_smollm2/types.json
gen degrid_qwen python3 teacher_ladder.py "$R/degrid_qwen/ladder" -o "$T/degrid_qwen/ladder.md"
check degrid_qwen/ladder.md degrid_qwen/ladder.json
gen converge_smollm2 python3 converge_table.py "$R/converge_smollm2" 0.2 0.1 -o "$T/converge_smollm2/table.md"
check converge_smollm2/table.md
gen degrid_qwen python3 degrid_types.py "$R/degrid_qwen" -o "$T/degrid_qwen/types.md"
check degrid_qwen/types.md degrid_qwen/types.json
gen degrid_smollm2 python3 degrid_width.py "$R/degrid_smollm2" -o "$T/degrid_smollm2/width.md"
check degrid_smollm2/width.md degrid_smollm2/width.json
gen calib_qwen python3 calib_tables.py "$R/calib_qwen" --hawq "$R/iq_qwen/hawq.json" -o "$T/calib_qwen/table"
check calib_qwen/table.md calib_qwen/table.json
gen iq_qwen python3 goal_table.py "$R/iq_qwen" -o "$T/iq_qwen/goal_table.md"
check iq_qwen/goal_table.md iq_qwen/goal_table.json
gen iq_qwen python3 binary_table.py "$R/iq_qwen" -o "$T/iq_qwen/binary_table.md"
check iq_qwen/binary_table.md iq_qwen/binary_table.json
gen iq_qwen python3 head_choice_table.py "$R/iq_qwen" -o "$T/iq_qwen/head_choice_table.md"
check iq_qwen/head_choice_table.md iq_qwen/head_choice_table.json
gen iq_qwen python3 search_table.py -o "$T/iq_qwen/search_table"
check iq_qwen/search_table.md iq_qwen/search_table.json
gen iq_qwen python3 stage1_ablation_table.py "$R/iq_qwen" warm -o "$T/iq_qwen/warm_start.md"
check iq_qwen/warm_start.md iq_qwen/warm_start.json
gen iq_qwen python3 stage1_ablation_table.py "$R/iq_qwen" reuse --sizes bpw2.75 -o "$T/iq_qwen/score_reuse.md"
check iq_qwen/score_reuse.md iq_qwen/score_reuse.json
gen iq_qwen python3 time_table.py -o "$T/iq_qwen/time_table.md"
check iq_qwen/time_table.md iq_qwen/time_table.json
gen iq_qwen sh -c 'python3 head_check_table.py "$1/iq_qwen" "$1/iq_qwen/layers-IQ3_S-heads.json" "$1/iq_qwen/head_choice" > "$2/iq_qwen/head_choice.md"' - "$R" "$T"
check iq_qwen/head_choice.md
gen iq_qwen python3 iq_tables.py "$R/iq_qwen" -o "$T/iq_qwen/table.md"
check iq_qwen/table.md iq_qwen/table.json
gen iq_qwen python3 plan_overlap.py "$R/iq_qwen" "$R/iq_qwen/pool-all/manifest.json" -o "$T/iq_qwen/plan_overlap.md"
check iq_qwen/plan_overlap.md iq_qwen/plan_overlap.json
# layer_profile.md names its score files as given: from the repository root, as committed.
gen iq_qwen sh -c 'cd "$1" && python3 experiments/layer_profile.py --hawq results/iq_qwen/hawq.json --manifest results/iq_qwen/pool-auto/manifest.json --layer-kld results/iq_qwen/layer_kld mse=results/iq_qwen/gamma.json mse-3x=results/iq_qwen/gamma-e3v3.json rel=results/iq_qwen/gamma-rel.step128.ckpt.json clip=results/iq_qwen/gamma-clip.json -o "$2/iq_qwen/layer_profile"' - "$root" "$T"
check iq_qwen/layer_profile.md iq_qwen/layer_profile.json
# The per-type tables are `gamma inspect POOL` over a pool's manifest and part sidecars (kept in the
# study's archive): with the C++ build only.
G=$root/build/cli/gamma
for s in iq_qwen iq_smollm2; do
  if [ -x "$G" ] && python3 kept.py cat "$R/$s/pool-all/manifest.json" > /dev/null 2>&1; then
    mkdir -p "$T/pools/$s"
    python3 - "$R/$s" "$T/pools/$s" <<'PY'
import os, sys
sys.path.insert(0, ".")
import kept
for p in kept.glob(os.path.join(sys.argv[1], "pool-all", "*.json")):
    with open(os.path.join(sys.argv[2], os.path.basename(p)), "wb") as f:
        f.write(kept._read(p))
PY
    mkdir -p "$T/$s"
    "$G" inspect "$T/pools/$s" > "$T/$s/types.md" 2> "$T/.stderr" || { echo "FAILED    gamma inspect ($s)"; fail=1; }
    check "$s/types.md"
    if [ -f "$R/$s/types.json" ]; then
      "$G" inspect "$T/pools/$s" --json > "$T/$s/types.json" 2> "$T/.stderr" || { echo "FAILED    gamma inspect --json ($s)"; fail=1; }
      check "$s/types.json"
    fi
  else
    echo "SKIPPED   results/$s/types.md (needs build/cli/gamma and $s/pool-all/ in the archive)"
  fi
done
# gamma report over the IQ sweep's plans (iq_report.sh) and over the layer-calibrated ones
# (report_cal.runs.json), against the pool manifest kept in the archive: with the C++ build only.
if [ -x "$G" ]; then
  mkdir -p "$T/iq_qwen/report" "$T/iq_qwen/report_cal"
  bash "$root/experiments/iq_report.sh" "$T/iq_qwen/report" > "$T/.stdout" 2> "$T/.stderr" || { echo "FAILED    iq_report.sh"; tail -5 "$T/.stderr"; fail=1; }
  check iq_qwen/report/table.md iq_qwen/report/report.json
  (cd "$root" && "$G" report results/iq_qwen/report_cal.runs.json -o "$T/iq_qwen/report_cal") > "$T/.stdout" 2> "$T/.stderr" || { echo "FAILED    gamma report report_cal"; fail=1; }
  check iq_qwen/report_cal/table.md iq_qwen/report_cal/report.json
  # The plan swaps: every file's evaluation is kept (evals/), so plan_swap.py measures nothing and
  # only its scorers' predictions need the build (gamma solve over the kept pool manifests).
  python3 kept.py extract "$R/iq_qwen" > /dev/null
  swap() {  # swap NAME ARGS...: plan_swap.py into $T/iq_qwen/NAME over the kept plans and evals
    local n=$1; shift
    mkdir -p "$T/iq_qwen/$n"
    ln -s "$R/iq_qwen/$n/evals" "$T/iq_qwen/$n/evals"; ln -s "$R/iq_qwen/$n/plans" "$T/iq_qwen/$n/plans"
    (cd "$root" && python3 experiments/plan_swap.py --work results/iq_qwen -o "$T/iq_qwen/$n" "$@" \
       --scorer GAMMA results/iq_qwen/pool-auto "--scores results/iq_qwen/gamma-d64k.json --transform delta-fit" \
       --scorer HAWQ-V2 results/iq_qwen/pool-all "--scores results/iq_qwen/hawq.json") > "$T/.stdout" 2> "$T/.stderr" \
      || { echo "FAILED    plan_swap.py $n"; tail -5 "$T/.stderr"; fail=1; }
    check "iq_qwen/$n/swap.md" "iq_qwen/$n/swap.json"
  }
  swap swap_Q3_K_M --a results/iq_qwen/plans/gammad-d64k-size-Q3_K_M-fit-o4e2.json \
    --b results/iq_qwen/plans/hawq-size-Q3_K_M-o4e2.json --groups attn_q attn_k attn_v ffn_gate+ffn_down ffn_gate ffn_down \
    blk.1.ffn_gate+blk.3.ffn_gate blk.6.ffn_gate+blk.19.ffn_down blk.0.ffn_gate+blk.1.ffn_down+blk.24.ffn_down \
    --test 'A<-B[blk.1.ffn_gate+blk.3.ffn_gate]' 'A<-B[ffn_gate+ffn_down]'
  swap swap_IQ3_XS --a results/iq_qwen/plans/gammad-d64k-size-IQ3_XS-fit-o4e2.json \
    --b results/iq_qwen/plans/hawq-size-IQ3_XS-hc.json --groups attn_q+attn_k+attn_v+attn_output ffn_gate+ffn_up+ffn_down \
    blk.1.ffn_down+blk.1.ffn_gate+blk.1.ffn_up+blk.2.ffn_gate+blk.3.ffn_down+blk.3.ffn_gate+blk.3.ffn_up \
    blk.5.ffn_down+blk.13.ffn_down+blk.27.ffn_down+blk.13.ffn_gate+blk.14.ffn_gate+blk.15.ffn_gate+blk.16.ffn_gate+blk.18.ffn_gate+blk.5.ffn_gate+blk.7.ffn_gate+blk.15.ffn_up+blk.18.ffn_up+blk.4.ffn_up
else
  echo "SKIPPED   results/iq_qwen/report/, report_cal/, swap_*/ (need build/cli/gamma)"
fi
gen iq_smollm2 python3 iq_tables.py "$R/iq_smollm2" -o "$T/iq_smollm2/table.md"
check iq_smollm2/table.md iq_smollm2/table.json
gen zeroshot_qwen python3 zeroshot_table.py "$R/zeroshot_qwen" -o "$T/zeroshot_qwen/table.md"
check zeroshot_qwen/table.md zeroshot_qwen/table.json
gen speed_model/goal python3 speed_goal_table.py "$R/speed_model/goal" -o "$T/speed_model/goal/table.md"
check speed_model/goal/table.md speed_model/goal/table.json
for s in speed_qwen speed_qwen_bpw speed_smollm2; do
  gen . python3 speed_table.py "$R/$s.json" -o "$T/$s.md"
  check "$s.md"
done
# scripts/crash_test.py's own table writer, loaded without running the script (it needs a build).
gen . python3 - "$root/scripts/crash_test.py" "$R/crash_consistency.json" "$T/crash_consistency.md" <<'PY'
import ast, json, os, sys
from pathlib import Path
src = open(sys.argv[1]).read()
fn = next(f for f in ast.parse(src).body if isinstance(f, ast.FunctionDef) and f.name == "write_markdown")
ns = {"os": os, "Path": Path}
exec(compile(ast.Module([fn], []), sys.argv[1], "exec"), ns)
ns["write_markdown"](json.load(open(sys.argv[2])), sys.argv[3])
PY
check_prefix crash_consistency.md

# sweep_qwen/table.md: gamma report over the sweep's kept plans and evals; its llama.cpp rows' bpw
# are read from the mixes, rebuilt from the teacher (not kept: SWEEP_MIXES=DIR, experiments/sweep_report.sh).
if [ -x "$G" ] && [ -n "${SWEEP_MIXES:-}" ]; then
  mkdir -p "$T/sweep_qwen"
  MIXES=$SWEEP_MIXES bash "$root/experiments/sweep_report.sh" "$T/sweep_qwen" > "$T/.stdout" 2> "$T/.stderr" || { echo "FAILED    sweep_report.sh"; fail=1; }
  check sweep_qwen/table.md sweep_qwen/report.json
else
  echo "SKIPPED   results/sweep_qwen/table.md (needs the build and SWEEP_MIXES: experiments/sweep_report.sh)"
fi

# token_energy.md reads Stage I's activation cache of calib-learn.txt (1.4 GB, not kept; its command
# in results/README.md): checked when that cache is here.
C=${GAMMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gamma}/activations/b30b14a4146149726adbe41e
if [ -f "$C/meta.json" ]; then
  gen iq_qwen python3 token_energy.py "$C" --seqs 4 -o "$T/iq_qwen/token_energy"
  check iq_qwen/token_energy.md iq_qwen/token_energy.json
else
  echo "SKIPPED   results/iq_qwen/token_energy.md (needs the activation cache $C; its command: results/README.md)"
fi

# results/fuzz.md's table is experiments/fuzz_table.py's output (the prose around it is by hand).
python3 fuzz_table.py "$R/fuzz.json" > "$T/fuzz_table.md" 2> "$T/.stderr" || { echo "FAILED    fuzz_table.py"; fail=1; }
contains() { python3 -c 'import sys; sys.exit(0 if open(sys.argv[1]).read().strip() in open(sys.argv[2]).read() else 1)' "$1" "$2"; }
if contains "$T/fuzz_table.md" "$R/fuzz.md"; then echo "same      results/fuzz.md (its table)"; else echo "DIFFERS   results/fuzz.md (its table)"; cat "$T/fuzz_table.md"; fail=1; fi
python3 fuzz_table.py --runs 'round 1 (`fuzz_gguf_header.json`)='"$R/fuzz_gguf_header.json" \
  'round 2, same corpus (`fuzz_gguf_header_round2.json`)='"$R/fuzz_gguf_header_round2.json" > "$T/fuzz_h.md" 2> "$T/.stderr" || { echo "FAILED    fuzz_table.py --runs"; fail=1; }
if contains "$T/fuzz_h.md" "$R/fuzz_gguf_header.md"; then echo "same      results/fuzz_gguf_header.md (its table)"; else echo "DIFFERS   results/fuzz_gguf_header.md (its table)"; cat "$T/fuzz_h.md"; fail=1; fi

# results/README.md's sweep tables are experiments/sweep_tables.py's output, block by block.
python3 sweep_tables.py "$R/sweep_qwen" > "$T/sweep_tables.md" 2> "$T/.stderr" || { echo "FAILED    sweep_tables.py"; tail -5 "$T/.stderr"; fail=1; }
python3 - "$T/sweep_tables.md" "$R/README.md" <<'PY' || fail=1
import sys
out, readme = open(sys.argv[1]).read(), open(sys.argv[2]).read()
blocks = [b.strip("\n") for b in out.split("\n\n") if b.strip()]
bad = [b for b in blocks if b not in readme]
for b in blocks:
    print(("same      " if b not in bad else "DIFFERS   ") + "results/README.md (issue 8's sweep): " + b.splitlines()[0][:70])
for b in bad:
    print("--- not in results/README.md:\n" + b)
sys.exit(1 if bad else 0)
PY

# results/README.md's tables written by hand: the line above each names its sources (<!-- rows: ... -->
# or <!-- numbers: ... -->) and every number in it must be one of theirs, read from what was just
# regenerated here where that exists (the rule: experiments/readme_numbers.py's header).
python3 readme_numbers.py --regenerated "$T" || fail=1

cat <<'EOF'

Not regenerable from results/ alone (kept as committed):
  results/iq_qwen/types-quiet.{md,json}  the sweep pool's per-type table as measured then (commit 52f75a7; its part
                                         sidecars were not kept): the quiet pool seconds
  results/README.md's other tables       written by hand: checked number by number (readme_numbers.py, above)
                                         against the files the marker line above each names
EOF
echo
if [ $fail = 0 ]; then echo "tables.sh: every regenerated table equals the committed one"; else echo "tables.sh: differences above"; fi
exit $fail
