#!/usr/bin/env python3
# Produces: results/calib_qwen/table.{md,json}.
"""The calibration study's tables (experiments/calib_study.sh): KLD vs the teacher of every
measured file on the validation texts (wiki.valid.tokens, the held-back end of python-calib.txt;
8 x 512 each, what chooses) and the test texts (wiki.test.raw, python-eval.txt; 16 x 512, what is
reported); and how alike Stage I's measured deltas are when learned on each text (Spearman over
modules of each one's Q4_K -> Q2_K loss change, and against HAWQ-V2's predicted one).
Usage: calib_tables.py results/calib_qwen [--hawq results/iq_qwen/hawq.json] [-o results/calib_qwen/table]"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rank_stats import loss_change, spearman_matrix  # noqa: E402
import kept  # noqa: E402

TEXTS = [("wv", "wiki.valid"), ("pv", "python valid"), ("wiki", "wiki.test"), ("py", "python-eval")]
CALIBS = ["prose", "code", "both"]
ROWS = [  # (eval name pattern, what)
    ("imx-{c}-llama-Q2_K", "llama.cpp Q2_K, imatrix on {c}"),
    ("imx-{c}-llama-Q3_K_M", "llama.cpp Q3_K_M, imatrix on {c}"),
    ("imx-{c}-static-size-Q2_K-o5e2", "static proxy at Q2_K's size (K pool, imatrix on {c})"),
    ("learn-{c}-gammad-size-Q2_K-o5e2", "GAMMA at Q2_K's size (Stage I on {c}; K pool, imatrix on both)"),
]


def load(d, name, tag):
    p = os.path.join(d, "evals", f"{name}.{tag}.json")
    if not kept.exists(p):
        return None
    e = kept.load_json(p)
    return {"mean": e["kld"]["mean"], "stderr": e["kld"]["stderr"], "bytes": e["model"]["file_bytes"],
            "chunks": e["perplexity"]["chunks"]}


def delta_agreement(d, hawq):
    """Spearman between the runs' per-module Q4_K -> Q2_K loss changes (and HAWQ-V2's)."""
    changes = {f"Stage I on {c}": loss_change(os.path.join(d, f"learn-{c}.json"))
               for c in CALIBS if kept.exists(os.path.join(d, f"learn-{c}.json"))}
    if len(changes) < 2:
        return None
    if hawq:
        changes["HAWQ-V2"] = loss_change(hawq, hawq=True)
    names, common, rho = spearman_matrix(changes)
    return {"modules": len(common), "names": names, "spearman": rho}

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--hawq", help="HAWQ-V2 scores over the same modules (the deltas compared to its)")
    ap.add_argument("-o", "--out", help="write OUT.md and OUT.json")
    a = ap.parse_args()
    rows, md = [], []
    md.append("| file | calibration | bytes | " + " | ".join(t for _, t in TEXTS) + " | valid sum |")
    md.append("|---|---|---|" + "---|" * (len(TEXTS) + 1))
    for pat, what in ROWS:
        best = None
        group = []
        for c in CALIBS:
            name = pat.format(c=c)
            cells = {tag: load(a.dir, name, tag) for tag, _ in TEXTS}
            if not any(cells.values()):
                continue
            v = [cells[t]["mean"] for t in ("wv", "pv") if cells[t]]
            vsum = sum(v) if len(v) == 2 else None
            group.append((c, name, cells, vsum))
            if vsum is not None and (best is None or vsum < best):
                best = vsum
        for c, name, cells, vsum in group:
            size = next((x["bytes"] for x in cells.values() if x), None)
            row = {"name": name, "what": what.format(c=c), "calibration": c, "bytes": size, "valid_sum": vsum,
                   "chosen_on_validation": vsum is not None and vsum == best,
                   "kld": {tag: cells[tag] for tag, _ in TEXTS}}
            rows.append(row)
            fmt = lambda x: "–" if x is None else f"{x['mean']:.4f} ± {x['stderr']:.4f}"
            mark = " **(chosen)**" if row["chosen_on_validation"] else ""
            md.append(f"| {what.format(c=c)} | {c}{mark} | {size:,} | "
                      + " | ".join(fmt(cells[t]) for t, _ in TEXTS)
                      + f" | {'–' if vsum is None else f'{vsum:.4f}'} |")
    agreement = delta_agreement(a.dir, a.hawq)
    if agreement:
        md.append("")
        md.append("Stage I's measured loss change Q4_K -> Q2_K per module: Spearman over the modules")
        md.append("")
        md.append("| | " + " | ".join(agreement["names"]) + " |")
        md.append("|---|" + "---|" * len(agreement["names"]))
        for r, row in zip(agreement["names"], agreement["spearman"]):
            md.append(f"| {r} | " + " | ".join(f"{x:.3f}" for x in row) + " |")
    text = "\n".join(md) + "\n"
    print(text, end="")
    if a.out:
        with open(a.out + ".md.tmp", "w") as f:
            f.write(text)
        os.replace(a.out + ".md.tmp", a.out + ".md")
        with open(a.out + ".json.tmp", "w") as f:
            json.dump({"schema": "gamma.calib_study", "version": 1, "rows": rows,
                       "delta_agreement": agreement}, f, indent=1)
        os.replace(a.out + ".json.tmp", a.out + ".json")


if __name__ == "__main__":
    main()
