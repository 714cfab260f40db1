#!/usr/bin/env python3
# Issue 47's goal table on the de-gridded teacher beside today's (the gridded teacher's,
# results/iq_qwen/goal_table.json), size by size: GAMMA's validation-chosen file, HAWQ-V2's and the
# static proxy's best, and the mix the size is named after, KLD on wiki.test.raw / python-eval.txt
# (16 x 512), with the differences of GAMMA's file from each. De-gridded: paired per chunk. Gridded:
# paired against HAWQ-V2 where that table paired them; otherwise only the two means and their
# per-token errors are on record (the files are gone), so the difference's error is the unpaired
# one and, because per-token errors understate per-chunk ones, also that error widened by the
# largest ratio of a paired error to the unpaired one measured in the de-gridded rows.
# Reads the run's per-size summaries (RUN/run-*.json, from go.sh's work directory or
# state.tar.xz unpacked) and writes Markdown to stdout.
#   python3 beside.py RUN_DIR [GRIDDED_TABLE.json] > beside.md
import glob
import json
import os
import sys

run_dir = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
gridded_json = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "../../iq_qwen/goal_table.json")
ORDER = ["IQ2_M", "Q2_K_S", "Q2_K", "IQ3_XXS", "IQ3_XS", "Q3_K_S", "IQ3_S", "IQ3_M", "Q3_K_M"]
TEXTS = ("wiki", "py")


def texts(row):  # a de-gridded summary row as {text: (mean, per-token error)}
    return {"wiki": (row["kld_mean"], row["kld_stderr"]), "py": (row["also"][0]["kld_mean"], row["also"][0]["kld_stderr"])}


def mark(mean, err):
    return " **below**" if mean + 2 * err < 0 else (" above" if mean - 2 * err > 0 else "")


def diff(mean, err):
    return f"{mean:+.4f} ± {err:.4f}{mark(mean, err)}"


def means(t):
    return f"{t['wiki'][0]:.4f} / {t['py'][0]:.4f}"


def unpaired_err(a, b, t):
    return (a[t][1] ** 2 + b[t][1] ** 2) ** 0.5


degrid, ratio = {}, 0.0
for f in glob.glob(os.path.join(run_dir, "run-*.json")):
    j = json.load(open(f))
    size = j["target"]["size"]
    best = {s["scorer"]: s for s in j["scorer_bests"]}
    mix = next((m for m in j["mixes"] if m["label"] == "llama.cpp " + size), None)
    if mix is None or not all(k in best for k in ("hawq", "static")):
        continue
    gamma = texts(j["rows"][0])
    degrid[size] = {"gamma": gamma, "mix": texts(mix), "chosen": j["chosen"]["name"]}
    for k in ("hawq", "static"):
        pairs = dict(zip(TEXTS, best[k]["paired_gamma_minus"]))
        degrid[size][k] = texts(best[k])
        degrid[size][k + "-d"] = " / ".join(diff(pairs[t]["mean"], pairs[t]["stderr"]) for t in TEXTS)
        ratio = max([ratio] + [pairs[t]["stderr"] / unpaired_err(gamma, degrid[size][k], t) for t in TEXTS])


def unpaired(a, b):  # a minus b from the two means; the error as measured (x1) and widened (x ratio)
    return "unpaired: " + " / ".join(
        f"{a[t][0] - b[t][0]:+.4f} ± {unpaired_err(a, b, t):.4f} (x{ratio:.2f}: {ratio * unpaired_err(a, b, t):.4f})"
        f"{mark(a[t][0] - b[t][0], ratio * unpaired_err(a, b, t))}" for t in TEXTS)


gridded = {}
for r in json.load(open(gridded_json))["rows"]:
    if r["size"] not in ORDER:
        continue
    g = {k: {t: tuple(r[k][t]) for t in TEXTS} for k in ("GAMMA", "HAWQ-V2", "static", "mix")}
    ph = r.get("paired_vs_hawq", {}).get("GAMMA")
    vs_hawq = " / ".join(diff(ph[t]["mean"], ph[t]["stderr"]) for t in TEXTS) if ph else unpaired(g["GAMMA"], g["HAWQ-V2"])
    gridded[r["size"]] = [means(g[k]) for k in ("GAMMA", "HAWQ-V2", "static", "mix")] + [vs_hawq, unpaired(g["GAMMA"], g["static"])]

print("| size | teacher | GAMMA | HAWQ-V2 | static proxy | llama.cpp mix | GAMMA − HAWQ-V2 | GAMMA − static |")
print("|---|---|---|---|---|---|---|---|")
for size in ORDER:
    if size in degrid:
        d = degrid[size]
        print(f"| {size} | de-gridded | **{means(d['gamma'])}** ({d['chosen']}) | {means(d['hawq'])} | "
              f"{means(d['static'])} | {means(d['mix'])} | {d['hawq-d']} | {d['static-d']} |")
    else:
        print(f"| {size} | de-gridded | not yet measured | | | | | |")
    if size in gridded:
        print(f"| | gridded | {' | '.join(gridded[size])} |")
print()
print("KLD vs each run's own teacher, wiki.test.raw / python-eval.txt, 16 x 512 (the same chunks for every "
      "file of a teacher). De-gridded differences are paired: the mean per-chunk difference ± its standard error, "
      "wiki / python. The gridded table paired GAMMA with HAWQ-V2 only where the two were close; its other "
      "differences are unpaired: the two means, the error from their per-token errors, and that error widened "
      f"{ratio:.2f}x, the largest ratio of a paired error to the unpaired one in the de-gridded rows above "
      "(per-token errors understate per-chunk ones). **below** / above: beyond two errors (the widened one "
      "where unpaired).")
