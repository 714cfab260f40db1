#!/usr/bin/env bash
# Which tests the sanitizer pass can run in the time CI has left.
#   ci_select.sh COST_DATA SECONDS_LEFT JOBS
# COST_DATA is the release pass's CTestCostData.txt (ctest's own record: name, runs, seconds).
# Prints nothing when every test fits (run them all); else a ctest -R regex of the cheapest
# tests that fit ("NONE" when none does), and names the ones left out on stderr.
#
# Why: CI has 90 minutes on whatever machine the session had. On this project's Xeon the whole
# script takes about 35 minutes with ccache warm; on the slower EPYC one stop's CI ran out of
# time before the sanitizer pass began (its release tests at about 2x the Xeon's seconds).
# Each test is priced at SLOWDOWN x its release time (ASan+UBSan measured 0.4-4.4x per test,
# 1.7x over the suite, on the Xeon), run JOBS at a time.
set -euo pipefail
cost=$1 left=$2 jobs=$3
slowdown=${SANITIZER_SLOWDOWN:-2}
[ -f "$cost" ] || { echo "ci_select: no $cost: every test" >&2; exit 0; }
awk -v left="$left" -v jobs="$jobs" -v k="$slowdown" '
  /^---/ { exit }
  NF == 3 { name[++n] = $1; t[n] = $3 * k }
  END {
    total = 0
    for (i = 1; i <= n; i++) total += t[i]
    if (total / jobs <= left) exit
    # cheapest first: they are the most tests per second
    for (i = 1; i <= n; i++) order[i] = i
    for (i = 2; i <= n; i++) { j = i; while (j > 1 && t[order[j - 1]] > t[order[j]]) { x = order[j]; order[j] = order[j - 1]; order[j - 1] = x; j-- } }
    sum = 0; re = ""; kept = 0; out = ""
    for (i = 1; i <= n; i++) {
      m = order[i]
      if ((sum + t[m]) / jobs <= left) { sum += t[m]; kept++; q = name[m]; gsub(/\./, "\\.", q); re = re (re == "" ? "" : "|") q }
      else out = out " " name[m]
    }
    printf "sanitizer pass: %d of %d tests fit the %d s CI has left (priced at %gx their release times); left out:%s\n", kept, n, left, k, out > "/dev/stderr"
    print (kept == 0 ? "NONE" : "^(" re ")$")
  }' "$cost"
