#!/usr/bin/env python3
# Produces: issue 8's sweep tables in results/README.md (printed).
"""Prints the README's sweep tables (Markdown) from results/sweep_qwen/evals, so the figures
there are copied by a program, not by hand:
  1. KLD vs teacher at each llama.cpp mix's file size, per allocator;
  2. KLD at the fixed linear-bpw budgets (score reuse: GAMMA re-solved from 3.0 vs learned at
     the budget);
  3. zero-shot arc_easy / piqa accuracy per point and allocator, with the mean over the points
     every allocator of the table has (paired: the same items everywhere);
  4. the ablations at the Q3_K_M size and the uniform runs: KLD and zero-shot;
  5. Spearman rho between KLD and zero-shot accuracy over every model with both.
Usage: experiments/sweep_tables.py [RESULTS_DIR]   (default results/sweep_qwen)"""
import os
import sys

from rank_stats import spearman
import kept

R = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "results", "sweep_qwen")
E = os.path.join(R, "evals")
MIXES = ["Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M"]
BUDGETS = ["2.75", "3.0", "3.25", "3.5", "3.75", "4.0"]
LIMIT = int(os.environ.get("MC_LIMIT", 100))  # as sweep_qwen.sh


def load(name, suffix=""):
    p = os.path.join(E, f"{name}{suffix}.json")
    return kept.load_json(p) if kept.exists(p) else None


def kld(name):
    e = load(name)
    return None if e is None else (e["kld"]["mean"], e["kld"]["stderr"], e["model"]["file_bytes"] / 2**20)


def fmt_k(v, best, err=False):
    if v is None:
        return "–"
    s = f"{v[0]:.4f}" if v[0] < 0.01 else f"{v[0]:.3f}"
    if err:
        s += f" ± {v[1]:.4f}" if v[0] < 0.01 else f" ± {v[1]:.3f}"
    return f"**{s}**" if best is not None and abs(v[0] - best) < 1e-12 else s


def best_of(cells):
    vals = [c[0] for c in cells if c is not None]
    return min(vals) if vals else None


def header(first, names):
    print(f"| {first} | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")


# 1. At each mix's size.
cols = [("llama.cpp mix", "llama-{m}"), ("static proxy", "static-size-{m}"), ("HAWQ-V2", "hawq-size-{m}"),
        ("GAMMA τ→0.05, size-log", "gammasl-size-{m}"), ("GAMMA τ=1, size-log", "gammat1sl-size-{m}"),
        ("GAMMA τ→0.05, log p", "gammalogp-size-{m}")]
header("size of", [c for c, _ in cols])
for m in MIXES:
    cells = [kld(p.format(m=m)) for _, p in cols]
    if cells[0] is None:
        continue
    best = best_of(cells)
    print(f"| {m} ({cells[0][2]:.0f} MiB) | " + " | ".join(fmt_k(c, best) for c in cells) + " |")
print()

# 2. At fixed budgets.
cols = [("static proxy", "static-{b}"), ("HAWQ-V2", "hawq-{b}"),
        ("GAMMA τ→0.05, size-log, from 3.0", "gammasl-{b}"), ("GAMMA τ→0.05, size-log, learned at the budget", "gammaatsl-{b}"),
        ("GAMMA τ=1, lr 0.05, size-log, from 3.0", "gammalrsl-{b}")]
header("budget (file)", [c for c, _ in cols])
for b in BUDGETS:
    cells = [kld(p.format(b=b)) for _, p in cols]
    if all(c is None for c in cells):
        continue
    size = next(c for c in cells if c is not None)[2]
    best = best_of(cells)
    out = [fmt_k(c, best, err=i >= 2) for i, c in enumerate(cells)]
    if b == "3.0" and cells[3] is None:
        out[3] = "(= the previous column)"
    print(f"| {b} ({size:.0f} MiB) | " + " | ".join(out) + " |")
print()

# 3. Zero-shot.
methods = [("llama.cpp", "llama-{m}", None), ("static proxy", "static-size-{m}", "static-{b}"),
           ("HAWQ-V2", "hawq-size-{m}", "hawq-{b}"), ("GAMMA τ→0.05, size-log", "gammasl-size-{m}", "gammasl-{b}"),
           ("GAMMA τ→0.05, learned at the budget", None, "gammaatsl-{b}"),
           ("GAMMA τ=1, lr 0.05, size-log", None, "gammalrsl-{b}")]
points = [("at " + m, {i: (p.format(m=m) if p else None) for i, (_, p, _) in enumerate(methods)}) for m in MIXES]
points += [(b + " bpw", {i: (q.format(b=b) if q else None) for i, (_, _, q) in enumerate(methods)}) for b in BUDGETS]


