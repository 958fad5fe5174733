"""Explains an MoE gallery layer's error against eager token by token: the
row error of mtsched's output beside the token's router margin (the k-th
against the (k+1)-th probability, relative). Tokens whose margin is within
rounding pick a different expert on either side; if every token off is such
a near-tie, the layer's kernels are not at fault.

Run on the GPU machine after scripts/gpu-torch-compare.sh, with its results
folder (the layer's out/*.npy are read) and the same seed (default 0):

    OUT=/tmp/cmp GALLERY=mixtral_8x7b_moe SIZES=prefill \\
        bash scripts/gpu-torch-compare.sh --no-compile
    python3 scripts/moe_route_check.py /tmp/cmp/torch-compare-prefill \\
        mixtral_8x7b_moe:2 --size prefill
"""
import argparse
import glob
import os
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "torch"))
from mtsched_torch import collectives  # noqa: E402
from mtsched_torch import compare as C  # noqa: E402
import gallery  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", help="gpu-torch-compare's results folder")
    p.add_argument("layers", nargs="+", metavar="NAME:K",
                   help="gallery MoE layer and its top-k")
    p.add_argument("--size", default="prefill")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tolerance", type=float, default=2e-2)
    a = p.parse_args()
    for spec in a.layers:
        name, k = spec.split(":")
        k = int(k)
        e = [g for g in gallery.GALLERY if g.name == name][0]
        specs = e.inputs(a.size, 1)
        # As compare.run_case builds it.
        torch.manual_seed(a.seed)
        m = e.factory()(world_size=1, device="cuda")
        m.eval()
        C.init_weights(m, a.seed)
        inputs = C.random_inputs(specs, "cuda", a.seed)
        cap = {}
        m.gate.register_forward_hook(lambda mod, i, o: cap.update(l=o))
        with torch.no_grad(), collectives.mode("local"):
            ref = m(*inputs).float().cpu().numpy()
        outs = glob.glob(os.path.join(a.results, "%s_%s" % (name, a.size),
                                      "out", "*.npy"))
        ours = np.load(outs[0])
        err = np.linalg.norm(ours - ref, axis=1) / np.linalg.norm(ref, axis=1)
        top = torch.topk(torch.softmax(cap["l"].float(), -1), k + 1,
                         -1).values.cpu().numpy()
        margin = (top[:, k - 1] - top[:, k]) / top[:, k - 1]
        off = err > a.tolerance
        print("%s_%s: %d tokens, norm error %.3g" % (
            name, a.size, len(err),
            np.linalg.norm(ours - ref) / np.linalg.norm(ref)))
        print("  tokens off by > %g: %d; their router margins: max %.3g" % (
            a.tolerance, off.sum(),
            margin[off].max() if off.any() else float("nan")))
        print("  tokens with margin < 1e-2: %d, of them off: %d" % (
            (margin < 1e-2).sum(), (off & (margin < 1e-2)).sum()))
        print("  row error median %.3g, max %.3g; norm error without the "
              "tokens off %.3g" % (
                  np.median(err), err.max(),
                  np.linalg.norm((ours - ref)[~off]) /
                  np.linalg.norm(ref[~off])))
        del m
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
