#!/usr/bin/env python3
# Produces: results/zeroshot_qwen/table.{md,json}.
"""The zero-shot table from results/zeroshot_qwen/evals/MODEL.TASK.json (experiments/zeroshot_qwen.sh):
accuracy per task (acc_norm for ARC, PIQA and HellaSwag, acc for WinoGrande and BoolQ, as
lm-eval-harness reports them) +- standard error, the average, and each model's file bytes.
Models with a task missing are shown with "–" there and no average.

Then the paired differences (PAIRS: each gamma file against the llama.cpp mix of its size, and
every quantized file against the teacher): the same items were scored for every model, so the
difference of two models' accuracies has the standard error of the per-item difference
(eval files carry `correct` / `correct_norm`, one character per item), much smaller than the
two independent errors. A difference is "inside the errors" where |d| < 2 SE.

  zeroshot_table.py results/zeroshot_qwen [-o results/zeroshot_qwen/table.md]
"""
import argparse
import math
import os

from table_out import emit_table
import kept

TASKS = [("arc_easy", "ARC-e", "acc_norm"), ("arc_challenge", "ARC-c", "acc_norm"), ("piqa", "PIQA", "acc_norm"),
         ("hellaswag", "HellaSwag", "acc_norm"), ("winogrande", "WinoGrande", "acc"), ("boolq", "BoolQ", "acc")]
ORDER = ["teacher", "uniform-Q3_K", "llama-Q2_K", "gamma-Q2_K", "llama-IQ3_XS", "gamma-IQ3_XS"]
PAIRS = [("gamma-Q2_K", "llama-Q2_K"), ("gamma-IQ3_XS", "llama-IQ3_XS")] + \
        [(m, "teacher") for m in ORDER[1:]]


def paired(ra, rb, metric):
    """(mean difference a - b, its standard error) over the items both scored, or None."""
    key = "correct" if metric == "acc" else "correct_norm"
    ca, cb = ra.get(key), rb.get(key)
    if not ca or not cb or len(ca) != len(cb) or ra.get("sha256") != rb.get("sha256"):
        return None
    d = [int(x) - int(y) for x, y in zip(ca, cb)]
    n = len(d)
    mu = sum(d) / n
    sd = math.sqrt(sum((v - mu) ** 2 for v in d) / (n - 1))
    return mu, sd / math.sqrt(n)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    res = {}
    for f in kept.glob(os.path.join(a.dir, "evals", "*.json")):
        model, task = os.path.basename(f)[:-len(".json")].rsplit(".", 1)
        j = kept.load_json(f)
        r = j["tasks"][task]
        res.setdefault(model, {"bytes": j.get("model", {}).get("file_bytes")})[task] = r
    models = [m for m in ORDER if m in res] + sorted(m for m in res if m not in ORDER)
    head = "| model | bytes | " + " | ".join(f"{t[1]} ({t[2]})" for t in TASKS) + " | average |"
    lines = [head, "|" + "---|" * (len(TASKS) + 3)]
    out = {"schema": "gamma.zeroshot_table", "version": 1, "models": {}}
    for m in models:
        cells, accs, ses, n = [], [], [], []
        for t, _, metric in TASKS:
            r = res[m].get(t)
            if r is None:
                cells.append("–")
                continue
            acc, se = r[metric], r[metric + "_stderr"]
            cells.append(f"{100 * acc:.1f} ± {100 * se:.1f}")
            accs.append(acc), ses.append(se), n.append(r["n"])
        full = len(accs) == len(TASKS)
        # The average's error: the tasks are independent samples, so the variances add.
        avg = sum(accs) / len(accs) if full else None
        avg_se = math.sqrt(sum(s * s for s in ses)) / len(ses) if full else None
        b = res[m]["bytes"]
        choice = os.path.join(a.dir, f"{m}.choice")
        label = m + (f" ({kept.read_text(choice).strip()})" if kept.exists(choice) else "")
        lines.append(f"| {label} | {b:,} | " + " | ".join(cells) +
                     (f" | {100 * avg:.1f} ± {100 * avg_se:.1f} |" if full else " | – |"))
        out["models"][m] = {"file_bytes": b, "average": avg, "average_stderr": avg_se,
                            "tasks": {t: res[m][t] for t, _, _ in TASKS if t in res[m]}}
    lines += ["", "Paired differences (a − b, accuracy points, same items; * where |d| ≥ 2 SE):", "",
              "| a − b | " + " | ".join(t[1] for t in TASKS) + " | average |", "|" + "---|" * (len(TASKS) + 2)]
    out["paired"] = {}
    for ma, mb in PAIRS:
        if ma not in res or mb not in res:
            continue
        ds = [paired(res[ma].get(t), res[mb].get(t), metric) if t in res[ma] and t in res[mb] else None
              for t, _, metric in TASKS]
        if any(d is None for d in ds):
            continue
        cells = [f"{100 * d:+.1f} ± {100 * se:.1f}" + ("*" if abs(d) >= 2 * se else "") for d, se in ds]
        avg = sum(d for d, _ in ds) / len(ds)
        avg_se = math.sqrt(sum(se * se for _, se in ds)) / len(ds)
        cells.append(f"{100 * avg:+.1f} ± {100 * avg_se:.1f}" + ("*" if abs(avg) >= 2 * avg_se else ""))
        lines.append(f"| {ma} − {mb} | " + " | ".join(cells) + " |")
        out["paired"][f"{ma} - {mb}"] = {"tasks": {t: {"diff": d, "stderr": se} for (t, _, _), (d, se) in zip(TASKS, ds)},
                                        "average": avg, "average_stderr": avg_se}
    emit_table(lines, out, a.out)


if __name__ == "__main__":
    main()
