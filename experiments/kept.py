# Produces no result: how every table generator reads results/ (disk, then the study's data.tar.xz).
"""results/ as kept, one rule for every table generator: a study's intermediates (its evals/, plans/,
and the like) live in ONE archive, results/STUDY/data.tar.xz, whose members are named relative to
results/STUDY (evals/NAME.wiki.json, plans/NAME.json, ...). A path under a directory that holds a
data.tar.xz is read from disk when it is there (the few files kept plain, e.g. for tests/, and
whatever a rerun writes) and from the archive otherwise.

  exists(p), load_json(p), read_text(p), glob(pattern)   as os.path.exists, json.load(open(p)),
                                                        open(p).read(), glob.glob, over disk + archive
  python3 experiments/kept.py cat PATH                  writes PATH's bytes (disk or archive) to stdout
  python3 experiments/kept.py extract results/STUDY      unpacks the members not on disk in place (the
                                                        scripts that skip what is already measured or read
                                                        plans with the C++ tools call it first; results/.gitignore
                                                        keeps the unpacked copies out of git)
  python3 experiments/kept.py pack results/STUDY FILE... moves plain files of the study into its archive (each
                                                        the member named relative to results/STUDY, replacing
                                                        one of that name; the archive is made if there is none),
                                                        then removes them (add their names to results/.gitignore)
"""
import fnmatch
import glob as _glob
import json
import os
import sys
import tarfile

ARCHIVE = "data.tar.xz"
_members = {}  # abspath of a study dir -> {member name: bytes}


def _study(path):
    """(abspath of the nearest directory above PATH holding data.tar.xz, PATH relative to it), or None."""
    p = os.path.abspath(path)
    d = os.path.dirname(p)
    while True:
        if os.path.isfile(os.path.join(d, ARCHIVE)):
            return d, os.path.relpath(p, d)
        up = os.path.dirname(d)
        if up == d:
            return None
        d = up


def _archive(study):
    if study not in _members:
        with tarfile.open(os.path.join(study, ARCHIVE), "r:xz") as t:
            _members[study] = {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}
    return _members[study]


def _read(path):
    if os.path.exists(path):
        with open(path, "rb") as f:
            return f.read()
    s = _study(path)
    if s and s[1] in _archive(s[0]):
        return _archive(s[0])[s[1]]
    raise FileNotFoundError(f"{path} (neither on disk nor in its study's {ARCHIVE})")


def exists(path):
    if os.path.exists(path):
        return True
    s = _study(path)
    return bool(s) and s[1] in _archive(s[0])


def read_text(path):
    return _read(path).decode()


def load_json(path):
    return json.loads(_read(path))


def glob(pattern):
    """glob.glob(PATTERN) over disk and the archive (wildcards in the file name or below the study dir)."""
    out = set(_glob.glob(pattern))
    s = _study(pattern)
    if s:
        study, rel = s
        parts = rel.split(os.sep)
        given = pattern.rstrip(os.sep)
        for _ in parts:
            given = os.path.dirname(given)
        for name in _archive(study):
            mp = name.split("/")
            if len(mp) == len(parts) and all(fnmatch.fnmatchcase(a, b) for a, b in zip(mp, parts)):
                out.add(os.path.join(given, *mp))
    return sorted(out)


def extract(study):
    """Unpacks the members not on disk (a file a rerun wrote is kept as it is)."""
    with tarfile.open(os.path.join(study, ARCHIVE), "r:xz") as t:
        t.extractall(study, members=[m for m in t.getmembers() if not os.path.exists(os.path.join(study, m.name))],
                     filter="data")


def pack(study, paths):
    """Moves PATHS (plain files below STUDY) into STUDY/data.tar.xz, members named relative to STUDY
    (replacing a member of the same name), then removes the plain files."""
    study = os.path.abspath(study)
    arc = os.path.join(study, ARCHIVE)
    names = {}
    for p in paths:
        rel = os.path.relpath(os.path.abspath(p), study)
        if rel.startswith("..") or not os.path.isfile(p):
            raise ValueError(f"{p}: not a file below {study}")
        names[rel.replace(os.sep, "/")] = p
    tmp = arc + ".tmp"
    with tarfile.open(tmp, "w:xz", format=tarfile.PAX_FORMAT) as new:
        if os.path.isfile(arc):
            with tarfile.open(arc, "r:xz") as old:
                for m in old.getmembers():
                    if m.name not in names:
                        new.addfile(m, old.extractfile(m) if m.isfile() else None)
        for rel, p in sorted(names.items()):
            info = new.gettarinfo(p, arcname=rel)
            info.mode, info.uid, info.gid, info.uname, info.gname = 0o644, 0, 0, "", ""
            with open(p, "rb") as f:
                new.addfile(info, f)
    os.replace(tmp, arc)
    for p in names.values():
        os.remove(p)
    _members.pop(study, None)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("cat", "extract", "pack") or (sys.argv[1] != "pack" and len(sys.argv) != 3):
        sys.exit("usage: kept.py cat PATH | kept.py extract results/STUDY | kept.py pack results/STUDY FILE...")
    if sys.argv[1] == "cat":
        sys.stdout.buffer.write(_read(sys.argv[2]))
    elif sys.argv[1] == "extract":
        extract(sys.argv[2])
    else:
        pack(sys.argv[2], sys.argv[3:])
