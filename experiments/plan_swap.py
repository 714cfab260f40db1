#!/usr/bin/env python3
"""Issue 19: which of the modules where two plans differ makes the KLD gap between them.

Two plans at the same size (GAMMA's pick A and HAWQ-V2's B) differ in a few modules. Group those
by module kind; for each group g build A with g's modules at B's types (A<-B[g]) and B with them at
A's types (B<-A[g]), emit each, and evaluate it on the validation texts (wiki.valid.tokens and the
held-back part of python-calib.txt, as iq_sweep.sh's valid_kld: 8 chunks each, same cached
teacher log-probs). A and B are evaluated again too, so that every file carries per-chunk KLDs and
every hybrid is compared with its parent chunk by chunk. A group whose swap moves A to B's KLD
carries the gap. Groups whose types differ in bytes change the file by their byte difference
(reported: kinds whose modules trade bytes inside the kind, e.g. q/k/v, keep the size).
Validation text decides what the attribution says; --test also evaluates named files on the test
texts, only to see whether it holds where the gap was reported. --scorer adds what each scorer
predicts for every file (gamma solve with every module pinned), beside what was measured.

  plan_swap.py --a PLAN_A --b PLAN_B --work /tmp/gamma-qwen -o results/iq_qwen/swap_Q3_K_M \\
      [--groups attn_q attn_k attn_v ffn_gate+ffn_down blk.1.ffn_gate+blk.3.ffn_gate] \\
      [--scorer NAME POOL "SOLVE ARGS"]... [--test 'A<-B[attn_q]' ...] [--gamma build/cli/gamma] [-t 2]
Writes OUT/plans/*.json, OUT/evals/*.{wv,pv[,wiki,py]}.json, OUT/swap.json and OUT/swap.md; resumes
(an eval that exists is kept).
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time

import kept
from rank_stats import paired_diff as paired
from table_out import emit_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXTS = ("wv", "pv")  # validation: wiki.valid.tokens, WORK/valid-py.txt (iq_sweep.sh writes it), 8 chunks
TESTS = ("wiki", "py")  # test (--test): wiki.test.raw, python-eval.txt, 16 chunks, as the goal table


def load(p):
    with open(p) as f:
        return json.load(f)


def save(obj, p):
    tmp = p + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, p)


def kind(name):
    return name.split(".")[2] if name.startswith("blk.") else name


def in_group(name, kinds):
    """A group names module kinds (attn_q) or modules (blk.1.ffn_gate), joined by '+'."""
    return any(kind(name) == k or name == k + ".weight" for k in kinds)


def module_bytes(manifest):
    return {m["name"]: {c["id"]: c["file_bytes"] for c in m["candidates"]} for m in manifest["modules"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="plan A (e.g. GAMMA's pick)")
    ap.add_argument("--b", required=True, help="plan B at the same size (e.g. HAWQ-V2's)")
    ap.add_argument("--work", required=True, help="work dir: pool-all, teacher-f32.gguf, kld-base-{wv,pv}-8.bin, valid-py.txt")
    ap.add_argument("--groups", nargs="+", default=["attn_q", "attn_k", "attn_v", "ffn_gate+ffn_down"],
                    help="groups: module kinds (attn_q) or modules (blk.1.ffn_gate), '+' joins them")
    ap.add_argument("--gamma", default=os.path.join(ROOT, "build/cli/gamma"))
    ap.add_argument("--text-dir", default=os.path.join(os.environ.get("GAMMA_SHARED_DATA", os.path.join(ROOT, "../shared/data")), "text"))
    ap.add_argument("--scorer", nargs=3, action="append", default=[], metavar=("NAME", "POOL", "ARGS"),
                    help="also each file's predicted objective under a scorer: gamma solve POOL ARGS with every "
                         "module pinned (higher is better; none where the pool lacks a pinned type)")
    ap.add_argument("--test", nargs="*", default=[], metavar="FILE",
                    help="files (labels as in the table, e.g. 'A<-B[attn_q]') also evaluated on the test texts, "
                         "with A and B, to see whether the validation attribution holds where a gap was reported")
    ap.add_argument("-t", "--threads", default="2")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()

    W = a.work
    pool = os.path.join(W, "pool-all")
    pa, pb = load(a.a), load(a.b)
    if pa["fixed"] != pb["fixed"] or set(pa["modules"]) != set(pb["modules"]):
        sys.exit("plan_swap: the two plans differ in their fixed tensors or module set; nothing to swap")
    mb = module_bytes(load(os.path.join(pool, "manifest.json")))
    diff = sorted(m for m in pa["modules"] if pa["modules"][m] != pb["modules"][m])
    groups = [(g, set(g.split("+"))) for g in a.groups]
    covered = {m for m in diff for _, ks in groups if in_group(m, ks)}
    if covered != set(diff):
        sys.exit("plan_swap: the groups leave out differing modules: " + ", ".join(sorted(set(diff) - covered)))
    os.makedirs(os.path.join(a.out, "plans"), exist_ok=True)
    os.makedirs(os.path.join(a.out, "evals"), exist_ok=True)

    def plan_bytes(mods):
        return sum(mb[m][t] for m, t in mods.items())

    base_bytes = plan_bytes(pa["modules"])
    files = [("A", pa["modules"], None), ("B", pb["modules"], None)]
    for g, ks in groups:
        ms = [m for m in diff if in_group(m, ks)]
        files.append((f"A<-B[{g}]", {**pa["modules"], **{m: pb["modules"][m] for m in ms}}, ("A", ms)))
        files.append((f"B<-A[{g}]", {**pb["modules"], **{m: pa["modules"][m] for m in ms}}, ("B", ms)))

    def fname(label):
        return label.replace("<-", "_from_").replace("[", "_").replace("]", "").replace("+", "_")

    chunks = {"wv": 8, "pv": 8, "wiki": 16, "py": 16}
    texts = {"wv": os.path.join(a.text_dir, "wiki.valid.tokens"), "pv": os.path.join(W, "valid-py.txt"),
             "wiki": os.path.join(a.text_dir, "wiki.test.raw"), "py": os.path.join(a.text_dir, "python-eval.txt")}
    unknown = set(a.test) - {label for label, _, _ in files}
    if unknown:
        sys.exit("plan_swap: --test names no file: " + ", ".join(sorted(unknown)))
    tested = {"A", "B", *a.test} if a.test else set()
    # Groups that cover every differing module make A<-B[g] the same file as B<-A[rest]: measured once.
    same = {}
    for label, mods, _ in files:
        same.setdefault(tuple(sorted(mods.items())), label)
    evname = {label: fname(same[tuple(sorted(mods.items()))]) for label, mods, _ in files}
    for label, mods, _ in files:
        n = fname(label)
        plan = dict(pa)
        plan["modules"] = mods
        plan["method"] = "swap"
        plan["info"] = {"swap": label, "a": os.path.relpath(a.a, ROOT), "b": os.path.relpath(a.b, ROOT)}
        pp = os.path.join(a.out, "plans", n + ".json")
        save(plan, pp)
        if evname[label] != n:
            continue
        todo = [t for t in TEXTS + (TESTS if label in tested else ()) if not os.path.exists(os.path.join(a.out, "evals", f"{n}.{t}.json"))]
        if not todo:
            continue
        gguf = os.path.join(W, "models", f"swap-{n}.gguf")
        print(f"[{time.strftime('%H:%M:%S')}] {label}: emit + {' '.join(todo)}", flush=True)
        subprocess.run([a.gamma, "emit", pool, pp, "-o", gguf], check=True, stdout=subprocess.DEVNULL)
        try:
            for t in todo:
                subprocess.run([a.gamma, "eval", gguf, "--teacher", os.path.join(W, "teacher-f32.gguf"),
                                "--kld-base", os.path.join(W, f"kld-base-{t}-{chunks[t]}.bin"), "--text", texts[t],
                                "--ctx", "512", "--chunks", str(chunks[t]),
                                "-t", a.threads, "-q", "-o", os.path.join(a.out, "evals", f"{n}.{t}.json")],
                               check=True, stdout=subprocess.DEVNULL)
        finally:
            for f in (gguf, gguf[:-len(".gguf")] + ".tensor-types.txt"):  # emit's llama-quantize sidecar
                if os.path.exists(f):
                    os.remove(f)

    def objective(mods, pool_dir, args):
        """The scorer's objective for exactly this plan: every module pinned, the budget no constraint."""
        pins = [x for m, t in sorted(mods.items()) for x in ("--pin", "^" + re.escape(m) + "$=" + t)]
        fixed = [x for k in ("output.weight", "token_embd.weight") if k in pa["fixed"]
                 for x in ("--fixed", f"{k}={pa['fixed'][k]}")]
        tmp = os.path.join(a.out, "objective.tmp.json")
        r = subprocess.run([a.gamma, "solve", "--pool", pool_dir, *shlex.split(args), "--size", str(2 * plan_bytes(mods)),
                            *fixed, *pins, "-o", tmp], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            return None
        o = load(tmp)["info"]["objective"]
        os.remove(tmp)
        return o

    pred = {label: {n: objective(mods, pool_dir, args) for n, pool_dir, args in a.scorer} for label, mods, _ in files}
    ev = {label: {t: load(os.path.join(a.out, "evals", f"{evname[label]}.{t}.json"))["kld"]
                  for t in TEXTS + (TESTS if label in tested else ())} for label, _, _ in files}
    rows = []
    for label, mods, parent in files:
        r = {"file": label, "bytes_delta": plan_bytes(mods) - base_bytes,
             "valid": {t: ev[label][t]["mean"] for t in TEXTS}}
        r["valid_sum"] = sum(r["valid"].values())
        if a.scorer:
            r["predicted_objective"] = pred[label]
        if parent:
            p, ms = parent
            r["modules"] = {m: [(pa if p == "A" else pb)["modules"][m], mods[m]] for m in ms}
            r["group_bytes_delta"] = plan_bytes(mods) - plan_bytes(pa["modules"] if p == "A" else pb["modules"])
            pr = {t: paired(ev[label][t]["chunk_means"], ev[p][t]["chunk_means"]) for t in TEXTS}
            if label in tested:  # diagnosis only: the test texts choose nothing here either
                r["test"] = {t: ev[label][t]["mean"] for t in TESTS}
                r["test_vs_parent"] = {t: dict(zip(("mean", "stderr"), paired(ev[label][t]["chunk_means"],
                                                                            ev[p][t]["chunk_means"]))) for t in TESTS}
            r["vs_parent"] = {t: {"mean": m, "stderr": s} for t, (m, s) in pr.items()}
            r["vs_parent"]["sum"] = {"mean": sum(m for m, _ in pr.values()),
                                     "stderr": sum(s * s for _, s in pr.values()) ** 0.5}
            if a.scorer:  # the scorer's predicted change of loss (objective is -loss): > 0 predicts worse
                r["predicted_vs_parent"] = {n: None if pred[label][n] is None or pred[p][n] is None
                                            else pred[p][n] - pred[label][n] for n, _, _ in a.scorer}
        rows.append(r)
    gap = {t: paired(ev["A"][t]["chunk_means"], ev["B"][t]["chunk_means"]) for t in TEXTS + (TESTS if tested else ())}
    out = {"schema": "gamma.plan_swap", "version": 1, "a": os.path.relpath(a.a, ROOT), "b": os.path.relpath(a.b, ROOT),
           "differing_modules": len(diff), "gap_a_minus_b": {t: {"mean": m, "stderr": s} for t, (m, s) in gap.items()},
           "rows": rows}

    # Plans under a study kept in an archive (experiments/kept.py) are read from it: say where.
    study = kept._study(a.a)
    where = (f" (both plans, and this study's `plans/`, `evals/`, are members of "
             f"`{os.path.relpath(os.path.join(study[0], kept.ARCHIVE), ROOT)}`)") if study else ""
    L = [f"# Plan swap: A = `{out['a']}`, B = `{out['b']}`{where}", "",
         f"{len(diff)} modules differ. Validation KLD vs the teacher (wiki.valid / held-back python-calib, 8 × 512 each); "
         "paired = mean over chunks of (file − parent) with its standard error, summed over the two texts.", "",
         "A − B paired: " + ", ".join(f"{t} {m:+.4f} ± {s:.4f}" for t, (m, s) in gap.items()), ""]
    names = [n for n, _, _ in a.scorer]
    if names:
        L += ["predicted Δ NAME: the change of loss vs the parent that scorer NAME's scores predict (its own units; "
              "> 0 predicts worse), from `gamma solve` with every module pinned.", ""]
    L += ["| file | modules swapped (from → to) | Δ bytes vs parent | wiki.valid | py.valid | sum | "
          "paired vs parent: wiki.valid | py.valid | sum |" + "".join(f" predicted Δ {n} |" for n in names),
          "|---|---|---|---|---|---|---|---|---|" + "---|" * len(names)]
    for r in rows:
        mods = "; ".join(f"{m.replace('.weight', '')} {f}→{t}" for m, (f, t) in r.get("modules", {}).items())
        vp = r.get("vs_parent")
        L.append(f"| {r['file']} | {mods or '—'} | {r.get('group_bytes_delta', 0):+,} | {r['valid']['wv']:.4f} | "
                 f"{r['valid']['pv']:.4f} | {r['valid_sum']:.4f} | "
                 + " | ".join(f"{vp[k]['mean']:+.4f} ± {vp[k]['stderr']:.4f}" if vp else "—" for k in ("wv", "pv", "sum"))
                 + " |" + "".join(f" {d:+.2e} |" if d is not None else " — |"
                                  for d in (r.get("predicted_vs_parent", {}).get(n) for n in names)))
    trows = [r for r in rows if "test_vs_parent" in r]
    if trows:
        L += ["", "Test texts (diagnosis, not choosing: wiki.test.raw / python-eval.txt, 16 × 512 each, the goal table's "
              "chunks). A − B paired: " + ", ".join(f"{t} {gap[t][0]:+.4f} ± {gap[t][1]:.4f}" for t in TESTS), "",
              "| file | wiki.test | python-eval | paired vs parent: wiki.test | python-eval |", "|---|---|---|---|---|"]
        for r in trows:
            L.append(f"| {r['file']} | {r['test']['wiki']:.4f} | {r['test']['py']:.4f} | "
                     + " | ".join(f"{r['test_vs_parent'][t]['mean']:+.4f} ± {r['test_vs_parent'][t]['stderr']:.4f}"
                                  for t in TESTS) + " |")
    emit_table(L, out, os.path.join(a.out, "swap.md"))


if __name__ == "__main__":
    main()
