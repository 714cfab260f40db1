#!/usr/bin/env python3
"""Would racing gamma run's variants choose the same file (issue 44, "comparisons that cost what
they tell")? For each `gamma run` size directory (W/at-BYTES) with its variants' validation evals
(*.valid-*-cC-nN.json, gamma eval's chunk means), the race: every variant scored on the first c
chunks of each validation text (their mean KLDs summed), the best K kept and scored on all N, the
least of those chosen, against the choice on all N. Prints one row per (directory, c, K): the same
choice or not, the chosen variants' full scores, and the share of chunk evaluations the race spends.
--rotate: the race run on every window of c consecutive chunks (cyclic) instead of the first only,
so that each directory gives N draws of the race's chunk: the rows then count the draws that chose
the full measurement's file and the mean full score given up.
--margin M: also keep every variant whose race score is within M (relative) of the K-th best.
Usage: race_sim.py AT_DIR... [-c 1 2 4] [-k 2 3 4] [--margin 0 0.05] [--rotate] [-o OUT.md]"""
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


def score(v, c, start=0):
    out = 0
    for ch in v.values():
        part = [ch[(start + i) % len(ch)] for i in range(c)]
        out += sum(part) / len(part)
    return out


def race(vs, full, c, k, margin, start):
    """The race's finalists (by its chunks' score), and the one the full score picks among them."""
    r = {x: score(vs[x], c, start) for x in vs}
    order = sorted(vs, key=r.get)
    cut = r[order[min(k, len(order)) - 1]] * (1 + margin)
    raced = [x for x in order if r[x] <= cut]
    return raced, min(raced, key=full.get)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("-c", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("-k", type=int, nargs="+", default=[2, 3, 4])
    ap.add_argument("--margin", type=float, nargs="+", default=[0.0])
    ap.add_argument("--rotate", action="store_true")
    ap.add_argument("-o")
    a = ap.parse_args()
    if a.rotate:
        rows = ["| run size | variants | chunks raced | kept | margin | draws choosing the full choice | mean full score given up | "
                "mean finalists | chunk evals spent |", "|---|---|---|---|---|---|---|---|---|"]
    else:
        rows = ["| run size | variants | chunks raced | kept | margin | same choice | race's choice (full score) | "
                "full choice (full score) | chunk evals spent |", "|---|---|---|---|---|---|---|---|---|"]
    for d in a.dirs:
        vs = variants(d)
        if len(vs) < 4:
            continue
        n = min(len(ch) for v in vs.values() for ch in v.values())
        full = {k: score(v, n) for k, v in vs.items()}
        best = min(full, key=full.get)
        for c in a.c:
            for k in a.k:
                for m in a.margin:
                    starts = range(n) if a.rotate else [0]
                    draws = [race(vs, full, c, k, m, s0) for s0 in starts]
                    kept = sum(len(r) for r, _ in draws) / len(draws)
                    spent = (len(vs) * c + kept * n) / (len(vs) * n)
                    if a.rotate:
                        same = sum(p == best for _, p in draws)
                        lost = sum(full[p] - full[best] for _, p in draws) / len(draws)
                        rows.append(f"| {d} | {len(vs)} | {c} of {n} | {k} | {m:g} | {same} of {len(draws)} | {lost:.5f} | "
                                    f"{kept:.1f} | {100 * spent:.0f} % |")
                    else:
                        pick = draws[0][1]
                        rows.append(f"| {d} | {len(vs)} | {c} of {n} | {k} | {m:g} | {'yes' if pick == best else 'NO'} | "
                                    f"{pick} ({full[pick]:.5f}) | {best} ({full[best]:.5f}) | {100 * spent:.0f} % |")
    text = "\n".join(rows) + "\n"
    if a.o:
        open(a.o, "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
