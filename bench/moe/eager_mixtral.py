"""PyTorch eager of the zoo's gpt-fast MoE (examples/zoo/moe.py) at
Mixtral's sizes (8 experts, top 2, 4096 <-> 14336, bf16): the w[ids]
gathers materialise T * A copies of each expert. Prints one line per T:
`eager mixtral_moe T=16: 1234.5 us` (compare.cuda_time_us), or why not
(out of memory).

    python3 bench/moe/eager_mixtral.py 16 128
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "zoo"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import moe  # noqa: E402
from mtsched_torch import compare  # noqa: E402


def main():
    torch.manual_seed(0)
    dev = "cuda"
    m = moe.MOEFeedForward(dim=4096, num_experts=8, intermediate_size=14336,
                           num_activated_experts=2)
    m = m.to(device=dev, dtype=torch.bfloat16).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.02)
    for t in [int(a) for a in sys.argv[1:]]:
        x = torch.randn(t, 4096, device=dev, dtype=torch.bfloat16)
        try:
            with torch.no_grad():
                us = compare.cuda_time_us(lambda: m(x), samples=5)
            print("eager mixtral_moe T=%d: %.1f us (peak %.1f GiB)" % (
                t, us, torch.cuda.max_memory_allocated() / 2**30), flush=True)
        except torch.cuda.OutOfMemoryError as e:
            print("eager mixtral_moe T=%d: out of memory (%s)" % (
                t, str(e).splitlines()[0][:120]), flush=True)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


if __name__ == "__main__":
    main()
