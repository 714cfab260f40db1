#!/usr/bin/env python3
"""Would racing gamma run's variants choose the same file (issue 44, "comparisons that cost what
they tell")? For each `gamma run` size directory (W/at-BYTES) with its variants' validation evals
(*.valid-*-cC-nN.json, gamma eval's chunk means), the race: every variant scored on the first c
chunks of each validation text (their mean KLDs summed), the best K kept and scored on all N, the
least of those chosen, against the choice on all N. Prints one row per (directory, c, K): the same
choice or not, the chosen variants' full scores, and the share of chunk evaluations the race spends.
Usage: race_sim.py AT_DIR... [-c 1 2 4] [-k 2 3 4] [-o OUT.md]"""
import argparse
import glob
import json
import os


def variants(d):
    out = {}
    for p in glob.glob(os.path.join(d, "*.valid-*.json")):
        name, text = os.path.basename(p).split(".valid-", 1)
        j = json.load(open(p))
        out.setdefault(name, {})[text] = j["kld"]["chunk_means"]
    # only variants measured on every text, all with the same chunk count
    texts = set.union(*(set(v) for v in out.values())) if out else set()
    return {k: v for k, v in out.items() if set(v) == texts}


def score(v, c):
    return sum(sum(ch[:c]) / len(ch[:c]) for ch in v.values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("-c", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("-k", type=int, nargs="+", default=[2, 3, 4])
    ap.add_argument("-o")
    a = ap.parse_args()
    rows = ["| run size | variants | chunks raced | kept | same choice | race's choice (full score) | full choice (full score) | chunk evals spent |",
            "|---|---|---|---|---|---|---|---|"]
    for d in a.dirs:
        vs = variants(d)
        if len(vs) < 4:
            continue
        n = min(len(ch) for v in vs.values() for ch in v.values())
        full = {k: score(v, n) for k, v in vs.items()}
        best = min(full, key=full.get)
        for c in a.c:
            for k in a.k:
                raced = sorted(vs, key=lambda x: score(vs[x], c))[:k]
                pick = min(raced, key=full.get)
                spent = (len(vs) * c + k * n) / (len(vs) * n)
                rows.append(f"| {d} | {len(vs)} | {c} of {n} | {k} | {'yes' if pick == best else 'NO'} | {pick} ({full[pick]:.5f}) | "
                            f"{best} ({full[best]:.5f}) | {100 * spent:.0f} % |")
    text = "\n".join(rows) + "\n"
    if a.o:
        open(a.o, "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
