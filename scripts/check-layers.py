#!/usr/bin/env python3
"""Fails on an include that runs up the library layers of docs/ARCHITECTURE.md.

    python3 scripts/check-layers.py            # this checkout
    python3 scripts/check-layers.py --root DIR # another tree (the lit test)

Every `#include "mtsched/<Lib>/..."` in lib/<Lib>/, include/mtsched/<Lib>/
and tools/ must name the file's own library or one in a lower layer of
LAYERS below. LAYERS is derived from the table under "## Layers" in
docs/ARCHITECTURE.md ("| `Lib` | what it holds | uses |"), and this script
checks that they agree: every library of the table is in LAYERS, every
library it "uses" lies in a lower layer, and every include is of a library
the table says it uses (directly or through those it uses); every folder
under lib/ (and lib/Backend/) is a library of LAYERS. Libraries of one
layer do not include each other: a layer is a set of siblings, so an
include between two of them fails too.

Prints one `FILE:LINE: error: ...` per problem and exits 1 if there was any.
"""

import argparse
import os
import re
import sys

# Lowest first. A library may include its own headers and those of any
# library in a strictly lower layer.
LAYERS = [
    # LLVM Support only.
    ["Support"],
    ["IR"],
    # Each needs only the IR: the pass machinery, the device descriptions
    # with the roofline formulas and communicators, the fp64 reference.
    ["Passes", "Runtime", "Reference"],
    ["Lowering", "Schedule"],
    ["Autotune"],
    ["Backend/Sim", "Backend/Cuda"],
    # Backends.cpp, the one list of backends; the ops with their own
    # kernel, one file each, registering their parts with IR, Reference and
    # Backend/Cuda.
    ["Backend", "OpUnits"],
    # The tools' library, and the C API that runs decided graphs in a
    # user's process (libmtsched_runtime): both sit on the backends.
    ["Tools", "RuntimeApi"],
    ["Driver"],
    ["tools/"],
]

# No upward include is legitimate today; one that must stay (with the
# reason) would be listed here as (file, included header).
ALLOWED = set()

INCLUDE = re.compile(r'^\s*#\s*include\s*"mtsched/([^"]+)"')
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|.*\|\s*([^|]*?)\s*\|\s*$")
SOURCE_EXT = (".cpp", ".h", ".def", ".inc", ".in")


def library_of_header(rel):
    """mtsched/<rel>: Backend/Cuda/X.h -> Backend/Cuda, IR/Graph.h -> IR."""
    parts = rel.split("/")
    if parts[0] == "Backend" and len(parts) > 2:
        return "Backend/" + parts[1]
    # Config/Version.h is generated from Support's version (Version.h.in).
    if parts[0] == "Config":
        return "Support"
    return parts[0]


def library_of_file(path):
    """A repository path under lib/, include/mtsched/ or tools/."""
    parts = path.split("/")
    if parts[0] == "tools":
        return "tools/"
    rest = parts[1:] if parts[0] == "lib" else parts[2:]
    if rest[0] == "Backend" and len(rest) > 2:
        return "Backend/" + rest[1]
    if rest[0] == "Config":
        return "Support"
    return rest[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root",
                    default=os.path.join(os.path.dirname(__file__), ".."))
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    level = {lib: i for i, layer in enumerate(LAYERS) for lib in layer}
    problems = []

    def report(where, msg):
        problems.append("%s: error: %s" % (where, msg))

    # The table of docs/ARCHITECTURE.md agrees with LAYERS.
    arch = os.path.join("docs", "ARCHITECTURE.md")
    in_table = set()
    uses = {}
    section = None
    with open(os.path.join(root, arch), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.startswith("## "):
                section = line[3:].strip()
            m = ROW.match(line)
            if section != "Layers" or not m:
                continue
            lib = m.group(1).rstrip("/") if m.group(1) != "tools/" else "tools/"
            in_table.add(lib)
            uses[lib] = set()
            if lib not in level:
                report("%s:%d" % (arch, n),
                       "library '%s' of the layer table is not in "
                       "scripts/check-layers.py's LAYERS" % lib)
                continue
            for used in re.split(r",\s*", m.group(2)):
                used = used.strip("` ")
                if used.startswith("LLVM") or not used:
                    continue
                uses[lib].add(used)
                if used not in level:
                    report("%s:%d" % (arch, n),
                           "'%s' uses '%s', which is not in LAYERS" %
                           (lib, used))
                elif level[used] >= level[lib]:
                    report("%s:%d" % (arch, n),
                           "'%s' uses '%s', which LAYERS does not put below "
                           "it" % (lib, used))
    for lib in level:
        if lib not in in_table:
            report(arch, "library '%s' of LAYERS has no row in the layer "
                   "table" % lib)

    # What each library may use by the table: what it names, and what those
    # use in turn.
    reach = {}
    for lib in uses:
        seen, todo = set(), list(uses[lib])
        while todo:
            u = todo.pop()
            if u not in seen:
                seen.add(u)
                todo.extend(uses.get(u, ()))
        reach[lib] = seen

    # Every library folder is in LAYERS.
    libdir = os.path.join(root, "lib")
    for e in sorted(os.listdir(libdir)):
        if not os.path.isdir(os.path.join(libdir, e)):
            continue
        names = [e]
        if e == "Backend":
            names += ["Backend/" + b
                      for b in sorted(os.listdir(os.path.join(libdir, e)))
                      if os.path.isdir(os.path.join(libdir, e, b))]
        for name in names:
            if name not in level:
                report("lib/" + name, "library '%s' is not in "
                       "scripts/check-layers.py's LAYERS (nor, likely, in "
                       "docs/ARCHITECTURE.md's layer table)" % name)

    # The includes.
    files = 0
    for top in ("lib", os.path.join("include", "mtsched"), "tools"):
        for dp, dns, fns in os.walk(os.path.join(root, top)):
            dns.sort()
            for fn in sorted(fns):
                if not fn.endswith(SOURCE_EXT):
                    continue
                path = os.path.relpath(os.path.join(dp, fn), root)
                path = path.replace(os.sep, "/")
                lib = library_of_file(path)
                if lib not in level:
                    continue  # reported above, as a folder
                files += 1
                with open(os.path.join(dp, fn), encoding="utf-8",
                          errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        used = library_of_header(m.group(1))
                        if used == lib or (path, m.group(1)) in ALLOWED:
                            continue
                        if used not in level:
                            report("%s:%d" % (path, n),
                                   "includes mtsched/%s of '%s', which is "
                                   "not a library of LAYERS" %
                                   (m.group(1), used))
                        elif level[used] >= level[lib]:
                            report("%s:%d" % (path, n),
                                   "%s (layer %d) includes mtsched/%s of %s "
                                   "(layer %d), which is not below it" %
                                   (lib, level[lib], m.group(1), used,
                                    level[used]))
                        elif lib in reach and used not in reach[lib]:
                            report("%s:%d" % (path, n),
                                   "%s includes mtsched/%s, but "
                                   "docs/ARCHITECTURE.md's layer table does "
                                   "not say that %s uses %s" %
                                   (lib, m.group(1), lib, used))

    for p in problems:
        print(p, file=sys.stderr)
    print("check-layers: %d file(s), %d problem(s)" % (files, len(problems)),
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
