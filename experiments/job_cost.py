#!/usr/bin/env python3
"""Issue 44: where a `gamma run` spent its time, against what it estimated, from its run.json (or
sweep.json's runs): each stage's measured seconds and the estimate it printed, grouped as the dry run
groups them, and the ratio. Optional: a disk samples file (one byte count per line, e.g. `du -sb W`
every 15 s) and a cache samples file ("EPOCH BYTES" lines of gamma's cache) for the peak disk.
--project W,L,N (the run's model: weights, linear weights, layers) adds each group's cost per unit it
scales with and the projection for Llama-3.1-8B and a 70B model on 2 and 16 cores (docs/scale.md);
--learn SCORES.json splits Stage I into its steps (weights) and the rest, the window made (linear weights);
--layers-cut F prices gamma layers as files cut before their layer (layers/layers.h): the run's
measured layers time times F (the cut files' time over the whole files', measured on the same
machine: results/layers_cut_qwen/), per weight x whole-file equivalent, 1 + (n_layer + 1) / 2 of them.
Usage: job_cost.py RUN.json [RUN.json...] [--disk SAMPLES] [--cache SAMPLES] [--project W,L,N
       [--learn SCORES.json] [--layers-cut F]] [-o OUT.md]"""
import argparse
import json
import re

GROUPS = [  # (group, pattern on the stage's name), first match wins
    ("fetch + dequantize -> teacher", r"^(fetch|dequantize)"),
    ("llama-imatrix", r"^llama-imatrix"),
    ("estimate", r"^estimate"),
    ("hawq traces (on the estimate)", r"^hawq traces"),
    ("pool", r"^pool"),
    ("hawq (rescore)", r"^hawq"),
    ("learn (Stage I)", r"^learn"),
    ("layers", r"^layers"),
    ("variants: solve + emit", r"^solve \+ emit [^ ]+ at [0-9.]+ [KMG]iB|^emit (?!.* at .*'s size)"),
    ("mixes: llama-quantize", r"^llama-quantize"),
    ("front: solve + emit", r"'s size"),
    ("evals: mixes", r"^eval llama-"),
    ("evals: front", r"^eval front-"),
    ("evals: variants and gamma's file", r"^eval "),
]


def group_of(name):
    for g, pat in GROUPS:
        if re.search(pat, name):
            return g
    return "other"


# What each group's time scales with ("w": weights, "lin": linear weights, "wf": weights x the
# files gamma layers evaluates, n_layer + 1) and its 16-core / 2-core factor, measured on a 16-core
# Xeon with llama.cpp's tools (results/scale_16_cores/: imatrix 5.47, quantize 5.11 Q4_K to 6.40
# IQ2_XS, perplexity 5.29); LibTorch's passes (HAWQ-V2, Stage I's steps) were not measured there
# and take ggml's 5.5.
UNITS = {
    "fetch + dequantize -> teacher": ("w", 5.5), "llama-imatrix": ("w", 5.47), "estimate": ("lin", 6.2),
    "hawq traces (on the estimate)": ("w", 5.5), "pool": ("lin", 6.2), "hawq (rescore)": ("w", 5.5),
    "learn (Stage I): window + MSE passes": ("lin", 6.2), "learn (Stage I): steps": ("w", 5.5),
    "learn (Stage I)": ("w", 5.5), "layers": ("wf", 5.29), "variants: solve + emit": ("w", 5.3),
    "mixes: llama-quantize": ("w", 5.8), "front: solve + emit": ("w", 5.3), "evals: mixes": ("w", 5.29),
    "evals: front": ("w", 5.29), "evals: variants and gamma's file": ("w", 5.29), "other": ("w", 5.3),
}
TARGETS = [("Llama-3.1-8B", 8.03e9, 6.98e9, 32), ("70B", 70.6e9, 68.4e9, 80)]


