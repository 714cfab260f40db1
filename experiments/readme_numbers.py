#!/usr/bin/env python3
# Produces no result: checks that results/README.md's hand-written tables quote their sources.
"""Every numeric table of results/README.md against the files its numbers come from.

The line right above a table's header row is one HTML comment that names where the table comes from:

  <!-- rows: SOURCE -->
      the table is an exact copy (or a subset of the rows) of a generator's output: each of its
      data rows must be a line of SOURCE, verbatim. SOURCE is a file, or a command run from the
      repository root whose output is the text (`python3 experiments/GENERATOR.py ARGS`).
  <!-- numbers: SOURCE... [; allow: NUMBER... (REASON)] -->
      the table re-arranges numbers: every number in its data rows, the first column (the row
      labels) and the header excepted, must be a number of some SOURCE as printed, i.e.
        - printed with d decimals, it equals a source number rounded to d decimals (within half
          a unit of the last printed digit); an integer equals a source number rounded to an
          integer (so byte counts match exactly); 5.1e-7 to the mantissa's digits;
        - or it equals the source number x 100 so rounded (percentages and accuracy points);
        - a number followed by MB / MiB / GB / GiB may also be the source in bytes so scaled, and
          one followed by min the source in seconds;
      where a printed number is: an optional sign (+, -, U+2212), digits with optional thousands
      commas, optional decimals and exponent, standing alone (not part of a name such as Q2_K,
      o4e2, d64k, blk.1 or top-1); `**` markers are dropped; both sides of a `±` pair are numbers;
      a parenthesis without a standalone number is a label and dropped, one with a number
      (`(sum 0.4419, lowest)`, `(249)`) is checked.
      The numbers that no source holds (a ratio or a difference taken by hand) are listed after
      `allow:` with the reason in parentheses; an allowed number must still be a miss, so the list
      cannot go stale.
  SOURCE: a path relative to the repository root, glob wildcards allowed, read from disk or from
  its study's data.tar.xz through experiments/kept.py. A JSON source contributes every number in
  it (strings too, tokenised as above); any other file every number in its text. PATH.json#a.b
  takes only the part of a JSON file under key a, then b (a list index is a number): for a file
  whose other numbers (a 300-step curve, say) would match almost anything.
  With --regenerated DIR (experiments/tables.sh passes its temporary tree) a source results/P is
  read from DIR/P where that file exists: the tables are checked against what was just regenerated.

A table whose data rows hold a number and that has no marker is itself an error, so a new table
written by hand cannot slip by; the file index (the table with the header `| file | command |
what |`) is the one table not checked. A marker not followed by a table is an error too.
Per table one line, `same` or `DIFFERS` with the numbers no source holds; exit 1 on any difference.
A number is looked up among all numbers of the named sources, not in one cell of them, so a low
precision number (0.3, 4) can match by chance: name the narrowest sources (a JSON part with #).
-v prints each number with the source number it matched and where that is.

  python3 experiments/readme_numbers.py [--readme results/README.md] [--regenerated DIR] [-v]
"""
import argparse
import bisect
import json
import math
import os
import re
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kept  # noqa: E402

ROOT = os.path.dirname(HERE)
INDEX_HEADER = "| file | command | what |"
MARKER = re.compile(r"^<!--\s*(rows|numbers):\s*(.*?)\s*-->\s*$")
NUM = re.compile(r"(?P<sign>[+\-\u2212]?)(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?"
                 r"(?:e(?P<exp>[+\-\u2212]?\d+))?")
UNIT = re.compile(r"\s*(MiB|MB|GiB|GB|min)(?![A-Za-z])")
UNITS = {"MB": 1e6, "MiB": 2.0 ** 20, "GB": 1e9, "GiB": 2.0 ** 30, "min": 60.0}


