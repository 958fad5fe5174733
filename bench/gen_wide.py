#!/usr/bin/env python3
"""Generates IR that is wide where the parser and verifier used to be
quadratic: one list or dictionary (or one module) with N entries.

  gen_wide.py configs N    # a custom op with N configs
  gen_wide.py graphs N     # N graphs
  gen_wide.py groups N     # N process groups
  gen_wide.py ranks N      # one group of N ranks
  gen_wide.py attrs N      # a graph with N attributes
  gen_wide.py timings N    # a decided collective with N choices, N timings
                           # and N fused timings, and a dispatch table of N
                           # rows

Every output parses and verifies; `mtsched-opt FILE` prints it back.
"""
import sys


def main():
    kind, n = sys.argv[1], int(sys.argv[2])
    w = sys.stdout.write
    if kind == "configs":
        w("graph @g(%x: f32[4]) {\n  %y = custom \"kernel\"(%x) configs [")
        w(", ".join("c%d" % i for i in range(n)))
        w("] : f32[4]\n  return %y\n}\n")
    elif kind == "graphs":
        for i in range(n):
            w("graph @g%d(%%x: f32[4]) {\n  return %%x\n}\n" % i)
    elif kind == "groups":
        for i in range(n):
            w("group @p%d = [0]\n" % i)
        w("graph @g(%x: f32[4]) {\n")
        for i in range(0, n, max(1, n // 1000)):
            w("  %%r%d = all_reduce(%%x) {group = \"p%d\"} : f32[4]\n" % (i, i))
        w("  return %x\n}\n")
    elif kind == "ranks":
        w("group @big = [%s]\n" % ", ".join(str(i) for i in range(n)))
        w("graph @g(%%x: f32[4]) attributes {world_size = %d} {\n" % n)
        w("  %r = all_reduce(%x) {group = \"big\"} : f32[4]\n  return %r\n}\n")
    elif kind == "attrs":
        w("graph @g(%x: f32[4]) attributes {")
        w(", ".join("a%d = %d" % (i, i) for i in range(n)))
        w("} {\n  return %x\n}\n")
    elif kind == "timings":
        names = ["c%d" % i for i in range(n)]
        w("graph @g(%x: f32[4]) {\n")
        w("  %y = collective_multi_template_buffer custom \"my_allreduce\"(%x) "
          "group @world kind all_reduce choices [")
        w(", ".join(names))
        w("] epilogue [%z] decided c0 sync ok timings {")
        w(", ".join("%s = %d.5us" % (c, i) for i, c in enumerate(names)))
        w("} fused_timings {")
        w(", ".join("%s = %d.25us" % (c, i) for i, c in enumerate(names)))
        w("} dispatch bytes {")
        w(", ".join("%d = %s" % (i + 1, c) for i, c in enumerate(names)))
        w("} : f32[4]\n  %z = buffer relu(%y) : f32[4]\n  return %z\n}\n")
    else:
        sys.exit("unknown kind " + kind)


main()
