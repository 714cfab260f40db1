#!/usr/bin/env python3
"""Issue 44: a `gamma run`'s stages from its log (for a run stopped before run.json), each stage's
wall time less the SIGSTOP pauses inside it (experiments' pause files: "stop EPOCH" / "cont EPOCH"
lines), beside the estimate the run printed.
Usage: stage_times.py RUN.log START_EPOCH [PAUSES] [-o OUT.md]"""
import argparse
import re

STAGE = re.compile(r"^== (.*?)  \[est\. ([0-9hms]+), run ([0-9hms]+)\]$")
DONE = re.compile(r"^   done in ([0-9hms]+)")


def secs(t):
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", t)
    h, mi, s = (int(x) if x else 0 for x in m.groups())
    return 3600 * h + 60 * mi + s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("start", type=float)
    ap.add_argument("pauses", nargs="?")
    ap.add_argument("-o")
    a = ap.parse_args()
    iv = []
    if a.pauses:
        ev = [l.split() for l in open(a.pauses) if l.strip()]
        for i in range(0, len(ev) - 1, 2):
            iv.append((float(ev[i][1]), float(ev[i + 1][1])))
    rows, cur = [], None
    for line in open(a.log):
        line = line.rstrip("\n")
        if m := STAGE.match(line):
            cur = (m.group(1), secs(m.group(2)), secs(m.group(3)))
        elif (m := DONE.match(line)) and cur:
            name, est, at = cur
            took = secs(m.group(1))
            t0, t1 = a.start + at, a.start + at + took
            paused = sum(max(0.0, min(q, t1) - max(p, t0)) for p, q in iv)
            rows.append((name, est, took, paused))
            cur = None
    out = ["| stage | estimate printed | wall | paused inside | wall less pauses |", "|---|---|---|---|---|"]
    for name, est, took, paused in rows:
        out.append(f"| {name} | {est} s | {took} s | {paused:.0f} s | {took - paused:.0f} s |")
    text = "\n".join(out) + "\n"
    if a.o:
        open(a.o, "w").write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
