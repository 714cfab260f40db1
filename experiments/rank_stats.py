# Produces no result: rank and paired statistics shared by the table generators.
"""Spearman's rank correlation and the paired difference of per-chunk KLDs, shared by the
experiment scripts (no SciPy on the CI image), and the per-module loss changes Stage I's ablation
tables compare with it."""
import json
import math
import statistics


def ranks(v):  # average ranks for ties
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2
        i = j + 1
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    var = sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)
    return cov / math.sqrt(var) if var > 0 else 0.0  # a constant ranking says nothing


def paired_diff(x, y):
    """(mean, stderr) over paired items of x - y (e.g. two files' KLDs on the same chunks)."""
    d = [p - q for p, q in zip(x, y)]
    n = len(d)
    m = sum(d) / n
    sd = (sum((v - m) ** 2 for v in d) / (n - 1)) ** 0.5
    return m, sd / n ** 0.5


def loss_change(scores, hawq=False):
    """Per module of a scores file, the Q4_K -> Q2_K loss change: measured (Stage I's delta) or
    HAWQ-V2's predicted one (its scores are -loss)."""
    mods = json.load(open(scores))["modules"]
    if hawq:
        return {n: m["score"]["Q4_K"] - m["score"]["Q2_K"] for n, m in mods.items()}
    return {n: m["delta"]["Q2_K"] - m["delta"]["Q4_K"] for n, m in mods.items()}


def spearman_matrix(changes):
    """{name: {module: value}} -> the names, the modules all share, Spearman between every pair."""
    names = list(changes)
    common = sorted(set.intersection(*(set(v) for v in changes.values()))) if changes else []
    rho = [[spearman([changes[a][m] for m in common], [changes[b][m] for m in common]) for b in names] for a in names]
    return names, common, rho
