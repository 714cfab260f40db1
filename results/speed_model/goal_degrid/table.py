#!/usr/bin/env python3
# Issue 45's goal table on the de-gridded teacher from go.sh's outputs: at each mix's size the mix,
# gamma's validation-chosen file without a speed budget (free) and the same scorer and head held to
# the mix's speed (speed): bytes, tg128 / pp512 predicted and measured (llama-bench, the same rounds),
# KLD on both test texts (16 x 512, the same chunks), paired per chunk against the mix, and whether
# the file dominates the mix: no larger, no slower in decode (measured), lower KLD on both texts
# (beyond two paired errors).
#   python3 table.py W > table.md        (W: go.sh's directory, default /work/runs/speed-degrid)
import glob
import json
import os
import sys

W = sys.argv[1] if len(sys.argv) > 1 else "/work/runs/speed-degrid"
R, D = W + "/run", "/work/runs/degrid-goal/run"
ORDER = ["IQ2_M", "Q2_K_S", "Q2_K", "IQ3_XXS", "IQ3_XS", "Q3_K_S", "IQ3_S", "IQ3_M", "Q3_K_M"]
TEXTS = ("wiki.test", "python-eval")


def evals(pattern):  # {text: its evaluation's kld}; pattern names the JSON with {t} for the text
    return {t: json.load(open(pattern.format(t=t)))["kld"] for t in TEXTS}


def paired(a, b):
    d = [x - y for x, y in zip(a["chunk_means"], b["chunk_means"])]
    m = sum(d) / len(d)
    se = (sum((x - m) ** 2 for x in d) / (len(d) - 1) / len(d)) ** 0.5
    return m, se


rows, verdicts = [], []
for mix in ORDER:
    bench_file = f"{W}/goal/{mix}-bench.json"
    if not (os.path.exists(bench_file) and all(os.path.exists(f"{W}/goal/{mix}-speed.{t}.json") for t in TEXTS)):
        continue
    bench = json.load(open(bench_file))["files"]
    mix_b, free_b, speed_b = bench
    free_stem = os.path.join(D, os.path.basename(free_b["file"])[: -len(".gguf")])
    files = [("llama.cpp " + mix, mix_b, evals(f"{R}/llama-{mix}.report-{{t}}-c512-n16.json")),
             ("gamma, no speed budget", free_b, evals(free_stem + ".report-{t}-c512-n16.json")),
             ("gamma --min-decode " + mix + ".gguf", speed_b, evals(f"{W}/goal/{mix}-speed.{{t}}.json"))]
    base = files[0][2]
    for label, b, ev in files:
        p = "" if ev is base else " / ".join(f"{m:+.4f} ± {s:.4f}" for m, s in (paired(ev[t], base[t]) for t in TEXTS))
        rows.append(f"| {mix} | {label} | {b['bytes']:,} | {b['predicted_tg128']:.2f} | {b['tg128']:.2f} | "
                    f"{b['predicted_pp512']:.1f} | {b['pp512']:.1f} | "
                    + " | ".join(f"{ev[t]['mean']:.4f} ± {ev[t]['stderr']:.4f}" for t in TEXTS) + f" | {p} |")
    for label, b, ev in files[1:]:
        fails = []
        if b["bytes"] > mix_b["bytes"]:
            fails.append("larger")
        if b["tg128"] < mix_b["tg128"]:
            fails.append(f"slower ({b['tg128'] / mix_b['tg128']:.3f}x)")
        for t in TEXTS:
            m, s = paired(ev[t], base[t])
            if not m + 2 * s < 0:
                fails.append(f"KLD not lower on {t}")
        verdicts.append(f"| {mix} | {label} | {b['tg128'] / mix_b['tg128']:.3f}x | "
                        + ("**yes**" if not fails else "no: " + ", ".join(fails)) + " |")

print("| size of | file | bytes | tg128 predicted | tg128 | pp512 predicted | pp512 | KLD wiki.test | KLD python-eval "
      "| paired − mix (wiki / python) |")
print("|---|---|---|---|---|---|---|---|---|---|")
print("\n".join(rows))
print()
print("| size of | file | tg128 / mix's (measured) | dominates the mix (no larger, no slower, lower KLD on both) |")
print("|---|---|---|---|")
print("\n".join(verdicts))
