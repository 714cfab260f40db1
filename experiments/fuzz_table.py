#!/usr/bin/env python3
# Produces: the tables of results/fuzz.md and results/fuzz_gguf_header.md (the prose around them is by hand).
"""The fuzzing tables from scripts/fuzz.sh's JSON: one row per target (what it reads, executions,
seconds, exec/s, coverage edges, crashes), or with --runs one row per run of one target.
  python3 experiments/fuzz_table.py results/fuzz.json
  python3 experiments/fuzz_table.py --runs "LABEL=results/fuzz_gguf_header.json" ...
"""
import json
import sys

READS = {"fuzz_gguf": "Model::open, describe_model, read_f32", "fuzz_imatrix": "load_imatrix",
         "fuzz_manifest": "Manifest::load", "fuzz_plan": "Plan reader", "fuzz_scores": "Scores reader",
         "fuzz_eval": "EvalResult reader", "fuzz_checkpoint": "Stage I checkpoint"}


def runs(specs):
    print("| run | executions | seconds | exec/s | edges | crashes |")
    print("|---|---|---|---|---|---|")
    for spec in specs:
        label, path = spec.rsplit("=", 1)
        for t in json.load(open(path))["targets"]:
            print(f"| {label} | {t['executions']:,} | {t['seconds']:,} | {t['execs_per_second']:,} | "
                  f"{t['coverage_edges']:,} | {len(t['crashes'])} |")


def main():
    if sys.argv[1] == "--runs":
        return runs(sys.argv[2:])
    d = json.load(open(sys.argv[1]))
    print("| target | executions | seconds | exec/s | edges | crashes |")
    print("|---|---|---|---|---|---|")
    for t in d["targets"]:
        name = t["target"] + (f" ({READS[t['target']]})" if t["target"] in READS else "")
        print(f"| {name} | {t['executions']:,} | {t['seconds']} | {t['execs_per_second']} | {t['coverage_edges']} | "
              f"{len(t['crashes'])} |")


if __name__ == "__main__":
    main()
