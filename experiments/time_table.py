#!/usr/bin/env python3
# Produces: results/iq_qwen/time_table.{md,json}.
"""Issue 24, item 5: the quantization-time table (the paper's "quantization time"), Qwen2.5-Coder-1.5B.

Every figure is a wall time this machine recorded while making the committed results (2 cores):
  pool seconds per type     results/iq_qwen/types-quiet.json (the sweep pool's per-type table, built with nothing else running)
  imatrix                   results/iq_qwen/imatrix-mix.seconds (llama-imatrix, 32 x 512 tokens)
  teacher                   results/iq_qwen/teacher.seconds (gamma dequantize to F32)
  HAWQ-V2 traces            results/iq_qwen/hawq.json stats.seconds
  Stage I (GAMMA)           results/iq_qwen/gamma.json stats.seconds (and its time split)
  search (AMQ-style)        results/iq_qwen/plans/search-size-Q2_K-*s.state.json (the longest run's seconds)
  Stage II                  the solver's own time in every committed plan (results/iq_qwen/plans)
  emit                      results/iq_qwen/emit.seconds (gamma emit of one plan from the pool)
  llama-quantize per mix    results/iq_qwen/evals/llama-MIX.quantize-seconds
Writes results/iq_qwen/time_table.{json,md}.  Usage: python3 experiments/time_table.py [-o OUT.md] (OUT.json beside it)
"""
import json
import math
import os
import sys
import kept

R = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results", "iq_qwen")


def num(path):
    p = os.path.join(R, path)
    return float(kept.read_text(p).split()[0]) if kept.exists(p) else None


def stage1_row(label, j, pool, note=""):
    """A Stage I run's scoring time (gamma learn's stats.seconds) and recipe."""
    g, hp = j["stats"], j["hyperparameters"]
    loss = f", --layer-loss {hp['layer_loss']}" if hp.get("layer_loss") else ""
    return {"allocator": label, "pool": pool, "scoring_s": g["seconds"],
            "scoring": f"{hp['steps']} steps of {hp['batch']} x {hp['seq_len']} tokens, {hp['estimator']} + "
                       f"{hp['forcing']} forcing, visits of {hp['visit_steps']}, measured every {hp['measure_every']}, "
                       f"{hp['calib_tokens']} tokens{loss}{note}",
            "time_split_s": g.get("time_split"), "peak_rss_bytes": g.get("peak_rss_bytes")}


