#!/usr/bin/env python3
# Produces: results/iq_qwen/goal_table.{md,json}.
"""Issue 19's goal, size by size: GAMMA (the variant with the lowest validation KLD among every
GAMMA variant measured on validation at that size, named) against HAWQ-V2, the static proxy and
llama.cpp's mix, KLD vs the teacher on both test texts, from results/iq_qwen/ (iq_sweep.sh).

A family's variant is an allocator's choice at that size (plans/ALLOC-size-SIZE.choice: its head
and transform, chosen on validation); among a family's allocators the one with the lowest
validation sum (wiki.valid + held-back python, evals/*.wv/pv.json) is the family's file. An
allocator without validation evals at a size is only taken when it is the family's only one.
The blend (gammab*: gamma solve --blend, Stage I's deltas with HAWQ-V2's) is not GAMMA alone and
has its own column and verdict.
"Below" means below on both test texts; "tie" means within one standard error (the larger of the
two) on a text where it is not below.
Paired columns (where both files' evals carry kld.chunk_means, experiments/paired_evals.sh): the
mean over the 16 test chunks of (GAMMA's chunk KLD - HAWQ-V2's) with its standard error, which
cancels what the chunks share (their difficulty); |mean| > 2 errors is marked as a difference
(the JSON has mean / stderr as `errors`).

  goal_table.py results/iq_qwen [-o results/iq_qwen/goal_table.md]
"""
import os

from pick import valid_sum
from rank_stats import paired_diff
from table_out import dir_and_out, emit_table
import kept

# GAMMA's variants over the full pool: Stage I runs (gammad*, not the binary / ternary candidate
# sets), their layer-calibrated scores (experiments/layer_calibrate.py: *-cal) and the native
# layer scale (gammal-TAG-LOW: gamma solve --layer-scale).
FAMILIES = {
    "GAMMA": lambda a: (a.startswith("gammad") and a not in ("gammad-bin", "gammad-ter")) or a.startswith("gammal-")
    or (a.startswith("gamma-") and a.endswith("-cal")),
    # Stage I's deltas blended with HAWQ-V2's (gamma solve --blend): not GAMMA alone, so its own column.
    "blend": lambda a: a.startswith("gammab"),
    "HAWQ-V2": lambda a: a == "hawq",
    "static": lambda a: a == "static",
}
SIZES = ["IQ2_M", "bpw2.75", "Q2_K", "IQ3_XXS", "bpw3.0", "bpw3.25", "IQ3_XS", "bpw3.5", "Q3_K_S", "IQ3_S", "IQ3_M",
         "Q3_K_M"]


def ev(d, name, t):
    p = os.path.join(d, "evals", f"{name}.{t}.json")
    if not kept.exists(p):
        return None
    j = kept.load_json(p)
    return j["kld"]["mean"], j["kld"]["stderr"]


def chunks(d, name, t):
    p = os.path.join(d, "evals", f"{name}.{t}.json")
    return kept.load_json(p)["kld"].get("chunk_means") if kept.exists(p) else None


def paired(d, a, b, t):
    """(mean, stderr) over the chunks of a's chunk KLD - b's, or None without both chunk lists."""
    x, y = chunks(d, a, t), chunks(d, b, t)
    if not x or not y or len(x) != len(y):
        return None
    return paired_diff(x, y)


def paired_cell(p):
    if p is None:
        return "–"
    m, se = p
    mark = " **below**" if m < -2 * se else " above" if m > 2 * se else ""
    return f"{m:+.4f} ± {se:.4f}{mark}"


