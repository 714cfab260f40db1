#!/usr/bin/env python3
"""Which types does the speed table misprice on this machine? Each measured file's decode time
(1e6 / llama-bench tg128, us a token) against the table's price of its weights, by type.

The model fitted: time = rest + sum over types of scale[type] * (the table's price of the file's
weights of that type), least squares with a ridge pulling each scale to 1 (few files, more
types). Leave-one-out: each file predicted by the fit of the others, beside the table's own
prediction (every scale 1, the table's rest).

    python3 type_fit.py SPEED.json CHECK.json [CHECK.json ...] [--ridge 0.02] [--skip NAME]

CHECK.json: `gamma speed --bench` output (gamma.speed.check), paths relative to --root.
"""
import argparse, json, os, struct, sys, collections

GGML_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 10: "Q2_K", 11: "Q3_K",
              12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S",
              20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS", 30: "BF16"}


def tensor_types(path):
    """name -> type name, from the GGUF header (no numpy)."""
    with open(path, "rb") as f:
        def u32(): return struct.unpack("<I", f.read(4))[0]
        def u64(): return struct.unpack("<Q", f.read(8))[0]
        def s(): return f.read(u64()).decode("utf-8", "replace")
        sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
        def skip(t):
            if t == 8: s()
            elif t == 9:
                et, n = u32(), u64()
                for _ in range(n): skip(et)
            else: f.read(sizes[t])
        assert f.read(4) == b"GGUF", path
        u32()
        n_t, n_kv = u64(), u64()
        for _ in range(n_kv):
            s(); skip(u32())
        out = {}
        for _ in range(n_t):
            name = s(); nd = u32()
            for _ in range(nd): u64()
            out[name] = GGML_TYPES.get(u32(), "?"); u64()
        return out


def solve(A, b):
    """Least squares by the normal equations (small systems), Gauss-Jordan."""
    n = len(A[0])
    M = [[sum(A[k][i] * A[k][j] for k in range(len(A))) for j in range(n)] + [sum(A[k][i] * b[k] for k in range(len(A)))]
         for i in range(n)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(M[r][c]))
        M[c], M[p] = M[p], M[c]
        for r in range(n):
            if r != c and M[c][c] != 0:
                f = M[r][c] / M[c][c]
                M[r] = [x - f * y for x, y in zip(M[r], M[c])]
    return [M[i][n] / M[i][i] for i in range(n)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("speed")
    ap.add_argument("checks", nargs="+")
    ap.add_argument("--root", default=".")
    ap.add_argument("--ridge", type=float, default=0.02)
    ap.add_argument("--skip", action="append", default=[])
    a = ap.parse_args()
    table = json.load(open(a.speed))
    cost, rest = table["cost"], table["rest"]["decode_us"]
    rows = []  # (label, measured us, {type: table us})
    for c in a.checks:
        for f in json.load(open(c))["files"]:
            name = f["file"]
            if any(k in name for k in a.skip) or "tg128" not in f: continue
            types = tensor_types(os.path.join(a.root, name))
            by = collections.Counter()
            for t, ty in types.items():
                if t in cost and ty in cost[t]: by[ty] += cost[t][ty]["decode_us"]
            rows.append((f"{os.path.basename(name)} ({os.path.basename(c)})", 1e6 / f["tg128"], dict(by)))
    types = sorted({t for _, _, by in rows for t in by}, key=lambda t: -sum(by.get(t, 0) for _, _, by in rows))
    scale_of = {}

    def fit(rs):
        # unknowns: rest, scale per type; ridge rows pull each scale to 1 (in units of the mean time)
        norm = sum(m for _, m, _ in rs) / len(rs)
        A, b = [], []
        for _, m, by in rs:
            A.append([1.0] + [by.get(t, 0.0) for t in types]); b.append(m)
        for i, t in enumerate(types):
            row = [0.0] * (len(types) + 1); row[i + 1] = a.ridge * norm; A.append(row); b.append(a.ridge * norm)
        return solve(A, b)

    x = fit(rows)
    print(f"{len(rows)} files; ridge {a.ridge}; fitted rest {x[0]:.0f} us (the table's {rest:.0f})")
    print("| type | table's us in the files (mean) | fitted scale |\n|---|---:|---:|")
    for i, t in enumerate(types):
        print(f"| {t} | {sum(by.get(t, 0) for _, _, by in rows) / len(rows):.0f} | {x[i + 1]:.3f} |")
    print("\n| file | measured tg128 | table | error | leave-one-out fit | error |\n|---|---:|---:|---:|---:|---:|")
    errs_t, errs_f = [], []
    for k, (label, m, by) in enumerate(rows):
        xt = fit(rows[:k] + rows[k + 1:])
        pf = xt[0] + sum(xt[i + 1] * by.get(t, 0) for i, t in enumerate(types))
        pt = rest + sum(by.values())
        et, ef = 100 * (m / pt - 1), 100 * (m / pf - 1)  # prediction in tok/s over measured, -1
        errs_t.append(abs(et)); errs_f.append(abs(ef))
        print(f"| {label} | {1e6 / m:.2f} | {1e6 / pt:.2f} | {et:+.1f} % | {1e6 / pf:.2f} | {ef:+.1f} % |")
    med = lambda v: sorted(v)[len(v) // 2]
    print(f"\n|error|: the table median {med(errs_t):.1f} % max {max(errs_t):.1f} %; "
          f"leave-one-out fit median {med(errs_f):.1f} % max {max(errs_f):.1f} %")


if __name__ == "__main__":
    sys.exit(main())
