"""Writes every ```mir block of a Markdown file to OUTDIR/N.mir.

usage: mir-blocks.py FILE.md OUTDIR
Exits 1 if the file has no such block, so a renamed fence cannot make the
test that uses this pass vacuously.
"""
import os
import re
import sys

text = open(sys.argv[1], encoding="utf-8").read()
blocks = re.findall(r"^```mir\n(.*?)^```", text, re.S | re.M)
os.makedirs(sys.argv[2], exist_ok=True)
for i, block in enumerate(blocks):
    with open(os.path.join(sys.argv[2], "%d.mir" % i), "w", encoding="utf-8") as f:
        f.write(block)
print(len(blocks))
sys.exit(0 if blocks else 1)
