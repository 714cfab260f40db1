#!/usr/bin/env python3
# Produces: results/iq_qwen/layer_profile.{md,json}.
"""Issue 19: where each scorer puts the sensitivity, layer by layer. Per layer, the summed loss
change of moving its seven modules from Q4_K to Q2_K: Stage I's measured deltas (a SCORES.json
with "delta", or a run's checkpoint, SCORES.json.ckpt, with the pool's manifest for the
candidate ids) against HAWQ-V2's predicted ones; Spearman rho over the 196 modules.
Each measured loss has its own unit, so compare shapes (the ratio column), not values.
With --layer-kld DIR (experiments/layer_kld.sh), the measured end-to-end KLD of each layer at
Q2_K (minus the all-source file's) is the reference: Spearman over the 28 layers of each
scorer's per-layer sum against it.

  layer_profile.py --hawq HAWQ.json --manifest POOL/manifest.json [--layer-kld DIR] LABEL=FILE ... -o OUT
"""
import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rank_stats import spearman  # noqa: E402
from table_out import emit_table  # noqa: E402
import kept  # noqa: E402

CHEAP, REF = "Q2_K", "Q4_K"


def deltas(path, ids):
    """module -> candidate -> mean measured loss change, and the step it was read at."""
    j = kept.load_json(path)
    if j.get("schema") == "gamma.learn.checkpoint":
        out = {m["name"]: {c: s / m["dn"] for c, s in zip(ids[m["name"]], m["dsum"])} for m in j["modules"] if m["dn"]}
        return out, j["step"]
    return {n: m["delta"] for n, m in j["modules"].items()}, j["final"]["steps"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hawq", required=True)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--layer-kld")
    ap.add_argument("runs", nargs="+", help="LABEL=SCORES.json or LABEL=SCORES.json.ckpt")
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    ids = {m["name"]: [c["id"] for c in m["candidates"]] for m in kept.load_json(a.manifest)["modules"]}
    hawq = kept.load_json(a.hawq)["modules"]
    h = {n: m["score"][REF] - m["score"][CHEAP] for n, m in hawq.items()}
    runs = []
    for spec in a.runs:
        label, path = spec.split("=", 1)
        d, step = deltas(path, ids)
        g = {n: v[CHEAP] - v[REF] for n, v in d.items()}
        names = sorted(set(g) & set(h))
        runs.append({"label": label, "file": os.path.relpath(path), "step": step, "modules": len(names),
                     "spearman_vs_hawq": spearman([g[n] for n in names], [h[n] for n in names]), "per_module": g})
    layer = lambda n: int(n.split(".")[1])  # noqa: E731
    L = max(layer(n) for n in h) + 1
    hl = collections.Counter()
    for n, v in h.items():
        hl[layer(n)] += v
    for r in runs:
        c = collections.Counter()
        for n, v in r["per_module"].items():
            c[layer(n)] += v
        r["per_layer"] = [c[i] for i in range(L)]
    meas = None
    if a.layer_kld:
        k = lambda f: kept.load_json(os.path.join(a.layer_kld, f))["kld"]["mean"]  # noqa: E731
        base = k("base.json")
        meas = [k(f"{i}.json") - base for i in range(L)]
        for r in runs:
            r["spearman_layers_vs_measured"] = spearman(r["per_layer"], meas)
        hawq_vs_meas = spearman([hl[i] for i in range(L)], meas)
    lines = [f"Per-layer loss change Q4_K -> {CHEAP} (sum over the layer's 7 modules): Stage I's measured deltas vs "
             "HAWQ-V2's prediction, Qwen2.5-Coder-1.5B; `experiments/layer_profile.py`", "",
             "| run | file | step | Spearman vs HAWQ-V2 (196 modules) | Spearman vs measured KLD (28 layers) |",
             "|---|---|---|---|---|"]
    for r in runs:
        sm = r.get("spearman_layers_vs_measured")
        lines.append(f"| {r['label']} | `{r['file']}` | {r['step']} | {r['spearman_vs_hawq']:.3f} | "
                     f"{'—' if sm is None else f'{sm:.3f}'} |")
    if meas:
        lines.append(f"| HAWQ-V2 | `{os.path.relpath(a.hawq)}` | | | {hawq_vs_meas:.3f} |")
    lines += ["", "| layer | " + ("measured KLD | " if meas else "") + "HAWQ-V2 | " +
              " | ".join(f"{r['label']} | HAWQ / {r['label']}" for r in runs) + " |",
              "|---|" + ("---|" if meas else "") + "---|" + "---|---|" * len(runs)]
    for i in range(L):
        cells = []
        for r in runs:
            v = r["per_layer"][i]
            cells += [f"{v:.3g}", f"{hl[i] / v:.3g}" if v else "—"]
        lines.append(f"| {i} | " + (f"{meas[i]:.3g} | " if meas else "") + f"{hl[i]:.3g} | " + " | ".join(cells) + " |")
    emit_table(lines, {"schema": "gamma.layer_profile", "version": 1, "cheap": CHEAP, "ref": REF,
                       "hawq_per_layer": [hl[i] for i in range(L)], "measured_kld_per_layer": meas,
                       "runs": runs}, a.out + ".md" if a.out else None)


if __name__ == "__main__":
    main()
