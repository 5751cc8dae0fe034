"""The Multi30k recipe's long translations in pieces (scripts/multi30k_pieces.py,
Recipe.nmt_translate()), on the run folder that tests/recipe_test.py's runs
leave: called directly, with the real nmt-translate and a stand-in. Exits
through check() when a check fails."""
import os
import subprocess

from recipe_util import check, stand_in


def pieces(r, run, tmp):
    """A long translation in pieces (multi30k_pieces.py), with pieces of 60
    lines. With nmt-translate's --window at 20 (a piece holds whole windows,
    as the recipe's 2,000 lines hold its 1,000), the output and the n-best
    list, their numbers offset, are those of one nmt-translate run on the
    whole file. With a stand-in nmt-translate: a run stopped part way keeps
    its pieces and the next makes only the rest; a touched model, or
    another thread count, makes them all again; a piece short of lines is
    refused and made again; a file of at most one piece, a scored one, and
    one whose --window does not divide a piece go whole."""
    import multi30k
    source, model = f"{run}/data/train.en", f"{run}/model-1/best.ckpt"
    saved, multi30k.PIECE_LINES = multi30k.PIECE_LINES, 60
    try:
        for extra, name, lines in (([], "pieces.out", 200), (["--n-best", "2"], "pieces.nbest", 400)):
            args = ["-b", "2", "--window", "20", *extra]
            whole = subprocess.run([f"{r.bin}/nmt-translate", "-m", model, "--threads", r.threads, *args,
                                    "-i", source], capture_output=True, check=True).stdout
            r.nmt_translate([model], [*args, "-i", source, "-o", f"{tmp}/{name}"], f"{tmp}/{name}.log")
            check(open(f"{tmp}/{name}", "rb").read() == whole and whole.count(b"\n") == lines,
                  f"{name}: the pieces' output is one run's")
            check("pieces/1.in (of " in open(f"{tmp}/{name}.log").read() and
                  not os.path.exists(f"{tmp}/{name}.pieces"), f"{name}: made in pieces, the pieces removed")
        real, r.bin = r.bin, f"{tmp}/pieces-bin"
        os.makedirs(r.bin)
        stand_in(f"{r.bin}/nmt-translate", f"""i=; o=; prev=; for a in "$@"; do
  [ "$prev" = -i ] && i=$a; [ "$prev" = -o ] && o=$a; prev=$a; done
echo "${{i##*/}}" >> {tmp}/pieces.calls
[ "${{i##*/}}" = "$(cat {tmp}/pieces.fail 2>/dev/null)" ] && exit 3
[ "${{i##*/}}" = "$(cat {tmp}/pieces.short 2>/dev/null)" ] && {{ head -n 5 "$i" > "$o"; exit 0; }}
tr a-z A-Z < "$i" > "$o"
""")
        out, text = f"{tmp}/upper", open(source, "rb").read()

        def attempt(args=("--window", "20"), fail="", short=""):
            """The stand-in's runs (the input files' names) for one call, and how the call ended."""
            for name, what in (("fail", fail), ("short", short)):
                with open(f"{tmp}/pieces.{name}", "w") as f:
                    f.write(what)
            open(f"{tmp}/pieces.calls", "w").close()
            try:
                r.nmt_translate([model], [*args, "-i", source, "-o", out], f"{tmp}/upper.log")
                ended = "made"
            except SystemExit as e:
                ended = str(e)
            return open(f"{tmp}/pieces.calls").read().split(), ended

        calls, ended = attempt(fail="3.in")
        check(calls == ["1.in", "2.in", "3.in"] and "nmt-translate failed" in ended and not os.path.exists(out)
              and sorted(os.listdir(out + ".pieces")) == ["1.out", "2.out", "3.in", "key"],
              f"a failed piece fails the whole, keeping the pieces made: {calls}, {ended}")
        calls, ended = attempt()
        check(calls == ["3.in", "4.in"] and ended == "made" and open(out, "rb").read() == text.upper(),
              f"the run started again makes only the pieces not made, and the whole from them: {calls}, {ended}")
        threads = r.threads
        for change, how in ((lambda: os.utime(model), "a touched model"),
                            (lambda: setattr(r, "threads", str(int(threads) + 1)), "another thread count")):
            attempt(fail="2.in")
            change()
            calls, _ = attempt()
            check(calls == ["1.in", "2.in", "3.in", "4.in"], f"with {how} the pieces are made again: {calls}")
        r.threads = threads
        calls, ended = attempt(short="2.in")
        check(calls == ["1.in", "2.in", "3.in", "4.in"] and "2.out: not one line per line of its 60" in ended,
              f"a piece short of lines is refused: {calls}, {ended}")
        calls, ended = attempt()
        check(calls == ["2.in"] and ended == "made", f"and made again, alone: {calls}, {ended}")
        for args, how in ((["--window", "20", "--reference", source], "scored"), (["--window", "40"], "--window 40")):
            calls, ended = attempt(args)
            check(calls == ["train.en"] and ended == "made", f"a {how} translation goes whole: {calls}")
        multi30k.PIECE_LINES = 200
        calls, ended = attempt()
        check(calls == ["train.en"], f"a source of one piece goes whole: {calls}")
        r.bin = real
    finally:
        multi30k.PIECE_LINES = saved
