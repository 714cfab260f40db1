#!/usr/bin/env python3
# Produces: results/iq_qwen/search_table.{md,json}.
"""Issue 24 item 2: gamma search against HAWQ-V2 and GAMMA at equal wall time and equal bytes
(llama.cpp Q2_K's file size, Qwen2.5-Coder-1.5B; KLD vs the F32 teacher, 16 x 512 chunks of
wiki.test.raw and python-eval.txt, the same chunks for every file).

The search starts from the static plan with the o5e2 head (output Q5_K, token_embd Q2_K) and
keeps that head, so the first block compares every allocator with that head; the second gives
each allocator's validation-chosen variant (its .choice file) as the sweep reports it.
  python3 experiments/search_table.py [-o results/iq_qwen/search_table]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from table_out import emit_table  # noqa: E402
import kept  # noqa: E402

R = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results", "iq_qwen")


def kld(name, text):
    p = os.path.join(R, "evals", f"{name}.{text}.json")
    if not kept.exists(p):
        return None
    d = kept.load_json(p)
    return {"mean": d["kld"]["mean"], "stderr": d["kld"]["stderr"], "file_bytes": d["model"]["file_bytes"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    hawq_s = kept.load_json(os.path.join(R, "hawq.json"))["stats"]["seconds"]
    gamma_s = kept.load_json(os.path.join(R, "gamma.json"))["stats"]["seconds"]
    start_calib = kept.load_json(os.path.join(R, "evals", "static-size-Q2_K-o5e2.search-calib.json"))["kld"]["mean"]
    rows = [("static proxy (the search's start)", "static-size-Q2_K-o5e2", 0.0, start_calib)]
    for f in sorted(kept.glob(os.path.join(R, "plans", "search-size-Q2_K-*s.state.json")),
                    key=lambda f: kept.load_json(f)["seconds"]):
        st = kept.load_json(f)
        name = os.path.basename(f)[:-len(".state.json")]
        limit = name[len("search-size-Q2_K-"):-1]
        rows.append((f"search, limit {limit} s ({st['generation']} generations, {st['evaluations']} evaluations)",
                     name, st["seconds"], st["parent_kld"]))
    rows += [("HAWQ-V2", "hawq-size-Q2_K-o5e2", hawq_s, None), ("GAMMA (measured deltas)", "gammad-size-Q2_K-o5e2", gamma_s, None)]
    chosen = []
    for alloc, label, secs in (("static", "static proxy", 0.0), ("hawq", "HAWQ-V2", hawq_s), ("gammad", "GAMMA", gamma_s)):
        n = kept.read_text(os.path.join(R, "plans", f"{alloc}-size-Q2_K.choice")).strip()
        chosen.append((f"{label}, validation-chosen ({n.split('size-Q2_K-')[1]})", n, secs, None))
    chosen.append(("llama.cpp Q2_K (llama-quantize, same teacher + imatrix)", "llama-Q2_K", None, None))
    lines = ["gamma search vs HAWQ-V2 and GAMMA at llama.cpp Q2_K's size (752,880,576 bytes), Qwen2.5-Coder-1.5B; "
             "KLD vs the F32 teacher (the Q4_K_M source dequantized), 16 x 512 chunks; "
             "`python3 experiments/search_table.py`", "",
             "| allocator | scoring wall | bytes | calibration KLD (search fitness, 4 x 512) | wiki.test KLD | python-eval KLD |",
             "|---|---|---|---|---|---|"]
    out = []

    def fmt(k):
        return "—" if k is None else f"{k['mean']:.4f} ± {k['stderr']:.4f}"

    for block, title in ((rows, "same head (o5e2: output Q5_K, token_embd Q2_K), the search's"), (chosen, "each allocator's validation-chosen variant")):
        lines.append(f"| *{title}* | | | | | |")
        for label, name, secs, calib in block:
            w, p = kld(name, "wiki"), kld(name, "py")
            b = (w or p or {}).get("file_bytes")
            lines.append(f"| {label} | {'—' if secs is None else f'{secs:.0f} s'} | {b:,} | "
                         f"{'—' if calib is None else f'{calib:.4f}'} | {fmt(w)} | {fmt(p)} |")
            out.append({"allocator": label, "name": name, "seconds": secs, "file_bytes": b, "calib_kld": calib,
                        "wiki": w, "py": p})
    emit_table(lines, {"schema": "gamma.search_table", "version": 1, "rows": out}, a.out + ".md" if a.out else None)


if __name__ == "__main__":
    main()
