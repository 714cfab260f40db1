#!/usr/bin/env python3
"""The front at one size (front.sh's files): a Markdown table and an SVG of KLD against measured
decode tok/s, the mix as its own point. Paired KLD differences to the mix per chunk, from the
evaluations' per-chunk means (the same chunks: the run's teacher base files).
   python3 front_table.py WORK MIX  ->  WORK/front/MIX-front.md, MIX-front.svg"""
import json, math, os, sys

work, mix = sys.argv[1], sys.argv[2]
fr = os.path.join(work, "front")
bench = json.load(open(os.path.join(fr, f"{mix}-bench.json")))
speed = {os.path.basename(f["file"]): f for f in bench["files"]}


def ev(stem, text):
    if stem.startswith("llama-"):
        p = os.path.join(work, "run", f"{stem}.report-{text}-c512-n16.json")
    else:
        p = os.path.join(fr, f"{stem}.{text}.json")
    return json.load(open(p))


def kld(e):
    k = e["kld"] if "kld" in e else e["metrics"]["kld"]
    return k["mean"], k.get("stderr", k.get("error", 0)), k.get("chunk_means")


def paired(a, b):
    ca, cb = kld(a)[2], kld(b)[2]
    if not ca or not cb or len(ca) != len(cb):
        return None
    d = [x - y for x, y in zip(ca, cb)]
    m = sum(d) / len(d)
    s = math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1) / len(d))
    return m, s


rows = []
for name in sorted(speed, key=lambda n: speed[n]["tg128"]):
    stem = name[:-5]
    plan = os.path.join(fr, stem + ".json")
    budget = None
    if os.path.exists(plan):
        info = json.load(open(plan))["info"].get("speed", {})
        budget = info.get("min_decode_tps") or None
    rows.append((stem, speed[name], budget))
mixstem = f"llama-{mix}"
out = [f"# The speed/quality front at {mix}'s size\n",
       "| file | bytes | decode budget (table) | tg128 predicted | tg128 measured | pp512 | KLD wiki.test | KLD python-eval | paired vs mix, wiki / python |",
       "|---|---|---|---|---|---|---|---|---|"]
pts = []
for stem, s, budget in rows:
    w, p = ev(stem, "wiki.test"), ev(stem, "python-eval")
    mw, mp = ev(mixstem, "wiki.test"), ev(mixstem, "python-eval")
    pw, pp = paired(w, mw), paired(p, mp)
    pr = "" if stem == mixstem or not pw or not pp else f"{pw[0]:+.4f} ± {pw[1]:.4f} / {pp[0]:+.4f} ± {pp[1]:.4f}"
    b = "" if stem == mixstem else ("none" if not budget else f"{budget:.2f}")
    out.append(f"| {stem} | {os.path.getsize(os.path.join(work, 'run' if stem == mixstem else 'front', stem + '.gguf')):,} | {b} | "
               f"{s.get('predicted_tg128', 0):.2f} | {s['tg128']:.2f} | {s['pp512']:.1f} | {kld(w)[0]:.4f} ± {kld(w)[1]:.4f} | "
               f"{kld(p)[0]:.4f} ± {kld(p)[1]:.4f} | {pr} |")
    pts.append((stem, s["tg128"], kld(w)[0], kld(p)[0]))
open(os.path.join(fr, f"{mix}-front.md"), "w").write("\n".join(out) + "\n")

# SVG: x = measured tg128, y = KLD; one series per text, the mix drawn as a square.
W, H, L, B = 720, 440, 70, 50
xs = [p[1] for p in pts]; ys = [v for p in pts for v in p[2:]]
x0, x1 = min(xs) * 0.97, max(xs) * 1.03
y0, y1 = 0, max(ys) * 1.1
X = lambda x: L + (x - x0) / (x1 - x0) * (W - L - 20)
Y = lambda y: H - B - (y - y0) / (y1 - y0) * (H - B - 20)
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<line x1="{L}" y1="{H-B}" x2="{W-20}" y2="{H-B}" stroke="black"/><line x1="{L}" y1="20" x2="{L}" y2="{H-B}" stroke="black"/>',
       f'<text x="{(W+L)/2}" y="{H-12}" text-anchor="middle">decode tok/s (llama-bench tg128, same rounds)</text>',
       f'<text x="16" y="{(H-B)/2}" transform="rotate(-90 16 {(H-B)/2})" text-anchor="middle">KLD vs teacher (16 x 512)</text>',
       f'<text x="{L}" y="14">{mix}\'s size: gamma at decode budgets (circles), llama.cpp {mix} (squares)</text>']
for i in range(6):
    yv = y0 + (y1 - y0) * i / 5; xv = x0 + (x1 - x0) * i / 5
    svg.append(f'<text x="{L-6}" y="{Y(yv)+4:.1f}" text-anchor="end">{yv:.3f}</text>')
    svg.append(f'<text x="{X(xv):.1f}" y="{H-B+16}" text-anchor="middle">{xv:.1f}</text>')
for k, (col, lab) in enumerate([("#1f77b4", "wiki.test"), ("#d62728", "python-eval")]):
    g = sorted([p for p in pts if p[0] != mixstem], key=lambda p: p[1])
    svg.append('<polyline fill="none" stroke="%s" points="%s"/>' % (col, " ".join(f"{X(p[1]):.1f},{Y(p[2+k]):.1f}" for p in g)))
    for p in pts:
        if p[0] == mixstem:
            svg.append(f'<rect x="{X(p[1])-5:.1f}" y="{Y(p[2+k])-5:.1f}" width="10" height="10" fill="{col}"/>')
        else:
            svg.append(f'<circle cx="{X(p[1]):.1f}" cy="{Y(p[2+k]):.1f}" r="4" fill="{col}"/>')
    svg.append(f'<text x="{W-150}" y="{40+16*k}" fill="{col}">{lab}</text>')
svg.append("</svg>")
open(os.path.join(fr, f"{mix}-front.svg"), "w").write("\n".join(svg) + "\n")
print("\n".join(out))
