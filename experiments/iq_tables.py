#!/usr/bin/env python3
# Produces: results/iq_qwen/table.{md,json}, results/iq_smollm2/table.{md,json}.
"""Issue 18's table from results/iq_<model>/ (experiments/iq_sweep.sh): at each llama.cpp mix's
file size (and at each fixed budget of BPWS), the mix and every gamma allocator (the non-linear-tensor variant chosen on
validation text, named) with file bytes and KLD vs the teacher on both test texts.

  iq_tables.py results/iq_smollm2 [-o results/iq_smollm2/table.md]
"""
import argparse
import os

from table_out import emit_table
import kept


def kld(path):
    if not kept.exists(path):
        return None
    j = kept.load_json(path)
    return j["model"]["file_bytes"], j["kld"]["mean"], j["kld"]["stderr"]


def variants(ev, al, m):
    """Every variant of allocator AL measured at size M: {variant: {valid_sum, wiki, py}} (None where not measured)."""
    out = {}
    prefix = f"{al}-size-{m}-"
    names = {os.path.basename(f).rsplit(".", 2)[0] for f in kept.glob(os.path.join(ev, f"{prefix}*.json"))}
    for name in sorted(names):
        wv, pv, w, p = (kld(os.path.join(ev, f"{name}.{t}.json")) for t in ("wv", "pv", "wiki", "py"))
        out[name[len(prefix):]] = {"valid_sum": wv[1] + pv[1] if wv and pv else None,
                                   "wiki": w and w[1:], "py": p and p[1:]}
    return out


def cell(r):
    return "–" if r is None else f"{r[1]:.4f} ± {r[2]:.4f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    ev = os.path.join(a.dir, "evals")
    mixes = sorted({os.path.basename(f)[len("llama-"):-len(".wiki.json")]
                    for f in kept.glob(os.path.join(ev, "llama-*.wiki.json"))},
                   key=lambda m: kld(os.path.join(ev, f"llama-{m}.wiki.json"))[0])
    allocs = sorted({os.path.basename(f).split("-size-")[0] for f in kept.glob(os.path.join(a.dir, "plans", "*.choice"))})
    lines = ["| size of | bytes | allocator (variant chosen on validation) | bytes | KLD wiki.test | KLD python-eval |",
             "|---|---|---|---|---|---|"]
    out = {"schema": "gamma.iq_table", "version": 1, "rows": []}
    # Fixed budgets (iq_sweep.sh BPWS): bpwB, the file of B bpw in the linear modules with
    # llama.cpp's default non-linear types; no mix there.
    bpws = sorted(os.path.basename(f)[len("size-"):-len(".json")] for f in kept.glob(os.path.join(a.dir, "plans", "size-bpw*.json")))
    for m in mixes + bpws:
        if m.startswith("bpw"):
            b = kept.load_json(os.path.join(a.dir, "plans", f"size-{m}.json"))["info"]["predicted"]["file_bytes"]
            lines.append(f"| {m[3:]} bpw | {b:,} | (no llama.cpp mix) | | | |")
            out["rows"].append({"size_of": m, "allocator": None, "file_bytes": b})
        else:
            w, p = kld(os.path.join(ev, f"llama-{m}.wiki.json")), kld(os.path.join(ev, f"llama-{m}.py.json"))
            lines.append(f"| {m} | {w[0]:,} | llama.cpp {m} | {w[0]:,} | {cell(w)} | {cell(p)} |")
            n = kept.load_json(os.path.join(ev, f"llama-{m}.wiki.json"))["model"]["n_params"]
            out["rows"].append({"size_of": m, "allocator": "llama.cpp", "file_bytes": w[0], "file_bpw": w[0] * 8 / n,
                                "wiki": w[1:], "py": p and p[1:]})
        for al in allocs:
            choice = os.path.join(a.dir, "plans", f"{al}-size-{m}.choice")
            if not kept.exists(choice):
                continue
            name = kept.read_text(choice).strip()
            cw, cp = kld(os.path.join(ev, f"{name}.wiki.json")), kld(os.path.join(ev, f"{name}.py.json"))
            if cw is None:
                continue
            variant = name[len(f"{al}-size-{m}-"):]
            lines.append(f"| | | {al} ({variant}) | {cw[0]:,} | {cell(cw)} | {cell(cp)} |")
            out["rows"].append({"size_of": m, "allocator": al, "variant": variant, "file_bytes": cw[0],
                                "wiki": cw[1:], "py": cp and cp[1:], "variants": variants(ev, al, m)})
    emit_table(lines, out, a.out)


if __name__ == "__main__":
    main()
