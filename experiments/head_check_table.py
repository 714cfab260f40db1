#!/usr/bin/env python3
"""results/iq_qwen/head_choice.md: the table of experiments/head_check.sh, from the files it measured
(RESULTS/head_choice/*.{plan,calib}.json, on disk or in results/iq_qwen/data.tar.xz), LAYERS
(layers-IQ3_S-heads.json) and HAWQ-V2's scores.

  head_check_table.py results/iq_qwen results/iq_qwen/layers-IQ3_S-heads.json results/iq_qwen/head_choice
"""
import sys

import kept

R, Lf, O = sys.argv[1:4]
L = kept.load_json(Lf)
base = L["base_kld"]
k = lambda n: kept.load_json(f"{O}/{n}.calib.json")["kld"]["mean"]
lsum = sum(max(0, l["kld"] - base) for l in L["layers"])
H = {t: {ty: v - base for ty, v in h["kld"].items()} for t, h in L["heads"].items()}
S = {m: v["score"] for m, v in kept.load_json(f"{R}/hawq.json")["modules"].items()}
said = {}
for m, e in L["modules"].items():
    said.setdefault(int(m.split(".")[1]), 0.0)
    said[int(m.split(".")[1])] += S[m][e["ref"]] - S[m][e["low"]]
c = lsum / sum(said.values())
cl = {l["layer"]: max(0, l["kld"] - base) / said[l["layer"]] for l in L["layers"]}
def body(n, scale):
    p = kept.load_json(f"{O}/{n}.plan.json")["modules"]
    return sum(scale(m) * (S[m][L["modules"][m]["ref"]] - S[m][ch]) for m, ch in p.items())
print("# The head against the body, measured (Qwen2.5-Coder-1.5B, calib-learn.txt 4 x 512, KLD vs the F32 teacher)\n")
print("`WORK=/tmp/gamma-qwen experiments/head_check.sh`; head costs from `layers-IQ3_S-heads.json` (gamma layers --head).\n")
print("| quantity | KLD above the source's file |")
print("|---|---|")
print(f"| sum over layers of one layer at IQ3_S | {lsum:.4f} |")
print(f"| every layer at IQ3_S at once (body-IQ3_S) | {k('body-IQ3_S') - base:.4f} ({(k('body-IQ3_S') - base) / lsum:.2f} of the sum) |")
print(f"| output.weight Q6_K -> Q4_K: alone / on top of body-IQ3_S | {H['output.weight']['Q4_K']:.4f} / {k('body-IQ3_S-out-Q4_K') - k('body-IQ3_S'):.4f} |")
print(f"| token_embd.weight Q4_K -> Q2_K: alone / on top of body-IQ3_S | {H['token_embd.weight']['Q2_K']:.4f} / {k('body-IQ3_S-embd-Q2_K') - k('body-IQ3_S'):.4f} |")
print()
print("HAWQ-V2's plans at IQ3_XS's size (832.0 MB), the body's KLD above the source's file: measured (the file's")
print("KLD minus the base and the head's measured cost) and predicted from HAWQ-V2's scores in KLD units")
print(f"by one global factor (c = {c:.4f}: the layers' measured sum over what the scores say) or layer by layer (`--layer-scale`):\n")
print("| plan | file KLD | body, measured | body, one factor | body, layer by layer | head (measured alone) |")
print("|---|---|---|---|---|---|")
for n, o, e in (("hawq-IQ3_XS-o4e2", "Q4_K", "Q2_K"), ("hawq-IQ3_XS-o5e3", "Q5_K", "IQ3_S")):
    head = H["output.weight"][o] + H["token_embd.weight"][e]
    print(f"| {n} | {k(n):.4f} | {k(n) - base - head:.4f} | {body(n, lambda m: c):.4f} | "
          f"{body(n, lambda m: cl[int(m.split('.')[1])]):.4f} | {head:.4f} |")
