#!/usr/bin/env python3
"""Writes the hand-written real layers of examples/layers/ (issue 14).

Each file holds one layer at a decode size (16 tokens) and a prefill size
(4096 tokens), per rank, with the configuration of the model it names:

  llama3_8b_tp2.mir   Llama-3-8B decoder layer (attention + SwiGLU MLP) at TP=2
  llama3_8b_tp8.mir   the same at TP=8
  megatron_sp.mir     Llama-3-70B decoder layer at TP=8 with Megatron sequence
                      parallelism (all_gather before, reduce_scatter after)
  mixtral_moe.mir     Mixtral-8x7B MoE layer, expert parallel over 8 ranks:
                      router (topk), tokens grouped by expert (sort,
                      index_select), pairs per expert counted, dispatch and
                      combine by uneven all_to_all

The graphs are written out by this script rather than by hand so that the
shapes of each tensor-parallel degree follow from one description; they use
the IR's ops directly (no custom stand-ins). Run it from anywhere:

  python3 examples/layers/gen_layers.py           # rewrites the .mir files
  python3 examples/layers/gen_layers.py --check   # exits 1 if one differs
  python3 examples/layers/gen_layers.py --one-rank DIR
      # writes each layer with one rank (world_size 1: collectives copy or
      # add nothing, per-rank shapes kept) into DIR, for `--run` on one GPU
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DECODE, PREFILL = 16, 4096


def t(dtype, *shape):
    return f"{dtype}[{','.join(str(d) for d in shape)}]"


def bf(*shape):
    return t("bf16", *shape)


class Graph:
    def __init__(self):
        self.lines = []

    def op(self, name, text, ty):
        self.lines.append(f"  %{name} = {text} : {ty}")
        return f"%{name}"


def rotary(g, x, cos, sin, shape, p):
    """Rotate-half RoPE on the last dimension: x*cos + rotate_half(x)*sin."""
    d = shape[-1]
    half = list(shape[:-1]) + [d // 2]
    lo = g.op(f"{p}_lo", f"slice({x}) {{dim = -1, start = 0, end = {d // 2}}}", bf(*half))
    hi = g.op(f"{p}_hi", f"slice({x}) {{dim = -1, start = {d // 2}, end = {d}}}", bf(*half))
    nhi = g.op(f"{p}_nhi", f"neg({hi})", bf(*half))
    rot = g.op(f"{p}_rot", f"concat({nhi}, {lo}) {{dim = -1}}", bf(*shape))
    xc = g.op(f"{p}_c", f"mul({x}, {cos})", bf(*shape))
    rs = g.op(f"{p}_s", f"mul({rot}, {sin})", bf(*shape))
    return g.op(f"{p}_r", f"add({xc}, {rs})", bf(*shape))


def attention_block(g, h, m, cfg, tp, decode, names):
    """QKV projections, RoPE, the KV cache and attention; returns the
    attention output as [m, heads * head_dim] and the updated caches."""
    hd = cfg["head_dim"]
    hq, hkv = cfg["heads"] // tp, cfg["kv_heads"] // tp
    q = g.op("q", f"matmul({h}, %wq)", bf(m, hq * hd))
    k = g.op("k", f"matmul({h}, %wk)", bf(m, hkv * hd))
    v = g.op("v", f"matmul({h}, %wv)", bf(m, hkv * hd))
    if decode:
        # One new token for each of m sequences: [batch, heads, 1, head_dim].
        qs, ks = [m, hq, 1, hd], [m, hkv, 1, hd]
        q4 = g.op("q4", f"reshape({q})", bf(*qs))
        k4 = g.op("k4", f"reshape({k})", bf(*ks))
        v4 = g.op("v4", f"reshape({v})", bf(*ks))
    else:
        # One sequence of m tokens: [1, heads, m, head_dim].
        qs, ks = [1, hq, m, hd], [1, hkv, m, hd]
        q3 = g.op("q3", f"reshape({q})", bf(1, m, hq, hd))
        k3 = g.op("k3", f"reshape({k})", bf(1, m, hkv, hd))
        v3 = g.op("v3", f"reshape({v})", bf(1, m, hkv, hd))
        q4 = g.op("q4", f"transpose({q3}) {{perm = [0, 2, 1, 3]}}", bf(*qs))
        k4 = g.op("k4", f"transpose({k3}) {{perm = [0, 2, 1, 3]}}", bf(*ks))
        v4 = g.op("v4", f"transpose({v3}) {{perm = [0, 2, 1, 3]}}", bf(*ks))
    qr = rotary(g, q4, "%cos", "%sin", qs, "qr")
    kr = rotary(g, k4, "%cos", "%sin", ks, "kr")
    if decode:
        # The cache holds the 4095 positions before this step; the new key
        # and value are appended (as Hugging Face's DynamicCache does with
        # torch.cat), and the grown cache is an output of the layer.
        cs = names["cache"]
        full = list(cs[:2]) + [cs[2] + 1, cs[3]]
        kc = g.op("k_cache_new", f"concat(%k_cache, {kr}) {{dim = 2}}", bf(*full))
        vc = g.op("v_cache_new", f"concat(%v_cache, {v4}) {{dim = 2}}", bf(*full))
    else:
        # Prefill starts the cache: the prompt's keys and values are it.
        kc, vc = kr, v4
    if decode:
        # The query attends to the whole cache, its own token included.
        o = g.op("o", f"attention({qr}, {kc}, {vc}) {{causal = true}}", bf(*qs))
        o2 = g.op("o2", f"reshape({o})", bf(m, hq * hd))
    else:
        # Prefill attends causally within the prompt.
        o = g.op("o", f"attention({qr}, {kr}, {v4}) {{causal = true}}", bf(*qs))
        ot = g.op("ot", f"transpose({o}) {{perm = [0, 2, 1, 3]}}", bf(1, m, hq, hd))
        o2 = g.op("o2", f"reshape({ot})", bf(m, hq * hd))
    return o2, kc, vc


def swiglu_mlp(g, h, m, inter):
    gt = g.op("gate", f"matmul({h}, %w_gate)", bf(m, inter))
    up = g.op("up", f"matmul({h}, %w_up)", bf(m, inter))
    gs = g.op("gate_silu", f"silu({gt})", bf(m, inter))
    gu = g.op("gated", f"mul({gs}, {up})", bf(m, inter))
    return gu


def cache_shape(cfg, tp, m):
    """The KV cache a decode step reads: m sequences, 4095 positions."""
    return [m, cfg["kv_heads"] // tp, 4095, cfg["head_dim"]]


def llama_layer(name, cfg, tp, m, decode, sp=False, world=None):
    world = world or tp
    H, hd = cfg["hidden"], cfg["head_dim"]
    hq, hkv = cfg["heads"] // tp, cfg["kv_heads"] // tp
    inter = cfg["inter"] // tp
    ms = m // world if sp else m  # rows this rank holds between the blocks
    cs = cache_shape(cfg, tp, m)
    rope = [m, 1, 1, hd] if decode else [1, 1, m, hd]
    args = [("x", bf(ms, H)), ("g_attn", bf(H)), ("wq", bf(H, hq * hd)),
            ("wk", bf(H, hkv * hd)), ("wv", bf(H, hkv * hd)), ("wo", bf(hq * hd, H)),
            ("g_mlp", bf(H)), ("w_gate", bf(H, inter)), ("w_up", bf(H, inter)),
            ("w_down", bf(inter, H)), ("cos", bf(*rope)), ("sin", bf(*rope))]
    if decode:
        args += [("k_cache", bf(*cs)), ("v_cache", bf(*cs))]
    g = Graph()
    h = g.op("h", "rmsnorm(%x, %g_attn) {eps = 1.0e-05}", bf(ms, H))
    if sp:
        h = g.op("h_full", f'all_gather({h}) {{group = "tp"}}', bf(m, H))
    o2, kc, vc = attention_block(g, h, m, cfg, tp, decode, {"cache": cs})
    a = g.op("attn_out", f"matmul({o2}, %wo)", bf(m, H))
    if sp:
        ar = g.op("attn_rs", f'reduce_scatter({a}) {{reduce = "sum", group = "tp"}}', bf(ms, H))
    else:
        ar = g.op("attn_ar", f'all_reduce({a}) {{reduce = "sum", group = "tp"}}', bf(m, H))
    x1 = g.op("x1", f"add({ar}, %x)", bf(ms, H))
    h2 = g.op("h2", f"rmsnorm({x1}, %g_mlp) {{eps = 1.0e-05}}", bf(ms, H))
    if sp:
        h2 = g.op("h2_full", f'all_gather({h2}) {{group = "tp"}}', bf(m, H))
    gu = swiglu_mlp(g, h2, m, inter)
    d = g.op("down", f"matmul({gu}, %w_down)", bf(m, H))
    if sp:
        dr = g.op("mlp_rs", f'reduce_scatter({d}) {{reduce = "sum", group = "tp"}}', bf(ms, H))
    else:
        dr = g.op("mlp_ar", f'all_reduce({d}) {{reduce = "sum", group = "tp"}}', bf(m, H))
    out = g.op("out", f"add({dr}, {x1})", bf(ms, H))
    sig = ", ".join(f"%{n}: {ty}" for n, ty in args)
    body = "\n".join(g.lines)
    return (f"graph @{name}({sig}) attributes {{world_size = {world}}} {{\n{body}\n"
            f"  return {out}, {kc}, {vc}\n}}\n")


def mixtral_layer(name, cfg, ep, m, world=None):
    """Mixtral-8x7B MoE block, one expert per rank (EP = 8). Each rank routes
    its m tokens and sends each (token, slot) pair to its expert's rank:
    the pairs, sorted by expert, go out by an uneven all_to_all whose send
    counts are the router's pairs per expert (a one-hot count) and whose
    receive counts come from an even all_to_all of those. Each rank runs
    its expert's SwiGLU MLP on what it receives (zero rows past them up to
    the capacity) and sends the rows back with the counts swapped; the
    combine weights them by the router's probabilities. The capacity is
    m * 8 rows at decode, every pair of every rank (nothing can overflow),
    and 2 * 2m at prefill (capacity factor 2: a routing that sends one
    expert more fails loudly, in the interpreter and on the GPU)."""
    H, E, inter = cfg["hidden"], cfg["experts"], cfg["inter"]
    assert E == ep
    world = world or ep
    pairs = 2 * m
    cap = m * ep if m <= 64 else 2 * pairs
    args = [("x", bf(m, H)), ("g_norm", bf(H)), ("w_router", bf(H, E)),
            ("w_gate", bf(H, inter)), ("w_up", bf(H, inter)), ("w_down", bf(inter, H))]
    g = Graph()
    h = g.op("h", "rmsnorm(%x, %g_norm) {eps = 1.0e-05}", bf(m, H))
    logits = g.op("logits", f"matmul({h}, %w_router)", bf(m, E))
    # The router's softmax and top-2 in f32, as Mixtral computes them.
    l32 = g.op("logits_f32", f"cast({logits})", t("f32", m, E))
    probs = g.op("probs", f"softmax({l32})", t("f32", m, E))
    g.lines.append(f"  %top_w, %top_e = topk({probs}) {{k = 2}} : {t('f32', m, 2)}, {t('i64', m, 2)}")
    wsum = g.op("w_sum", "sum(%top_w) {dim = -1, keepdim = true}", t("f32", m, 1))
    wn32 = g.op("w_norm_f32", f"div(%top_w, {wsum})", t("f32", m, 2))
    wn = g.op("w_norm", f"cast({wn32})", bf(m, 2))
    # (token, slot) pairs in expert order: sort the chosen experts, gather
    # the tokens in that order.
    ef = g.op("e_flat", "reshape(%top_e)", t("i64", pairs))
    g.lines.append(f"  %e_sorted, %perm = sort({ef}) : {t('i64', pairs)}, {t('i64', pairs)}")
    # Pairs per expert: a one-hot count against the ids 0..E-1 (a cumsum of
    # ones), then per rank (its experts' sum; one each at EP = 8).
    row = g.op("l_row", f"slice({logits}) {{dim = 0, start = 0, end = 1}}", bf(1, E))
    ones = g.op("ones", f"full_like({row}) {{scalar = 1}}", t("i64", 1, E))
    ids1 = g.op("ids1", f"cumsum({ones})", t("i64", 1, E))
    ids = g.op("ids", f"sub({ids1}) {{scalar = 1}}", t("i64", 1, E))
    ec = g.op("e_col", f"reshape({ef})", t("i64", pairs, 1))
    diff = g.op("e_diff", f"sub({ec}, {ids})", t("i64", pairs, E))
    zero = g.op("zeros", f"full_like({diff}) {{scalar = 0}}", t("i64", pairs, E))
    hot = g.op("one_hot", f"where({diff}, {zero}) {{scalar = 1}}", t("i64", pairs, E))
    per_e = g.op("per_expert", f"sum({hot}) {{dim = 0}}", t("i64", E))
    per_r2 = g.op("per_rank2", f"reshape({per_e})", t("i64", world, E // world))
    send = g.op("send_counts", f"sum({per_r2}) {{dim = 1}}", t("i64", world))
    recvc = g.op("recv_counts", f'all_to_all({send}) {{group = "ep"}}', t("i64", world))
    x3 = g.op("h3", f"reshape({h})", bf(m, 1, H))
    x2 = g.op("h_pairs3", f"expand({x3})", bf(m, 2, H))
    xp = g.op("h_pairs", f"reshape({x2})", bf(pairs, H))
    disp = g.op("dispatch", f"index_select({xp}, %perm) {{dim = 0}}", bf(pairs, H))
    recv = g.op("recv", f'all_to_all({disp}, {send}, {recvc}) {{group = "ep"}}', bf(cap, H))
    gu = swiglu_mlp(g, recv, cap, inter)
    y = g.op("expert_out", f"matmul({gu}, %w_down)", bf(cap, H))
    back = g.op("back", f'all_to_all({y}, {recvc}, {send}) {{group = "ep"}}', bf(pairs, H))
    # Undo the sort: the inverse permutation is the argsort of %perm.
    g.lines.append(f"  %perm_sorted, %inv = sort(%perm) : {t('i64', pairs)}, {t('i64', pairs)}")
    un = g.op("unsorted", f"index_select({back}, %inv) {{dim = 0}}", bf(pairs, H))
    u3 = g.op("unsorted3", f"reshape({un})", bf(m, 2, H))
    w3 = g.op("w3", f"reshape({wn})", bf(m, 2, 1))
    wy = g.op("weighted", f"mul({u3}, {w3})", bf(m, 2, H))
    wt = g.op("weighted_t", f"transpose({wy}) {{perm = [0, 2, 1]}}", bf(m, H, 2))
    comb = g.op("combined", "sum(%weighted_t) {dim = -1}", bf(m, H))
    out = g.op("out", f"add({comb}, %x)", bf(m, H))
    sig = ", ".join(f"%{n}: {ty}" for n, ty in args)
    body = "\n".join(g.lines)
    return (f"graph @{name}({sig}) attributes {{world_size = {world}}} {{\n{body}\n"
            f"  return {out}\n}}\n")


LLAMA3_8B = dict(hidden=4096, heads=32, kv_heads=8, head_dim=128, inter=14336)
LLAMA3_70B = dict(hidden=8192, heads=64, kv_heads=8, head_dim=128, inter=28672)
MIXTRAL = dict(hidden=4096, experts=8, inter=14336)
# The MoE layer uses the two-result topk and sort and index_select; set to
# False to write the dense layers only.
MOE_OPS = True

HEAD = "// Generated by examples/layers/gen_layers.py; edit that script, not this file.\n"


def group(name, n, world=None):
    return f"group @{name} = [{', '.join(str(i) for i in range(world or n))}]\n"


def files(world=None):
    """The layers; with `world`, each with that many ranks instead."""
    out = {}
    for tp in (2, 8):
        out[f"llama3_8b_tp{tp}.mir"] = (
            HEAD + f"// Llama-3-8B decoder layer at tensor parallelism {tp}, per rank: RMSNorm,\n"
            "// column-parallel Q/K/V projections, rotary embedding (rotate-half),\n"
            "// KV cache, grouped-query causal attention, row-parallel output\n"
            "// projection and all_reduce, residual, RMSNorm, SwiGLU MLP, all_reduce,\n"
            "// residual. Decode: 16 sequences, one new token each after 4095 cached\n"
            "// positions (the grown caches are outputs). Prefill: one prompt of 4096\n"
            "// tokens (its keys and values, the new cache, are outputs).\n"
            + group("tp", tp, world) + "\n"
            + llama_layer("decode", LLAMA3_8B, tp, DECODE, True, world=world) + "\n"
            + llama_layer("prefill", LLAMA3_8B, tp, PREFILL, False, world=world))
    out["megatron_sp.mir"] = (
        HEAD + "// Llama-3-70B decoder layer at TP=8 with Megatron sequence parallelism:\n"
        "// between the blocks each rank holds 1/8 of the tokens; all_gather before\n"
        "// each column-parallel block, reduce_scatter after each row-parallel one.\n"
        + group("tp", 8, world) + "\n"
        + llama_layer("decode", LLAMA3_70B, 8, DECODE, True, sp=True, world=world) + "\n"
        + llama_layer("prefill", LLAMA3_70B, 8, PREFILL, False, sp=True, world=world))
    if MOE_OPS:
        out["mixtral_moe.mir"] = (
            HEAD + "// " + mixtral_layer.__doc__.strip().replace("\n    ", "\n// ") + "\n"
            + group("ep", 8, world) + "\n"
            + mixtral_layer("decode", MIXTRAL, 8, DECODE, world=world) + "\n"
            + mixtral_layer("prefill", MIXTRAL, 8, PREFILL, world=world))
    return out


def main():
    args = sys.argv[1:]
    if args[:1] == ["--one-rank"] and len(args) == 2:
        os.makedirs(args[1], exist_ok=True)
        for name, text in files(world=1).items():
            with open(os.path.join(args[1], name), "w") as f:
                f.write(text)
        return 0
    check = "--check" in args
    bad = 0
    for name, text in files().items():
        path = os.path.join(HERE, name)
        if check:
            try:
                with open(path) as f:
                    same = f.read() == text
            except OSError:
                same = False
            if not same:
                print(f"{path}: differs from gen_layers.py's output", file=sys.stderr)
                bad = 1
        else:
            with open(path, "w") as f:
                f.write(text)
    return bad


if __name__ == "__main__":
    sys.exit(main())
