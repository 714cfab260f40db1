#!/usr/bin/env python3
# Produces: results/iq_qwen/head_choice_table.{md,json}.
"""Issue 19: the head gamma solve --choose-head picks (variant "hc", iq_sweep.sh CHOOSE_HEAD) against
the hand-picked heads (FIXED variants) validation chose among, per allocator and size: the types,
the validation KLD sums (wiki.valid + held-back python, 8 x 512 each) and whether hc is the same
file as one of them.

  head_choice_table.py results/iq_qwen [-o results/iq_qwen/head_choice_table.md]
"""
import os

from table_out import dir_and_out, emit_table
import kept


def val(d, n):
    fs = [os.path.join(d, "evals", f"{n}.{t}.json") for t in ("wv", "pv")]
    return sum(kept.load_json(f)["kld"]["mean"] for f in fs) if all(map(kept.exists, fs)) else None


def main():
    d, out = dir_and_out()
    lines = ["| allocator | size | head chosen by the solver (output, embedding) | its validation sum | best hand-picked head, validation sum | same file? |",
             "|---|---|---|---|---|---|"]
    rows = []
    for p in sorted(kept.glob(os.path.join(d, "plans", "*-size-*-hc.json"))):
        n = os.path.basename(p)[:-5]
        alloc, rest = n.split("-size-")
        size, label = rest.split("-", 1)
        prefix = label[: -len("hc")]  # "" or "fit-"
        plan = kept.load_json(p)
        hc = (plan["fixed"]["output.weight"], plan["fixed"]["token_embd.weight"])
        key = (plan["modules"], plan["fixed"])
        others = []
        for q in kept.glob(os.path.join(d, "plans", f"{alloc}-size-{size}-{prefix}*.json")):
            o = os.path.basename(q)[:-5]
            if o == n or o[len(f"{alloc}-size-{size}-{prefix}"):].startswith(("fit-", "k-")) or val(d, o) is None:
                continue
            qp = kept.load_json(q)
            others.append((val(d, o), o, (qp["modules"], qp["fixed"]) == key))
        if not others or val(d, n) is None:
            continue
        best = min(others)
        same = [o for _, o, eq in others if eq]
        rows.append({"allocator": alloc, "size": size, "hc": n, "head": hc, "hc_valid": val(d, n), "best_fixed": best[1],
                     "best_fixed_valid": best[0], "same_as": same[0] if same else None})
        lines.append(f"| {alloc}{' (fit)' if prefix else ''} | {size} | {hc[0]}, {hc[1]} | {val(d, n):.4f} | "
                     f"{best[1][len(f'{alloc}-size-{size}-{prefix}'):]}: {best[0]:.4f} | {same[0][len(f'{alloc}-size-{size}-{prefix}'):] if same else 'no'} |")
    wins = sum(r["hc_valid"] <= r["best_fixed_valid"] + 1e-12 for r in rows)
    lines += ["", f"The solver's head is at or below the best hand-picked one on validation in {wins} of {len(rows)} cases "
              "(hand-picked: o4e2 = output Q4_K, embedding Q2_K; o5e3 = Q5_K, IQ3_S; oi4e2 = IQ4_XS, Q2_K; o3e2 = Q3_K, Q2_K)."]
    emit_table(lines, {"schema": "gamma.head_choice_table", "version": 1, "rows": rows}, out)


if __name__ == "__main__":
    main()
