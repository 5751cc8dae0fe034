#!/usr/bin/env python3
"""Checks the shape of the source tree: no file over MAX_FILE_LINES lines, no
function over MAX_FUNCTION_LINES lines (signature to closing brace), and no
include that runs upward through the layers of src/ (LAYERS: a folder may
include its own headers and those of folders before it).

    scripts/check_layout.py [ROOT]

Prints one line per finding (path:line: problem) and exits 1 when there is
any, 0 otherwise. Functions are found by a brace scan that skips comments,
strings and character literals: a block opened at namespace level whose
opening text holds a parenthesis and is not a class, struct, enum, union or
namespace is a function body. Lambdas and in-class definitions count within
the function or class that holds them."""
import pathlib
import re
import sys

MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 80
# The layers of src/, lowest first: each may include only itself and those before it.
LAYERS = ["base", "io", "text", "model", "engine", "search", "translate", "train", "tools", "serve"]
CHECKED = ("src", "apps", "tests", "bench", "scripts")
SUFFIXES = {".h", ".cc", ".cpp", ".py", ".sh"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def strip_code(text):
    """The text with comments, strings and character literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = ")" + (m.group(1) if m else "") + '"'
            j = text.find(end, i)
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def long_functions(path, text):
    """(line, length) of each function body longer than MAX_FUNCTION_LINES lines."""
    code = strip_code(text)
    found = []
    depth_kinds = []  # per open brace: "ns" (transparent), "fn" or "other"
    start_text = ""   # text since the last ; { or } at namespace level
    start_line = 1
    line = 1
    fn_start = None
    for c in code:
        if c == "\n":
            line += 1
        at_top = all(k == "ns" for k in depth_kinds)
        if c == "{":
            if at_top:
                head = start_text.strip()
                if re.match(r"^(namespace\b|extern\b)", head) or re.search(r"\bnamespace\s*\w*\s*$", head):
                    kind = "ns"
                elif "(" in head and not re.match(r"^(template\s*<.*>\s*)?(class|struct|enum|union)\b", head, re.S):
                    kind = "fn"
                    fn_start = start_line
                else:
                    kind = "other"
                depth_kinds.append(kind)
            else:
                depth_kinds.append("inner")
            start_text = ""
        elif c == "}":
            kind = depth_kinds.pop() if depth_kinds else "ns"
            if kind == "fn" and fn_start is not None:
                length = line - fn_start + 1
                if length > MAX_FUNCTION_LINES:
                    found.append((fn_start, length))
                fn_start = None
            start_text = ""
        elif c == ";" and at_top:
            start_text = ""
        elif at_top:
            if not start_text.strip() and not c.isspace():
                start_line = line
            start_text += c
    return found


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    problems = []
    for top in CHECKED:
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file() or "data" in path.relative_to(root).parts:
                continue
            rel = path.relative_to(root)
            text = path.read_text(encoding="utf-8", errors="replace")
            lines = text.count("\n")
            if lines > MAX_FILE_LINES:
                problems.append(f"{rel}:1: {lines} lines (at most {MAX_FILE_LINES})")
            if path.suffix in {".h", ".cc", ".cpp"}:
                for start, length in long_functions(path, text):
                    problems.append(f"{rel}:{start}: a function of {length} lines (at most {MAX_FUNCTION_LINES})")
            if rel.parts[0] == "src" and len(rel.parts) > 2 and rel.parts[1] in LAYERS:
                own = LAYERS.index(rel.parts[1])
                for n, text_line in enumerate(text.splitlines(), 1):
                    m = INCLUDE.match(text_line)
                    if m and m.group(1) in LAYERS and LAYERS.index(m.group(1)) > own:
                        problems.append(f"{rel}:{n}: includes {m.group(1)}/ from {rel.parts[1]}/ (an upward include)")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
