#!/usr/bin/env python3
"""Fails on documentation that points at something the repository lacks.

    python3 scripts/check-docs.py            # README.md and docs/*.md
    python3 scripts/check-docs.py --root DIR # another tree (the lit test)

For README.md and every docs/*.md it checks
  * relative Markdown links and images, [text](path) and ![alt](path): the
    file or directory must exist (relative to the page; a #fragment is
    ignored, web links are not followed);
  * repository paths in backticks, `lib/IR/Parser.cpp`: a path whose first
    component is a top-level directory of the repository must exist, unless
    it is a pattern (<Lib>, *, {a,b}, $VAR, ...) or lies under a directory
    the build or a run creates (build*/, Output/, ...);
  * page names, DESIGN.md: a NAME.md in capitals, in the text or in
    backticks, must be a page of the repository (docs/, the top level);
  * CMake package targets, `mtsched::Name`: Name must be a library
    (add_library(MtschedName ...) under lib/).

Prints one `FILE:LINE: error: ...` per problem and exits 1 if there was any.
"""

import os
import re
import sys

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE = re.compile(r"`([^`\n]+)`")
PAGE = re.compile(r"(?<![\w/.-])([A-Z][A-Z0-9_]*\.md)\b")
TARGET = re.compile(r"\bmtsched::([A-Z]\w*)\b")
PATH_CHARS = re.compile(r"^[A-Za-z0-9_.+/-]+$")
# Made by a build, a test run or a user, never in the repository.
GENERATED = re.compile(
    r"(^|/)(build[^/]*|Output|\.ccache|__pycache__|default-cache)(/|$)")


def top_level_dirs(root):
    return {
        e for e in os.listdir(root)
        if os.path.isdir(os.path.join(root, e)) and e not in (".git", )
        and not e.startswith("build")
    }


def library_targets(root):
    names = set()
    for dirpath, _, files in os.walk(os.path.join(root, "lib")):
        if "CMakeLists.txt" not in files:
            continue
        with open(os.path.join(dirpath, "CMakeLists.txt"),
                  encoding="utf-8") as f:
            for m in re.finditer(r"add_library\(\s*Mtsched(\w+)\s+(STATIC|SHARED)",
                                 f.read()):
                names.add(m.group(1))
    return names


def pages(root):
    found = set()
    for d in (root, os.path.join(root, "docs")):
        if os.path.isdir(d):
            found |= {e for e in os.listdir(d) if e.endswith(".md")}
    return found


def candidate_path(text, tops):
    """The repository path a backticked text names, or None."""
    # A command line: look at its words.
    for word in text.split():
        word = word.strip("'\",;:()")
        # path:line and path:line:col citations.
        word = re.sub(r"(:\d+)+$", "", word)
        if not word or not PATH_CHARS.match(word) or "/" not in word:
            continue
        if word.startswith("./"):
            word = word[2:]
        first = word.split("/", 1)[0]
        if first in tops and not GENERATED.search(word):
            yield word.rstrip("/")


def check_file(root, rel, tops, libs, known_pages):
    problems = []
    path = os.path.join(root, rel)
    here = os.path.dirname(path)
    in_fence = False
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for no, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue

        def bad(msg):
            problems.append("%s:%d: error: %s" % (rel, no, msg))

        if not in_fence:
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                    continue
                target = target.split("#", 1)[0]
                if not os.path.exists(os.path.normpath(os.path.join(here, target))):
                    bad("dead link '%s'" % m.group(1))
        # Backticked text (inside a fence, the whole line is code).
        spans = [line] if in_fence else CODE.findall(line)
        for span in spans:
            if re.search(r"[<>*{}$%]|\.\.\.|\bNN\b", span):
                continue
            for p in candidate_path(span, tops):
                if not os.path.exists(os.path.join(root, p)):
                    bad("'%s' names a file that does not exist" % p)
        for m in PAGE.finditer(line):
            if m.group(1) not in known_pages:
                bad("'%s' is not a page of the repository" % m.group(1))
        for m in TARGET.finditer(line):
            if m.group(1) not in libs:
                bad("'mtsched::%s' is not a library target (lib/: %s)" %
                    (m.group(1), ", ".join(sorted(libs))))
    return problems


def main(argv):
    root = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
    args = argv[1:]
    if len(args) == 2 and args[0] == "--root":
        root = args[1]
    elif args:
        print("check-docs: error: usage: check-docs.py [--root DIR]",
              file=sys.stderr)
        return 2
    files = []
    if os.path.exists(os.path.join(root, "README.md")):
        files.append("README.md")
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        files += sorted("docs/" + e for e in os.listdir(docs) if e.endswith(".md"))
    tops = top_level_dirs(root)
    libs = library_targets(root)
    known_pages = pages(root)
    problems = []
    for rel in files:
        problems += check_file(root, rel, tops, libs, known_pages)
    for p in problems:
        print(p)
    sys.stdout.flush()
    print("check-docs: %d file(s), %d problem(s)" % (len(files), len(problems)),
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
