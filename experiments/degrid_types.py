# Writes results/degrid_*/types.md (+ .json): each candidate type's imatrix-weighted weight error on
# the gridded teacher (the source dequantized) beside the de-gridded one, from two
# `gamma inspect MODEL --errors --json` outputs (types-grid.json, types-dither.json in DIR or, as kept, in DIR/data.tar.xz).
#   python3 experiments/degrid_types.py results/degrid_smollm2 [-o results/degrid_smollm2/types.md]
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kept  # noqa: E402
from table_out import dir_and_out, emit_table  # noqa: E402

d, out = dir_and_out()
grid = kept.load_json(os.path.join(d, "types-grid.json"))
dith = kept.load_json(os.path.join(d, "types-dither.json"))
D = {r["type"]: r for r in dith["types"]}
# imatrix.txt in DIR, when there, says which imatrix weighted both (default: each its own).
im_note = os.path.join(d, "imatrix.txt")
imatrix = kept.read_text(im_note).strip() if kept.exists(im_note) else "each with its own imatrix"
rows, lines = [], [
    f"Mean imatrix-weighted relative error of the weights per candidate type, {grid['sampled_rows']} sampled rows per "
    "module (`gamma inspect --errors`): the source dequantized (gridded) and the de-gridded teacher "
    f"(`gamma dequantize --dither 1`), {imatrix}.",
    "",
    "| type | bpw | modules | gridded teacher | exact copies | de-gridded teacher | ratio | Pareto (gridded / de-gridded) |",
    "|---|---|---|---|---|---|---|---|",
]
for g in grid["types"]:
    x = D.get(g["type"])
    if not x:
        continue
    ratio = x["rel_err_mean"] / g["rel_err_mean"] if g["rel_err_mean"] > 0 else float("inf")
    rows.append({"type": g["type"], "bpw": g["bpw"], "modules": g["modules"], "grid": g["rel_err_mean"],
                 "exact_copies": g["exact_copies"], "dither": x["rel_err_mean"], "ratio": ratio})
    lines.append(f"| {g['type']} | {g['bpw']:.3f} | {g['modules']} | {g['rel_err_mean']:.5f} | {g['exact_copies']} | "
                 f"{x['rel_err_mean']:.5f} | {'∞' if ratio == float('inf') else f'{ratio:.2f}'} | "
                 f"{'yes' if g['type'] in grid['pareto'] else 'no'} / {'yes' if g['type'] in dith['pareto'] else 'no'} |")
emit_table(lines, {"rows": rows, "pareto_grid": grid["pareto"], "pareto_dither": dith["pareto"]}, out)