def main():
    d, out = dir_and_out()
    lines = ["| size | GAMMA (variant chosen on validation) | HAWQ-V2 | static proxy | llama.cpp mix | GAMMA below all on both texts? "
             "| GAMMA × HAWQ-V2 blend | blend below all? |",
             "|---|---|---|---|---|---|---|---|"]
    plines = ["| size | GAMMA − HAWQ-V2, wiki.test | GAMMA − HAWQ-V2, python-eval | blend − HAWQ-V2, wiki.test "
              "| blend − HAWQ-V2, python-eval |", "|---|---|---|---|---|"]
    rows = []
    for size in SIZES:
        choices = {}
        for c in kept.glob(os.path.join(d, "plans", f"*-size-{size}.choice")):
            alloc = os.path.basename(c)[: -len(f"-size-{size}.choice")]
            choices[alloc] = kept.read_text(c).strip()
        row = {"size": size}
        for fam, member in FAMILIES.items():
            cands, untested = [], []
            for alloc, n in choices.items():
                if not member(alloc):
                    continue
                if ev(d, n, "wiki") is None or ev(d, n, "py") is None:
                    # iq_sweep.sh NO_TEST=1: validated only. Skipping it would silently hand the
                    # pick to the runner-up, so it may only be skipped when validation ranks it below.
                    if valid_sum(d, n) is not None:
                        untested.append((valid_sum(d, n), alloc, n))
                    continue
                cands.append((valid_sum(d, n), alloc, n))
            with_val = [x for x in cands if x[0] is not None]
            pick = min(with_val) if with_val else (cands[0] if len(cands) == 1 else None)
            if untested and (pick is None or pick[0] is None or min(untested)[0] < pick[0]):
                raise SystemExit(f"goal_table.py: {min(untested)[2]} is {fam}'s validation pick at {size} but has "
                                 f"no test evals; run iq_sweep.sh without NO_TEST for it")
            if pick:
                row[fam] = {"allocator": pick[1], "variant": pick[2], "valid_sum": pick[0],
                            "wiki": ev(d, pick[2], "wiki"), "py": ev(d, pick[2], "py"), "candidates": len(cands)}
        if not size.startswith("bpw"):
            row["mix"] = {"variant": f"llama-{size}", "wiki": ev(d, f"llama-{size}", "wiki"), "py": ev(d, f"llama-{size}", "py")}
        if "GAMMA" not in row:
            continue
        def verdict_of(g):
            out = []
            for other in ("HAWQ-V2", "static", "mix"):
                if other not in row or row[other]["wiki"] is None:
                    continue
                for t in ("wiki", "py"):
                    gk, ok = g[t], row[other][t]
                    if gk[0] < ok[0]:
                        continue
                    out.append(f"{'tie' if gk[0] - ok[0] <= max(gk[1], ok[1]) else 'above'} {other} on {t}")
            return out
        verdict = verdict_of(row["GAMMA"])
        row["verdict"] = verdict
        pcells = []
        for fam in ("GAMMA", "blend"):
            for t in ("wiki", "py"):
                p = paired(d, row[fam]["variant"], row["HAWQ-V2"]["variant"], t) if fam in row and "HAWQ-V2" in row else None
                if p:
                    row.setdefault("paired_vs_hawq", {}).setdefault(fam, {})[t] = {
                        "mean": p[0], "stderr": p[1], "errors": p[0] / p[1] if p[1] else None}
                pcells.append(paired_cell(p))
        size_label = size.replace('bpw', '') + (' bpw' if size.startswith('bpw') else '')
        if any(c != "–" for c in pcells):
            plines.append(f"| {size_label} | " + " | ".join(pcells) + " |")
        if "blend" in row:
            row["blend_verdict"] = verdict_of(row["blend"])
        rows.append(row)

        def cell(fam):
            if fam not in row or row[fam]["wiki"] is None:
                return "–"
            r = row[fam]
            s = f"{r['wiki'][0]:.4f} / {r['py'][0]:.4f}"
            return s + (f" ({r['variant']})" if fam in ("GAMMA", "blend") else "")
        lines.append(f"| {size.replace('bpw', '') + (' bpw' if size.startswith('bpw') else '')} | {cell('GAMMA')} | "
                     f"{cell('HAWQ-V2')} | {cell('static')} | {cell('mix')} | "
                     f"{'yes' if not verdict else '; '.join(verdict)} | {cell('blend')} | "
                     f"{'–' if 'blend' not in row else 'yes' if not row['blend_verdict'] else '; '.join(row['blend_verdict'])} |")
    lines += ["", "(wiki.test.raw / python-eval.txt, 16 × 512 each, KLD vs the F32 teacher; errors in the eval JSONs.)"]
    if len(plines) > 2:
        lines += ["", "Paired on the same 16 test chunks (mean of the per-chunk KLD difference ± its standard error; "
                  "**below** / above: beyond 2 errors):", ""] + plines
    emit_table(lines, {"schema": "gamma.goal_table", "version": 1, "rows": rows}, out)


if __name__ == "__main__":
    main()
