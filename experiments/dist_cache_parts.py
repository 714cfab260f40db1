#!/usr/bin/env python3
# Produces: results/dist_cache_parts_qwen1.5b.json.
"""Issue 23: ranks on separate disks build only their part of the activation cache.

  experiments/dist_cache_parts.py --pool POOL --teacher F32.gguf -o results/dist_cache_parts_MODEL.json
      [--ranks 2] [--steps 1] [extra gamma learn flags after --]

One process learns with the cache in one directory (built there if missing); then N ranks learn
the same job, each with its own empty --cache-dir (as N machines would), meeting through a
file:// rendezvous. Recorded: the boundaries and bytes each rank's directory holds, the wall
time, and whether the scores equal the one process's."""
import argparse, json, os, re, shutil, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser()
ap.add_argument("--pool", required=True)
ap.add_argument("--teacher", required=True)
ap.add_argument("-o", "--output", required=True)
ap.add_argument("--ranks", type=int, default=2)
ap.add_argument("--steps", type=int, default=1)
ap.add_argument("--gamma", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "cli", "gamma"))
ap.add_argument("extra", nargs="*")
a = ap.parse_args()

work = tempfile.mkdtemp(prefix="gamma-parts-")
base = [a.gamma, "learn", a.pool, "--teacher", a.teacher, "--steps", str(a.steps), "--layers-per-step", "0",
        "-t", "1", "-q", "--checkpoint-every", "1000000"] + a.extra
one = os.path.join(work, "one.json")
subprocess.run(base + ["-o", one], check=True)
out = os.path.join(work, "ranks.json")
t0 = time.time()
procs = [subprocess.Popen(base + ["-o", out, "--cache-dir", os.path.join(work, f"disk{r}"), "--world-size", str(a.ranks),
                                  "--rank", str(r), "--rendezvous", "file://" + os.path.join(work, "rdv")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(a.ranks)]
outs = [p.communicate()[0] for p in procs]
wall = time.time() - t0
for r, p in enumerate(procs):
    if p.returncode != 0:
        sys.exit(f"dist_cache_parts: rank {r} failed: {outs[r].strip()}")
ranks = []
for r in range(a.ranks):
    d = os.path.join(work, f"disk{r}")
    files = [os.path.join(root, f) for root, _, fs in os.walk(d) for f in fs]
    bs = sorted(int(m.group(1)) for f in files if (m := re.match(r"h(\d+)\.bin$", os.path.basename(f))))
    ranks.append({"rank": r, "boundaries": [bs[0], bs[-1]] if bs else [], "n_boundaries": len(bs),
                  "bytes": sum(os.path.getsize(f) for f in files)})
s1, sn = json.load(open(one)), json.load(open(out))
res = {"command": " ".join(sys.argv), "steps": a.steps, "ranks": ranks, "wall_seconds_with_builds": round(wall, 1),
       "scores_equal_to_one_process": s1["modules"] == sn["modules"] and s1["final"] == sn["final"]}
print(json.dumps(res, indent=1))
tmp = a.output + ".tmp"
json.dump(res, open(tmp, "w"), indent=1)
os.replace(tmp, a.output)
shutil.rmtree(work)
