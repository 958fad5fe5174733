"""Imports the zoo's gpt-fast MoE (examples/zoo/moe.py) at Mixtral's sizes
(8 experts, top 2, 4096 <-> 14336, bf16) with meta weights, so that no
memory is allocated (the bench/moe/mixtral_moe_t*.mir files came from it,
make_fx on PyTorch 1.13):

    /usr/bin/python3 bench/moe/import_mixtral.py 16 bench/moe/mixtral_moe_t16.mir
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "zoo"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import moe  # noqa: E402
from mtsched_torch import import_module  # noqa: E402

DIM, EXPERTS, INTER = 4096, 8, 14336


def meta(*shape):
    return torch.nn.Parameter(torch.empty(*shape, device="meta",
                                          dtype=torch.bfloat16))


def main():
    t = int(sys.argv[1])
    m = moe.MOEFeedForward(dim=64, num_experts=EXPERTS, intermediate_size=64,
                           num_activated_experts=2)
    m.gate = torch.nn.Linear(DIM, EXPERTS, bias=False, device="meta",
                             dtype=torch.bfloat16)
    m.cond_ffn.w1 = meta(EXPERTS, INTER, DIM)
    m.cond_ffn.w3 = meta(EXPERTS, INTER, DIM)
    m.cond_ffn.w2 = meta(EXPERTS, DIM, INTER)
    m.dim = DIM
    x = torch.empty(t, DIM, dtype=torch.bfloat16, device="meta")
    res = import_module(m.eval(), [x], "mixtral_moe_t%d" % t, 1, "make_fx",
                        ["x"], quiet=True)
    with open(sys.argv[2], "w") as f:
        f.write(res.text())


if __name__ == "__main__":
    main()
