"""Long translations of the Multi30k recipe (scripts/multi30k.py) in pieces
that outlive a stop: a training source of 29,000 lines takes an ensemble
an hour or more on two cores, and a run stopped near its end made it again
from the first line. Here the source is cut into pieces of PIECE_LINES
lines, each translated by its own nmt-translate run into OUT.pieces/, and
OUT is written whole from them at the end; a run started again with the
same command, code and inputs goes on from the first piece not made.

PIECE_LINES is a multiple of nmt-translate's --window (1000 lines, the
lines it sorts by length and cuts into batches), so every piece holds whole
windows of the source and the pieces' batches are one run's: the output is
byte for byte that of one nmt-translate run on the whole file."""
import os
import shutil

WINDOW = 1000      # nmt-translate's --window
PIECE_LINES = 2000  # a multiple of WINDOW


def in_pieces(source, out, key, translate, nbest=False, lines=PIECE_LINES):
    """OUT made from SOURCE: by TRANSLATE(SOURCE, OUT) when SOURCE has at most
    LINES lines (or is not a file: TRANSLATE fails on it); else by
    TRANSLATE(OUT.pieces/K.in, OUT.pieces/K.out) for each piece K of LINES
    lines not yet made, then OUT written from the pieces in order (through
    OUT.joined, so a stop leaves no half of it) and the folder removed.
    TRANSLATE writes its output whole or not at all (nmt-translate -o does)
    and returns whether it succeeded. The folder's pieces are kept only when
    its `key` file says what they were made with: LINES, NBEST and KEY() (a
    string naming the command, the code and the inputs, asked for only when
    there are pieces); otherwise they are discarded first. With NBEST, the
    output's lines are n-best lines ("I ||| ...", I from 0 in each piece),
    and each piece's I is offset by its first line's number. Returns False,
    keeping the pieces made, as soon as TRANSLATE does. Raises ValueError,
    removing the piece, when a piece's output is not one line (NBEST: one
    list) per line of its input, and OSError when a file cannot be read or
    written."""
    if not os.path.isfile(source):
        return translate(source, out)
    with open(source, "rb") as f:
        source_lines = f.readlines()
    if len(source_lines) <= lines:
        return translate(source, out)
    key, folder = f"{lines} lines a piece{', n-best' if nbest else ''}\n{key()}", out + ".pieces"
    if os.path.isdir(folder) and not _says(f"{folder}/key", key):
        shutil.rmtree(folder)
    os.makedirs(folder, exist_ok=True)
    _write(f"{folder}/key", key.encode())
    starts = range(0, len(source_lines), lines)
    width = len(str(len(starts)))
    pieces = []
    for k, start in enumerate(starts, 1):
        piece = f"{folder}/{k:0{width}d}"
        pieces.append((start, min(lines, len(source_lines) - start), piece + ".out"))
        if os.path.exists(piece + ".out"):
            continue
        _write(piece + ".in", b"".join(source_lines[start:start + lines]))
        if not translate(piece + ".in", piece + ".out"):
            return False
        os.remove(piece + ".in")
    try:
        with open(out + ".joined", "wb") as joined:
            for start, count, piece in pieces:
                joined.write(_offset(piece, start, count, nbest))
        os.replace(out + ".joined", out)
    finally:
        if os.path.exists(out + ".joined"):
            os.remove(out + ".joined")
    shutil.rmtree(folder)
    return True


def _offset(piece, start, count, nbest):
    """The output PIECE of COUNT input lines, its n-best numbers (NBEST)
    offset by START. Raises ValueError, removing PIECE, when it does not
    answer each input line."""
    with open(piece, "rb") as f:
        lines = f.readlines()
    if nbest:
        numbers = [int(line.split(b" ||| ", 1)[0]) for line in lines if b" ||| " in line]
        answered = len(numbers) == len(lines) and numbers == sorted(numbers) and set(numbers) == set(range(count))
        lines = [b"%d ||| %s" % (n + start, line.split(b" ||| ", 1)[1]) for n, line in zip(numbers, lines)]
    else:
        answered = len(lines) == count
    if not answered:
        os.remove(piece)
        raise ValueError(f"{piece}: not one {'n-best list' if nbest else 'line'} per line of its {count}; "
                         "removed, to be made again")
    return b"".join(lines)


def _says(path, text):
    if not os.path.exists(path):
        return False
    with open(path, "rb") as f:
        return f.read() == text.encode()


def _write(path, data):
    """PATH holding DATA, replaced whole."""
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)