def main():
    types = kept.load_json(os.path.join(R, "types-quiet.json"))
    pareto = types["pareto"]
    pool = {t["type"]: t["pool_seconds"] for t in types["types"]}
    pool_auto = sum(pool[t] for t in pareto)
    pool_all = sum(pool.values())
    hawq = kept.load_json(os.path.join(R, "hawq.json"))
    gamma = kept.load_json(os.path.join(R, "gamma.json"))
    solve = []
    for f in kept.glob(os.path.join(R, "plans", "*.json")):
        if os.path.basename(f).startswith("search-"):  # a search's plan records the search's time
            continue
        info = kept.load_json(f).get("info", {})
        if "seconds" in info:
            solve.append(info["seconds"])
    shared = {"teacher (gamma dequantize -> F32)": num("teacher.seconds"),
              "imatrix (llama-imatrix, 32 x 512 tokens)": num("imatrix-mix.seconds")}
    pools = {f"auto set ({len(pareto)} types)": pool_auto, f"every type ({len(pool)} types)": pool_all}
    auto_name, all_name = list(pools)
    emit = num("emit.seconds")
    allocators = [
        {"allocator": "static proxy", "pool": all_name, "scoring_s": 0.0,
         "scoring": "none (the pool's imatrix-weighted errors)"},
        {"allocator": "HAWQ-V2", "pool": all_name, "scoring_s": hawq["stats"]["seconds"],
         "scoring": f"Hessian traces, {hawq['hyperparameters']['samples']} Hutchinson probes, "
                    f"{hawq['hyperparameters']['calib_tokens']} tokens"},
        stage1_row("GAMMA, gammad (Stage I, measured loss changes)", gamma, auto_name,
                   "; shared the cores with evaluations for part of the run"),
    ]
    # Every other allocator the goal table's GAMMA column picks (goal_table.json): its Stage I run
    # (gamma-TAG.json), plus for gamma-TAG-cal the 29 short layer evals of layer_calibrate.py and
    # for gammal-TAG-LOW the gamma layers run (layers-LOW.json) its --layer-scale reads.
    layer_kld = math.fsum(kept.load_json(f)["seconds"] for f in kept.glob(os.path.join(R, "layer_kld", "*.json")))
    picked = sorted({r["GAMMA"]["allocator"] for r in kept.load_json(os.path.join(R, "goal_table.json"))["rows"]
                     if "GAMMA" in r} - {"gammad"})
    for a in picked:
        tag = a.split("-")[1]
        j = kept.load_json(os.path.join(R, f"gamma-{tag}.json"))
        row = stage1_row(f"GAMMA, {a}", j, auto_name)
        if a.endswith("-cal"):
            row["scoring_s"] += layer_kld
            row["scoring"] += f"; + 29 layer KLD evals (layer_calibrate.py, {layer_kld:.0f} s)"
        elif a.startswith("gammal-"):
            low = a.split("-")[2]
            ls = kept.load_json(os.path.join(R, f"layers-{low}.json"))["info"]["seconds"]
            row["scoring_s"] += ls
            row["scoring"] += f"; + gamma layers at {low} ({ls:.0f} s)"
        allocators.append(row)
    runs = []
    for f in kept.glob(os.path.join(R, "plans", "search-size-Q2_K-*s.state.json")):
        st = kept.load_json(f)
        limit = int(os.path.basename(f)[len("search-size-Q2_K-"):-len("s.state.json")])
        runs.append((st["seconds"], st["generation"], st["evaluations"], st["config"], limit))
    if runs:
        sec, gens, evals, cfg, limit = max(runs)
        allocators.append({"allocator": "search (AMQ-style)", "pool": all_name, "scoring_s": sec,
                           "scoring": f"from the static plan: {gens} generations of {cfg['offspring']} offspring "
                                      f"({evals} evaluations, KLD vs the teacher on {cfg['chunks']} x {cfg['ctx']} "
                                      f"calibration tokens), wall-time limit {limit} s (the generation under way at "
                                      f"the limit is finished)"})
    shared_s = sum(v for v in shared.values() if v)
    for a in allocators:
        a["end_to_end_s"] = shared_s + pools[a["pool"]] + a["scoring_s"] + max(solve) + (emit or 0)
    mixes = {}
    for f in sorted(kept.glob(os.path.join(R, "evals", "llama-*.quantize-seconds"))):
        mixes[os.path.basename(f)[len("llama-"):-len(".quantize-seconds")]] = float(kept.read_text(f))
    doc = {"schema": "gamma.time_table", "version": 1, "model": "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (teacher: F32)",
           "machine": "2 cores (AMD EPYC), 2 threads", "command": "python3 experiments/time_table.py",
           "shared_s": shared, "pools_s": pools, "pool_seconds_per_type": pool,
           "stage2": {"solves": len(solve), "max_s": max(solve), "median_s": sorted(solve)[len(solve) // 2]},
           "emit_s": emit, "allocators": allocators, "llama_quantize_s": mixes}
    md = sys.argv[2] if len(sys.argv) == 3 and sys.argv[1] == "-o" else os.path.join(R, "time_table.md")
    js = os.path.splitext(md)[0] + ".json"
    json.dump(doc, open(js + ".tmp", "w"), indent=1)
    os.replace(js + ".tmp", js)

    def hm(s):
        if s is None:
            return "—"
        s = round(s)
        return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"

    out = ["Quantization time, Qwen2.5-Coder-1.5B, this machine (2 cores, 2 threads); "
           "`python3 experiments/time_table.py`", "",
           "| step | wall |", "|---|---|"]
    for k, v in shared.items():
        out.append(f"| {k} | {hm(v)} |")
    for k, v in pools.items():
        out.append(f"| pool, {k} | {hm(v)} |")
    out.append(f"| Stage II: exact knapsack, per budget ({len(solve)} solves) | {max(solve) * 1e3:.2f} ms at most |")
    out.append(f"| emit one plan from the pool | {hm(emit)} |")
    out += ["", "| allocator | pool (as in the sweep) | scoring | scoring wall | end to end (teacher + imatrix + pool + scoring + solve + emit) |",
            "|---|---|---|---|---|"]
    for a in allocators:
        out.append(f"| {a['allocator']} | {a['pool']} | {a['scoring']} | {hm(a['scoring_s'])} | {hm(a['end_to_end_s'])} |")
    out += ["", "llama-quantize of each standard mix from the same teacher and imatrix (for comparison; "
            "some ran beside other jobs):", "", "| mix | wall |", "|---|---|"]
    for m, s in sorted(mixes.items(), key=lambda x: x[1]):
        out.append(f"| {m} | {hm(s)} |")
    open(md + ".tmp", "w").write("\n".join(out) + "\n")
    os.replace(md + ".tmp", md)
    print(md)


if __name__ == "__main__":
    sys.exit(main())
