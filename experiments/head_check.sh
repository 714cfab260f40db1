#!/usr/bin/env bash
# Issue 19: why gamma solve --choose-head rescales the scores layer by layer. On the calibration
# text gamma layers measured on (calib-learn.txt, 4 x 512; never test or validation text), KLD vs
# the teacher of:
#   body-IQ3_S[-out-Q4_K|-embd-Q2_K]: every linear module at IQ3_S (the source's head, or one head
#     tensor lowered): is the body's cost the sum of its layers', and the head's the same in context?
#   hawq-IQ3_XS-o4e2 / -o5e3: HAWQ-V2's plans at IQ3_XS's size with the two heads, against what
#     one global factor (the layers' measured sum over what HAWQ-V2's raw scores say it costs) and the layer-scaled scores predict.
# Writes results/iq_qwen/head_choice/*.json and head_choice.md.
#   WORK=/tmp/gamma-qwen experiments/head_check.sh
set -euo pipefail
root=${GAMMA_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
G=$root/build/cli/gamma; W=${WORK:-/tmp/gamma-qwen}; R=$root/results/iq_qwen; O=$R/head_choice; T=${THREADS:-2}
L=$R/layers-IQ3_S-heads.json
mkdir -p $O
for v in body-IQ3_S: body-IQ3_S-out-Q4_K:output.weight=Q4_K body-IQ3_S-embd-Q2_K:token_embd.weight=Q2_K; do
  n=${v%%:*}; fx=${v#*:}
  [ -f $O/$n.plan.json ] || python3 - $L $W/pool-auto/manifest.json "$fx" $O/$n.plan.json <<'PY'
import json, sys
L, man, fx, out = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3], sys.argv[4]
plan = {"schema": "gamma.plan", "version": 1, "model_fingerprint": L["model_fingerprint"], "method": "head_check",
        "info": {}, "modules": {k: v["low"] for k, v in L["modules"].items()},
        "fixed": {f["name"]: f["source_type"] for f in man["fixed"]}}
if fx:
    t, ty = fx.split("=")
    plan["fixed"][t] = ty
json.dump(plan, open(out, "w"), indent=1)
PY
done
cp $R/plans/hawq-size-IQ3_XS-o4e2.json $O/hawq-IQ3_XS-o4e2.plan.json
cp $R/plans/hawq-size-IQ3_XS-o5e3.json $O/hawq-IQ3_XS-o5e3.plan.json
for p in $O/*.plan.json; do
  n=$(basename $p .plan.json)
  [ -f $O/$n.calib.json ] && continue
  $G emit $W/pool-all $p -o /dev/shm/head-check.gguf > /dev/null
  $G eval /dev/shm/head-check.gguf --teacher $W/teacher-f32.gguf --kld-base $W/kld-base-calib-4.bin \
    --text $W/calib-learn.txt --ctx 512 --chunks 4 -t $T -q -o $O/$n.calib.json > /dev/null
done
rm -f /dev/shm/head-check.gguf
python3 - $R $L $O <<'PY' | tee $R/head_choice.md
import json, sys
R, Lf, O = sys.argv[1:4]
L = json.load(open(Lf))
base = L["base_kld"]
k = lambda n: json.load(open(f"{O}/{n}.calib.json"))["kld"]["mean"]
lsum = sum(max(0, l["kld"] - base) for l in L["layers"])
H = {t: {ty: v - base for ty, v in h["kld"].items()} for t, h in L["heads"].items()}
S = {m: v["score"] for m, v in json.load(open(f"{R}/hawq.json"))["modules"].items()}
said = {}
for m, e in L["modules"].items():
    said.setdefault(int(m.split(".")[1]), 0.0)
    said[int(m.split(".")[1])] += S[m][e["ref"]] - S[m][e["low"]]
c = lsum / sum(said.values())
cl = {l["layer"]: max(0, l["kld"] - base) / said[l["layer"]] for l in L["layers"]}
def body(n, scale):
    p = json.load(open(f"{O}/{n}.plan.json"))["modules"]
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
PY
