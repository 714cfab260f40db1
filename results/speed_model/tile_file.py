#!/usr/bin/env python3
"""Copy a GGUF and overwrite every linear module's data (blk.*.{attn,ffn}_*.weight) with its first 64 rows
repeated, as gamma's probes tile one quantized 64-row block: the same file, writer and types, only the data tiled.
With --shuffle, every row after the first 64 is its tile row with the blocks in a random order (seeded), as gamma's
probes are from 2026-12-08: the same blocks, no repeated page.
Usage: tile_file.py [--shuffle] IN.gguf OUT.gguf (the types must be block types whose row size is n_in/blck*type_size)."""
import random, re, shutil, struct, sys

SIZES = {8: (32, 34), 10: (256, 84), 11: (256, 110), 12: (256, 144), 14: (256, 210), 2: (32, 18), 3: (32, 20)}  # Q8_0 Q2_K Q3_K Q4_K Q6_K Q4_0 Q4_1

def main(src, dst, shuffle=False):
    rng = random.Random(1234)
    shutil.copyfile(src, dst)
    with open(dst, 'r+b') as f:
        def rd(fmt):
            return struct.unpack('<' + fmt, f.read(struct.calcsize('<' + fmt)))[0]
        def rstr():
            return f.read(rd('Q')).decode()
        def skip_val(t):
            fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
            if t in fixed: f.read(fixed[t]); return None
            if t == 8: return rstr()
            if t == 9:
                et, n = rd('I'), rd('Q')
                for _ in range(n): skip_val(et)
                return None
            raise ValueError(t)
        assert f.read(4) == b'GGUF'
        rd('I'); nt, nkv = rd('Q'), rd('Q')
        align = 32
        for _ in range(nkv):
            k, t = rstr(), rd('I')
            if k == 'general.alignment':
                align = rd('I')
            else:
                skip_val(t)
        infos = []
        for _ in range(nt):
            name = rstr(); nd = rd('I'); dims = [rd('Q') for _ in range(nd)]; t = rd('I'); off = rd('Q')
            infos.append((name, dims, t, off))
        base = (f.tell() + align - 1) // align * align
        n = 0
        for name, dims, t, off in infos:
            if not re.match(r'blk\.\d+\.(attn_(q|k|v|output)|ffn_(gate|up|down))\.weight$', name):
                continue
            blck, tsz = SIZES[t]
            row = dims[0] // blck * tsz
            f.seek(base + off)
            tile = f.read(row * 64)
            for r in range(64, dims[1], 64):
                f.seek(base + off + r * row)
                part = tile[: row * min(64, dims[1] - r)]
                if shuffle:
                    out = []
                    for i in range(0, len(part), row):
                        blocks = [part[j:j + tsz] for j in range(i, i + row, tsz)]
                        rng.shuffle(blocks)
                        out.append(b''.join(blocks))
                    part = b''.join(out)
                f.write(part)
            n += 1
        print(f'{n} tensors tiled')

args = sys.argv[1:]
main(*[a for a in args if a != '--shuffle'], shuffle='--shuffle' in args)
