#!/usr/bin/env python3
# Issue 47's goal table on the de-gridded teacher beside today's (the gridded teacher's,
# results/iq_qwen/goal_table.md), size by size: GAMMA's validation-chosen file, HAWQ-V2's and the
# static proxy's best, and the mix the size is named after, KLD on wiki.test.raw / python-eval.txt
# (16 x 512), with the paired differences of GAMMA's file from each (de-gridded run only: the
# gridded table paired GAMMA with HAWQ-V2 only where they were close). Reads the run's per-size
# summaries (RUN/run-*.json, from go.sh's work directory or state.tar.xz unpacked) and writes
# Markdown to stdout.
#   python3 beside.py RUN_DIR [GRIDDED_TABLE.md] > beside.md
import glob
import json
import os
import re
import sys

run_dir = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
gridded_md = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "../../iq_qwen/goal_table.md")
ORDER = ["IQ2_M", "Q2_K_S", "Q2_K", "IQ3_XXS", "IQ3_XS", "Q3_K_S", "IQ3_S", "IQ3_M", "Q3_K_M"]


def pair(row):  # "wiki / python" of a summary row
    return row["kld_mean"], row["also"][0]["kld_mean"]


def fmt(p):
    return f"{p[0]:.4f} / {p[1]:.4f}"


def paired(row):
    out = []
    for p in row["paired_gamma_minus"]:
        mark = " **below**" if p["mean"] + 2 * p["stderr"] < 0 else (" above" if p["mean"] - 2 * p["stderr"] > 0 else "")
        out.append(f"{p['mean']:+.4f} ± {p['stderr']:.4f}{mark}")
    return " / ".join(out)


degrid = {}
for f in glob.glob(os.path.join(run_dir, "run-*.json")):
    j = json.load(open(f))
    size = j["target"]["size"]
    best = {s["scorer"]: s for s in j["scorer_bests"]}
    mix = next((m for m in j["mixes"] if m["label"] == "llama.cpp " + size), None)
    if mix is None or not all(k in best for k in ("hawq", "static")):
        continue
    degrid[size] = {"gamma": j["rows"][0], "hawq": best["hawq"], "static": best["static"], "mix": mix,
                    "chosen": j["chosen"]["name"]}

gridded = {}
for line in open(gridded_md):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 8 and cells[0] in ORDER:  # the first table (the paired one has 5 columns)
        # GAMMA, HAWQ-V2, static, mix: each cell's leading "wiki / python"
        gridded[cells[0]] = [re.match(r"[0-9.]+ / [0-9.]+", c).group(0) for c in cells[1:5]]

print("| size | teacher | GAMMA | HAWQ-V2 | static proxy | llama.cpp mix | GAMMA − HAWQ-V2 (paired) | GAMMA − static (paired) |")
print("|---|---|---|---|---|---|---|---|")
for size in ORDER:
    if size in degrid:
        d = degrid[size]
        print(f"| {size} | de-gridded | **{fmt(pair(d['gamma']))}** ({d['chosen']}) | {fmt(pair(d['hawq']))} | "
              f"{fmt(pair(d['static']))} | {fmt(pair(d['mix']))} | {paired(d['hawq'])} | {paired(d['static'])} |")
    else:
        print(f"| {size} | de-gridded | not yet measured | | | | | |")
    if size in gridded:
        g = gridded[size]
        print(f"| | gridded | {g[0]} | {g[1]} | {g[2]} | {g[3]} | | |")
print()
print("KLD vs each run's own teacher, wiki.test.raw / python-eval.txt, 16 x 512 (the same chunks for every "
      "file of a teacher). Paired: the mean per-chunk difference ± its standard error, wiki / python; "
      "**below** / above: beyond two errors.")
