#!/usr/bin/env python3
"""The table of experiments/converge_study.sh: Stage I with --converge TOL against the full
schedule (scores-0.json) on one run's pool: steps run, Stage I seconds, measurements per layer,
the modules whose type changes in the raw-delta (gamma) and layer-calibrated (gamma-cal) plans,
and gamma compare's paired KLD (converged - full) where a plan changed.
Usage: converge_table.py STUDY_DIR TOL... -o TABLE.md   (reads through kept.py)"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kept  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("study")
    ap.add_argument("tols", nargs="+")
    ap.add_argument("-o", required=True)
    a = ap.parse_args()
    d = a.study
    rows = ["| --converge | steps run | Stage I seconds | measurements per layer | gamma plan: modules changed | "
            "gamma-cal plan: modules changed | paired KLD, converged - full (16 x 512) |",
            "|---|---|---|---|---|---|---|"]
    for t in ["0"] + a.tols:
        s = kept.load_json(f"{d}/scores-{t}.json")
        n = sorted(set(m["delta_n"] for m in s["modules"].values() if "delta_n" in m))
        changed, pairs = [], []
        for v in ["gamma", "gamma-cal"]:
            x = kept.load_json(f"{d}/plan-0-{v}.json")["modules"]
            y = kept.load_json(f"{d}/plan-{t}-{v}.json")["modules"]
            changed.append(str(sum(x[k] != y[k] for k in x)))
            for text in ["wiki.test.raw", "python-eval.txt"]:
                p = f"{d}/compare-{t}-{v}-{text}.json"
                if kept.exists(p):
                    c = kept.load_json(p)["a_minus_b"]  # a = the full schedule's plan
                    pairs.append(f"{v} {text} {-c['mean']:+.5f} ± {c['stderr']:.5f}")
        rows.append(f"| {'off (the full schedule)' if t == '0' else t} | {s['final']['steps_run']} of {s['final']['steps']} | "
                    f"{s['stats']['seconds']:.1f} | {n[0]}-{n[-1]} | {changed[0]} | {changed[1]} | "
                    f"{'; '.join(pairs) or 'the same plans'} |")
    os.makedirs(os.path.dirname(os.path.abspath(a.o)), exist_ok=True)
    with open(a.o, "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
