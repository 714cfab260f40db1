#!/usr/bin/env python3
# Produces: results/iq_qwen/token_energy.{md,json}.
"""Issue 19: where the teacher's hidden-state energy sits, per layer boundary, on Stage I's
calibration cache (gamma's activation cache: h<B>.bin, F16, n_seq x seq_len x n_embd).

For each boundary B (0: embeddings, B: output of layer B-1) over the first SEQS sequences:
the mean squared norm of each sequence's first token and of the other tokens, the share of
the total energy in the top 1 % of tokens, and in the largest single dimension. The layer
MSE of Stage I (--layer-loss mse) weighs every element alike, so where one token holds most
of the energy, its error is most of the loss; --layer-loss rel divides it out.
  python3 experiments/token_energy.py CACHE_DIR [--seqs 4] -o results/iq_qwen/token_energy
"""
import argparse
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from table_out import emit_table  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cache")
    ap.add_argument("--seqs", type=int, default=4)
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    meta = json.load(open(os.path.join(a.cache, "meta.json")))
    E, L = meta["n_embd"], meta["n_layer"]
    T = meta["settings"]["seq_len"]
    rows = []
    for b in range(L + 1):
        with open(os.path.join(a.cache, f"h{b}.bin"), "rb") as f:
            buf = f.read(a.seqs * T * E * 2)
        v = struct.unpack(f"<{a.seqs * T * E}e", buf)
        n2, dim = [], [0.0] * E
        for t in range(a.seqs * T):
            s = 0.0
            for i, x in enumerate(v[t * E:(t + 1) * E]):
                xx = x * x
                s += xx
                dim[i] += xx
            n2.append(s)
        tot = sum(n2)
        first = sum(n2[s * T] for s in range(a.seqs)) / a.seqs
        rest = (tot - first * a.seqs) / (a.seqs * (T - 1))
        top = sorted(n2, reverse=True)[:max(1, len(n2) // 100)]
        rows.append({"boundary": b, "first_token_sq_norm": first, "other_tokens_sq_norm": rest,
                     "ratio": first / rest, "top1pct_token_share": sum(top) / tot, "max_dim_share": max(dim) / tot})
    lines = [f"Teacher hidden-state energy per layer boundary (first {a.seqs} calibration sequences of {T} "
             f"tokens, cache {meta['key']}; `python3 experiments/token_energy.py`)", "",
             "| boundary | first token |h|^2 | other tokens |h|^2 | ratio | top 1 % tokens' share | largest dim's share |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['boundary']} | {r['first_token_sq_norm']:.3g} | {r['other_tokens_sq_norm']:.3g} | "
                     f"{r['ratio']:.3g} | {r['top1pct_token_share']:.3f} | {r['max_dim_share']:.3f} |")
    emit_table(lines, {"schema": "gamma.token_energy", "version": 1, "cache": meta["key"], "seqs": a.seqs,
                       "seq_len": T, "rows": rows}, a.out + ".md")

if __name__ == "__main__":
    main()
