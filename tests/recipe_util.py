"""What tests/recipe_test.py's checks share: the tiny models' flags, the
failing check, the tiny corpus, a run of the recipe, its result file,
a snapshot of a run folder's files, the threads of a translation and an
executable restamped as another commit's build, and stand-ins for
nmt's executables."""
import glob
import json
import os
import re
import subprocess
import sys


# Tiny models that still say something after 3 epochs of 200 pairs (at the
# config's rate of 1e-3 the teachers' best checkpoint can be one that outputs
# nothing, which leaves the students no training pairs; the config's decoder
# state dropout, on a 32-wide state, leaves most of them empty too).
TINY = ("--max-epochs 3 --learning-rate 0.01 --batch-sentences 8 --vocab-size 200 --emb-dim 16 "
        "--enc-hidden 16 --dec-hidden 32 --attn-dim 32 --dec-hidden-dropout 0")


def check(ok, what):
    if not ok:
        sys.exit(f"recipe_test.py: failed: {what}")


def make_data(source, folder, lines):
    """FOLDER: a Multi30k-shaped tok-form en-de corpus, the first LINES of data/demo's splits."""
    os.makedirs(folder)
    for split, demo, n in (("train", "train", lines), ("val", "valid", 30), ("test_2016_flickr", "test", 30)):
        for lang, side in (("en", "src"), ("de", "tgt")):
            with open(f"{source}/data/demo/{demo}.{side}", encoding="utf-8") as f:
                head = [next(f) for _ in range(n)]
            with open(f"{folder}/{split}.lc.norm.tok.{lang}", "w", encoding="utf-8") as g:
                g.writelines(head)


def recipe(source, env, **extra):
    """Runs the recipe with ENV and EXTRA variables; its exit code and output."""
    p = subprocess.run([sys.executable, f"{source}/scripts/multi30k.py", env["DATA"], "en-de", "tok"],
                       env={**env, **extra}, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def result(results, pattern):
    files = glob.glob(f"{results}/{pattern}")
    check(len(files) == 1, f"one result file {pattern} in {results}, found {files}")
    return json.load(open(files[0]))


def snapshot(run):
    """Every file under RUN with its (mtime_ns, size)."""
    return {os.path.join(d, f): (os.stat(os.path.join(d, f)).st_mtime_ns, os.stat(os.path.join(d, f)).st_size)
            for d, _, files in os.walk(run) for f in files}


def stand_in(path, body):
    """Writes PATH, an executable shell script standing in for one of nmt's:
    --version names commit feedbee, as the real ones name theirs; anything
    else runs BODY."""
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\n[ \"$1\" = --version ] && echo 'nmt 0.1.0 (commit feedbee)' && exit 0\n{body}\n")
    os.chmod(path, 0o755)


def threads_of(nbest):
    """The --threads of the nmt-translate run that wrote the n-best list NBEST
    (its log NBEST.log says them): run again with as many, nmt-translate
    computes the same bits. With other threads, some kernels (OpenBLAS's
    Haswell ones) add some sums in another order, which can turn a near tie
    of the reranking the other way."""
    found = re.findall(r"threads (\d+)\)", open(nbest + ".log").read())
    check(found, f"{nbest}.log names the translation's threads")
    return found[0]


def restamp(path):
    """Rewrites the executable PATH as a build of the same code at another
    commit would be: the commit its --version names replaced by another of
    the same length, and its GNU build ID (found by readelf, apart from the
    recipe's own search) by other bytes. Checks that it still runs and names
    the new commit, that scripts/multi30k_cache.py's code_digest() is the
    same for both, and that it is not once a byte of the code changes."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    from multi30k_cache import build_commit, code_digest
    stamp = build_commit(path).encode()
    other = stamp.translate(bytes.maketrans(b"0123456789abcdef", b"123456789abcdef0"))  # each hex digit + 1
    build_id = re.search(r"Build ID: ([0-9a-f]+)", subprocess.run(["readelf", "-n", path], capture_output=True,
                                                                   text=True).stdout)
    data = open(path, "rb").read()
    new = data.replace(stamp, other)
    if build_id:
        old_id = bytes.fromhex(build_id[1])
        check(new.count(old_id) == 1, f"{path}'s build ID is in its bytes once")
        new = new.replace(old_id, bytes(255 - b for b in old_id))
    check(new != data and code_digest(new, other) == code_digest(data, stamp),
          f"a build of the same code at another commit has the same code digest ({stamp} -> {other})")
    at = len(new) // 2  # a byte of the code (.text sits in the middle of the file)
    changed = new[:at] + bytes([new[at] ^ 1]) + new[at + 1:]
    check(code_digest(changed, other) != code_digest(new, other), "a change of the code changes the digest")
    with open(path, "wb") as f:
        f.write(new)
    said = build_commit(path)
    check(said == other.decode(), f"the restamped {path} runs and names its commit: {said}")
