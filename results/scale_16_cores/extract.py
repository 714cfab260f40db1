# Qwen2.5-Coder-1.5B's metadata and tensor shapes (no weights), for a random model of its shape.
import sys, pickle
sys.path.insert(0, 'gguf-py')
from gguf import GGUFReader, GGUFValueType
r = GGUFReader(sys.argv[1])
kv = []
for f in r.fields.values():
    if f.name.startswith('GGUF.'): continue
    t = f.types[0]
    if t == GGUFValueType.ARRAY:
        sub = f.types[1]
        if sub == GGUFValueType.STRING:
            v = [bytes(f.parts[i]).decode('utf-8', errors='surrogateescape') for i in f.data]
        else:
            v = [f.parts[i].tolist()[0] for i in f.data]
        kv.append((f.name, int(t), int(sub), v))
    elif t == GGUFValueType.STRING:
        kv.append((f.name, int(t), None, bytes(f.parts[f.data[0]]).decode('utf-8')))
    else:
        kv.append((f.name, int(t), None, f.parts[f.data[0]].tolist()[0]))
tensors = [(t.name, [int(x) for x in t.shape]) for t in r.tensors]
pickle.dump({'kv': kv, 'tensors': tensors}, open(sys.argv[2], 'wb'))
print(len(kv), 'keys', len(tensors), 'tensors', [k for k in kv if not isinstance(k[3], list)][:40])
