# Where a decode attention kernel's time goes (bench/device/attn-dec16d.sh):
# the CUDA C++ that `mtsched-opt --dump-kernels` wrote for one attn_dec
# tile, compiled with NVRTC for sm_90a and launched through the driver API
# on torch's tensors (the tensor maps encoded as the launcher encodes them):
#   1. checked element-wise against an fp32 reference in torch;
#   2. timed as bench/peers/torch_sdpa.py times SDPA (`loop` launches in a
#      CUDA graph, the median replay over `loop`, inputs rotated over copies
#      larger than 3x the L2), beside SDPA (default and cuDNN) in the same
#      process, in two interleaved rounds, with variants: `carve100` (the
#      preferred shared-memory carve-out at 100 %), `lb1` (__launch_bounds__
#      asking for one CTA an SM: more registers), `1cta` (120 KB of shared
#      memory: one CTA an SM), `tmpf` (the tensor maps prefetched first
#      thing), `padco` (the combine's partial results in rows of D + 8
#      floats: no bank conflicts), `pdl` (programmatic stream serialization: the next launch
#      may start as this one's CTAs exit; a kernel with griddepcontrol.wait
#      runs so as `ours`, `nopdl` is it launched without, and `notrig` without its
#      griddepcontrol.launch_dependents), `empty` and `empty0` (the launch
#      alone: the kernel returning at once, with its dynamic shared memory
#      and with none; not checked);
#   3. compiled with -DMT_TIMELINE (AttentionDecodeTimeline.cpp): every
#      CTA's SM and %globaltimer at its start, first stage landed, last
#      stage consumed, combine done, end, over `loop` launches of a graph;
#      printed: each launch's span (first start to last end), the gap to
#      the next launch's first start, start and end spreads, per-CTA
#      phases, CTAs per SM, the timer's granularity.
#   [ROUNDS=2] python3 attn-dec-timeline.py CASES
# CASES: a line per kernel: KERNEL.cu B HQ HKV SKV D [MODE] (bf16, one
# query; MODE `full`, the default: the variants too; `tl`: without them;
# `ncu`: only checked, then launched beside SDPA in NVTX ranges for ncu;
# `pf`: PDL and L2 (bench/device/attn-dec-pf.sh): the generator's
# PRE_WAIT prefetch and EVICT_FIRST copies switched off, on or to other
# depths, and the trigger moved to the last copy by late_trigger).
# Variants in `full`, `ncu` and `pf` modes: `l2p0` to `l2p3`, the tensor maps
# with L2 promotion none, 64 B, 128 B and 256 B instead of the launcher's
# (the dump's first line names it).
import ctypes, math, os, re, statistics, sys
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "peers"))
from torch_sdpa import gtime  # noqa: E402

LOOP = 10
TMAP_PREFETCH = """  if (threadIdx.x == THREADS - 32) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(&tm_k) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(&tm_v) : "memory");
  }
"""


NO_COMBINE = """  if (warp < NC) {
    float x = lA + lB + mA + mB;
#pragma unroll
    for (int n = 0; n < NOA; ++n)
      x += o[n][0] + o[n][1] + o[n][2] + o[n][3];
    out[bh * GROUP * SQ * D_ + tid] = STORE(x);
  }
"""


TRIGGER = '  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");\n'


def late_trigger(src):
    """The grid's trigger moved from after the start to after the producer's
    last copy, so that the next launch's CTAs come at this one's end."""
    a = "        issue(it);\n      }\n#if TAIL\n      // No copy may land"
    if TRIGGER not in src or a not in src:
        return src
    b = "        issue(it);\n      }\n" + TRIGGER.replace("  asm", "      asm") + \
        "#if TAIL\n      // No copy may land"
    return src.replace(TRIGGER, "", 1).replace(a, b, 1)


def set_defines(src, **values):
    """src with #define NAME N set to each value (the generator's PRE_WAIT
    and EVICT_FIRST switches)."""
    for name, v in values.items():
        src = re.sub(r"#define %s \d+" % name, "#define %s %d" % (name, v), src)
    return src

