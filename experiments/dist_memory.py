#!/usr/bin/env python3
# Produces: results/dist_memory_{smollm2,qwen1.5b}.json.
"""Issue 23: layer-sharded Stage I on one machine with 1, 2 and 4 ranks: per-rank peak RSS
and seconds per step, and the scores' agreement with one process (bit for bit expected).

  experiments/dist_memory.py --pool POOL --teacher F32.gguf -o results/dist_memory_MODEL.json
      [--ranks 1,2,4] [--steps 4] [--threads-per-rank 1] [extra gamma learn flags after --]

Every rank runs `gamma learn` with --layers-per-step 0 (each step runs every layer, so each
rank runs its whole range); rank 0's peak RSS comes from the scores' stats, the others' from
their last line. Ranks meet through a fresh file:// rendezvous per job."""
import argparse, json, os, re, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser()
ap.add_argument("--pool", required=True)
ap.add_argument("--teacher", required=True)
ap.add_argument("-o", "--output", required=True)
ap.add_argument("--ranks", default="1,2,4")
ap.add_argument("--steps", type=int, default=4)
ap.add_argument("--threads-per-rank", type=int, default=1)
ap.add_argument("--gamma", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "cli", "gamma"))
ap.add_argument("extra", nargs="*")
a = ap.parse_args()

work = tempfile.mkdtemp(prefix="gamma-dist-")
base = [a.gamma, "learn", a.pool, "--teacher", a.teacher, "--steps", str(a.steps), "--layers-per-step", "0",
        "-t", str(a.threads_per_rank), "-q", "--checkpoint-every", "1000000"] + a.extra
rows, ref = [], None
for w in [int(x) for x in a.ranks.split(",")]:
    out = os.path.join(work, f"scores-{w}.json")
    rdv = ["--world-size", str(w), "--rendezvous", "file://" + os.path.join(work, f"rdv-{w}")] if w > 1 else []
    t0 = time.time()
    procs = [subprocess.Popen(base + ["-o", out] + rdv + (["--rank", str(r)] if w > 1 else []),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(w)]
    outs = [p.communicate()[0] for p in procs]
    wall = time.time() - t0
    for r, p in enumerate(procs):
        if p.returncode != 0:
            sys.exit(f"dist_memory: {w} ranks: rank {r} failed: {outs[r].strip()}")
    s = json.load(open(out))
    rss = [s["stats"]["peak_rss_bytes"]]
    for r in range(1, w):
        m = re.search(r"peak RSS ([0-9.]+) MiB", outs[r])
        rss.append(int(float(m.group(1)) * (1 << 20)) if m else None)
    if ref is None:
        ref = s
    row = {"ranks": w, "threads_per_rank": a.threads_per_rank, "wall_seconds": round(wall, 1),
           "seconds_per_step": s["stats"]["seconds_per_step"], "peak_rss_bytes_per_rank": rss,
           "peak_rss_mib_per_rank": [round(x / (1 << 20), 1) if x else None for x in rss],
           "scores_equal_to_one_process": s["modules"] == ref["modules"] and s["final"] == ref["final"]}
    print(json.dumps(row), flush=True)
    rows.append(row)
res = {"command": " ".join(sys.argv), "pool": a.pool, "teacher": a.teacher, "steps": a.steps,
       "n_layer": len({m.split(".")[1] for m in ref["modules"]}), "runs": rows}
tmp = a.output + ".tmp"
json.dump(res, open(tmp, "w"), indent=1)
os.replace(tmp, a.output)