def numbers(text, units=False):
    """(printed, value, half a unit of the last digit, unit scale or None) of each number in TEXT."""
    out = []
    for m in NUM.finditer(text):
        s, e = m.span()
        before = text[s - 1] if s > 0 else " "
        after = text[e] if e < len(text) else " "
        if before.isalnum() or before in "_." or (not m["sign"] and before in "-+\u2212") \
                or after.isalnum() or after == "_":
            continue
        sign = "-" if m["sign"] in "-\u2212" and m["sign"] else ""
        digits = m["int"].replace(",", "") + (m["frac"] or "")
        d = len(m["frac"]) - 1 if m["frac"] else 0
        exp = int(m["exp"].replace("\u2212", "-")) if m["exp"] else 0
        value = float(sign + digits) * 10.0 ** exp
        if not math.isfinite(value):
            continue
        unit = UNIT.match(text, e) if units else None
        out.append((m.group(0).replace("\u2212", "-"), value, 0.5 * 10.0 ** (exp - d),
                    UNITS[unit.group(1)] if unit else None))
    return out


def strip_labels(cell):
    """A cell without `**` markers and without parenthesised labels (a parenthesis holding a
    number, e.g. "(sum 0.4419, lowest)" or "(249)", is kept)."""
    cell = cell.replace("**", "")
    return re.sub(r"\(([^()]*)\)", lambda m: m.group(0) if numbers(m.group(1)) else "", cell)


def cells(row):
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


class Sources:
    def __init__(self, regenerated):
        self.regenerated = regenerated
        self.values = {}  # spec -> (sorted floats, where each came from)
        self.texts = {}

    def paths(self, spec):
        found = kept.glob(os.path.join(ROOT, spec))
        if not found:
            raise FileNotFoundError(f"no source {spec} (neither on disk nor in its study's archive)")
        return found

    def read(self, path):
        rel = os.path.relpath(path, ROOT)
        if self.regenerated and rel.startswith("results" + os.sep):
            alt = os.path.join(self.regenerated, os.path.relpath(rel, "results"))
            if os.path.isfile(alt):
                with open(alt, "rb") as f:
                    return f.read()
        return kept._read(path)

    def text(self, spec):
        if spec not in self.texts:
            if spec.startswith("python3 "):
                r = subprocess.run(shlex.split(spec), cwd=ROOT, capture_output=True, text=True)
                if r.returncode != 0:
                    raise RuntimeError(f"{spec} failed: {r.stderr.strip()[-300:]}")
                self.texts[spec] = r.stdout
            else:
                self.texts[spec] = "\n".join(self.read(p).decode() for p in self.paths(spec))
        return self.texts[spec]

    def numbers(self, spec):
        if spec not in self.values:
            pattern, _, keys = spec.partition("#")
            vals = []
            for p in self.paths(pattern):
                raw, rel = self.read(p), os.path.relpath(p, ROOT)
                if keys:
                    obj = json.loads(raw)
                    for k in keys.split("."):
                        obj = obj[int(k)] if isinstance(obj, list) else obj[k]
                    walk(obj, vals, f"{rel}:{keys}")
                elif p.endswith(".json"):
                    walk(json.loads(raw), vals, rel)
                else:
                    vals += [(v, rel) for _, v, _, _ in numbers(raw.decode(errors="replace"))]
            vals.sort(key=lambda x: x[0])
            self.values[spec] = ([v for v, _ in vals], [w for _, w in vals])
        return self.values[spec]


