#!/usr/bin/env python3
# Produces: results/iq_qwen/binary_table.{md,json}.
"""Issue 24 item 1: binary vs ternary candidate sets on Qwen2.5-Coder-1.5B (the paper's study).
Stage I over {IQ2_XS, Q4_K} (two candidates: the sigmoid form) and over {IQ2_XS, IQ3_XXS, Q4_K},
each learned at 3.0 bpw with the sweep's recipe (iq_sweep.sh GAMMA_TAG=bin|ter GAMMA_TYPES=...),
solved on its measured deltas (--transform delta) at 2.5 / 2.75 / 3.0 / 3.25 / 3.5 bpw with the
o4e2 head, KLD vs the teacher on both test texts (16 x 512).

  binary_table.py results/iq_qwen [-o results/iq_qwen/binary_table.md]
"""
import argparse
import os

from table_out import emit_table
import kept

SETS = [("bin", "binary {IQ2_XS, Q4_K}"), ("ter", "ternary {IQ2_XS, IQ3_XXS, Q4_K}")]
BUDGETS = ["2.5", "2.75", "3.0", "3.25", "3.5"]


def ev(d, name, t):
    p = os.path.join(d, "evals", f"{name}.{t}.json")
    if not kept.exists(p):
        return None
    j = kept.load_json(p)
    return j["model"]["file_bytes"], j["kld"]["mean"], j["kld"]["stderr"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    head = "| budget (file bytes) | " + " | ".join(f"{label}: wiki.test / python-eval" for _, label in SETS) + " |"
    lines = [head, "|---|" + "---|" * len(SETS)]
    rows = []
    for b in BUDGETS:
        row = {"bpw": float(b)}
        cells, size = [], None
        for tag, _ in SETS:
            n = f"gammad-{tag}-size-bpw{b}-o4e2"
            w, p = ev(a.dir, n, "wiki"), ev(a.dir, n, "py")
            if w is None or p is None:
                cells.append("–")
                continue
            size = w[0]
            row[tag] = {"plan": n, "file_bytes": w[0], "wiki": w[1:], "py": p[1:]}
            cells.append(f"{w[1]:.4f} ± {w[2]:.4f} / {p[1]:.4f} ± {p[2]:.4f}")
        rows.append(row)
        lines.append(f"| {b} ({size:,}) | " if size else f"| {b} | ")
        lines[-1] += " | ".join(cells) + " |"
    time = {}
    for tag, _ in SETS:
        s = os.path.join(a.dir, f"gamma-{tag}.json")
        if kept.exists(s):
            time[tag] = kept.load_json(s)["stats"]["seconds"]
    lines += ["", "Stage I wall time (s): " + ", ".join(f"{t} {v:.0f}" for t, v in time.items() if v)]
    emit_table(lines, {"schema": "gamma.binary_table", "version": 1, "rows": rows, "stage1_seconds": time}, a.out)


if __name__ == "__main__":
    main()
