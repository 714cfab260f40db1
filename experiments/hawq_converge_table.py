#!/usr/bin/env python3
"""The table of experiments/hawq_converge_study.sh: per setting (SAMPLES:TOL) the seconds of the
traces, the probes run per layer, the largest relative standard error of a trace, the modules whose
plan type differs from the reference's (8:0), and the paired KLD of the two files where they differ."""
import argparse
import json
import os


def load(p):
    with open(p) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("settings", nargs="+")
    ap.add_argument("-o", required=True)
    a = ap.parse_args()
    ref = load(os.path.join(a.out, "plan-8:0.json"))["modules"]
    rows = ["| setting (probes:tolerance) | traces seconds | probes per layer (mean, min-max) | worst trace error | modules changed | paired KLD, setting - reference (wiki; python) |",
            "|---|---|---|---|---|---|"]
    for st in ["8:0"] + a.settings:
        tr = load(os.path.join(a.out, f"traces-{st}.json"))
        secs = open(os.path.join(a.out, f"traces-{st}.time")).read().split()[-1]
        per_layer = {}
        worst = 0.0
        for name, m in tr["modules"].items():
            layer = name.split(".")[1]
            per_layer[layer] = len(m["trace_probes"])
            if m.get("trace_rel_stderr") is not None:
                worst = max(worst, m["trace_rel_stderr"])
        k = list(per_layer.values())
        plan = load(os.path.join(a.out, f"plan-{st}.json"))["modules"]
        changed = sum(1 for n in ref if plan.get(n) != ref[n])
        kld = "-"
        cw, cp = (os.path.join(a.out, f"compare-{st}-{t}.json") for t in ("wiki.test.raw", "python-eval.txt"))
        if os.path.exists(cw) and os.path.exists(cp):
            d = [load(c)["a_minus_b"] for c in (cw, cp)]
            # compare's a is the reference, b the setting: setting - reference = -(a - b)
            kld = "; ".join(f"{-x['mean']:+.5f} ± {x['stderr']:.5f}" for x in d)
        rows.append(f"| {st} | {float(secs):.1f} | {sum(k) / len(k):.2f} ({min(k)}-{max(k)}) | {worst:.3f} | {changed} of {len(ref)} | {kld} |")
    with open(a.o, "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
