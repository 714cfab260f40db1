# Writes results/degrid_*/ladder.md (+ .json): llama.cpp's standard mixes against one teacher,
# smallest to largest, from experiments/teacher_ladder.sh's evals: file bytes, KLD vs the teacher
# and perplexity on wiki.test.raw and python-eval.txt (16 x 512 each).
#   python3 experiments/teacher_ladder.py OUT [-o results/STUDY/ladder.md]
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kept  # noqa: E402
from table_out import dir_and_out, emit_table  # noqa: E402

d, out = dir_and_out()
names = sorted({os.path.basename(p)[: -len(".wiki.json")] for p in kept.glob(os.path.join(d, "evals", "*.wiki.json"))})


def ev(name, t):
    p = os.path.join(d, "evals", f"{name}.{t}.json")
    return kept.load_json(p) if kept.exists(p) else None


def size(name):
    p = os.path.join(d, "evals", f"{name}.bytes")
    if kept.exists(p):
        return int(kept.read_text(p))
    e = ev(name, "wiki")
    return e["model"]["file_bytes"] if e else 0


rows = []
for n in names:
    w, p = ev(n, "wiki"), ev(n, "py")
    if not w or not p:
        continue
    row = {"name": n, "file_bytes": size(n)}
    for t, e in (("wiki", w), ("py", p)):
        row[t] = {"ppl": e["perplexity"]["ppl"], "ppl_stderr": e["perplexity"]["ppl_stderr"]}
        if "kld" in e:
            row[t].update(kld=e["kld"]["mean"], kld_stderr=e["kld"]["stderr"], top1=e["kld"]["top1"])
    rows.append(row)
rows.sort(key=lambda r: (r["name"] != "teacher", r["file_bytes"]))


def cell(r, t):
    x = r[t]
    k = f"{x['kld']:.4f} ± {x['kld_stderr']:.4f}" if "kld" in x else "–"
    return f"{k} | {x['ppl']:.3f}"


lines = ["| file | bytes | KLD wiki.test | PPL wiki.test | KLD python-eval | PPL python-eval |", "|---|---|---|---|---|---|"]
for r in rows:
    lines.append(f"| {r['name']} | {r['file_bytes']:,} | {cell(r, 'wiki')} | {cell(r, 'py')} |")
lines.append("")
lines.append("(KLD vs the teacher, 16 × 512 tokens of each text, the same chunks for every file; the mixes built by "
             "the vendored llama-quantize from the teacher with its imatrix.)")
emit_table(lines, {"rows": rows}, out)
