"""Recognises attention written by hand in an imported IR graph.

``softmax(q @ k^T * s + mask) @ v`` -- GPT-2's, Qwen's and BERT's attention,
a decomposed ``scaled_dot_product_attention`` -- becomes the IR's
``attention(q, k, v) {causal, scale}`` when it is one:

* the two matmuls may be batched over any leading dimensions (make_fx
  flattens them to 3-D ``bmm``s with reshapes around them); q, k and v are
  taken before those reshapes where that gives ``[B, H, S, D]``, else
  reshaped to ``[1, N, S, D]``;
* ``k^T`` is a transpose of the last two dimensions (one is made if the
  transposed keys come from elsewhere);
* the scale is a ``mul`` / ``div`` by a number of the scores, or of q
  (and of k), default 1 (written explicitly);
* the mask is absent, or a constant folded at import (a ``triu`` /
  ``masked_fill`` / ``where`` mask of 0 and -inf, or of 0 and a large
  negative number such as ``finfo.min``, which softmax turns into the same
  zero weights) that is the same for every batch and head and is either
  all zero (no mask) or exactly the causal mask aligned to the end of the
  keys (query i sees keys j <= Skv - Sq + i: the IR's ``causal``);
* or one additive mask of any other kind -- a graph input (the gallery's
  Llama layers), a value computed at run time, a constant sliding window
  -- added to the scores: it becomes attention's mask operand
  ``[B or 1, Hq or 1, Sq or 1, Skv]`` (reshaped, or expanded where its
  broadcast does not survive the reshape of the heads), beside
  ``causal`` when a causal constant is added too;
* casts between floating types are seen through: a bf16 model's softmax
  in fp32 (the scores cast up, the probabilities cast back; GPT-J casts q
  and k up before the scores) is the attention's own fp32 arithmetic; q,
  k, v and the result then have the model's type;
* grouped-query attention: k and v repeated per query head (``repeat_kv``'s
  expand + reshape, or ``repeat_interleave``'s, which the importer maps to
  the same, also when the heads are moved before the sequence after the
  repeat) are taken before the repeat: the IR's attention reads kv head
  h / (Hq / Hkv) itself.

Anything else (two masks computed at run time, a mask scaled after it is
added, a ``where`` mask that is not a constant) stays ``matmul`` /
``softmax`` / ``matmul``: correct, unfused.
"""

import torch

_NEG = -1e4  # masked: exp(-1e4 + anything a score is) is 0 in fp64 too


def _producers(graph):
    return {n.name: n for n in graph.nodes}


def _moves_only_ones(n):
    """A transpose that moves only size-1 dimensions (einsum's): a reshape
    on values."""
    if n.op != "transpose" or n.custom:
        return False
    perm = list(n.attrs.get("perm", []))
    src = [p for p in perm if n.shape[perm.index(p)] != 1]
    return src == sorted(src)


_FLOATS = ("f64", "f32", "f16", "bf16")


def _float_cast(conv, n):
    """n casts one floating type to another (a bf16 model's softmax in
    fp32: the scores cast up, the probabilities cast back)."""
    return n is not None and not n.custom and n.op == "cast" and \
        len(n.operands) == 1 and n.dtype in _FLOATS and \
        conv.types[n.operands[0]][0] in _FLOATS


def _strip(prod, v, ops=("reshape",), conv=None):
    """v's origin through the given shape-only ops (and transposes that
    only move size-1 dimensions), and through casts between floating
    types where conv is given."""
    n = prod.get(v)
    while n is not None and not n.custom and (
            n.op in ops or ("reshape" in ops and _moves_only_ones(n)) or
            (conv is not None and _float_cast(conv, n))):
        v = n.operands[0]
        n = prod.get(v)
    return v


def _strip_casts(conv, prod, v):
    """v's origin through reshapes and casts between floating types."""
    return _strip(prod, v, conv=conv)


def _reaches_matmul(conv, prod, v, depth=12):
    """Whether v is the scores: a matmul through reshapes, casts, scalings
    and further masks (so the other operand of an add is the mask)."""
    while depth > 0:
        depth -= 1
        v = _strip_casts(conv, prod, v)
        n = prod.get(v)
        if n is None or n.custom:
            return False
        if n.op == "matmul":
            return True
        if n.op in ("mul", "div") and len(n.operands) == 1:
            v = n.operands[0]
        elif n.op == "where" and len(n.operands) == 2:
            v = n.operands[1]
        elif n.op == "add" and len(n.operands) == 2:
            return any(_reaches_matmul(conv, prod, o, depth)
                       for o in n.operands)
        else:
            return False
    return False


