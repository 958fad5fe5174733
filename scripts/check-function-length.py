#!/usr/bin/env python3
"""Finds functions in lib/ longer than a limit (150 lines, issue 36).

    python3 scripts/check-function-length.py           # exit 1 on a new one
    python3 scripts/check-function-length.py --list    # every long function,
                                                       # allowlisted or not
    python3 scripts/check-function-length.py --limit=N

A function is a body at namespace or class level in a lib/**/*.cpp file: the
scan drops comments and string, character and raw-string literals, then
matches braces; a brace whose header (the text since the last ';', '{' or
'}') has a parameter list opens a function, and the lines from its header's
first line to its closing brace are its length. Lambdas and blocks inside a
function count towards it. It is a brace scan, not a parser: a macro that
opens a body without a parameter list is not seen.

ALLOWED names the long functions that stay, each with its reason: the
generated-kernel text emitters (one function writes one kernel's CUDA C++,
and reads best top to bottom as the kernel does), and ones still "to split".
An allowlisted function that is no longer long is reported too, so the list
does not outlive what it excuses.
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = 150

EMITTER = "generated-kernel text emitter: writes one kernel's CUDA C++"
TO_SPLIT = "to split"

# "path:function" -> why it may stay longer than the limit.
ALLOWED = {
    # Generated-kernel text emitters.
    "lib/Backend/Cuda/GemmKernels.cpp:generateGemmKernelText": EMITTER +
    " (the mma.sync GEMM template and its epilogue)",
    "lib/Backend/Cuda/WgmmaGemm.cpp:codegen::emitWgmmaGemm": EMITTER +
    " (the Hopper wgmma GEMM: TMA, pipeline, warpgroup loop, epilogue)",
    "lib/Backend/Cuda/GroupKernels.cpp:GroupEmitter::emitRows": EMITTER +
    " (the row-wise group kernel: loads, reductions, stores)",
    # Still to split (issue 36): named steps with early returns.
}


def strip(text):
    """text with comments and literals blanked, newlines kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        m = re.match(r'(?:u8|[uUL])?R"([^()\\\s]{0,16})\(', text[i:i + 24])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + re.sub(r"[^\n]", "", text[i:j]))
            i = j
            continue
        if c in "\"'":
            # A digit separator (1'000) is no character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and \
                    i + 1 < n and text[i + 1].isalnum() and \
                    re.match(r"[0-9a-fA-FxXbB']", text[i - 1]):
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


FUNC_HEADER = re.compile(
    r"\)\s*(?:const|override|final|noexcept(?:\([^)]*\))?|volatile|&|&&|"
    r"->\s*[\w:<>,\s*&]+|\s)*$")


def name_of(header):
    """The function's name: the qualified identifier before its '('."""
    depth = 0
    for k, ch in enumerate(header):
        if ch == "(":
            if depth == 0:
                m = re.search(r"((?:[\w~]+::)*(?:operator\s*\S+|[\w~]+))\s*$",
                              header[:k])
                if m:
                    return m.group(1)
            depth += 1
        elif ch == ")":
            depth -= 1
    return "?"


def functions(path):
    """(name, first line, last line) of each function body in path."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = strip(f.read())
    found = []
    # Stack of scopes: 'ns' and 'class' hold functions, 'func' and 'other'
    # do not; 'init' is a member initializer's braces before a body.
    stack = []
    header_start = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "#" and (i == 0 or text[i - 1] == "\n" or
                         text[text.rfind("\n", 0, i) + 1:i].strip() == ""):
            # A preprocessor line (with its continuations) is no header.
            j = i
            while True:
                j = text.find("\n", j)
                if j < 0 or text[j - 1] != "\\":
                    break
                j += 1
            i = n if j < 0 else j
            header_start = i
            continue
        if c == ";":
            header_start = i + 1
        elif c == "{":
            header = text[header_start:i]
            inside_code = any(s[0] in ("func", "other") for s in stack)
            h = " ".join(header.split())
            if inside_code:
                kind = "other"
            elif re.search(r"\b(namespace|extern\s*\"\")\b", h) or \
                    re.match(r'^extern\s*""', h):
                kind = "ns"
            elif re.search(r"\b(class|struct|union)\b[^()]*$", h) and \
                    "=" not in h:
                kind = "class"
            elif re.search(r"\benum\b", h) or "=" in h.split("(")[0]:
                kind = "other"
            elif re.search(r"\)\s*:\s*\S", h) and re.search(r"\w$", h):
                # A member initialized with braces (": A(x), B{y} {"): the
                # body's header goes on past it.
                kind = "init"
            elif "(" in h and (FUNC_HEADER.search(h) or
                               re.search(r"\)\s*:\s*\S", h)):
                kind = "func"
            else:
                kind = "other"
            if kind == "func":
                first = header_start + len(header) - len(header.lstrip())
                stack.append(("func", name_of(h),
                              text.count("\n", 0, first) + 1))
            else:
                stack.append((kind, None, None))
            if kind != "init":
                header_start = i + 1
        elif c == "}":
            if stack:
                kind, name, line = stack.pop()
                if kind == "func":
                    found.append((name, line, text.count("\n", 0, i) + 1))
                if kind == "init":
                    i += 1
                    continue
            header_start = i + 1
        i += 1
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true",
                    help="print every long function, allowlisted or not")
    ap.add_argument("--limit", type=int, default=LIMIT)
    args = ap.parse_args()
    long_ones = []
    for dirpath, _, files in os.walk(os.path.join(ROOT, "lib")):
        for f in sorted(files):
            if not f.endswith(".cpp"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, ROOT)
            for name, first, last in functions(path):
                length = last - first + 1
                if length > args.limit:
                    long_ones.append((rel, name, first, length))
    long_ones.sort()
    bad = 0
    seen = set()
    for rel, name, first, length in long_ones:
        key = rel + ":" + name
        seen.add(key)
        why = ALLOWED.get(key)
        if why is None:
            bad += 1
            print(f"{rel}:{first}: error: '{name}' is {length} lines, more "
                  f"than {args.limit}: split it into named steps (or, for a "
                  f"generated-kernel text emitter, allowlist it with a reason)")
        elif args.list:
            print(f"{rel}:{first}: '{name}' is {length} lines: {why}")
    for key in sorted(set(ALLOWED) - seen):
        bad += 1
        print(f"{key}: error: allowlisted but not over {args.limit} lines "
              f"(or gone): drop it from ALLOWED")
    to_split = sum(1 for k in seen if ALLOWED.get(k) == TO_SPLIT)
    print(f"check-function-length: {len(long_ones)} function(s) over "
          f"{args.limit} lines, {to_split} to split, {bad} problem(s)",
          file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
