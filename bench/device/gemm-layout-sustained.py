#!/usr/bin/env python3
"""Megatron's prefill GEMMs in two weight layouts, under sustained load.

Issue 35: Megatron's SP MLP at prefill runs 1.005-1.020x max-autotune, and
kernel_profile.busy (bench/mlp_breakdown.py) put the gap in the GEMMs under
sustained load. mtsched's import holds a linear's weight as its [in, out]
transpose, so cuBLAS runs it NN; max-autotune keeps PyTorch's [out, in]
and runs it TN (with the bias in the epilogue). This times the same
products both ways (and the TN addmm), in turn, each round CALLS
back-to-back calls timed by events, so both layouts see the same clocks.

  gemm-layout-sustained.py [--rounds N] [--calls N] [--m M]
Prints per shape and form the median per-call microseconds and the ratio
of NN to TN.
"""
import argparse
import statistics

import torch


def timed(fn, calls):
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--m", type=int, default=4096)
    a = ap.parse_args()
    dt = torch.bfloat16
    torch.manual_seed(0)
    # GPT-3 175B's MLP (world size 1): fc1 12288 -> 49152, fc2 back.
    for name, k, n in (("fc1", 12288, 49152), ("fc2", 49152, 12288)):
        x = torch.randn(a.m, k, device="cuda", dtype=dt)
        w_nk = torch.randn(n, k, device="cuda", dtype=dt) / k ** 0.5
        w_kn = w_nk.t().contiguous()
        bias = torch.randn(n, device="cuda", dtype=dt)
        forms = {
            "NN x @ w[k,n]": lambda: torch.mm(x, w_kn),
            "TN x @ w[n,k].t()": lambda: torch.mm(x, w_nk.t()),
            "TN addmm (bias)": lambda: torch.addmm(bias, x, w_nk.t()),
        }
        ref = forms["TN x @ w[n,k].t()"]().float()
        err = (forms["NN x @ w[k,n]"]().float() - ref).abs().max().item()
        for fn in forms.values():  # warm-up, clocks up
            timed(fn, 5)
        res = {f: [] for f in forms}
        for _ in range(a.rounds):
            for f, fn in forms.items():
                res[f].append(timed(fn, a.calls))
        med = {f: statistics.median(v) for f, v in res.items()}
        print("%s [%d x %d x %d] (NN vs TN max abs diff %.2e):" % (
            name, a.m, k, n, err), flush=True)
        for f, v in res.items():
            print("  %-20s median %9.1f us  (rounds %s)" % (
                f, med[f], " ".join("%.1f" % t for t in v)), flush=True)
        print("  NN / TN: %.4f" % (med["NN x @ w[k,n]"] /
                                    med["TN x @ w[n,k].t()"]), flush=True)


if __name__ == "__main__":
    main()
