"""Writes one graph of a gallery file, with the file's groups and world size
cut to one rank, for a device script that runs a layer on one GPU:

    python3 scripts/one_rank_graph.py examples/gallery/llama3_8b_layer.mir \\
        OUT.mir llama3_8b_layer_decode

The file's header (its groups, without comments) is kept; of its graphs only
the named one.
"""
import re
import sys


def one_rank_graph(text, name):
    text = re.sub(r"group @(\w+) = \[[0-9, ]*\]", r"group @\1 = [0]", text)
    text = re.sub(r"world_size = \d+", "world_size = 1", text)
    out, keep, head = [], False, True
    for line in text.splitlines(True):
        m = re.match(r"graph @(\w+)\(", line)
        if m:
            head = False
            keep = m.group(1) == name
        if head and not line.startswith("//"):
            out.append(line)
        elif keep:
            out.append(line)
            if line.startswith("}"):
                keep = False
    return "".join(out)


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: one_rank_graph.py GALLERY.mir OUT.mir GRAPH")
    with open(sys.argv[1]) as f:
        text = one_rank_graph(f.read(), sys.argv[3])
    if "graph @" + sys.argv[3] + "(" not in text:
        sys.exit("one_rank_graph.py: no graph @%s in %s" % (sys.argv[3], sys.argv[1]))
    with open(sys.argv[2], "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
