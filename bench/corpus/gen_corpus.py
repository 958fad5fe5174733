"""Writes the heuristics lab's corpus (bench/corpus/*.mir).

Four realistic graph families on 4 tensor-parallel ranks, Llama-3-8B-like
sizes (hidden 4096, MLP 14336, 32 heads), each at a decode size (M = 1..16
tokens) and a prefill size (M = 2048..8192 tokens):

  tp_layer     attention projections and MLP, two all_reduces, residual
               adds, rmsnorm (Megatron tensor parallelism)
  sp_layer     sequence parallel MLP: all_gather before, reduce_scatter
               after the matmuls
  moe_layer    mixture of experts: router, all_to_all dispatch and combine
  coll_chain   a chain of six collectives with pointwise work between them
  llama_layer  tp_layer with Llama's SwiGLU MLP (gate and up GEMMs, silu,
               mul: merged or split, as fuse-swiglu/select-swiglu decide)
               and the residual sum written by the first all_reduce's
               fused add -> rmsnorm beside the norm (a two-output epilogue)
  llama_qkv    llama_layer with Q, K and V projections (multi-head), on at
               most 2 ranks, and a pointwise stand-in for RoPE on Q and K (a scale by
               the position's cos): the epilogue, horizontal and prologue
               decisions around the attention norm interact (the
               recursive fusion search, --fusion-search=recursive)

The attention core (QK^T, softmax, PV) is a softmax over the query
projection: the IR has no batched attention op, and the scheduler only
decides the projections and collectives around it.

usage: python3 gen_corpus.py [--tp N] [--out DIR]
  (default: 4 ranks, rewriting the .mir files next to it; the GPU lab on a
  2-GPU machine uses --tp 2 --out SOMEWHERE)
"""
import argparse
import os

ap = argparse.ArgumentParser()
ap.add_argument("--tp", type=int, default=4)
ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
args = ap.parse_args()
TP = args.tp
H, F = 4096, 14336
HQ = H // TP           # per-rank query/output width
FF = F // TP           # per-rank MLP width
HEAD = "group @tp = [" + ", ".join(map(str, range(TP))) + "]\n"


def tp_layer(m):
    return f"""// Tensor-parallel transformer layer, M = {m} tokens, {TP} ranks.
{HEAD}
graph @tp_layer_m{m}(%x: bf16[{m},{H}], %g1: bf16[{H}], %wq: bf16[{H},{HQ}], %wo: bf16[{HQ},{H}], %g2: bf16[{H}], %wu: bf16[{H},{FF}], %wd: bf16[{FF},{H}]) attributes {{world_size = {TP}}} {{
  %n1 = rmsnorm(%x, %g1) {{eps = 1.0e-05}} : bf16[{m},{H}]
  %q = matmul(%n1, %wq) : bf16[{m},{HQ}]
  %s = softmax(%q) : bf16[{m},{HQ}]
  %o = matmul(%s, %wo) : bf16[{m},{H}]
  %or = all_reduce(%o) {{reduce = "sum", group = "tp"}} : bf16[{m},{H}]
  %h1 = add(%or, %x) : bf16[{m},{H}]
  %n2 = rmsnorm(%h1, %g2) {{eps = 1.0e-05}} : bf16[{m},{H}]
  %u = matmul(%n2, %wu) : bf16[{m},{FF}]
  %a = silu(%u) : bf16[{m},{FF}]
  %d = matmul(%a, %wd) : bf16[{m},{H}]
  %dr = all_reduce(%d) {{reduce = "sum", group = "tp"}} : bf16[{m},{H}]
  %out = add(%dr, %h1) : bf16[{m},{H}]
  return %out
}}
"""


