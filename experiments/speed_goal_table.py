#!/usr/bin/env python3
"""Issue 45's goal table from experiments/speed_goal.sh's work directory W: per llama.cpp mix size,
the mix, its own types re-made from gamma's pool (the control), gamma's plan without and with the
speed budget (`--min-decode MIX.gguf`): bytes, predicted and measured tg128 / pp512 (llama-bench,
the same round-robin rounds), KLD vs the teacher on both test texts with the paired difference to
the mix (per-chunk means, 16 x 512), and whether the speed plan dominates the mix (no larger, no
slower measured, lower KLD on both texts).
    python3 experiments/speed_goal_table.py W [-o TABLE.md]   (TABLE.json beside it)
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kept  # noqa: E402
from rank_stats import paired_diff as paired  # noqa: E402

ORDER = ["IQ2_M", "Q2_K", "IQ3_XXS", "IQ3_XS", "Q3_K_S", "IQ3_S", "IQ3_M", "Q3_K_M"]
ROWS = [("mix", "llama.cpp {m}"), ("control", "{m}'s types from gamma's pool"), ("free", "gamma{h}, no speed budget"),
        ("speed", "gamma{h} --min-decode {m}.gguf")]
TAGS = ["", "-h"]  # gamma's plans with the mix's head, and (TAG=-h) with the head HEAD gave them


def load(path):
    return json.loads(kept._read(path))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    W = a.work
    sizes = []
    for mix, tag in [(m, t) for m in ORDER for t in TAGS]:
        x = mix + tag
        bench_p = os.path.join(W, f"{x}-bench.json")
        if not kept.exists(bench_p) or not kept.exists(os.path.join(W, "evals", f"{x}-speed.py.json")):
            continue
        bench = {os.path.basename(f["file"]): f for f in load(bench_p)["files"]}
        fixed = load(os.path.join(W, f"{x}-speed.json"))["fixed"]
        head = f" (head {fixed.get('output.weight', '-')}, embedding {fixed.get('token_embd.weight', '-')})"
        rows = []
        for key, label in ROWS:
            stem = f"{mix}-{key}" if key in ("mix", "control") else f"{x}-{key}"
            name = f"llama-{mix}.gguf" if key == "mix" else f"{stem}.gguf"
            b = bench[name]
            r = {"file": key, "label": label.format(m=mix, h=head), "bytes": b["bytes"], "predicted_tg128": b["predicted_tg128"],
                 "tg128": b["tg128"], "pp512": b["pp512"], "predicted_pp512": b["predicted_pp512"]}
            for t in ("wiki", "py"):
                ev = load(os.path.join(W, "evals", f"{stem}.{t}.json"))["kld"]
                r[f"kld_{t}"], r[f"kld_{t}_err"], r[f"chunks_{t}"] = ev["mean"], ev["stderr"], ev["chunk_means"]
            rows.append(r)
        base = rows[0]
        for r in rows[1:]:
            for t in ("wiki", "py"):
                r[f"paired_{t}"] = paired(r[f"chunks_{t}"], base[f"chunks_{t}"])
        sp = rows[3]
        dom = {"no_larger": sp["bytes"] <= base["bytes"], "no_slower": sp["tg128"] >= base["tg128"],
               "lower_kld_both": all(sp[f"paired_{t}"][0] < 0 for t in ("wiki", "py")),
               "tg128_ratio": sp["tg128"] / base["tg128"], "free_tg128_ratio": rows[2]["tg128"] / base["tg128"]}
        dom["dominates"] = dom["no_larger"] and dom["no_slower"] and dom["lower_kld_both"]
        for r in rows:
            for t in ("wiki", "py"):
                del r[f"chunks_{t}"]
        sizes.append({"mix": mix, "tag": tag, "rows": rows, "goal": dom,
                      "speed_plan": load(os.path.join(W, f"{x}-speed.json"))["info"].get("speed", {})})
    out = ["| size of | file | bytes | tg128 predicted | tg128 | pp512 | KLD wiki.test | KLD python-eval | paired vs mix (wiki / python) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for s in sizes:
        for r in s["rows"]:
            p = ""
            if "paired_wiki" in r:
                p = " / ".join(f"{r[f'paired_{t}'][0]:+.4f} ± {r[f'paired_{t}'][1]:.4f}" for t in ("wiki", "py"))
            out.append(f"| {s['mix']}{s['tag']} | {r['label']} | {r['bytes']:,} | {r['predicted_tg128']:.2f} | {r['tg128']:.2f} | "
                       f"{r['pp512']:.1f} | {r['kld_wiki']:.4f} ± {r['kld_wiki_err']:.4f} | {r['kld_py']:.4f} ± {r['kld_py_err']:.4f} | {p} |")
    out += ["", "| size of | speed plan / mix, tg128 measured | free plan / mix | goal: no larger, no slower, lower KLD on both |",
            "|---|---|---|---|"]
    for s in sizes:
        g = s["goal"]
        why = [k for k in ("no_larger", "no_slower", "lower_kld_both") if not g[k]]
        out.append(f"| {s['mix']}{s['tag']} | {g['tg128_ratio']:.3f}x | {g['free_tg128_ratio']:.3f}x | "
                   f"{'yes' if g['dominates'] else 'no (' + ', '.join(why) + ')'} |")
    text = "\n".join(out) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
        with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
            json.dump({"sizes": sizes}, f, indent=1)
            f.write("\n")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