def pdl_wait(src):
    """griddepcontrol.wait after the producer's barriers are set up (before
    its first copy) and before the consumers read q."""
    a = "      for (int it = 0; it < DEPTH && it < nTiles; ++it)\n        issue(it);"
    b = "    // Packed row r is query r % SQ"
    w = '      asm volatile("griddepcontrol.wait;" ::: "memory");\n'
    if a not in src or b not in src:
        return src
    return src.replace(a, w + a, 1).replace(b, w[2:] + b, 1)


def pad_combine(src):
    """The consumers' partial results in shared memory with rows of D + 8
    floats instead of D: their stores free of bank conflicts."""
    out = re.sub(r"\(warp \* 16 \+ (g \+ 8|g|ra|rb)\) \* D_", r"(warp * 16 + \1) * CO_LD", src)
    out = out.replace("float *cM = cO + NC * 16 * D_;", "float *cM = cO + NC * 16 * CO_LD;")
    out = out.replace("x += cO[w * 16 * D_ + e] * cW[w * 16 + i];",
                      "x += cO[(w * 16 + i) * CO_LD + e % D_] * cW[w * 16 + i];")
    if out.count("CO_LD") < 4:
        return src
    return "#define CO_LD (D_ + 8)\n" + out


def lib(names):
    for n in names:
        try:
            return ctypes.CDLL(n)
        except OSError:
            pass
    raise RuntimeError("cannot open any of " + str(names))


NVRTC = lib(["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"])
CU = lib(["libcuda.so.1", "libcuda.so"])


def ck(r, what):
    if r:
        raise RuntimeError(f"{what}: CUresult {r}")


def compile_cubin(src, defines=()):
    prog = ctypes.c_void_p()
    assert NVRTC.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"k.cu", 0, None, None) == 0
    opts = [b"-arch=sm_90a", b"-std=c++17", b"--use_fast_math", b"--ptxas-options=-v"]
    opts += [d.encode() for d in defines]
    rc = NVRTC.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    n = ctypes.c_size_t()
    NVRTC.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    NVRTC.nvrtcGetProgramLog(prog, log)
    regs = " ".join(l.strip() for l in log.value.decode().splitlines()
                    if "registers" in l or "spill" in l)
    if rc:
        raise RuntimeError("nvrtc: " + log.value.decode()[-2000:])
    NVRTC.nvrtcGetCUBINSize(prog, ctypes.byref(n))
    cubin = ctypes.create_string_buffer(n.value)
    NVRTC.nvrtcGetCUBIN(prog, cubin)
    return cubin, regs


class Kernel:
    def __init__(self, src, name, smem, defines=(), carveout=None):
        self.cubin, self.regs = compile_cubin(src, defines)
        self.mod, self.fn = ctypes.c_void_p(), ctypes.c_void_p()
        ck(CU.cuModuleLoadData(ctypes.byref(self.mod), self.cubin), "cuModuleLoadData")
        ck(CU.cuModuleGetFunction(ctypes.byref(self.fn), self.mod, name.encode()),
           "cuModuleGetFunction")
        ck(CU.cuFuncSetAttribute(self.fn, 8, smem), "max dynamic shared memory")
        if carveout is not None:  # CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
            ck(CU.cuFuncSetAttribute(self.fn, 9, carveout), "carve-out")

    def global_ptr(self, name):
        p, n = ctypes.c_uint64(), ctypes.c_size_t()
        ck(CU.cuModuleGetGlobal_v2(ctypes.byref(p), ctypes.byref(n), self.mod, name.encode()),
           "cuModuleGetGlobal " + name)
        return p.value, n.value


class LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint),
                ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("numAttrs", ctypes.c_uint)]


class LaunchAttr(ctypes.Structure):  # CUlaunchAttribute: id, pad, 64-byte value
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("val", ctypes.c_int * 16)]