def llama_layer(m):
    return f"""// Llama tensor-parallel layer with a SwiGLU MLP, M = {m} tokens, {TP} ranks.
// %h1 feeds the RMSNorm and the last residual add: the first all_reduce's
// fused epilogue writes it beside the norm.
{HEAD}
graph @llama_layer_m{m}(%x: bf16[{m},{H}], %g1: bf16[{H}], %wq: bf16[{H},{HQ}], %wo: bf16[{HQ},{H}], %g2: bf16[{H}], %wg: bf16[{H},{FF}], %wu: bf16[{H},{FF}], %wd: bf16[{FF},{H}]) attributes {{world_size = {TP}}} {{
  %n1 = rmsnorm(%x, %g1) {{eps = 1.0e-05}} : bf16[{m},{H}]
  %q = matmul(%n1, %wq) : bf16[{m},{HQ}]
  %s = softmax(%q) : bf16[{m},{HQ}]
  %o = matmul(%s, %wo) : bf16[{m},{H}]
  %or = all_reduce(%o) {{reduce = "sum", group = "tp"}} : bf16[{m},{H}]
  %h1 = add(%or, %x) : bf16[{m},{H}]
  %n2 = rmsnorm(%h1, %g2) {{eps = 1.0e-05}} : bf16[{m},{H}]
  %gt = matmul(%n2, %wg) : bf16[{m},{FF}]
  %up = matmul(%n2, %wu) : bf16[{m},{FF}]
  %gs = silu(%gt) : bf16[{m},{FF}]
  %gu = mul(%gs, %up) : bf16[{m},{FF}]
  %d = matmul(%gu, %wd) : bf16[{m},{H}]
  %dr = all_reduce(%d) {{reduce = "sum", group = "tp"}} : bf16[{m},{H}]
  %out = add(%dr, %h1) : bf16[{m},{H}]
  return %out
}}
"""


# llama_qkv runs on at most 2 ranks, as the gallery's layers: at 4 the
# per-rank projections (1024 wide) run cuBLAS with their epilogues apart in
# pass order already, and no decision interacts.
QKV_TP = min(TP, 2)
QKV_HEAD = "group @tp = [" + ", ".join(map(str, range(QKV_TP))) + "]\n"


def llama_qkv(m):
    HQ, HKV, FF = H // QKV_TP, H // QKV_TP, F // QKV_TP  # multi-head
    return f"""// Llama tensor-parallel layer with Q/K/V projections (multi-head), a
// RoPE stand-in on Q and K, a SwiGLU MLP, M = {m} tokens, {QKV_TP} ranks.
// K and V are returned (the KV cache write).
{QKV_HEAD}
graph @llama_qkv_m{m}(%x: bf16[{m},{H}], %g1: bf16[{H}], %wq: bf16[{H},{HQ}], %wk: bf16[{H},{HKV}], %wv: bf16[{H},{HKV}], %cq: bf16[{m},{HQ}], %ck: bf16[{m},{HKV}], %wo: bf16[{HQ},{H}], %g2: bf16[{H}], %wg: bf16[{H},{FF}], %wu: bf16[{H},{FF}], %wd: bf16[{FF},{H}]) attributes {{world_size = {QKV_TP}}} {{
  %n1 = rmsnorm(%x, %g1) {{eps = 1.0e-05}} : bf16[{m},{H}]
  %q = matmul(%n1, %wq) : bf16[{m},{HQ}]
  %qr = mul(%q, %cq) : bf16[{m},{HQ}]
  %k = matmul(%n1, %wk) : bf16[{m},{HKV}]
  %kr = mul(%k, %ck) : bf16[{m},{HKV}]
  %v = matmul(%n1, %wv) : bf16[{m},{HKV}]
  %s = softmax(%qr) : bf16[{m},{HQ}]
  %o = matmul(%s, %wo) : bf16[{m},{H}]
  %or = all_reduce(%o) {{reduce = "sum", group = "tp"}} : bf16[{m},{H}]
  %h1 = add(%or, %x) : bf16[{m},{H}]
  %n2 = rmsnorm(%h1, %g2) {{eps = 1.0e-05}} : bf16[{m},{H}]
  %gt = matmul(%n2, %wg) : bf16[{m},{FF}]
  %up = matmul(%n2, %wu) : bf16[{m},{FF}]
  %gs = silu(%gt) : bf16[{m},{FF}]
  %gu = mul(%gs, %up) : bf16[{m},{FF}]
  %d = matmul(%gu, %wd) : bf16[{m},{H}]
  %dr = all_reduce(%d) {{reduce = "sum", group = "tp"}} : bf16[{m},{H}]
  %out = add(%dr, %h1) : bf16[{m},{H}]
  return %out, %kr, %v
}}
"""


