#!/usr/bin/env python3
"""Produces: results/house_default_job.md (issue 43). Compares two gamma run work directories: run.json
without its timings (seconds, work_dir_bytes, stage seconds), and the chosen file's sha256.

  same_run.py BEFORE/gamma-run AFTER/gamma-run
"""
import hashlib, json, sys
a, b = sys.argv[1], sys.argv[2]
def load(d):
    j = json.load(open(f"{d}/run.json"))
    for k in ("seconds", "work_dir_bytes"):
        j.pop(k, None)
    j["stages"] = [s["stage"] for s in j["stages"]]
    return j
ja, jb = load(a), load(b)
def sha(p):
    return hashlib.sha256(open(p, "rb").read()).hexdigest()
same = ja == jb
print("run.json without timings:", "identical" if same else "DIFFERENT")
if not same:
    for k in sorted(set(ja) | set(jb)):
        if ja.get(k) != jb.get(k):
            print("  differs:", k)
fa, fb = ja["rows"][0]["path"], jb["rows"][0]["path"]
print("chosen file:", fa, sha(f"{a}/../{fa}"), "\n            ", fb, sha(f"{b}/../{fb}"))
