#!/usr/bin/env python3
"""A graph of W ranks that declares W/K tensor-parallel groups of K ranks
(as a TP x DP layout does) and one small all_reduce over the world: the
pre-sync's record then carries the groups' text, O(W) bytes per rank.
Usage: gen_groups.py W [K]"""
import sys

w = int(sys.argv[1])
k = int(sys.argv[2]) if len(sys.argv) > 2 else 8
for g in range(w // k):
    print("group @tp%d = [%s]" % (g, ", ".join(str(r) for r in range(g * k, g * k + k))))
print("""
graph @g(%%x: f32[64,64], %%w: f32[64,64]) attributes {world_size = %d} {
  %%h = matmul(%%x, %%w) : f32[64,64]
  %%r = all_reduce(%%h) {reduce = "sum"} : f32[64,64]
  return %%r
}""" % w)
