# Produces no result: how the table generators write OUT.md and OUT.json.
"""An experiment's table: printed, and with -o PATH written as Markdown to PATH and as JSON
beside it (PATH with .json), each atomically (a temporary file renamed over the old one)."""
import argparse
import json
import os


def dir_and_out():
    """The usual command line of a table over one results directory: DIR [-o PATH.md]."""
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    return a.dir, a.out


def emit_table(lines, obj, md_path=None):
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if not md_path:
        return
    js = os.path.splitext(md_path)[0] + ".json"
    for path, write in ((md_path, lambda f: f.write(text)), (js, lambda f: json.dump(obj, f, indent=1))):
        with open(path + ".tmp", "w") as f:
            write(f)
        os.replace(path + ".tmp", path)