def walk(obj, vals, where):
    """Every number in a JSON value, with where it is (PATH:key.key[i])."""
    if isinstance(obj, bool) or obj is None:
        return
    if isinstance(obj, (int, float)):
        if math.isfinite(obj):
            vals.append((float(obj), where))
    elif isinstance(obj, str):
        vals += [(v, where) for _, v, _, _ in numbers(obj)]
    elif isinstance(obj, dict):
        for k, v in obj.items():
            walk(k, vals, f"{where}:{k} (key)" if ":" not in where else f"{where}.{k} (key)")
            walk(v, vals, f"{where}:{k}" if ":" not in where else f"{where}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            walk(v, vals, f"{where}[{i}]")


def held(value, half, unit, lists):
    """The first source number that, rounded as VALUE was printed (or x 100, or in bytes), is VALUE:
    (number, where), or None."""
    h = half * (1 + 1e-9) + 1e-12 * abs(value)
    windows = [(value - h, value + h), ((value - h) / 100, (value + h) / 100)]
    if unit:
        windows.append(((value - h) * unit, (value + h) * unit))
    for vals, where in lists:
        for lo, hi in windows:
            i = bisect.bisect_left(vals, lo)
            if i < len(vals) and vals[i] <= hi:
                return vals[i], where[i]
    return None


def tables(lines):
    """(index of the header line, [data rows]) of each table."""
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and (i == 0 or not lines[i - 1].startswith("|")):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            yield i, lines[i + 2:j]
            i = j
        else:
            i += 1


def parse_numbers_marker(body):
    specs, _, allow = body.partition(";")
    allowed, reason = set(), ""
    if allow.strip():
        m = re.match(r"\s*allow:\s*(.*)$", allow)
        if not m:
            raise ValueError(f"after ';' only 'allow: NUMBER... (REASON)' may follow: {allow.strip()}")
        rest = m.group(1)
        while True:
            t = re.match(r"\s*([+\-\u2212]?[\d.,]+(?:e[+\-\u2212]?\d+)?)(?=\s|$)", rest)
            if not t:
                break
            allowed.add(t.group(1).replace("\u2212", "-"))
            rest = rest[t.end():]
        reason = rest.strip()
        if not (allowed and reason.startswith("(") and reason.endswith(")") and len(reason) > 2):
            raise ValueError("allow: needs the numbers as printed, then the reason in parentheses")
    return specs.split(), allowed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--readme", default=os.path.join(ROOT, "results", "README.md"))
    ap.add_argument("--regenerated", help="a tree like results/ with regenerated files, read before results/")
    ap.add_argument("-v", "--verbose", action="store_true", help="each number with the source number it matched")
    a = ap.parse_args()
    src = Sources(a.regenerated)
    lines = open(a.readme).read().split("\n")
    name = os.path.relpath(a.readme, ROOT)
    bad = 0
    headers = set()
    for h, rows in tables(lines):
        headers.add(h)
        where = f"{name}:{h + 1} ({lines[h][:60].rstrip()}…)"
        m = MARKER.match(lines[h - 1]) if h > 0 else None
        numeric = [r for r in rows if any(numbers(strip_labels(c)) for c in cells(r)[1:])]
        if not m:
            if lines[h].strip() == INDEX_HEADER or not numeric:
                continue
            print(f"DIFFERS   {where}: a table of numbers without a <!-- numbers: ... --> or <!-- rows: ... --> line above it")
            bad += 1
            continue
        kind, body = m.groups()
        try:
            if kind == "rows":
                have = set(src.text(body).split("\n"))
                missing = [r for r in rows if r not in have]
                if missing:
                    print(f"DIFFERS   {where}: rows not in {body}:")
                    for r in missing:
                        print(f"            {r}")
                    bad += 1
                else:
                    print(f"same      {where}: {len(rows)} rows in {body}")
                continue
            specs, allowed = parse_numbers_marker(body)
            lists = [src.numbers(s) for s in specs]
        except (OSError, ValueError, RuntimeError, KeyError, IndexError, TypeError) as e:
            msg = f"no key {e} in a source" if isinstance(e, (KeyError, IndexError)) else str(e)
            print(f"DIFFERS   {where}: {msg}")
            bad += 1
            continue
        misses, count = [], 0
        for r in rows:
            cs = cells(r)
            for c in cs[1:]:
                for printed, value, half, unit in numbers(strip_labels(c), units=True):
                    count += 1
                    hit = held(value, half, unit, lists)
                    if not hit:
                        misses.append((printed, cs[0]))
                    elif a.verbose:
                        print(f"  {h + 1}  {cs[0][:30]:30}  {printed:>14}  = {hit[0]!r:24} {hit[1]}")
        unexplained = [(p, lab) for p, lab in misses if p not in allowed]
        stale = sorted(allowed - {p for p, _ in misses})
        if unexplained or stale:
            bad += 1
            print(f"DIFFERS   {where}: numbers in none of {' '.join(specs)}:")
            for p, lab in unexplained:
                print(f"            {p}   (row '{lab}')")
            for p in stale:
                print(f"            allow: {p} is not needed (found in a source, or not in the table)")
        else:
            extra = f", {len(misses)} allowed" if misses else ""
            print(f"same      {where}: {count} numbers{extra}")
    for i, l in enumerate(lines):
        if MARKER.match(l) and i + 1 not in headers:
            print(f"DIFFERS   {name}:{i + 1}: a marker not directly above a table's header row")
            bad += 1
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
