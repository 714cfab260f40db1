# A random model of Qwen2.5-Coder-1.5B's shape (its metadata, tokenizer and tensor shapes from
# meta.pkl, the first N layers), F16 weights ~ N(0, 0.02): timing only, the values do not matter.
import sys, pickle
sys.path.insert(0, 'gguf-py')
import numpy as np
from gguf import GGUFWriter, GGUFValueType
meta = pickle.load(open(sys.argv[1], 'rb'))
out, n = sys.argv[2], int(sys.argv[3])
w = GGUFWriter(out, 'qwen2')
for name, t, sub, v in meta['kv']:
    if name == 'general.architecture': continue
    if name == 'qwen2.block_count': v = n
    if name == 'general.file_type': v = 1
    w.add_key_value(name, v, GGUFValueType(t), GGUFValueType(sub) if sub is not None else None)
rng = np.random.default_rng(0)
for name, shape in meta['tensors']:
    if name.startswith('blk.') and int(name.split('.')[1]) >= n: continue
    np_shape = tuple(reversed(shape))
    if len(shape) == 1 or shape[1] == 1 and len(shape) == 2 and False:
        a = (1.0 + 0.02 * rng.standard_normal(np_shape, dtype=np.float32)).astype(np.float32)
    else:
        a = (0.02 * rng.standard_normal(np_shape, dtype=np.float32)).astype(np.float16)
    w.add_tensor(name, a)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
