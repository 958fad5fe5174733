# Element-wise check of one attn_wg kernel (bench/device/attn-wg.sh): the
# CUDA C++ that `mtsched-opt --dump-kernels` wrote for a graph, compiled
# with NVRTC for sm_90a and launched through the driver API on torch's
# tensors (the tensor maps encoded as the launcher encodes them), then
# compared with an fp32 reference in torch: the largest error, the first bad
# elements (batch, head, query, column) and which query rows and columns
# are bad, so a wrong tile can be debugged from one device call.
#   python3 attn-wg-check.py CASES
# CASES: a line per kernel, KERNEL.cu B HQ HKV SQ SKV D CAUSAL DTYPE BKV
# STAGES [MASK]; MASK "q": an f32 [1, 1, SQ, SKV] mask (random, a tenth of
# the keys -inf).
import ctypes, math, re, sys
import torch

REFS = {}
REPEATS = 5


def reference(q, k, v, mask, B, HQ, G, SQ, SKV, scale, CAUSAL, MASK):
    # fp32, one query head at a time; mtsched's causal mask ends at the last
    # key (query i sees keys up to SKV - SQ + i).
    dev = q.device
    ref = torch.empty(q.shape, device=dev)
    ii = torch.arange(SQ, device=dev)[:, None]
    jj = torch.arange(SKV, device=dev)[None, :]
    for b in range(B):
        for h in range(HQ):
            s_ = q[b, h].float() @ k[b, h // G].float().T * scale
            if MASK:
                s_ = s_ + mask[0, 0]
            if CAUSAL:
                s_ = s_.masked_fill(jj > SKV - SQ + ii, -math.inf)
            p = torch.softmax(s_, dim=-1)
            ref[b, h] = p @ v[b, h // G].float()
    return ref


def check(argv):
    src_path = argv[0]
    B, HQ, HKV, SQ, SKV, D = map(int, argv[1:7])
    CAUSAL = argv[7] == "1"
    DT = {"bf16": torch.bfloat16, "f16": torch.float16}[argv[8]]
    BKV, STAGES = int(argv[9]), int(argv[10])
    MASK = len(argv) > 11 and argv[11] == "q"
    BQ, G = 128, HQ // HKV
    ROWS, NBH = G * SQ, B * HKV
    src = open(src_path).read()
    name = src_path.rsplit("/", 1)[-1][:-3]

    torch.manual_seed(0)
    dev = "cuda"
    q = torch.randn(B, HQ, SQ, D, device=dev).to(DT)
    k = torch.randn(B, HKV, SKV, D, device=dev).to(DT)
    v = torch.randn(B, HKV, SKV, D, device=dev).to(DT)
    mask = None
    if MASK:
        mask = torch.randn(1, 1, SQ, SKV, device=dev)
        mask[torch.rand(1, 1, SQ, SKV, device=dev) < 0.1] = -math.inf
    out = torch.full((B, HQ, SQ, D), float("nan"), device=dev).to(DT)
    torch.cuda.synchronize()

    def load(names):
        for n in names:
            try:
                return ctypes.CDLL(n)
            except OSError:
                pass
        raise RuntimeError("cannot open any of " + str(names))

    nvrtc = load(["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"])
    cu = load(["libcuda.so.1", "libcuda.so"])
    prog = ctypes.c_void_p()
    assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"k.cu", 0, None, None) == 0
    opts = [b"-arch=sm_90a", b"-std=c++17", b"--use_fast_math", b"--ptxas-options=-v"]
    rc = nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    n = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    print("nvrtc rc", rc, "|", " ".join(l.strip() for l in log.value.decode().splitlines()
                                       if "registers" in l or "spill" in l or "error" in l))
    if rc:
        print(log.value.decode()[-3000:])
        return
    nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(n))
    cubin = ctypes.create_string_buffer(n.value)
    nvrtc.nvrtcGetCUBIN(prog, cubin)

    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    def ck(r, what):
        if r:
            raise RuntimeError(f"{what}: CUresult {r}")
    ck(cu.cuModuleLoadData(ctypes.byref(mod), cubin), "cuModuleLoadData")
    ck(cu.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()), "cuModuleGetFunction")
    smem = 1024 + 2 * (BQ + 2 * STAGES * BKV) * D + 8 * (4 * STAGES + 2)
    # The mask's stages, as the generator chose (AttentionWgKernels.cpp).
    mask_tma = "#define MASK_TMA 1" in src
    if mask_tma:
        smem += STAGES * (BQ * BKV * 4 + 8)
    elif "#define MASK_STAGED 1" in src:
        smem += STAGES * (BQ * (BKV + 8) * 4 + 8)
    # The dump's first line says what the launcher gives it: that wins.
    launch_line = re.search(r"dynamic shared memory (\d+) bytes", src.split("\n", 1)[0])
    if launch_line:
        smem = int(launch_line.group(1))
    ck(cu.cuFuncSetAttribute(fn, 8, smem), "cuFuncSetAttribute")

    keep = []

    def tmap(t, rows, box_rows, inner=None, batch=None, ebytes=2, box_inner=64):
        # A CUtensorMap: 128 bytes, 64-byte aligned.
        inner = D if inner is None else inner
        batch = NBH if batch is None else batch
        buf = ctypes.create_string_buffer(192)
        keep.append(buf)
        addr = (ctypes.addressof(buf) + 63) & ~63
        dims = (ctypes.c_uint64 * 3)(inner, rows, batch)
        strides = (ctypes.c_uint64 * 2)(inner * ebytes, rows * inner * ebytes)
        box = (ctypes.c_uint32 * 3)(box_inner, box_rows, 1)
        es = (ctypes.c_uint32 * 3)(1, 1, 1)
        ck(cu.cuTensorMapEncodeTiled(ctypes.c_void_p(addr), 1 if ebytes == 2 else 2, 3,
                                     ctypes.c_void_p(t.data_ptr()), dims, strides, box, es,
                                     0, 3, 3, 0), "cuTensorMapEncodeTiled")
        return addr

    maps = [tmap(q, ROWS, BQ), tmap(k, SKV, BKV), tmap(v, SKV, BKV)]
    if mask_tma:  # the [1, 1, SQ, SKV] mask as [SQ][SKV] words, 32 x BQ boxes
        maps.append(tmap(mask, SQ, BQ, inner=SKV, batch=1, ebytes=4, box_inner=32))
    ptrs = [ctypes.c_void_p(t.data_ptr()) for t in ([q, k, v] + ([mask] if MASK else []) + [out])]
    args = (ctypes.c_void_p * (len(maps) + len(ptrs)))(
        *maps,
        *[ctypes.cast(ctypes.byref(p), ctypes.c_void_p) for p in ptrs])
    grid = max(1, NBH * ((ROWS + BQ - 1) // BQ))
    # A persistent tile (`_p`) walks its query tiles with one CTA per SM at
    # most, as the launcher starts it (launchGridX).
    if "#define PERSISTENT 1" in src:
        grid = min(grid, torch.cuda.get_device_properties(0).multi_processor_count)
    stream = torch.cuda.current_stream().cuda_stream

    def launch():
        ck(cu.cuLaunchKernel(fn, grid, 1, 1, 384, 1, 1, smem, ctypes.c_void_p(stream), args, None),
           "cuLaunchKernel")

    launch()
    torch.cuda.synchronize()
    # The median of REPEATS means of 10 back-to-back launches (one mean
    # drifts by about 1 %, as much as the changes compared).
    runs = []
    for _ in range(REPEATS):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(10):
            launch()
        e.record()
        torch.cuda.synchronize()
        runs.append(s.elapsed_time(e) * 100.0)
    us = sorted(runs)[len(runs) // 2]

    # The reference in fp32, one query head at a time; mtsched's causal mask
    # ends at the last key (query i sees keys up to SKV - SQ + i).
    scale = 1.0 / math.sqrt(D)
    key = (B, HQ, HKV, SQ, SKV, D, CAUSAL, str(DT), MASK)
    ref = REFS.get(key)
    if ref is None:
        ref = REFS[key] = reference(q, k, v, mask, B, HQ, G, SQ, SKV, scale, CAUSAL, MASK)
    got = out.float()
    both_nan = torch.isnan(ref) & torch.isnan(got)
    err = (got - ref).abs()
    err[both_nan] = 0
    err[torch.isnan(err)] = math.inf
    tol = 2e-2 * ref.abs().clamp(min=1.0)
    bad = err > tol
    flops = 4 * B * HQ * D * (SQ * (SKV - SQ) + SQ * (SQ + 1) // 2 if CAUSAL else SQ * SKV)
    # A variant of a kernel (the same name, edited) sits in a folder ab-TAG.
    parent = src_path.rsplit("/", 2)[-2] if src_path.count("/") >= 1 else ""
    tag = " [" + parent[3:] + "]" if parent.startswith("ab-") else ""
    print(f"{name}{tag}: shape B={B} HQ={HQ} HKV={HKV} SQ={SQ} SKV={SKV} D={D} causal={CAUSAL} "
          f"mask={MASK}: max abs error {err.max().item():.3e}, bad {int(bad.sum())} of "
          f"{bad.numel()}, {us:.1f} us ({flops / us / 1e6:.1f} TFLOP/s; min {min(runs):.1f})")
    if bad.any():
        idx = bad.nonzero()[:12].tolist()
        print("  first bad (b, h, q, d): got / ref:",
              "; ".join(f"{tuple(i)} {got[tuple(i)].item():.4g}/{ref[tuple(i)].item():.4g}" for i in idx))
        rows = bad.any(dim=-1)  # [B, HQ, SQ]
        qb = rows.nonzero()[:, 2]
        print(f"  bad rows: {int(rows.sum())}; query indices min {qb.min().item()} max "
              f"{qb.max().item()}; per head {rows.sum(dim=(0, 2)).tolist()}")
        print(f"  bad columns: {bad.any(dim=(0, 1, 2)).nonzero().flatten().tolist()[:64]}")
        r16 = rows.reshape(B, HQ, -1).float().mean(dim=(0, 1))
        print("  bad share per 16 queries:", [round(x, 2) for x in
              torch.nn.functional.pad(r16, (0, (-SQ) % 16)).reshape(-1, 16).mean(1).tolist()[:48]])
        print(f"  nan in output: {int(torch.isnan(got).sum())}, ref nan: {int(torch.isnan(ref).sum())}")


for line in open(sys.argv[1]):
    if line.strip():
        try:
            check(line.split())
        except Exception as e:  # one case's failure does not stop the rest
            print(line.split()[0], "FAILED:", e, flush=True)
        torch.cuda.synchronize()
        sys.stdout.flush()
