# Writes results/degrid_smollm2/width.md (+ .json): the de-gridded teacher's perplexity by
# --dither-width, beside the source's (16 x 512 of each test text). The width-1 teacher and the
# source are the ladder's evals (ladder/evals/teacher.*, ladder/evals/SOURCE.*); the narrower
# ones come from
#   gamma dequantize --dither 1 --dither-width W SmolLM2-135M-Instruct.Q4_1.gguf -o tW.gguf
#   gamma eval tW.gguf --text wiki.test.raw (python-eval.txt) --chunks 16 -o width/pplW.{wiki,py}.json
#   python3 experiments/degrid_width.py results/degrid_smollm2 [-o results/degrid_smollm2/width.md]
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kept  # noqa: E402
from table_out import dir_and_out, emit_table  # noqa: E402

d, out = dir_and_out()


def ppl(path):
    e = kept.load_json(path)["perplexity"]
    return e["ppl"], e["ppl_stderr"]


rows = [("source (SmolLM2-135M-Instruct.Q4_1.gguf)", "ladder/evals/SmolLM2-135M-Instruct.Q4_1.{}.json"),
        ("de-gridded, width 0.25", "width/ppl0.25.{}.json"), ("de-gridded, width 0.5", "width/ppl0.5.{}.json"),
        ("de-gridded, width 1 (the teacher of record)", "ladder/evals/teacher.{}.json")]
lines = ["| model | PPL wiki.test | PPL python-eval |", "|---|---|---|"]
obj = []
for name, pat in rows:
    w, p = ppl(os.path.join(d, pat.format("wiki"))), ppl(os.path.join(d, pat.format("py")))
    lines.append(f"| {name} | {w[0]:.3f} ± {w[1]:.3f} | {p[0]:.3f} ± {p[1]:.3f} |")
    obj.append({"model": name, "wiki": w, "py": p})
emit_table(lines, {"rows": obj}, out)
