#!/usr/bin/env python3
"""results/speed_*.md: the llama-bench table of experiments/speed_bench.sh, from its OUT.json
(pp512 / tg128 tok/s per file, ratios vs the first file).

  speed_table.py results/speed_qwen.json [-o results/speed_qwen.md]
"""
import argparse
import json
import os


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    doc = json.load(open(a.json))
    rows, ref = doc["rows"], doc["rows"][0]
    text = (f"llama-bench, {doc['threads']} threads, {doc['repetitions']} repetitions, {rows[0]['cpu']}; ratios vs {ref['label']}\n\n"
            "| file | bytes | pp512 tok/s | tg128 tok/s | pp ratio | tg ratio |\n|---|---|---|---|---|---|\n")
    for r in rows:
        text += (f"| {r['label']} | {r['file_bytes']:,} | {r['pp512']['tok_s']:.1f} ± {r['pp512']['stddev']:.1f} | "
                 f"{r['tg128']['tok_s']:.1f} ± {r['tg128']['stddev']:.1f} | {r['pp512']['tok_s'] / ref['pp512']['tok_s']:.2f} | "
                 f"{r['tg128']['tok_s'] / ref['tg128']['tok_s']:.2f} |\n")
    if not a.out:
        print(text, end="")
        return
    with open(a.out + ".tmp", "w") as f:
        f.write(text)
    os.replace(a.out + ".tmp", a.out)
    print(a.out)


if __name__ == "__main__":
    main()
