#!/usr/bin/env python3
# Produces: results/iq_qwen/delta_fit.json.
"""How Stage I's measured loss changes depend on the candidate's weight error (issue 19).

For every module, fits delta_b = a + c * rel_err_b ** k over its candidates b (least squares,
with an intercept) for several powers k, and reports the R^2 over modules. rel_err is the
pool's imatrix-weighted relative error (gamma pool's manifest). k = 1 is what
`gamma solve --transform delta-fit` uses; k = 2 is the quadratic law HAWQ-V2 assumes.
  python3 experiments/delta_fit.py SCORES.json POOL/manifest.json -o results/iq_qwen/delta_fit.json
"""
import argparse
import json
import os

POWERS = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)


def fit(x, y):
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((a - mx) ** 2 for a in x)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    c = sxy / sxx if sxx > 0 else 0.0
    ss = sum((b - my) ** 2 for b in y)
    res = sum((b - my - c * (a - mx)) ** 2 for a, b in zip(x, y))
    return c, (1 - res / ss) if ss > 0 else 1.0


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scores")
    ap.add_argument("manifest")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    sc = json.load(open(a.scores))
    man = json.load(open(a.manifest))
    rel = {m["name"]: {c["id"]: c["rel_err"] for c in m["candidates"]} for m in man["modules"]}
    rows = {}
    slopes_nonpositive = {}
    for k in POWERS:
        r2 = []
        neg = 0
        for name, m in sc["modules"].items():
            d = m.get("delta")
            if not d:
                raise SystemExit(f"{a.scores}: module {name} has no measured deltas (gamma learn --measure-every)")
            ids = list(d)
            c, r = fit([rel[name][i] ** k for i in ids], [d[i] for i in ids])
            r2.append(r)
            neg += c <= 0
        rows[str(k)] = {"r2_median": pct(r2, 0.5), "r2_p10": pct(r2, 0.1), "r2_mean": sum(r2) / len(r2),
                        "r2_min": min(r2)}
        slopes_nonpositive[str(k)] = neg
    doc = {"schema": "gamma.delta_fit", "version": 1, "scores": os.path.basename(a.scores),
           "modules": len(sc["modules"]), "model": "delta_b = a + c * rel_err_b ** k, per module, least squares",
           "command": "python3 experiments/delta_fit.py " + " ".join([a.scores, a.manifest, "-o", a.out]),
           "by_power": rows, "nonpositive_slopes": slopes_nonpositive}
    with open(a.out + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(a.out + ".tmp", a.out)
    for k, r in rows.items():
        print(f"k={k}: R^2 median {r['r2_median']:.3f}, p10 {r['r2_p10']:.3f}, mean {r['r2_mean']:.3f}")


if __name__ == "__main__":
    main()