def tmap(t, D, SKV, NBH, BKV, keep, promo=3):
    # k or v as [B * Hkv][Skv][D], boxes of 64 columns x BKV keys, 128-byte
    # swizzle (wgmmaTensorMap); L2 promotion `promo` (CUtensorMapL2promotion:
    # 0 none, 1 64 B, 2 128 B, 3 256 B, as the launcher encodes).
    buf = ctypes.create_string_buffer(192)
    keep.append(buf)
    addr = (ctypes.addressof(buf) + 63) & ~63
    dims = (ctypes.c_uint64 * 3)(D, SKV, NBH)
    strides = (ctypes.c_uint64 * 2)(D * 2, SKV * D * 2)
    box = (ctypes.c_uint32 * 3)(64, BKV, 1)
    es = (ctypes.c_uint32 * 3)(1, 1, 1)
    # 16-bit elements as CU_TENSOR_MAP_DATA_TYPE_UINT16, as the launcher
    # encodes bf16 and f16 (encodeTensorMaps).
    ck(CU.cuTensorMapEncodeTiled(ctypes.c_void_p(addr), 1,
                                 3, ctypes.c_void_p(t.data_ptr()), dims, strides, box, es,
                                 0, 3, promo, 0), "cuTensorMapEncodeTiled")
    return addr


def define(src, name):
    m = re.search(r"#define %s (\d+)" % name, src)
    return int(m.group(1)) if m else None


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5))]