def sp_layer(m):
    s = m // TP
    return f"""// Sequence-parallel MLP layer, M = {m} tokens ({s} per rank), {TP} ranks.
{HEAD}
graph @sp_layer_m{m}(%xs: bf16[{s},{H}], %g: bf16[{H}], %wu: bf16[{H},{FF}], %wd: bf16[{FF},{H}], %b: bf16[{H}]) attributes {{world_size = {TP}}} {{
  %xg = all_gather(%xs) {{group = "tp"}} : bf16[{m},{H}]
  %n = rmsnorm(%xg, %g) {{eps = 1.0e-05}} : bf16[{m},{H}]
  %u = matmul(%n, %wu) : bf16[{m},{FF}]
  %a = gelu(%u) : bf16[{m},{FF}]
  %d = matmul(%a, %wd) : bf16[{m},{H}]
  %rs = reduce_scatter(%d) {{reduce = "sum", group = "tp"}} : bf16[{s},{H}]
  %rb = add(%rs, %b) : bf16[{s},{H}]
  %out = add(%rb, %xs) : bf16[{s},{H}]
  return %out
}}
"""


def moe_layer(m):
    return f"""// Mixture-of-experts layer (one expert per rank), M = {m} tokens, {TP} ranks.
{HEAD}
graph @moe_layer_m{m}(%x: bf16[{m},{H}], %wr: bf16[{H},64], %we1: bf16[{H},{F // 4}], %we2: bf16[{F // 4},{H}]) attributes {{world_size = {TP}}} {{
  %r = matmul(%x, %wr) : bf16[{m},64]
  %p = softmax(%r) : bf16[{m},64]
  %dx = all_to_all(%x) {{group = "tp"}} : bf16[{m},{H}]
  %e = matmul(%dx, %we1) : bf16[{m},{F // 4}]
  %a = silu(%e) : bf16[{m},{F // 4}]
  %e2 = matmul(%a, %we2) : bf16[{m},{H}]
  %c = all_to_all(%e2) {{group = "tp"}} : bf16[{m},{H}]
  %out = add(%c, %x) : bf16[{m},{H}]
  return %out, %p
}}
"""


def coll_chain(m):
    return f"""// A chain of six collectives with pointwise work between, M = {m}, {TP} ranks.
{HEAD}
graph @coll_chain_m{m}(%x: bf16[{m},{H}], %b: bf16[{H}]) attributes {{world_size = {TP}}} {{
  %c1 = all_reduce(%x) {{reduce = "sum", group = "tp"}} : bf16[{m},{H}]
  %p1 = add(%c1, %b) : bf16[{m},{H}]
  %c2 = reduce_scatter(%p1) {{reduce = "sum", group = "tp"}} : bf16[{m // TP},{H}]
  %p2 = gelu(%c2) : bf16[{m // TP},{H}]
  %c3 = all_gather(%p2) {{group = "tp"}} : bf16[{m},{H}]
  %p3 = relu(%c3) : bf16[{m},{H}]
  %c4 = all_to_all(%p3) {{group = "tp"}} : bf16[{m},{H}]
  %p4 = mul(%c4, %x) : bf16[{m},{H}]
  %c5 = all_reduce(%p4) {{reduce = "sum", group = "tp"}} : bf16[{m},{H}]
  %p5 = silu(%c5) : bf16[{m},{H}]
  %c6 = all_reduce(%p5) {{reduce = "max", group = "tp"}} : bf16[{m},{H}]
  %out = add(%c6, %b) : bf16[{m},{H}]
  return %out
}}
"""


GRAPHS = [("tp_layer", tp_layer, 4, 4096), ("sp_layer", sp_layer, 16, 8192),
          ("moe_layer", moe_layer, 8, 2048), ("coll_chain", coll_chain, 4, 4096),
          ("llama_layer", llama_layer, 4, 4096),
          ("llama_qkv", llama_qkv, 16, 4096)]

os.makedirs(args.out, exist_ok=True)
for name, fn, dec, pre in GRAPHS:
    for phase, m in (("decode", dec), ("prefill", pre)):
        with open(os.path.join(args.out, f"{name}_{phase}.mir"), "w") as f:
            f.write(fn(m))
