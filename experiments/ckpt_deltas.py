#!/usr/bin/env python3
"""A Stage I run under way, against finished scores: the running means of its measured loss
changes (the checkpoint's dsum / dn, `gamma learn --measure-every`) ranked against another
scores file's deltas and HAWQ-V2's predictions, Spearman over the modules measured so far of the
Q4_K -> Q2_K loss change (experiments/rank_stats.py).

  ckpt_deltas.py SCORES.json.ckpt POOL/manifest.json OTHER_SCORES.json HAWQ.json
"""
import json
import sys

from rank_stats import loss_change, spearman


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: ckpt_deltas.py SCORES.json.ckpt POOL/manifest.json OTHER_SCORES.json HAWQ.json")
    ck, man = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
    ids = {m["name"]: [c["id"] for c in m["candidates"]] for m in man["modules"]}
    run = {}
    for m in ck["modules"]:
        if m.get("dn", 0) > 0:
            d = dict(zip(ids[m["name"]], (s / m["dn"] for s in m["dsum"])))
            run[m["name"]] = d["Q2_K"] - d["Q4_K"]
    other, hawq = loss_change(sys.argv[3]), loss_change(sys.argv[4], hawq=True)
    common = sorted(set(run) & set(other) & set(hawq))
    rho = lambda a, b: spearman([a[n] for n in common], [b[n] for n in common])
    print(f"step {ck['step']}: {len(common)} modules, at least {min(m['dn'] for m in ck['modules'] if m.get('dn', 0) > 0)} "
          f"measurements each")
    print(f"Spearman, this run vs {sys.argv[3]}: {rho(run, other):.4f}")
    print(f"Spearman vs HAWQ-V2: this run {rho(run, hawq):.4f}, {sys.argv[3]} {rho(other, hawq):.4f}")


if __name__ == "__main__":
    main()
