# Writes results/degrid_smollm2/width.md (+ .json): the de-gridded teacher's perplexity by
# --dither-width, beside the source's (16 x 512 of each test text). The width-1 teacher and the
# source are the ladder's evals (ladder/evals/teacher.*, ladder/evals/SOURCE.*); the narrower
# ones come from
#   gamma dequantize --dither 1 --dither-width W SmolLM2-135M-Instruct.Q4_1.gguf -o tW.gguf
#   gamma eval tW.gguf --text wiki.test.raw (python-eval.txt) --chunks 16 -o width/pplW.{wiki,py}.json
# and, for width 0.5, the source and llama-quantize's Q4_1 of that teacher (its own imatrix,
# llama-imatrix on the run's calib.txt, 32 x 512) against it on wiki.test.raw:
#   gamma eval SOURCE (Q4_1.gguf) --teacher t0.5.gguf --text wiki.test.raw --chunks 16 -o width/{source-vs,q4_1-of}-t0.5.wiki.json
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


def kld(path):
    p = os.path.join(d, path)
    if not path or not kept.exists(p):
        return None
    e = kept.load_json(p)["kld"]
    return e["mean"], e["stderr"]


rows = [("source (SmolLM2-135M-Instruct.Q4_1.gguf)", "ladder/evals/SmolLM2-135M-Instruct.Q4_1.{}.json", "", ""),
        ("de-gridded, width 0.25", "width/ppl0.25.{}.json", "", ""),
        ("de-gridded, width 0.5", "width/ppl0.5.{}.json", "width/source-vs-t0.5.wiki.json", "width/q4_1-of-t0.5.wiki.json"),
        ("de-gridded, width 1 (the teacher of record)", "ladder/evals/teacher.{}.json",
         "ladder/evals/SmolLM2-135M-Instruct.Q4_1.wiki.json", "ladder/evals/Q4_1.wiki.json")]
lines = ["| model | PPL wiki.test | PPL python-eval | KLD of the source vs it (wiki.test) | KLD of llama-quantize's Q4_1 of it (wiki.test) |",
         "|---|---|---|---|---|"]
obj = []
fmt = lambda k: f"{k[0]:.4f} ± {k[1]:.4f}" if k else "–"  # noqa: E731
for name, pat, src, q41 in rows:
    w, p = ppl(os.path.join(d, pat.format("wiki"))), ppl(os.path.join(d, pat.format("py")))
    ks, kq = kld(src), kld(q41)
    lines.append(f"| {name} | {w[0]:.3f} ± {w[1]:.3f} | {p[0]:.3f} ± {p[1]:.3f} | {fmt(ks)} | {fmt(kq)} |")
    obj.append({"model": name, "wiki": w, "py": p, "kld_source": ks, "kld_q4_1": kq})
emit_table(lines, {"rows": obj}, out)
