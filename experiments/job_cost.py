#!/usr/bin/env python3
"""Issue 44: where a `gamma run` spent its time, against what it estimated, from its run.json (or
sweep.json's runs): each stage's measured seconds and the estimate it printed, grouped as the dry run
groups them, and the ratio. Optional: a disk samples file (one byte count per line, e.g. `du -sb W`
every 15 s) and a cache samples file ("EPOCH BYTES" lines of gamma's cache) for the peak disk.
Usage: job_cost.py RUN.json [RUN.json...] [--disk SAMPLES] [--cache SAMPLES] [-o OUT.md]"""
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


def runs_of(path):
    with open(path) as f:
        j = json.load(f)
    return j["sizes"] if "sizes" in j else [j]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--disk")
    ap.add_argument("--cache")
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
    out = "\n".join(lines) + "\n"
    if a.o:
        with open(a.o, "w") as f:
            f.write(out)
    print(out, end="")


if __name__ == "__main__":
    main()
