# Peer for fp8 GEMMs (bench/fp8-gemm.sh): torch._scaled_mm (cuBLASLt's fp8
# GEMM, e4m3 x e4m3 with per-tensor scales, bf16 out) and bf16 torch.mm
# (cuBLAS) at the same shapes, on GPU 0, timed as torch_gemm.py times
# (peer_timing.gtime: CUDA graph of `loop` calls, median of replays /
# loop; inputs rotated over enough copies to exceed 3x the L2). cuBLASLt
# wants B column-major (K-major); mtsched's matmul takes B row-major, so
# the peer's B is the transpose of a row-major [N, K] tensor: the same
# bytes per element.
#   python3 torch_fp8_gemm.py OUT.json [M,N,K ...]
import json, math, os, sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_timing import gtime  # noqa: E402


shapes = [tuple(map(int, a.split(","))) for a in sys.argv[2:]] or \
    [(16, 4096, 4096), (64, 4096, 4096), (256, 4096, 4096), (4096, 4096, 4096)]
l2 = torch.cuda.get_device_properties(0).L2_cache_size
torch.manual_seed(0)
res = {}
f8 = torch.float8_e4m3fn
for (M, N, K) in shapes:
    per_set = M * K + K * N + 2 * M * N
    C = max(1, min(16, math.ceil(3 * l2 / per_set)))
    A = [torch.randn(M, K, device="cuda").to(f8) for _ in range(C)]
    B = [torch.randn(N, K, device="cuda").to(f8).t() for _ in range(C)]
    sa = torch.tensor(0.5, device="cuda"); sb = torch.tensor(0.25, device="cuda")
    r = {"copies": C}
    r["scaled_mm_us"] = gtime(lambda i: torch._scaled_mm(
        A[i], B[i], scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16), C)
    Ab = [a.to(torch.bfloat16) for a in A]; Bb = [b.t().contiguous().t().to(torch.bfloat16).contiguous() for b in B]
    del A, B
    out = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
    r["bf16_cublas_us"] = gtime(lambda i: torch.mm(Ab[i], Bb[i], out=out), C)
    res[f"{M}x{N}x{K}"] = r
    print(f"{M}x{N}x{K}: " + ", ".join(f"{k}={v:.2f}" for k, v in r.items()), flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
