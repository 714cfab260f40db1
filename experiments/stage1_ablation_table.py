#!/usr/bin/env python3
# Produces: results/iq_qwen/warm_start.{md,json}, results/iq_qwen/score_reuse.{md,json}.
"""Issue 19's Stage I ablations on Qwen, each a table of files at equal bytes (o4e2 head):
validation sum (wiki.valid + held-back python, 8 x 512 each), wiki.test / python-eval (16 x 512)
KLD vs the teacher, how many modules each plan sets unlike HAWQ-V2's, and how alike the runs'
per-module Q4_K -> Q2_K loss changes are (Spearman; HAWQ-V2's predicted ones beside them).
Every GAMMA file is Stage I's raw deltas layer-scaled by `gamma layers` (allocator
gammal-TAG-Q2_K of experiments/iq_sweep.sh), the clip recipe (337 steps, deltas measured every
3rd step).
  warm  (item 5): from the uniform start (gamma-clip.json) vs from HAWQ-V2's plan at 3.25 bpw
        (gamma-clip-hawq.json, `gamma learn --init-plan`, p = 0.5 on its type).
  reuse (item 3): learned once at 3.25 bpw and re-solved vs learned at the size's own budget
        (gamma-clip-b2.75.json at 2.75 bpw).

  stage1_ablation_table.py results/iq_qwen warm [--sizes Q2_K IQ3_XS] [-o results/iq_qwen/warm_start.md]
  stage1_ablation_table.py results/iq_qwen reuse --sizes bpw2.75 [-o results/iq_qwen/score_reuse.md]
"""
import argparse
import os

from rank_stats import loss_change, spearman_matrix
from table_out import emit_table
import kept

STUDIES = {  # rows (what, eval name) and the Stage I runs whose deltas are compared
    "warm": {"rows": [("HAWQ-V2 (the start)", "hawq-size-{s}-o4e2"),
                      ("HAWQ-V2, layer-scaled", "hawq-cal-size-{s}-o4e2"),
                      ("GAMMA from the uniform start", "gammal-clip-Q2_K-size-{s}-o4e2"),
                      ("GAMMA from HAWQ-V2's plan", "gammal-clip-hawq-Q2_K-size-{s}-o4e2")],
             "runs": {"uniform start": "gamma-clip.json", "HAWQ-V2 start": "gamma-clip-hawq.json"}},
    "reuse": {"rows": [("HAWQ-V2", "hawq-size-{s}-o4e2"),
                       ("GAMMA learned at 3.25 bpw, re-solved", "gammal-clip-Q2_K-size-{s}-o4e2"),
                       ("GAMMA learned at 2.75 bpw", "gammal-clip-b2.75-Q2_K-size-{s}-o4e2")],
              "runs": {"learned at 3.25": "gamma-clip.json", "learned at 2.75": "gamma-clip-b2.75.json"}},
}


def kld(d, name, tag):
    p = os.path.join(d, "evals", f"{name}.{tag}.json")
    if not kept.exists(p):
        return None
    e = kept.load_json(p)["kld"]
    return {"mean": e["mean"], "stderr": e["stderr"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("study", choices=sorted(STUDIES))
    ap.add_argument("--sizes", nargs="+", default=["Q2_K", "IQ3_XS"])
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    fmt = lambda x: "–" if x is None else f"{x['mean']:.4f} ± {x['stderr']:.4f}"
    lines = ["| size | allocator | validation sum | wiki.test | python-eval | modules unlike HAWQ-V2's plan |",
             "|---|---|---|---|---|---|"]
    study = STUDIES[a.study]
    out = {"schema": "gamma.stage1_ablation", "version": 1, "study": a.study, "rows": []}
    for s in a.sizes:
        ref = os.path.join(a.dir, "plans", f"hawq-size-{s}-o4e2.json")
        ph = kept.load_json(ref)["modules"] if kept.exists(ref) else None
        for what, pat in study["rows"]:
            n = pat.format(s=s)
            c = {t: kld(a.dir, n, t) for t in ("wv", "pv", "wiki", "py")}
            if not any(c.values()):
                continue
            vsum = c["wv"]["mean"] + c["pv"]["mean"] if c["wv"] and c["pv"] else None
            plan = os.path.join(a.dir, "plans", n + ".json")
            differ = None
            if ph and kept.exists(plan):
                p = kept.load_json(plan)["modules"]
                differ = sum(p[k] != ph[k] for k in p)
            out["rows"].append({"size": s, "allocator": what, "name": n, "valid_sum": vsum,
                                "kld": c, "modules_unlike_hawq": differ})
            lines.append(f"| {s} | {what} | {'–' if vsum is None else f'{vsum:.4f}'} | {fmt(c['wiki'])} | "
                         f"{fmt(c['py'])} | {'–' if differ is None else differ} |")
    runs = {k: os.path.join(a.dir, f) for k, f in study["runs"].items()}
    ch = {k: loss_change(p) for k, p in runs.items() if kept.exists(p)}
    hq = os.path.join(a.dir, "hawq.json")
    if kept.exists(hq):
        ch["HAWQ-V2"] = loss_change(hq, hawq=True)
    names, common, rho = spearman_matrix(ch)
    out["delta_spearman"] = {"names": names, "modules": len(common), "rho": rho}
    lines += ["", f"Per-module Q4_K -> Q2_K loss change, Spearman over {len(common)} modules:", "",
              "| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines += [f"| {x} | " + " | ".join(f"{v:.3f}" for v in row) + " |" for x, row in zip(names, rho)]
    emit_table(lines, out, a.out)


if __name__ == "__main__":
    main()
