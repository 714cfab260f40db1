#!/usr/bin/env python3
"""Issue 44: what choosing the pool's candidates from an estimate costs the plans, on Qwen-1.5B.

gamma run (--pool-window K, run/prune.cpp) quantizes, per module, only the candidates within K
steps (by bytes) of HAWQ-V2's plans on an estimate of the pool (errors from sampled rows) at the
sizes the run makes. This study takes the full pool of every auto type and the scores each
allocator measured on it (results/iq_qwen: HAWQ-V2, Stage I's deltas raw, fitted, layer-
calibrated and blended), and at each of llama.cpp's mix sizes solves every allocator twice:
over the whole pool and over the window alone. It reports, per window K, the share of the
pool's quantization time the window keeps (each type's measured seconds per weight, from the
pool's part sidecars), how many modules each allocator's plan changes, and what the change
costs in the allocator's own objective. The window is the one rule of solve/window.cpp,
restated here (each module: the candidates from min(index) - K to max(index) + K over the
anchor plans); --check compares it with a gamma run's pool-only.json.

The estimate's HAWQ-V2 scores are HAWQ-V2's Hessian traces (results/iq_qwen/hawq.json, the same
teacher and settings gamma run uses) times each candidate's estimated sq_err, which is what
`gamma hawq ESTIMATE` computes from the same traces.

  prune_window.py --pool POOL-ALL --estimate EST --hawq results/iq_qwen/hawq.json \\
      --scorer hawq "--scores results/iq_qwen/hawq.json" ... --steps 2 3 4 -o results/prune_qwen/window
Writes OUT.json and OUT.md.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from table_out import emit_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AUTO = ["IQ2_XXS", "IQ2_XS", "IQ2_S", "Q2_K", "IQ3_XXS", "IQ3_S", "IQ4_XS", "Q4_K", "Q4_1", "Q5_K", "Q5_1", "Q6_K", "Q8_0"]
# (label, the target, every size the window is made for): one mix size alone, then what gamma run
# does at 880MiB and at Q2_K's size (the target and the mixes it compares with: the two largest
# that fit, the smallest above; --max-mixes 2).
SIZES = [("IQ2_M", 701332416, [701332416]), ("Q2_K", 752880576, [752880576]),
         ("IQ3_XXS", 769070016, [769070016]), ("IQ3_XS", 831976896, [831976896]),
         ("IQ3_S", 862684608, [862684608]), ("IQ3_M", 876941760, [876941760]),
         ("880MiB", 922746880, [922746880]), ("Q3_K_M", 924456384, [924456384]),
         ("run --size 880MiB", 922746880, [922746880, 862684608, 876941760, 924456384]),
         ("run at Q2_K's size", 752880576, [752880576, 701332416, 769070016])]


def load(p):
    with open(p) as f:
        return json.load(f)


def solve(gamma, pool, args, size, allow, out):
    cmd = [gamma, "solve", "--pool", pool] + args.split() + ["--size", str(size), "-o", out]
    for name, types in allow.items():
        pattern = name if name == ".*" else "^" + name.replace(".", "\\.") + "$"
        cmd += ["--allow", pattern + "=" + ",".join(types)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    p = load(out)
    return p["modules"], p["info"]["objective"]


def window(est, plans, k):
    out = {}
    for m in est["modules"]:
        ids = [c["id"] for c in m["candidates"]]
        idx = [ids.index(p[m["name"]]) for p in plans]
        lo, hi = max(0, min(idx) - k), min(len(ids) - 1, max(idx) + k)
        out[m["name"]] = [m["candidates"][i]["type"] for i in range(lo, hi + 1)]
        if m["source_type"] in ids and m["source_type"] not in out[m["name"]]:
            out[m["name"]].append(m["source_type"])  # gamma run keeps the source's own bytes
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pool", required=True, help="a pool holding every auto type (its manifest and part sidecars)")
    ap.add_argument("--estimate", required=True, help="gamma pool --estimate-rows of the same model and imatrix")
    ap.add_argument("--hawq", required=True, help="HAWQ-V2 scores whose traces make the estimate's scores")
    ap.add_argument("--scorer", nargs=2, action="append", default=[], metavar=("NAME", "SOLVE_ARGS"))
    ap.add_argument("--steps", nargs="+", type=int, default=[2, 3, 4])
    ap.add_argument("--gamma", default=os.path.join(ROOT, "build/cli/gamma"))
    ap.add_argument("--seconds-from", help="a per-type table (gamma inspect POOL) whose pool s column prices the types")
    ap.add_argument("--check", help="a gamma run's work dir: its pool-only.json must equal this window")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    est = load(os.path.join(a.estimate, "manifest.json"))
    full = load(os.path.join(a.pool, "manifest.json"))
    hawq = load(a.hawq)
    # Seconds per weight of each type: the "pool s" column of a per-type table (gamma inspect POOL)
    # of a pool built with nothing else running, else the pool's own part sidecars.
    n_of = {m["name"]: m["n_params"] for m in full["modules"]}
    total_n = sum(n_of.values())
    sec = {}
    if a.seconds_from:
        for line in open(a.seconds_from):
            f = [x.strip() for x in line.split("|")]
            if len(f) > 8 and f[1] in AUTO:
                sec[f[1]] = float(f[7]) / total_n
    for t in AUTO:
        if t not in sec:
            side = load(os.path.join(a.pool, f"cand-{t}.json"))
            sec[t] = side["seconds"] / sum(n_of[n] for n in side["modules"])
    full_cost = sum(sec[c["type"]] * m["n_params"] for m in est["modules"] for c in m["candidates"])
    with tempfile.TemporaryDirectory() as tmp:
        sc = {"schema": "gamma.scores", "version": 1, "method": "hawq", "model_fingerprint": est["model"]["fingerprint"],
              "modules": {}}
        for m in est["modules"]:
            tpw = hawq["modules"][m["name"]]["trace_per_weight"]
            sc["modules"][m["name"]] = {"score": {c["id"]: -tpw * c["sq_err"] for c in m["candidates"]}}
        est_scores = os.path.join(tmp, "est-hawq.json")
        with open(est_scores, "w") as f:
            json.dump(sc, f)
        auto_allow = {".*": AUTO}
        rows, out = [], {"sizes": {}, "type_seconds_per_gweight": {t: round(sec[t] * 1e9, 1) for t in AUTO},
                         "full_pool_seconds": round(full_cost, 1)}
        for label, size, at in SIZES:
            anchors = [solve(a.gamma, a.estimate, "--scores " + est_scores, s_, {}, os.path.join(tmp, "anchor.json"))[0]
                       for s_ in at]
            base = {}
            for name, args in a.scorer:
                base[name] = solve(a.gamma, a.pool, args, size, auto_allow, os.path.join(tmp, "p.json"))
            out["sizes"][label] = {"bytes": size, "window_sizes": at, "steps": {}}
            for k in a.steps:
                w = window(est, anchors, k)
                cost = sum(sec[t] * n_of[n] for n, ts in w.items() for t in ts)
                cell = {"pool_share": round(cost / full_cost, 4), "candidates": sum(len(v) for v in w.values()), "scorers": {}}
                row = [label, str(k), f"{cost / full_cost:.0%}"]
                for name, args in a.scorer:
                    plan, obj = solve(a.gamma, a.pool, args, size, w, os.path.join(tmp, "p.json"))
                    bplan, bobj = base[name]
                    changed = sum(1 for n in plan if plan[n] != bplan[n])
                    loss = (bobj - obj) / abs(bobj) if bobj else 0.0
                    cell["scorers"][name] = {"modules_changed": changed, "objective_loss": loss}
                    row.append(f"{changed} / {100 * loss:.2f} %")
                out["sizes"][label]["steps"][str(k)] = cell
                rows.append(row)
                print(" ".join(row), flush=True)
            if a.check and label == "run --size 880MiB":
                got = load(os.path.join(a.check, "pool-only.json"))["modules"]
                same = all(sorted(got[n]) == sorted(v) for n, v in window(est, anchors, 3).items())
                out["check"] = {"work_dir": a.check, "steps": 3, "equal": same}
    head = ["size of", "window K", "pool time kept"] + [f"{n}: modules changed / objective lost" for n, _ in a.scorer]
    lines = ["Each allocator at the target over the window (K steps around HAWQ-V2's plans on a 128-row estimate at",
             "the sizes named) against the same allocator over the whole auto pool (" + f"{full_cost / 60:.0f}" +
             " min of quantizing, 2 cores), Qwen2.5-Coder-1.5B, the default head.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]
    if "check" in out:
        lines += ["", f"gamma run's pool-only.json ({out['check']['work_dir']}, K = 3 at 880MiB) equals this window: "
                  f"{out['check']['equal']}"]
    emit_table(lines, out, a.out + ".md")


if __name__ == "__main__":
    sys.exit(main())
