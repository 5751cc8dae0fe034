"""Reused results of the Multi30k recipe (scripts/multi30k.py): a val
translation or reranking, OUT.json, is reused when OUT.models says it was
made as now (the same models, settings and nmt-translate code) and none of its
inputs is newer; a file made from another is made again when that one is newer."""
import hashlib
import json
import os
import re
import subprocess
import threading

_lock = threading.Lock()
_digests = {}  # nmt-translate's path -> ((mtime, size), SHA-256)


def translator(bin_dir):
    """BIN_DIR/nmt-translate's code_digest(), a part of every reused result's
    key: a rebuild that changes the code makes the results again; a relink, or
    a build of another commit with the same code (a result file, a document),
    keeps them (an mtime would not tell these apart, nor would the plain
    bytes, which carry the commit). Raises OSError when the executable cannot
    be read or does not say its commit."""
    path = f"{bin_dir}/nmt-translate"
    stat = os.stat(path)
    with _lock:
        seen = _digests.get(path)
        if seen is None or seen[0] != (stat.st_mtime_ns, stat.st_size):
            stamp = build_commit(path).encode()
            with open(path, "rb") as f:
                seen = _digests[path] = ((stat.st_mtime_ns, stat.st_size), code_digest(f.read(), stamp))
        return seen[1]


def kernels(bin_dir):
    """What BIN_DIR/nmt-translate --version says it runs with here, after its
    first line: the LibTorch and BLAS kernels (which the CPU,
    OPENBLAS_CORETYPE and ATEN_CPU_CAPABILITY choose) and the SentencePiece
    module. Raises OSError when it cannot run."""
    version = subprocess.run([f"{bin_dir}/nmt-translate", "--version"], capture_output=True, text=True)
    if version.returncode != 0:
        raise OSError(f"{bin_dir}/nmt-translate --version: exit {version.returncode}")
    return version.stdout.splitlines()[1:]


def build_commit(executable):
    """The commit one of nmt's EXECUTABLEs was built from, as its --version
    names it ("-dirty" when the build had changes, cmake/commit.cmake).
    Raises OSError when it cannot run or names none."""
    version = subprocess.run([executable, "--version"], capture_output=True, text=True)
    stamp = re.search(r"\(commit ([^)\s]+)\)", version.stdout)
    if version.returncode != 0 or not stamp:
        raise OSError(f"{executable} --version: no commit in its output (exit {version.returncode})")
    return stamp[1]


# An ELF note of the GNU build ID: name size 4, descriptor size (one byte
# here, 20 for the linker's SHA-1), type 3 (NT_GNU_BUILD_ID), name "GNU".
_BUILD_ID_NOTE = re.compile(rb"\x04\x00\x00\x00(.)\x00\x00\x00\x03\x00\x00\x00GNU\x00", re.S)


def code_digest(data, stamp):
    """The SHA-256 of an executable's bytes DATA with what a build of the same
    code at another commit changes blanked: each occurrence of STAMP (the
    commit that --version names, cmake/commit.cmake) and the GNU build ID,
    which the linker derives from all the other bytes. Two clean commits'
    stamps have one length, so their builds of one code get one digest; a
    "-dirty" stamp is longer, moves what follows it, and gets another (the
    results are made again, never wrongly reused)."""
    data = data.replace(stamp, b"\0" * len(stamp))
    note = _BUILD_ID_NOTE.search(data)
    if note:
        n = note[1][0]
        data = data[:note.end()] + b"\0" * n + data[note.end() + n:]
    return hashlib.sha256(data).hexdigest()


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