def mask_operand(conv, mv, xshape, b, hq, sq, skv, new, hint):
    """The additive mask mv, added to scores of shape xshape
    ([..., Sq, Skv] whose leading dimensions hold b * hq rows, batch major),
    as attention's mask operand [b or 1, hq or 1, sq or 1, skv] of f32 or
    the attention's type (nodes it needs appended to new); None when it
    does not broadcast to the scores along the keys."""
    md, ms = conv.types[mv]
    ms, xshape = tuple(int(d) for d in ms), tuple(int(d) for d in xshape)
    if len(ms) > len(xshape) or len(xshape) < 2 or md not in _FLOATS:
        return None
    pm = (1,) * (len(xshape) - len(ms)) + ms
    lead, xl = pm[:-2], xshape[:-2]
    n = 1
    for d in xl:
        n *= d
    if pm[-1] != skv or pm[-2] not in (1, sq) or n != b * hq or \
            any(d != 1 and d != x for d, x in zip(lead, xl)):
        return None
    sqm = pm[-2]
    cur = mv

    def reshape(val, shape, tag):
        if tuple(conv.types[val][1]) == tuple(shape):
            return val
        new.append(conv.emit("reshape", [val], conv.types[val][0], shape,
                             hint=hint + tag))
        return new[-1]

    if all(d == 1 for d in lead):
        cur = reshape(cur, (1, 1, sqm, skv), ".r")
    elif len(xl) == 2 and tuple(xl) == (b, hq):
        cur = reshape(cur, pm, ".r")
    else:
        # The broadcast dimensions do not line up with [b, hq]: spell the
        # mask out over the scores' leading dimensions, then fold them.
        cur = reshape(cur, pm, ".r")
        if tuple(lead) != tuple(xl):
            new.append(conv.emit("expand", [cur], md, xl + (sqm, skv),
                                 hint=hint + ".e"))
            cur = new[-1]
        cur = reshape(cur, (b, hq, sqm, skv), ".h")
    return cur


def _uncast(conv, prod, v):
    """v's origin through casts between floating types."""
    while _float_cast(conv, prod.get(v)):
        v = prod[v].operands[0]
    return v


def _batch(shape):
    n = 1
    for d in shape[:-2]:
        n *= int(d)
    return n


def _const_value(conv, prod, v):
    """The value of v when it is a folded constant, possibly reshaped,
    expanded or cast (as a torch tensor in v's shape), else None."""
    n = prod.get(v)
    if n is None:
        t = conv.constants.get(v)
        return None if t is None else t.double()
    if n.custom or n.op not in ("reshape", "expand", "cast") or \
            len(n.operands) != 1:
        return None
    t = _const_value(conv, prod, n.operands[0])
    if t is None:
        return None
    if n.op == "reshape":
        return t.reshape(n.shape)
    if n.op == "expand":
        return t.expand(n.shape)
    return t


def _mask_kind(t, shape):
    """'none', 'causal' or None for an additive mask t broadcast to the
    scores' shape [..., Sq, Skv]."""
    sq, skv = int(shape[-2]), int(shape[-1])
    try:
        full = torch.broadcast_to(t, tuple(shape)).reshape(-1, sq, skv)
    except RuntimeError:
        return None
    m = full[0]
    if not bool((full == m).all()) and not bool(
            ((full <= _NEG) == (m <= _NEG)).all() &
            ((full == 0) == (m == 0)).all()):
        return None
    if bool((full == 0).all()):
        return "none"
    i = torch.arange(sq).unsqueeze(1)
    j = torch.arange(skv).unsqueeze(0)
    visible = (j <= skv - sq + i).expand(sq, skv)
    if bool((full[:, visible] == 0).all()) and bool(
            (full[:, ~visible] <= _NEG).all()):
        return "causal"
    return None


def _scaled(prod, v):
    """(origin, factor) of v = origin * factor (mul/div by a number)."""
    f = 1.0
    while True:
        n = prod.get(v)
        if n is None or n.custom or len(n.operands) != 1 or \
                "scalar" not in n.attrs:
            return v, f
        if n.op == "mul":
            f *= float(n.attrs["scalar"])
        elif n.op == "div":
            f /= float(n.attrs["scalar"])
        else:
            return v, f
        v = n.operands[0]


