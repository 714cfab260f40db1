#!/usr/bin/env python3
# Produces: the table of results/fuzz.md (the prose around it is written by hand).
"""The fuzzing table from scripts/fuzz.sh's JSON: one row per target, what it reads, executions,
seconds, exec/s, coverage edges, crashes.
  python3 experiments/fuzz_table.py results/fuzz.json
"""
import json
import sys

READS = {"fuzz_gguf": "Model::open, describe_model, read_f32", "fuzz_imatrix": "load_imatrix",
         "fuzz_manifest": "Manifest::load", "fuzz_plan": "Plan reader", "fuzz_scores": "Scores reader",
         "fuzz_eval": "EvalResult reader", "fuzz_checkpoint": "Stage I checkpoint"}


def main():
    d = json.load(open(sys.argv[1]))
    print("| target | executions | seconds | exec/s | edges | crashes |")
    print("|---|---|---|---|---|---|")
    for t in d["targets"]:
        name = t["target"] + (f" ({READS[t['target']]})" if t["target"] in READS else "")
        print(f"| {name} | {t['executions']:,} | {t['seconds']} | {t['execs_per_second']} | {t['coverage_edges']} | "
              f"{len(t['crashes'])} |")


if __name__ == "__main__":
    main()
