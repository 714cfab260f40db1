#!/usr/bin/env python3
# Two GGUFs of the same model, tensor by tensor: how many have the same type and the same bytes,
# and which do not. The protocol's fair control (a mix's own per-tensor types emitted from
# gamma's pool) needs no evaluation of its own where every tensor is the mix's bytes: the two
# files then give llama.cpp the same weights. Reads with llama.cpp's gguf-py (GGUF_PY: its
# directory, default the vendored copy in gamma's cache); prints one JSON line, and a summary
# line on stderr; exits 0 when every tensor is the same bytes, 1 when some differ, 2 when a file cannot be read.
#   python3 same_tensors.py A.gguf B.gguf
import hashlib
import json
import os
import sys

sys.path.insert(0, os.environ.get(
    "GGUF_PY", os.path.expanduser("~/.cache/gamma/deps/llama-cpp-python-0.3.36/vendor/llama.cpp/gguf-py")))
import gguf  # noqa: E402


def tensors(path):
    out = {}
    for t in gguf.GGUFReader(path).tensors:
        out[t.name] = (t.tensor_type.name, hashlib.sha256(t.data.tobytes()).hexdigest())
    return out


try:
    a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
except Exception as e:  # 1 means "differ": a file that cannot be read is another answer
    print(f"same_tensors.py: {e}", file=sys.stderr)
    sys.exit(2)
differ = sorted(n for n in a.keys() & b.keys() if a[n] != b[n])
out = {
    "a": sys.argv[1], "b": sys.argv[2], "tensors": len(a.keys() | b.keys()),
    "same_bytes": sum(1 for n in a.keys() & b.keys() if a[n] == b[n]),
    "only_in_a": sorted(a.keys() - b.keys()), "only_in_b": sorted(b.keys() - a.keys()),
    "differ": [{"tensor": n, "a": a[n][0], "b": b[n][0]} for n in differ],
}
print(json.dumps(out))
print(f"{sys.argv[2]}: {out['same_bytes']} of {out['tensors']} tensors the same bytes; {len(differ)} differ", file=sys.stderr)
sys.exit(0 if out["same_bytes"] == out["tensors"] else 1)