def _kv_heads(conv, prod, v):
    """k or v [B, Hq, S, D] built by repeating [B, Hkv, S, D] per query
    head (expand of [B, Hkv, 1, S, D] to [B, Hkv, r, S, D], reshaped), or
    v itself."""
    n = prod.get(v)
    if n is None or n.op != "reshape" or len(n.shape) != 4:
        return v
    e = prod.get(n.operands[0])
    if e is None or e.op != "expand" or len(e.shape) != 5:
        return v
    r = prod.get(e.operands[0])
    if r is None or r.op != "reshape" or len(r.shape) != 5:
        return v
    src = r.operands[0]
    b, hkv, one, s, d = r.shape
    if one != 1 or tuple(conv.types[src][1]) != (b, hkv, s, d) or \
            tuple(e.shape) != (b, hkv, e.shape[2], s, d) or \
            tuple(n.shape) != (b, hkv * e.shape[2], s, d):
        return v
    return src


def _kv_heads_moved(conv, prod, v, new, hint):
    """k or v [.., H, S, D] (up to leading ones) made by repeating the heads
    of a [.., S, Hkv, D] tensor and then moving heads before the sequence
    (``repeat_kv`` on [S, Hkv, D] then ``transpose(0, 1)``: the gallery's
    layers): the same transpose of the unrepeated tensor, reshaped as v but
    with Hkv heads (appended to new); else v itself."""
    vs = tuple(conv.types[v][1])
    t = prod.get(_strip(prod, v))
    if t is None or t.custom or t.op != "transpose" or len(t.shape) < 3:
        return v
    ts = tuple(t.shape)
    if len(vs) < len(ts) or vs[len(vs) - len(ts):] != ts or \
            any(x != 1 for x in vs[:len(vs) - len(ts)]):
        return v
    perm = list(t.attrs.get("perm", []))
    n = prod.get(t.operands[0])
    if n is None or n.custom or n.op != "reshape" or len(perm) != len(ts) \
            or perm[-1] != len(ts) - 1:
        return v
    ns = tuple(n.shape)
    hax = perm[-3]  # the head axis before the transpose
    e = prod.get(n.operands[0])
    if e is None or e.custom or e.op != "expand" or \
            len(e.shape) != len(ns) + 1:
        return v
    es = tuple(e.shape)
    kv, rep = es[hax], es[hax + 1]
    if es[:hax] != ns[:hax] or es[hax + 2:] != ns[hax + 1:] or \
            kv * rep != ns[hax] or rep <= 1:
        return v
    r = prod.get(e.operands[0])
    if r is None or r.custom or r.op != "reshape" or \
            tuple(r.shape) != es[:hax + 1] + (1,) + es[hax + 2:]:
        return v
    src = r.operands[0]
    ss = ns[:hax] + (kv,) + ns[hax + 1:]
    if tuple(conv.types[src][1]) != ss:
        return v
    dt = conv.types[src][0]
    new.append(conv.emit("transpose", [src], dt,
                         tuple(ss[p] for p in perm), {"perm": perm},
                         hint=hint + ".t"))
    out = list(vs)
    out[len(vs) - 3] = kv
    new.append(conv.emit("reshape", [new[-1]], dt, tuple(out),
                         hint=hint + ".r"))
    return new[-1]


def _as4(conv, prod, v, batch, rows, d, new, hint):
    """v (an [N, rows, d] tensor up to reshapes) as [B, H, rows, d]: the
    first rank-4 value of that shape along its chain of reshapes, else v
    reshaped to [1, N, rows, d]."""
    cur = v
    while True:
        sh = conv.types[cur][1]
        if len(sh) == 4 and tuple(sh[2:]) == (rows, d) and \
                _batch(sh) == batch:
            return cur
        n = prod.get(cur)
        if n is None or n.custom or not (n.op == "reshape" or
                                         _moves_only_ones(n)):
            break
        cur = n.operands[0]
    new.append(conv.emit("reshape", [v], conv.types[v][0],
                         (1, batch, rows, d), hint=hint))
    return new[-1]