def project(tot, model, learn, layers_cut=None):
    w, lin, n = model
    size = lambda u, W, L, N: {"w": W, "lin": L, "wf": W * (N + 1), "wc": W * (1 + (N + 1) / 2)}[u] / 1e9
    t = dict((g, v[0]) for g, v in tot.items())
    if layers_cut is not None and "layers" in t:
        t["layers (cut files)"] = t.pop("layers") * layers_cut
    if learn and "learn (Stage I)" in t:
        # Stage I apart: its optimisation (the scores' stats.seconds, the steps) and the rest of the
        # stage: the window's candidates made from the source at first use, and the layer MSE
        # passes before and after the steps (priced here per linear weight, as the window).
        steps = json.load(open(learn))["stats"]["seconds"]
        t["learn (Stage I): window + MSE passes"] = t["learn (Stage I)"] - steps
        t["learn (Stage I): steps"] = steps
        del t["learn (Stage I)"]
    rows = ["| stage | measured here | per unit (s) | unit | 16/2 cores | " + " | ".join(
        f"{name}, 2 cores (h) | {name}, 16 cores (h)" for name, *_ in TARGETS) + " |",
            "|---|---|---|---|---|" + "---|---|" * len(TARGETS)]
    total = [0.0] * (2 * len(TARGETS))
    for g, sec in t.items():
        u, f = ("wc", UNITS["layers"][1]) if g == "layers (cut files)" else UNITS.get(g, UNITS["other"])
        per = sec / size(u, w, lin, n)
        cells = []
        for i, (_, W, L, N) in enumerate(TARGETS):
            two = per * size(u, W, L, N) / 3600
            total[2 * i] += two
            total[2 * i + 1] += two / f
            cells += [f"{two:.2f}", f"{two / f:.2f}"]
        unit = {"w": "10^9 weights", "lin": "10^9 linear weights", "wf": "10^9 weights x layer file",
                "wc": "10^9 weights x whole-file equivalent"}[u]
        rows.append(f"| {g} | {sec:.0f} s | {per:.1f} | {unit} | {f} | " + " | ".join(cells) + " |")
    rows.append("| **total** | | | | | " + " | ".join(f"**{x:.1f}**" for x in total) + " |")
    return rows


def runs_of(path):
    with open(path) as f:
        j = json.load(f)
    return j["sizes"] if "sizes" in j else [j]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--disk")
    ap.add_argument("--cache")
    ap.add_argument("--project")
    ap.add_argument("--learn")
    ap.add_argument("--layers-cut", type=float)
    ap.add_argument("-o")
    a = ap.parse_args()
    seen, tot = set(), {}
    for p in a.runs:
        for r in runs_of(p):
            for s in r["stages"]:
                key = (s["stage"], s["seconds"])  # a sweep's sizes repeat the shared stages
                if key in seen:
                    continue
                seen.add(key)
                g = group_of(s["stage"])
                m, e, n = tot.get(g, (0.0, 0.0, 0))
                tot[g] = (m + s["seconds"], e + s["estimate_seconds"], n + 1)
    order = [g for g, _ in GROUPS] + ["other"]
    lines = ["| stage | count | measured | estimated | measured / estimated |", "|---|---|---|---|---|"]
    hms = lambda x: f"{int(x // 3600)}:{int(x % 3600 // 60):02d}:{int(x % 60):02d}"
    M = E = 0.0
    for g in order:
        if g in tot:
            m, e, n = tot[g]
            M, E = M + m, E + e
            lines.append(f"| {g} | {n} | {hms(m)} | {hms(e)} | {m / e:.2f} |" if e > 0 else f"| {g} | {n} | {hms(m)} | - | - |")
    lines.append(f"| **total** | | **{hms(M)}** | **{hms(E)}** | **{M / E:.2f}** |")
    if a.disk:
        work = [int(x) for x in open(a.disk).read().split()]
        lines.append(f"\nwork directory at most {max(work) / 2**30:.2f} GiB ({len(work)} samples)")
    if a.cache:
        c = [int(l.split()[1]) for l in open(a.cache) if l.strip()]
        lines.append(f"gamma's cache grew by {(max(c) - c[0]) / 2**30:.2f} GiB from its first sample")
    if a.project:
        w, lin, n = a.project.split(",")
        lines += ["", "Per unit and projected (hours):", ""] + project(tot, (float(w), float(lin), int(n)), a.learn, a.layers_cut)
    out = "\n".join(lines) + "\n"
    if a.o:
        with open(a.o, "w") as f:
            f.write(out)
    print(out, end="")


if __name__ == "__main__":
    main()
