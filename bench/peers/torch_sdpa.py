# Peer for the attention choices: PyTorch's scaled_dot_product_attention at
# the shapes of bench/attention-llama3.mir, on GPU 0, bf16: the default
# dispatch and each SDPA backend on its own (flash, efficient, cudnn, math)
# where it accepts the shape. Device time as bench/gemm-sweep.py's peers
# take it: `loop` calls captured in one CUDA graph, the median of replays
# divided by `loop`, inputs rotated over copies larger than 3x the L2.
# PyTorch's is_causal aligns the mask to the top left, mtsched's to the end
# of the keys (docs/IR.md): they agree when Sq == Skv, and a one-query
# decode step sees every key, so decode is timed with is_causal=False.
# With --masked also the gallery Llama-3-8B layer's prefill attention at
# one rank: 2048 queries over 4096 keys, 16 query and 4 kv heads, an
# additive [1, 1, 2048, 4096] mask (bf16 here: SDPA wants a float mask of
# q's type; mtsched's graph takes it in f32).
#   python3 bench/peers/torch_sdpa.py OUT.json [--masked] [--only=NAME,...]
import json, math, statistics, sys
import torch
import torch.nn.functional as F

SHAPES = {  # name: (B, Hq, Hkv, Sq, Skv, D, causal as mtsched means it)
    "decode_b1": (1, 32, 8, 1, 4096, 128, True),
    "decode_b4": (4, 32, 8, 1, 4096, 128, True),
    "decode_b16": (16, 32, 8, 1, 4096, 128, True),
    "prefill_4096": (1, 32, 8, 4096, 4096, 128, True),
}


MASKED = {"prefill_masked_2048x4096": (1, 16, 4, 2048, 4096, 128, False)}


def gtime(fn, copies, iters=20, loop=10):
    for i in range(3):
        fn(i % copies)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s0 = torch.cuda.Stream()
    with torch.cuda.stream(s0):
        with torch.cuda.graph(g, stream=s0):
            for i in range(loop):
                fn(i % copies)
    torch.cuda.synchronize()
    for _ in range(3):
        g.replay()
    ts = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1000.0 / loop)
    return statistics.median(ts)


def backends():
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return {}
    out = {}
    for name in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"):
        if hasattr(SDPBackend, name):
            out[name.lower()] = (sdpa_kernel, getattr(SDPBackend, name))
    return out


def main():
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    torch.manual_seed(0)
    gqa = "enable_gqa" in F.scaled_dot_product_attention.__doc__
    res = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
           "enable_gqa": gqa}
    shapes = dict(SHAPES)
    if "--masked" in sys.argv[2:]:
        shapes.update(MASKED)
    # --only=NAME,...: just those shapes (a short device call).
    for a in sys.argv[2:]:
        if a.startswith("--only="):
            keep = a[len("--only="):].split(",")
            shapes = {n: s for n, s in shapes.items() if n in keep}
    for name, (B, Hq, Hkv, Sq, Skv, D, causal) in shapes.items():
        bf = dict(dtype=torch.bfloat16, device="cuda")
        per_set = 2 * (2 * B * Hq * Sq * D + 2 * B * Hkv * Skv * D)
        C = max(1, min(8, math.ceil(3 * l2 / per_set)))
        q = [torch.randn(B, Hq, Sq, D, **bf) for _ in range(C)]
        k = [torch.randn(B, Hkv, Skv, D, **bf) for _ in range(C)]
        v = [torch.randn(B, Hkv, Skv, D, **bf) for _ in range(C)]
        if not gqa:  # older PyTorch: kv heads expanded before the call
            k = [x.repeat_interleave(Hq // Hkv, dim=1) for x in k]
            v = [x.repeat_interleave(Hq // Hkv, dim=1) for x in v]
        tc = causal and Sq > 1
        kw = {"enable_gqa": True} if gqa else {}
        if name in MASKED:
            m = torch.randn(1, 1, Sq, Skv, **bf)
            kw["attn_mask"] = m
        call = lambda i: F.scaled_dot_product_attention(q[i], k[i], v[i], is_causal=tc, **kw)
        r = {"copies": C}
        flops = 4 * B * Hq * D * (Sq * (Skv - Sq) + Sq * (Sq + 1) // 2 if causal else Sq * Skv)
        r["sdpa_us"] = gtime(call, C)
        for bname, (ctx, be) in backends().items():
            try:
                with ctx(be):
                    r[f"sdpa_{bname}_us"] = gtime(call, C)
            except Exception as e:  # a backend that refuses the shape
                r[f"sdpa_{bname}_us"] = None
                r[f"sdpa_{bname}_error"] = str(e).splitlines()[0][:200]
        r["sdpa_tflops"] = flops / (r["sdpa_us"] * 1e-6) / 1e12
        res[name] = r
        print(f"{name}: " + ", ".join(
            f"{k2}={v2:.2f}" if isinstance(v2, float) else f"{k2}={v2}"
            for k2, v2 in r.items() if not k2.endswith("_error")), flush=True)
    json.dump(res, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