def _try(conv, prod, o):
    if o.op != "matmul" or o.custom or len(o.operands) != 2:
        return None
    pv, vv = o.operands
    pn = prod.get(_strip(prod, pv, conv=conv))
    if pn is None or pn.op != "softmax" or pn.custom:
        return None
    x = pn.operands[0]
    xs = conv.types[x][1]
    # Peel additive masks that are constants (several add up: a triu
    # mask plus a masked_fill's), and at most one other (dyn: the value and
    # the shape of the scores it is added to).
    # A scale applied after the mask (GPT-J: where(mask, w, min) / sqrt(d)).
    s, outer = _scaled(prod, _strip(prod, x, conv=conv))
    s = _strip(prod, s, conv=conv)
    total = None
    dyn = []
    const_adds = []
    wheres = 0
    while True:
        xn = prod.get(s)
        if xn is not None and xn.op == "where" and not xn.custom and \
                len(xn.operands) == 2 and \
                float(xn.attrs.get("scalar", 0)) <= _NEG:
            # where(keep, scores, -1e4 or less) with a constant keep: the
            # scores softmax sees are those of an additive -inf mask.
            keep = _const_value(conv, prod, xn.operands[0])
            if keep is None or tuple(conv.types[xn.operands[1]][1]) != \
                    tuple(xn.shape):
                return None
            keep = torch.broadcast_to(keep, tuple(xn.shape)) != 0
            t = torch.zeros(keep.shape, dtype=torch.float64).masked_fill(
                ~keep, float("-inf"))
            total = t if total is None else total + t
            wheres += 1
            s = _strip(prod, xn.operands[1], conv=conv)
            continue
        if xn is None or xn.op != "add" or xn.custom or \
                len(xn.operands) != 2 or "scalar" in xn.attrs:
            break
        for a, b in (xn.operands, xn.operands[::-1]):
            t = _const_value(conv, prod, b)
            if t is not None and tuple(conv.types[a][1]) == tuple(xn.shape):
                t = torch.broadcast_to(t, tuple(xn.shape))
                total = t if total is None else total + t
                const_adds.append((b, tuple(xn.shape)))
                s = _strip(prod, a, conv=conv)
                break
        else:
            for a, b in (xn.operands, xn.operands[::-1]):
                if tuple(conv.types[a][1]) == tuple(xn.shape) and \
                        _reaches_matmul(conv, prod, a) and \
                        not _reaches_matmul(conv, prod, b):
                    dyn.append((b, tuple(xn.shape)))
                    s = _strip_casts(conv, prod, a)
                    break
            else:
                return None
    kind = "none" if total is None else _mask_kind(total * outer,
                                                  tuple(total.shape))
    if not dyn and kind is None and len(const_adds) == 1 and not wheres:
        # One constant mask that is neither none nor causal (a sliding
        # window, a padding pattern): the mask operand.
        dyn, kind = const_adds, "none"
    # The mask operand is added before a scale applied after the mask
    # would multiply it; one only.
    if kind is None or len(dyn) > 1 or (dyn and outer != 1.0):
        return None
    s, scale = _scaled(prod, _strip(prod, s, conv=conv))
    scale *= outer
    mm = prod.get(_strip(prod, s, conv=conv))
    if mm is None or mm.op != "matmul" or mm.custom:
        return None
    q, kt = mm.operands
    q, fq = _scaled(prod, q)
    scale *= fq
    qt, ktt, vt = conv.types[q], conv.types[kt], conv.types[vv]
    if len(qt[1]) < 3 or len(ktt[1]) != len(qt[1]) or \
            len(vt[1]) != len(qt[1]):
        return None
    batch = _batch(qt[1])
    sq, d = qt[1][-2:]
    skv = ktt[1][-1]
    if ktt[1][-2] != d or tuple(vt[1][-2:]) != (skv, d) or \
            _batch(ktt[1]) != batch or _batch(vt[1]) != batch or \
            tuple(o.shape[-2:]) != (sq, d) or \
            tuple(xs[-2:]) != (sq, skv) or scale <= 0:
        return None
    if kind == "causal" and sq > skv:
        return None
    new = []
    # The keys: kt's origin, transposed back.
    ko = _strip(prod, kt)
    kn = prod.get(ko)
    k = None
    if kn is not None and kn.op == "transpose" and not kn.custom:
        perm = list(kn.attrs.get("perm", []))
        r = len(perm)
        if r >= 2 and perm == list(range(r - 2)) + [r - 1, r - 2]:
            k = kn.operands[0]
    if k is None:
        r = len(ktt[1])
        new.append(conv.emit("transpose", [kt], ktt[0],
                             tuple(ktt[1][:-2]) + (skv, d),
                             {"perm": list(range(r - 2)) + [r - 1, r - 2]},
                             hint=o.name + ".k"))
        k = new[-1]
    k, fk = _scaled(prod, k)
    scale *= fk
    q4 = _as4(conv, prod, q, batch, sq, d, new, o.name + ".q")
    k4 = _as4(conv, prod, k, batch, skv, d, new, o.name + ".k4")
    v4 = _as4(conv, prod, vv, batch, skv, d, new, o.name + ".v4")
    # One type for q, k, v and the result: a cast of q and k up to fp32
    # for the scores (GPT-J's) is the attention's own fp32 arithmetic.
    dt = conv.types[o.name][0]
    if conv.types[q4][0] != dt:
        q4 = _uncast(conv, prod, q4)
    if conv.types[k4][0] != dt:
        k4 = _uncast(conv, prod, k4)
    if dt not in ("f32", "f16", "bf16") or any(
            conv.types[x][0] != dt for x in (q4, k4, v4)):
        return None
    b, hq = conv.types[q4][1][:2]
    kg, vg = _kv_heads(conv, prod, k4), _kv_heads(conv, prod, v4)
    if kg != k4 and vg != v4 and conv.types[kg][1] == conv.types[vg][1]:
        k4, v4 = kg, vg
    else:
        # k4 and v4 may be reshapes made above: look them up too.
        now = _producers(conv.graph)
        moved = []
        kg = _kv_heads_moved(conv, now, k4, moved, o.name + ".kv_k")
        vg = _kv_heads_moved(conv, now, v4, moved, o.name + ".kv_v")
        # Both or neither (what one alone made is unread: dead code).
        if kg != k4 and vg != v4 and conv.types[kg][1] == conv.types[vg][1]:
            new.extend(moved)
            k4, v4 = kg, vg
    if conv.types[k4][1][0] != b or conv.types[v4][1][0] != b or \
            conv.types[k4][1][:2] != conv.types[v4][1][:2] or \
            hq % conv.types[k4][1][1]:
        # The batch splits differently between q and k/v: one layout.
        for i, (val, rows) in enumerate(((q4, sq), (k4, skv), (v4, skv))):
            sh = conv.types[val][1]
            if tuple(sh[:2]) != (1, batch):
                new.append(conv.emit("reshape", [val], conv.types[val][0],
                                     (1, batch, rows, d),
                                     hint="%s.flat%d" % (o.name, i)))
                val = new[-1]
            if i == 0:
                q4 = val
            elif i == 1:
                k4 = val
            else:
                v4 = val
        b, hq = 1, batch
    operands = [q4, k4, v4]
    if dyn:
        b, hq = conv.types[q4][1][:2]
        m4 = mask_operand(conv, dyn[0][0], dyn[0][1], b, hq, sq, skv, new,
                          o.name + ".mask")
        if m4 is None:
            return None
        if conv.types[m4][0] not in (dt, "f32"):
            new.append(conv.emit("cast", [m4], "f32", conv.types[m4][1],
                                 hint=o.name + ".mask.f32"))
            m4 = new[-1]
        operands.append(m4)
    attrs = {"causal": kind == "causal", "scale": float(scale)}
    att = conv.emit("attention", operands, dt,
                    conv.types[q4][1][:2] + (sq, d), attrs,
                    hint=o.name + ".attention")
    new.append(att)
    return new, att