def mc_names():  # every run with a zero-shot file
    return sorted(os.path.basename(f)[:-len(f".mc{LIMIT}.json")] for f in kept.glob(os.path.join(E, f"*.mc{LIMIT}.json")))


def acc(name):
    t = load(name, f".mc{LIMIT}") if name else None
    return None if t is None else (t["tasks"]["arc_easy"]["acc"], t["tasks"]["piqa"]["acc"])


def fmt_acc(a):
    return "–" if a is None else f"{a[0]:.2f} / {a[1]:.2f}"


header(f"`--limit {LIMIT}`, arc_easy / piqa acc", [n for n, _, _ in methods])
table = []
for label, names in points:
    cells = [acc(names[i]) for i in range(len(methods))]
    if all(c is None for c in cells):
        continue
    table.append(cells)
    print(f"| {label} | " + " | ".join(fmt_acc(c) for c in cells) + " |")


# Means over the points that have every allocator averaged (paired: the same items everywhere).
def means(rows, cols, label):
    full = [c for c in rows if all(c[i] is not None for i in cols)]
    if not full:
        return
    out = ["–"] * len(methods)
    for i in cols:
        out[i] = f"{sum(c[i][0] for c in full) / len(full):.3f} / {sum(c[i][1] for c in full) / len(full):.3f}"
    print(f"| mean over the {len(full)} {label} | " + " | ".join(out) + " |")


means(table, [0, 1, 2, 3], "mix sizes")
means(table, [1, 2, 3], "points of static, HAWQ, GAMMA")
# 4. Ablations at the Q3_K_M size, then the uniform runs.
ABLATIONS = [("augmented Lagrangian, τ→0.05 / size-log (the main variant)", "gammasl-size-Q3_K_M"),
             ("DNAS-style multiplicative penalty (`--penalty dnas`, β 10, γ 1), τ→0.05 / size-log", "gammadnas-size-Q3_K_M"),
             ("CE on the final logits (`--objective ce`, all layers chained, 40 steps) / size-log", "gammace-size-Q3_K_M"),
             ("augmented Lagrangian, τ→0.05 / log p", "gammalogp-size-Q3_K_M"),
             ("augmented Lagrangian, τ→0.05 / Σ p (the paper's Stage II)", "gamma-size-Q3_K_M"),
             ("τ fixed at 1 / log p", "gammatau1-size-Q3_K_M"),
             ("τ fixed at 1 / size-log", "gammat1sl-size-Q3_K_M"),
             ("τ fixed at 1, lr 0.05 (5×) / Σ p", "gammalr-size-Q3_K_M"),
             ("τ fixed at 1, lr 0.05 (5×) / log p", "gammalrlogp-size-Q3_K_M"),
             ("τ fixed at 1, lr 0.05 (5×) / size-log", "gammalrsl-size-Q3_K_M"),
             ("no learning (Stage I's starting scores) / size-log", "gammanull-size-Q3_K_M"),
             ("llama.cpp's Q3_K_M mix (reference)", "llama-Q3_K_M")]
UNIFORM = [(f"uniform {t} (every module)", f"uniform-{t}") for t in ("Q2_K", "Q3_K", "Q4_K")]

print()
header("Stage I / Stage II at the Q3_K_M size, or uniform", ["file", "KLD vs teacher", f"arc_easy / piqa acc (`--limit {LIMIT}`)"])
for label, name in ABLATIONS + UNIFORM:
    k = kld(name)
    if k is not None:
        print(f"| {label} | {k[2]:.0f} MiB | {fmt_k(k, None, err=True)} | {fmt_acc(acc(name))} |")
covered = {n for _, names in points for n in names.values() if n} | {n for _, n in ABLATIONS + UNIFORM}
other = [n for n in mc_names() if n not in covered]
if other:
    print()
    print("Other runs, arc_easy / piqa acc (names as in `evals/`: gammalogp = τ→0.05 / log p, gammat1sl = τ=1 / "
          "size-log, gammalr = τ=1, lr 0.05 / Σ p; -size-M at the size of mix M, -B at B bpw): "
          + "; ".join(f"{n} {fmt_acc(acc(n))}" for n in other) + ".")


# Does KLD show through in zero-shot at all? Spearman ρ over every model that has both.
both = [(k, acc(n)) for n in mc_names() for k in [kld(n)] if k is not None]
if len(both) > 2:
    k = [b[0][0] for b in both]
    print()
    print(f"Spearman ρ(KLD, acc) over the {len(both)} models with both: arc_easy "
          f"{spearman(k, [b[1][0] for b in both]):+.2f}, piqa {spearman(k, [b[1][1] for b in both]):+.2f}.")
