"""Writes a .npy file by hand (stdlib only), for the bad-input tests:
make_npy.py PATH DESCR FORTRAN(True|False) SHAPE(e.g. 2,3) DATA_BYTES"""
import struct
import sys

path, descr, fortran, shape, nbytes = sys.argv[1:6]
dims = [d for d in shape.split(",") if d]
shape_text = "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
    descr, fortran, shape_text)
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
    f.write(header.encode("latin-1"))
    f.write(b"\0" * int(nbytes))