def recognise_attention(conv):
    """Rewrites every hand-written attention of conv.graph; returns how
    many. The rewritten matmul becomes a reshape (or the attention itself)
    of the same name, so its readers are unchanged; the pieces it no longer
    needs are left to dead-code removal."""
    count = 0
    i = 0
    while i < len(conv.graph.nodes):
        o = conv.graph.nodes[i]
        prod = _producers(conv.graph)
        before = len(conv.graph.nodes)
        try:
            got = _try(conv, prod, o)
        except (KeyError, IndexError, TypeError, ValueError):
            got = None
        if got is None:
            del conv.graph.nodes[before:]
            i += 1
            continue
        names, att = got
        added = conv.graph.nodes[before:]
        del conv.graph.nodes[before:]
        conv.graph.nodes[i:i] = added
        i += len(added)
        o = conv.graph.nodes[i]
        o.op = "reshape"
        o.operands = [att]
        o.attrs = {}
        if tuple(conv.types[att][1]) == tuple(o.shape):
            # Same shape: the node is the identity; keep the name by making
            # the attention itself carry it.
            a = conv.graph.nodes[i - 1]
            del conv.graph.nodes[i]
            a_old = a.name
            a.name = o.name
            conv.types[o.name] = conv.types.pop(a_old)
            i -= 1
        count += 1
        i += 1
    return count
