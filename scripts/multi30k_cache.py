"""Reused results of the Multi30k recipe (scripts/multi30k.py): a val
translation or reranking, OUT.json, is reused when OUT.models says it was
made as now (the same models, settings and nmt-translate) and none of its
inputs is newer; a file made from another is made again when that one is newer."""
import hashlib
import json
import os
import threading

_lock = threading.Lock()
_digests = {}  # nmt-translate's path -> ((mtime, size), SHA-256)


def translator(bin_dir):
    """BIN_DIR/nmt-translate's SHA-256, a part of every reused result's key: a
    rebuild that changes its bytes makes the results again, a relink that
    does not keeps them (an mtime would not tell the two apart). Raises
    OSError when it cannot be read."""
    path = f"{bin_dir}/nmt-translate"
    stat = os.stat(path)
    with _lock:
        seen = _digests.get(path)
        if seen is None or seen[0] != (stat.st_mtime_ns, stat.st_size):
            with open(path, "rb") as f:
                seen = _digests[path] = ((stat.st_mtime_ns, stat.st_size), hashlib.sha256(f.read()).hexdigest())
        return seen[1]


def fresh(result, sidecar, made, inputs):
    """Whether RESULT is there, SIDECAR says MADE, and none of INPUTS is newer than RESULT."""
    return (os.path.exists(result) and os.path.exists(sidecar) and open(sidecar).read().strip() == made
            and all(os.path.getmtime(result) > os.path.getmtime(p) for p in inputs))


def nonempty(path):
    return os.path.exists(path) and os.path.getsize(path) > 0


def newer(path, *sources):
    """Whether PATH is there, not empty, and no older than any of SOURCES (a
    file made from them: the clock's granularity can give both one time)."""
    return (nonempty(path) and all(os.path.getmtime(path) >= os.path.getmtime(s) for s in sources))


def cached(out, made, inputs, key):
    """OUT.json's figure KEY when it is fresh() with OUT.models saying MADE;
    None otherwise (the caller makes OUT.json, then record()s MADE)."""
    return json.load(open(out + ".json"))[key] if fresh(out + ".json", out + ".models", made, inputs) else None


def record(out, made, key):
    """Writes MADE into OUT.models, once OUT.json is made; returns its figure KEY."""
    with open(out + ".models", "w") as f:
        f.write(made + "\n")
    return json.load(open(out + ".json"))[key]