def timeline(rec, G, ev_us):
    """rec: [n][16] uint64 of one graph replay of LOOP launches."""
    n = len(rec)
    print(f"  timeline: {n} CTA records ({LOOP} launches x {G})")
    if n < G:
        return
    stamps = sorted({r[k] for r in rec for k in (1, 2, 3, 4, 5) if r[k]})
    diffs = [b - a for a, b in zip(stamps, stamps[1:]) if b > a]
    print(f"  %globaltimer granularity: smallest step {min(diffs or [0])} ns, "
          f"steps < 100 ns: {sum(d < 100 for d in diffs)} of {len(diffs)}")
    launches = [rec[i * G:(i + 1) * G] for i in range(n // G)]
    spans, gaps, sspread, espread = [], [], [], []
    for i, L in enumerate(launches):
        s0 = min(r[1] for r in L)
        ends = [r[5] for r in L if r[5]]
        e1 = max(ends)
        spans.append((e1 - s0) / 1e3)
        sspread.append((max(r[1] for r in L) - s0) / 1e3)
        espread.append((e1 - min(ends)) / 1e3)
        if i + 1 < len(launches):
            gaps.append((min(r[1] for r in launches[i + 1]) - e1) / 1e3)
    med = statistics.median
    print(f"  per launch (us, median of {len(launches)}; min..max): span first start to "
          f"last end {med(spans):.2f} ({min(spans):.2f}..{max(spans):.2f}), gap last end to "
          f"next first start {med(gaps) if gaps else 0:.2f} ({min(gaps or [0]):.2f}.."
          f"{max(gaps or [0]):.2f}), start spread {med(sspread):.2f}, end spread "
          f"{med(espread):.2f}; event time {ev_us:.2f}")
    L = launches[len(launches) // 2]
    s0 = min(r[1] for r in L)

    def ph(a, b):
        xs = [(r[b] - r[a]) / 1e3 for r in L if r[a] and r[b]]
        if not xs:
            return "-"
        return f"{min(xs):.2f}/{pct(xs, .5):.2f}/{max(xs):.2f}"

    print(f"  launch {len(launches) // 2}, per CTA min/median/max us: "
          f"first stage landed {ph(1, 2)}; loop {ph(1, 3)}; combine in CTA "
          f"{ph(3, 4)} (partials stored {ph(3, 8)}, weights {ph(8, 9)}, sum {ph(9, 4)}); "
          f"out/split combine {ph(4, 5)}; whole {ph(1, 5)}")
    starts = sorted((r[1] - s0) / 1e3 for r in L)
    ends = sorted((r[5] - s0) / 1e3 for r in L if r[5])
    print("  starts after s0 (us) p0/10/50/90/100: " +
          "/".join(f"{pct(starts, p):.2f}" for p in (0, .1, .5, .9, 1)))
    print("  ends after s0 (us)   p0/10/50/90/100: " +
          "/".join(f"{pct(ends, p):.2f}" for p in (0, .1, .5, .9, 1)) +
          "; last 8: " + " ".join(f"{e:.2f}" for e in ends[-8:]))
    per_sm = {}
    for r in L:
        per_sm.setdefault(r[0] & 0xffffffff, []).append(r)
    multi = {sm: len(v) for sm, v in per_sm.items() if len(v) > 1}
    print(f"  SMs used {len(per_sm)}; SMs with more than one CTA: {len(multi)} "
          f"{sorted(multi.items())[:12]}")
    ghz = [(r[7] - r[6]) / (r[5] - r[1]) for r in L if r[5] > r[1] and r[7] > r[6]]
    if ghz:
        print(f"  SM clock (clock64 / globaltimer over a CTA): {med(ghz):.3f} GHz")


def ncu_ranges(gos, check, q, k, v, C):
    """MODE `ncu`: each variant of `gos` checked, then two launches of each
    in an NVTX range of its name and two of SDPA's cuDNN backend in
    `sdpa_cudnn`, each on its own copy of the inputs, for `ncu --nvtx
    --nvtx-include` to profile side by side (bench/device/attn-dec-ncu.sh)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    gos = {t: go for t, go in gos.items() if check(t, go)}
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):  # cuDNN builds its plan
        F.scaled_dot_product_attention(q[0], k[0], v[0], enable_gqa=True)
    for tag in list(gos) + ["sdpa_cudnn"]:
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(tag)
        for i in range(2):
            if tag in gos:
                gos[tag](i % C)
            else:
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    F.scaled_dot_product_attention(q[i % C], k[i % C], v[i % C],
                                                   enable_gqa=True)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


def run_case(line):
    path, B, HQ, HKV, SKV, D = line.split()[:6]
    mode = line.split()[6] if len(line.split()) > 6 else "full"
    full = mode == "full"
    B, HQ, HKV, SKV, D = map(int, (B, HQ, HKV, SKV, D))
    src = open(path).read()
    name = os.path.basename(path)[:-3]
    head = src.split("\n", 1)[0]
    m = re.search(r"grid \((\d+), (\d+), (\d+)\), block (\d+), dynamic shared memory (\d+)", head)
    gx, gy, gz, block, smem = map(int, m.groups())
    # The launcher's L2 promotion for the kernel's tensor maps (256 bytes
    # where the dump does not say): CUtensorMapL2promotion 0-3.
    pm = re.search(r"L2 promotion (\d+) bytes", head)
    own_promo = {0: 0, 64: 1, 128: 2, 256: 3}[int(pm.group(1)) if pm else 256]
    BKV, SPLITS = define(src, "BKV"), define(src, "SPLITS")
    assert define(src, "ONE_BOX") == 0 and define(src, "CLUSTER_SPLITS") in (0, None), \
        "plain tiles only"
    G, NBH, GROUP = gx * gy * gz, B * HKV, HQ // HKV
    # A persistent form (_p, _ps) is launched with a CTA per SM at most.
    GMAX = define(src, "GMAX")
    if GMAX:
        gx = min(gx, torch.cuda.get_device_properties(0).multi_processor_count)
    print(f"== {name}: B={B} HQ={HQ} HKV={HKV} SKV={SKV} D={D}: grid ({gx}, {gy}, {gz}) x "
          f"{block}, {smem} bytes of shared memory", flush=True)
    dt = torch.bfloat16
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    per_set = 2 * (2 * B * HQ * D + 2 * NBH * SKV * D)
    C = max(1, min(8, math.ceil(3 * l2 / per_set)))
    torch.manual_seed(0)
    q = [torch.randn(B, HQ, 1, D, device="cuda", dtype=dt) for _ in range(C)]
    k = [torch.randn(B, HKV, SKV, D, device="cuda", dtype=dt) for _ in range(C)]
    v = [torch.randn(B, HKV, SKV, D, device="cuda", dtype=dt) for _ in range(C)]
    out = [torch.full((B, HQ, 1, D), float("nan"), device="cuda", dtype=dt) for _ in range(C)]
    ws_bytes = 0
    if SPLITS > 1:
        ws_bytes = gx * gy * SPLITS * (16 * D + 32) * 4 + gx * gy * 4
    elif GMAX and define(src, "SMAX"):  # _ps: slots, counters, lists
        SMAX, LCAP = define(src, "SMAX"), define(src, "LCAP")
        ws_bytes = ((NBH + GMAX * SMAX) * (16 * D + 32) + NBH * (3 + LCAP) + 1) * 4
    elif GMAX:  # _p: a slot per CTA and kv head (_pw: per consumer warp too)
        warps = define(src, "THREADS") // 32 - 1
        ws_bytes = ((GMAX + NBH) * warps * (16 * D + 32) + NBH) * 4
    ws = [torch.zeros(max(16, ws_bytes) // 4 + 4, device="cuda") for _ in range(C)]
    keep = []

    def make_args(promo):
        """The kernel's parameters for each copy, the tensor maps with L2
        promotion `promo`."""
        out_args = []
        for i in range(C):
            maps = [tmap(k[i], D, SKV, NBH, BKV, keep, promo),
                    tmap(v[i], D, SKV, NBH, BKV, keep, promo)]
            ptrs = [ctypes.c_void_p(t.data_ptr()) for t in (q[i], k[i], v[i], out[i])]
            if ws_bytes:
                ptrs.append(ctypes.c_void_p(ws[i].data_ptr()))
            keep.append(ptrs)
            a = (ctypes.c_void_p * (2 + len(ptrs)))(
                *maps, *[ctypes.cast(ctypes.byref(p), ctypes.c_void_p) for p in ptrs])
            keep.append(a)
            out_args.append(a)
        return out_args

    args = make_args(own_promo)

    # A kernel that waits (griddepcontrol.wait, KernelSource::ProgrammaticWait)
    # is launched with PDL, as the launcher does, and so are its variants;
    # `nopdl` is it launched without.
    wait_pdl = "griddepcontrol.wait" in src and hasattr(CU, "cuLaunchKernelEx")

    def launcher(K, pdl=wait_pdl, smem=smem, args=args):
        attr = LaunchAttr()
        attr.id = 6  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        attr.val[0] = 1
        keep.append(attr)

        def go(i):
            stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
            if pdl:
                cfg = LaunchConfig(gx, gy, gz, block, 1, 1, smem, stream,
                                   ctypes.cast(ctypes.byref(attr), ctypes.c_void_p), 1)
                ck(CU.cuLaunchKernelEx(ctypes.byref(cfg), K.fn, args[i], None), "cuLaunchKernelEx")
            else:
                ck(CU.cuLaunchKernel(K.fn, gx, gy, gz, block, 1, 1, smem, stream, args[i], None),
                   "cuLaunchKernel")
        return go

    scale = 1.0 / math.sqrt(D)
    ref = [F.scaled_dot_product_attention(q[i].float(), k[i].float(), v[i].float(), scale=scale,
                                          enable_gqa=True) for i in range(C)]

    def check(tag, go):
        for i in range(C):
            out[i].fill_(float("nan"))
            go(i)
        torch.cuda.synchronize()
        err = max(((out[i].float() - ref[i]).abs().nan_to_num(math.inf)).max().item()
                  for i in range(C))
        ok = err <= 2e-2
        print(f"  {tag}: max abs error against fp32 {err:.3e}: {'ok' if ok else 'WRONG'}")
        return ok

    variants = {}
    base = Kernel(src, name, smem)
    print(f"  ptxas: {base.regs}")
    variants["ours"] = launcher(base)
    if wait_pdl:
        variants["nopdl"] = launcher(base, pdl=False)
    trig = '  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");\n'
    if wait_pdl and trig in src:
        # The same kernel without its early trigger: the next launch starts
        # only as this one's CTAs exit.
        variants["notrig"] = launcher(Kernel(src.replace(trig, ""), name, smem))
    if mode == "pf" and wait_pdl:
        # PDL and L2, by the generator's switches: a kernel with PRE_WAIT
        # tiles (its L2 prefetch before the wait, with evict-first copies
        # and no L2 promotion): `nopw` without the three (the kernel as it
        # was before them), `pw0_ef` without the prefetch, `noef`
        # without the evict-first copies, `pwN` other depths; a kernel with
        # none (split tiles): `ef` evict-first copies, `ef_pwN` and N tiles
        # prefetched. Both: `late0`, the trigger after the last copy.
        pw = define(src, "PRE_WAIT")
        if pw:
            try:
                nopw = set_defines(src, PRE_WAIT=0, EVICT_FIRST=0)
                variants["nopw"] = launcher(Kernel(nopw, name, smem), args=make_args(3))
            except Exception as e:
                print(f"  nopw: not built: {e}")
            forms = [("pw0_ef", lambda: set_defines(src, PRE_WAIT=0)),
                     ("noef", lambda: set_defines(src, EVICT_FIRST=0)),
                     ("pw%d" % (pw // 2), lambda: set_defines(src, PRE_WAIT=pw // 2)),
                     ("pw%d" % (pw * 3 // 2), lambda: set_defines(src, PRE_WAIT=pw * 3 // 2))]
        else:
            forms = [(t, lambda n=n: set_defines(src, PRE_WAIT=n, EVICT_FIRST=1))
                     for t, n in (("ef", 0), ("ef_pw4", 4), ("ef_pw8", 8))]
        forms.append(("late0", lambda: late_trigger(src)))
        for tag, make in forms:
            alt = make()
            if alt != src:
                try:
                    variants[tag] = launcher(Kernel(alt, name, smem))
                except Exception as e:
                    print(f"  {tag}: not built: {e}")
            else:
                print(f"  {tag}: the kernel text has no place for it")
    # The tensor maps' L2 promotion: none, 64 B, 128 B, 256 B (l2p0-l2p3;
    # `ours` as the launcher encodes them), in modes full, ncu and pf.
    promos = {}
    if full or mode in ("ncu", "pf"):
        promos = {"l2p%d" % p: launcher(base, args=make_args(p)) for p in (0, 1, 2, 3)
                  if p != own_promo}
    if mode == "ncu":
        ncu_ranges(dict(ours=variants["ours"], **promos), check, q, k, v, C)
        return
    variants.update(promos)
    lb = re.sub(r"__launch_bounds__\(THREADS, 2\)", "__launch_bounds__(THREADS, 1)", src)
    # The producer's lane prefetches both tensor maps first thing.
    pf = src.replace("  MT_TL_START\n", "  MT_TL_START\n" + TMAP_PREFETCH, 1)

    def add(tag, make):
        try:
            variants[tag] = make()
        except Exception as e:  # one variant's failure does not stop the rest
            print(f"  {tag}: not built: {e}")

    # _ps: other claim sizes (tiles an atomic add claims).
    for c in (1, 4, 8):
        alt = re.sub(r"#define CLAIM \d+u", "#define CLAIM %du" % c, src)
        if alt != src and "#define CLAIM %du" % c not in src:
            add("claim%d" % c, lambda alt=alt: launcher(Kernel(alt, name, smem)))
    if full:
        add("carve100", lambda: launcher(Kernel(src, name, smem, carveout=100)))
        if lb != src:
            add("lb1", lambda: launcher(Kernel(lb, name, smem)))
        # More dynamic shared memory than two CTAs fit in: one CTA an SM
        # (round 2 launched a 136 KB kernel with 120 KB: a fault).
        if smem < 120 * 1024:
            add("1cta", lambda: launcher(Kernel(src, name, 120 * 1024), smem=120 * 1024))
        if pf != src:
            add("tmpf", lambda: launcher(Kernel(pf, name, smem)))
        pc = pad_combine(src)
        if pc != src:
            add("padco", lambda: launcher(Kernel(pc, name, smem)))
    # (The persistent forms have no stamps.)
    if "MT_TL_START" in src:
        tl = Kernel(src, name, smem, defines=["-DMT_TIMELINE=1"])
        variants["timeline"] = launcher(tl)
    if full and not wait_pdl and hasattr(CU, "cuLaunchKernelEx"):  # last: the riskiest capture
        add("pdl", lambda: launcher(base, pdl=True))
        # PDL as a graph of dependent kernels could use it: the barriers
        # set up, then griddepcontrol.wait before the first copy and
        # before q is read.
        pw = pdl_wait(src)
        if pw != src:
            add("pdlw", lambda: launcher(Kernel(pw, name, smem), pdl=True))
    good = {t: go for t, go in variants.items() if check(t, go)}
    old_end = "  const int VR = ROWS - r0 < 16 ? (int)(ROWS - r0) : 16;\n  float *cO"
    if full and old_end in src:
        # The loop alone: the consumers' accumulators summed into out
        # without the combine after the barrier (not checked): the
        # combine's cost at the end of the last CTA (the tiles without the
        # early combine).
        i, j = src.index(old_end), src.rindex("  MT_TL_END")
        nc = src[:i] + NO_COMBINE + src[j:]
        add("nocomb", lambda: launcher(Kernel(nc, name, smem)))
        if "nocomb" in variants:
            good["nocomb"] = variants["nocomb"]
    if full and "MT_TL_START" in src:
        # The launch alone: the same kernel returning at once (same
        # parameters, grid and block), with its dynamic shared memory and
        # with none; not checked (it writes nothing).
        empty = src.replace("  MT_TL_START\n", "  MT_TL_START\n  if (gridDim.x > 0)\n    return;\n", 1)
        if empty != src:
            add("empty", lambda: launcher(Kernel(empty, name, smem)))
            add("empty0", lambda: launcher(Kernel(empty, name, 0), smem=0))
            for t in ("empty", "empty0"):
                if t in variants:
                    good[t] = variants[t]

    from torch.nn.attention import SDPBackend, sdpa_kernel
    sd = lambda i: F.scaled_dot_product_attention(q[i], k[i], v[i], enable_gqa=True)
    res = {}
    for rnd in range(int(os.environ.get("ROUNDS", "2"))):
        res.setdefault("sdpa", []).append(gtime(sd, C, loop=LOOP))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            res.setdefault("sdpa_cudnn", []).append(gtime(sd, C, loop=LOOP))
        for t, go in list(good.items()):
            try:
                res.setdefault(t, []).append(gtime(go, C, loop=LOOP))
            except Exception as e:  # a variant that cannot be captured
                print(f"  {t}: not timed: {e}")
                del good[t]
                torch.cuda.synchronize()
    print("  us (round 1, round 2, ...): " + ", ".join(
        f"{t} {' '.join(f'{x:.2f}' for x in xs)}" for t, xs in res.items()), flush=True)

    if "timeline" in good:
        # One replay of LOOP launches, the records counted from zero.
        g = torch.cuda.CUDAGraph()
        s0 = torch.cuda.Stream()
        go = good["timeline"]
        with torch.cuda.stream(s0):
            with torch.cuda.graph(g, stream=s0):
                for i in range(LOOP):
                    go(i % C)
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
        cnt_ptr, _ = tl.global_ptr("mt_tl_n")
        tl_ptr, tl_bytes = tl.global_ptr("mt_tl")
        ck(CU.cuMemsetD32_v2(ctypes.c_uint64(cnt_ptr), 0, 1), "reset")
        torch.cuda.synchronize()
        g.replay()
        torch.cuda.synchronize()
        n = ctypes.c_uint()
        ck(CU.cuMemcpyDtoH_v2(ctypes.byref(n), ctypes.c_uint64(cnt_ptr), 4), "count")
        cnt = min(n.value, tl_bytes // 128)
        buf = (ctypes.c_uint64 * (16 * cnt))()
        ck(CU.cuMemcpyDtoH_v2(buf, ctypes.c_uint64(tl_ptr), 128 * cnt), "records")
        rec = [list(buf[16 * j:16 * j + 16]) for j in range(cnt)]
        timeline(rec, G, statistics.median(res["timeline"]))


def main():
    for line in open(sys.argv[1]):
        if line.strip():
            try:
                run_case(line)
            except Exception as e:  # one case's failure does not stop the rest
                print(line.split()[0], "FAILED:", e, flush=True)
            torch.cuda.synchronize()
            sys.stdout.flush()


# (bench/device/pointwise-sweep.py imports the loader and Kernel.)
if __name__ == "__main__":
    main()
