#!/usr/bin/env python3
"""Generates tensor-parallel IR graphs for the benchmarks.

Each layer is: matmul -> all_reduce -> add(bias) -> gelu, i.e. one collective
node and one template per layer, with a fusable epilogue.

  gen_graph.py --layers 5 --world 2          # 5 collective nodes
  gen_graph.py --nodes 100000 --world 1      # about 100k nodes
"""
import argparse
import sys


def emit(out, layers, world, m, n):
    out.write("graph @gen(%x: bf16[{m},{n}], %w: bf16[{n},{n}], %b: bf16[{n}]) "
              "attributes {{world_size = {world}}} {{\n".format(m=m, n=n, world=world))
    prev = "%x"
    for i in range(layers):
        t = "bf16[{},{}]".format(m, n)
        out.write("  %h{i} = matmul({p}, %w) : {t}\n".format(i=i, p=prev, t=t))
        out.write("  %r{i} = all_reduce(%h{i}) {{reduce = \"sum\"}} : {t}\n".format(i=i, t=t))
        out.write("  %z{i} = add(%r{i}, %b) : {t}\n".format(i=i, t=t))
        out.write("  %a{i} = gelu(%z{i}) : {t}\n".format(i=i, t=t))
        prev = "%a{}".format(i)
    out.write("  return {}\n}}\n".format(prev))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--layers", type=int, help="layers (= collective nodes)")
    g.add_argument("--nodes", type=int, help="approximate node count (4 per layer)")
    p.add_argument("--world", type=int, default=2)
    p.add_argument("-m", type=int, default=1024)
    p.add_argument("-n", type=int, default=4096)
    a = p.parse_args()
    layers = a.layers if a.layers is not None else max(1, a.nodes // 4)
    emit(sys.stdout, layers, a.world, a.m, a.n)


if __name__ == "__main__":
    main()
