"""The op-mapping table: ATen / collective op name -> IR.

``OPS`` maps an op name (namespace.packet, overload ignored) to a function
``fn(conv, node) -> IR value name``; it raises ``convert.Unmapped`` to decline
(the node then becomes ``custom "aten.x"``). Adding an op is one entry; ops
the IR does not have yet (index_put, fp8 matmuls) stay custom. A number operand of a binary op becomes the IR's attribute
``scalar`` (the op's last operand).

Exactness rules (docs/IMPORT.md):

* a view, reshape, clone, contiguous, detach or alias whose result has the
  operand's shape is the identity on values and is elided; one that changes
  the shape (view, reshape, _unsafe_view, squeeze, unsqueeze, flatten,
  _reshape_alias with contiguous strides) becomes ``reshape``, which keeps
  the row-major order as PyTorch's reshape does; ``expand`` becomes
  ``expand``; ``permute``/``transpose``/``t`` become ``transpose {perm}``;
  ``slice``, ``select``, ``split`` and ``split_with_sizes`` become ``slice``
  (and ``reshape`` for select); ``cat`` becomes ``concat``;
  ``index_select`` becomes ``index_select``, and ``embedding(w, ids)``
  ``index_select(w, ids) {dim = 0}`` (ids flattened to rank 1 and the rows
  reshaped back around it);
* ``zeros_like``, ``ones_like`` and ``full_like`` (a finite value) become
  ``full_like {scalar}``; ``scatter`` (src or a number value, no reduce)
  becomes ``scatter {dim}`` when the index matches the destination along
  every other dimension and has the source's shape (``scatter_add``, a
  sum ``scatter_reduce`` and ``reduce='add'`` add ``reduce = "add"``);
  ``index_copy`` and ``index_add`` become ``scatter`` with the rank-1 index
  reshaped and expanded to the source's shape; ``cumsum`` becomes
  ``cumsum {dim}`` in the result's type;
* ``topk`` (last dimension, ``sorted``) and ``sort`` / ``argsort`` (last
  dimension) become the IR's two-result ``topk`` and ``sort``; the IR breaks
  ties by index, which PyTorch leaves unspecified;
* ``aten.t`` / ``permute([1, 0])`` / ``transpose(0, 1)`` of a 2-D parameter
  or buffer used only that way (or as ``aten.linear``'s weight) makes the
  graph input its transpose (``[in, out]``): the input's comment says so and
  the importer's input list records ``transposed``;
* the RMSNorm pattern ``w * cast(x * rsqrt(mean(x^2, -1, keepdim) + eps))``
  (with optional casts of x) becomes ``rmsnorm(x, w) {eps}``: the same
  function, evaluated with one rounding fewer;
* binary ops whose operands' element types differ cast the operand to the
  result type first (PyTorch's type promotion computes in that type).
"""

import math

import torch

from .attention import mask_operand
from .fxutil import Unmapped, op_name, tensor_meta

OPS = {}


def lookup(name):
    """The mapping for op name, the generic collective mapping for a name
    that contains a collective, or None."""
    fn = OPS.get(name)
    if fn is not None:
        return fn
    kind = collective_kind_in(name)
    if kind is not None:
        return lambda conv, node: _generic_collective(conv, node, kind)
    return None


_IGNORED_PREFIXES = ("aten._assert", "aten.sym_constrain_range",
                     "aten._check", "aten._print", "aten._functional_assert")


def is_ignored(name):
    """Ops with no value semantics (export's runtime checks)."""
    return name.startswith(_IGNORED_PREFIXES)


def register(*names):
    def deco(fn):
        for n in names:
            OPS[n] = fn
        return fn
    return deco


def _arg(node, i, name, default=None):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def _result(conv, node):
    tdt, shape = conv.meta(node)
    return conv.dtype(tdt, node.name), shape


# -- identities -----------------------------------------------------------------


@register("aten.clone", "aten.contiguous", "aten.detach", "aten.alias",
          "aten.lift_fresh_copy", "aten.view", "aten._unsafe_view",
          "aten.reshape", "aten.expand", "aten.squeeze", "aten.unsqueeze",
          "aten.flatten", "aten._reshape_alias",
          "_c10d_functional.wait_tensor", "c10d_functional.wait_tensor")
def _identity(conv, node):
    v = conv.value(node.args[0])
    dt, shape = _result(conv, node)
    # aten._reshape_alias(x, size, stride) is what reshape and view record
    # (PyTorch 1.13) when they can view x: its strides describe memory (an
    # expanded operand's are 0), its values are x reshaped, so it maps as
    # the reshape it came from.
    vshape = conv.types[v][1]
    if tuple(shape) != tuple(vshape):
        op = "expand" if _name(node) == "aten.expand" else "reshape"
        if op == "reshape" and _numel(shape) != _numel(vshape):
            raise Unmapped("changes the element count %s -> %s"
                           % (list(vshape), list(shape)))
        if _name(node) in ("_c10d_functional.wait_tensor",
                           "c10d_functional.wait_tensor"):
            raise Unmapped("changes the shape %s -> %s" % (list(vshape),
                                                           list(shape)))
        v = conv.emit(op, [v], conv.types[v][0], shape, hint=node.name)
        return conv.cast(v, dt)
    conv.elided[_name(node)] += 1
    return conv.cast(v, dt)


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _is_transpose_2d(node):
    t = node.target
    if t is torch.ops.aten.t.default:
        return True
    if t is torch.ops.aten.permute.default:
        return list(node.args[1]) == [1, 0]
    if t is torch.ops.aten.transpose.int:
        return sorted(int(d) % 2 for d in node.args[1:3]) == [0, 1]
    if t is getattr(torch.ops.aten, "numpy_T", None):
        return True
    return False


def find_pretransposed(nodes, infos):
    """Placeholders (parameters/buffers, 2-D) used only through a 2-D
    transpose or as aten.linear's weight."""
    out = set()
    for n in nodes:
        if n.op != "placeholder":
            continue
        info = infos.get(n.name)
        if info is None or info.kind not in ("parameter", "buffer",
                                             "constant"):
            continue
        m = tensor_meta(n)
        if not m or isinstance(m, list) or len(m[1]) != 2 or not n.users:
            continue
        ok = True
        for u in n.users:
            if u.op != "call_function":
                ok = False
            elif _is_transpose_2d(u) and u.args[0] is n:
                continue
            elif u.target is torch.ops.aten.linear.default and \
                    _arg(u, 1, "weight") is n and u.args[0] is not n:
                continue
            else:
                ok = False
        if ok:
            out.add(n)
    return out


@register("aten.t", "aten.permute", "aten.transpose", "aten.numpy_T")
def _transpose(conv, node):
    src = node.args[0]
    if src in conv.transposed_fx and _is_transpose_2d(node):
        conv.elided["transpose of a pre-transposed weight"] += 1
        return conv.value(src)
    v = conv.value(src)
    rank = len(conv.types[v][1])
    perm = list(range(rank))
    t = node.target
    if t is torch.ops.aten.permute.default:
        perm = [int(d) % rank for d in node.args[1]]
    elif t is torch.ops.aten.transpose.int:
        a, b = int(node.args[1]) % rank, int(node.args[2]) % rank
        perm[a], perm[b] = perm[b], perm[a]
    elif rank == 2:  # t, numpy_T
        perm = [1, 0]
    elif rank > 2:
        raise Unmapped("numpy_T of rank %d" % rank)
    if perm == list(range(rank)):
        conv.elided[_name(node)] += 1
        return v
    dt, shape = _result(conv, node)
    return conv.cast(conv.emit("transpose", [v], conv.types[v][0], shape,
                               {"perm": perm}, hint=node.name), dt)


def _slice_of(conv, v, dim, start, end, hint):
    """v[start:end] along dim, clamped as Python slices are; the value
    itself when that is all of it."""
    dt, vshape = conv.types[v]
    size = vshape[dim]
    start = 0 if start is None else int(start)
    end = size if end is None else int(end)
    start = max(0, min(size, start + size if start < 0 else start))
    end = max(0, min(size, end + size if end < 0 else end))
    if end <= start:
        raise Unmapped("empty slice")
    if start == 0 and end == size:
        conv.elided["full slice"] += 1
        return v
    shape = list(vshape)
    shape[dim] = end - start
    return conv.emit("slice", [v], dt, shape,
                     {"dim": dim, "start": start, "end": end}, hint=hint)


@register("aten.slice")
def _slice(conv, node):
    v = conv.value(node.args[0])
    rank = len(conv.types[v][1])
    dim = int(_arg(node, 1, "dim", 0)) % rank
    step = _arg(node, 4, "step", 1)
    dt, shape = _result(conv, node)
    if step != 1:
        # A strided slice (x[..., ::2], rotate_every_two): the IR's slice
        # with step, start and end clamped as Python's are.
        if not isinstance(step, int) or step < 1:
            raise Unmapped("step %r" % (step,))
        size = conv.types[v][1][dim]
        start, end = _arg(node, 2, "start"), _arg(node, 3, "end")
        start = 0 if start is None else int(start)
        end = size if end is None else int(end)
        start = max(0, min(size, start + size if start < 0 else start))
        end = max(0, min(size, end + size if end < 0 else end))
        if end <= start:
            raise Unmapped("empty slice")
        vdt = conv.types[v][0]
        out = conv.emit("slice", [v], vdt, shape, {
            "dim": dim, "start": start, "end": end, "step": step},
            hint=node.name)
        return conv.cast(out, dt)
    out = _slice_of(conv, v, dim, _arg(node, 2, "start"), _arg(node, 3, "end"),
                    node.name)
    if tuple(conv.types[out][1]) != tuple(shape):
        raise Unmapped("slice result %s, expected %s"
                       % (list(conv.types[out][1]), list(shape)))
    return conv.cast(out, dt)


@register("aten.select")
def _select(conv, node):
    v = conv.value(node.args[0])
    vshape = conv.types[v][1]
    dim = int(node.args[1]) % len(vshape)
    i = int(node.args[2])
    i = i + vshape[dim] if i < 0 else i
    s = _slice_of(conv, v, dim, i, i + 1, node.name + ".slice")
    dt, shape = _result(conv, node)
    return conv.cast(conv.emit("reshape", [s], conv.types[s][0], shape,
                               hint=node.name), dt)


@register("aten.split", "aten.split_with_sizes")
def _split(conv, node):
    v = conv.value(node.args[0])
    vshape = conv.types[v][1]
    dim = int(_arg(node, 2, "dim", 0)) % len(vshape)
    sizes = node.args[1]
    if isinstance(sizes, int):
        n = -(-vshape[dim] // sizes)
        sizes = [min(sizes, vshape[dim] - i * sizes) for i in range(n)]
    out, start = [], 0
    for i, n in enumerate(sizes):
        out.append(_slice_of(conv, v, dim, start, start + int(n),
                             "%s.%d" % (node.name, i)))
        start += int(n)
    return out


@register("aten.chunk")
def _chunk(conv, node):
    """chunk(x, n, dim): pieces of ceil(size / n), the last smaller (what
    torch.export keeps; make_fx traces it to split)."""
    v = conv.value(node.args[0])
    vshape = conv.types[v][1]
    dim = int(_arg(node, 2, "dim", 0)) % len(vshape)
    n = int(node.args[1])
    step = -(-vshape[dim] // n)
    out = []
    for i, start in enumerate(range(0, vshape[dim], step)):
        out.append(_slice_of(conv, v, dim, start, start + step,
                             "%s.%d" % (node.name, i)))
    return out


@register("aten.cat", "aten.concat")
def _cat(conv, node):
    tensors = [t for t in node.args[0]]
    dt, shape = _result(conv, node)
    vals = [conv.cast(conv.value(t), dt) for t in tensors
            if _numel(tensor_meta(t)[1]) > 0]
    if not vals:
        raise Unmapped("only empty tensors")
    dim = int(_arg(node, 1, "dim", 0)) % len(shape)
    if len(vals) == 1:
        return vals[0]
    return conv.emit("concat", vals, dt, shape, {"dim": dim}, hint=node.name)


def _indices(conv, v, hint):
    """v as the rank-1 index tensor index_select takes."""
    dt, shape = conv.types[v]
    if dt not in ("i32", "i64"):
        raise Unmapped("indices of type %s (i32 or i64 needed)" % dt)
    if len(shape) == 1:
        return v
    return conv.emit("reshape", [v], dt, [_numel(shape)], hint=hint)


@register("aten.index_select")
def _index_select(conv, node):
    v = conv.value(node.args[0])
    vdt, vshape = conv.types[v]
    if not vshape:
        raise Unmapped("a rank-0 tensor")
    dim = int(_arg(node, 1, "dim")) % len(vshape)
    idx = _indices(conv, conv.value(_arg(node, 2, "index")),
                   node.name + ".index")
    dt, shape = _result(conv, node)
    out = conv.emit("index_select", [v, idx], vdt, shape, {"dim": dim},
                    hint=node.name)
    return conv.cast(out, dt)


@register("aten.embedding")
def _embedding(conv, node):
    """embedding(weight, ids): the rows of weight the ids name, in ids' shape
    (padding_idx and the sparse flags only change the gradient)."""
    w = conv.value(node.args[0])
    wdt, wshape = conv.types[w]
    if len(wshape) != 2:
        raise Unmapped("a weight of rank %d" % len(wshape))
    ids = conv.value(node.args[1])
    n = _numel(conv.types[ids][1])
    flat = _indices(conv, ids, node.name + ".ids")
    rows = conv.emit("index_select", [w, flat], wdt, [n, wshape[1]],
                     {"dim": 0}, hint=node.name + ".rows")
    dt, shape = _result(conv, node)
    if tuple(shape) == (n, wshape[1]):
        return conv.cast(rows, dt)
    return conv.cast(conv.emit("reshape", [rows], wdt, shape, hint=node.name),
                     dt)


@register("aten.zeros_like", "aten.ones_like", "aten.full_like")
def _full_like(conv, node):
    """x's shape filled with one number, in the result's type: the IR's
    full_like {scalar} (x's values are not read)."""
    name = _name(node)
    if name == "aten.full_like":
        value = _arg(node, 1, "fill_value")
    else:
        value = 1 if name == "aten.ones_like" else 0
    if isinstance(value, bool):
        value = int(value)
    dt, shape = _result(conv, node)
    if not _is_number(value) and not (
            isinstance(value, float) and dt in ("f32", "f16", "bf16",
                                                "bool")):
        raise Unmapped("fill value %r (a finite number, or a non-finite one "
                       "for a float result)" % (value,))
    v = conv.value(node.args[0])
    if tuple(shape) != tuple(conv.types[v][1]):
        raise Unmapped("changes the shape")
    return conv.emit("full_like", [v], dt, shape, {"scalar": float(value)},
                     hint=node.name)


def _scatter_emit(conv, node, dst, dim, idx, src, add):
    """The IR's scatter of src (a value or a number) into dst at idx."""
    ddt, dshape = conv.types[dst]
    idt, ishape = conv.types[idx]
    if idt not in ("i32", "i64"):
        raise Unmapped("indices of type %s (i32 or i64 needed)" % idt)
    if len(ishape) != len(dshape) or any(
            i != d for k, (i, d) in enumerate(zip(ishape, dshape))
            if k != dim):
        raise Unmapped("an index of shape %s into %s (it must match along "
                       "every dimension but %d)" % (list(ishape),
                                                    list(dshape), dim))
    if isinstance(src, str):
        s = conv.cast(src, ddt)
        if tuple(conv.types[s][1]) != tuple(ishape):
            raise Unmapped("a source of shape %s, not the index's %s"
                           % (list(conv.types[s][1]), list(ishape)))
    elif _is_number(src):
        s = conv.emit("full_like", [idx], ddt, ishape, {"scalar": float(src)},
                      hint=node.name + ".value")
    else:
        raise Unmapped("source %r" % (src,))
    attrs = {"dim": dim}
    if add:
        attrs["reduce"] = "add"
    dt, shape = _result(conv, node)
    out = conv.emit("scatter", [dst, idx, s], ddt, dshape, attrs,
                    hint=node.name)
    return conv.cast(out, dt)


def _dst_dim(conv, node):
    dst = conv.value(node.args[0])
    dshape = conv.types[dst][1]
    if not dshape:
        raise Unmapped("a rank-0 tensor")
    return dst, int(_arg(node, 1, "dim")) % len(dshape)


def _source(conv, x):
    return conv.value(x) if isinstance(x, torch.fx.Node) else x


@register("aten.scatter", "aten.scatter_add", "aten.scatter_reduce")
def _scatter(conv, node):
    """scatter(self, dim, index, src | value[, reduce='add']),
    scatter_add(self, dim, index, src) and scatter_reduce(self, dim, index,
    src, 'sum', include_self=True): the IR's scatter (reduce = "add" for
    the sums), where the index has src's shape and self's along every
    other dimension; a number value becomes a full_like source of the
    index's shape."""
    name = _name(node)
    if name == "aten.scatter_reduce":
        if _arg(node, 4, "reduce") != "sum" or \
                not _arg(node, 5, "include_self", True):
            raise Unmapped("reduce %r, include_self %r" % (
                _arg(node, 4, "reduce"), _arg(node, 5, "include_self", True)))
        add = True
    elif name == "aten.scatter_add":
        add = True
    else:
        reduce = _arg(node, 4, "reduce")
        if reduce not in (None, "add"):
            raise Unmapped("reduce %r" % (reduce,))
        add = reduce == "add"
    dst, dim = _dst_dim(conv, node)
    idx = conv.value(_arg(node, 2, "index"))
    src = _arg(node, 3, "src", _arg(node, 3, "value"))
    return _scatter_emit(conv, node, dst, dim, idx, _source(conv, src), add)


@register("aten.index_copy", "aten.index_add")
def _index_copy(conv, node):
    """index_copy(self, dim, index, source) and index_add(self, dim, index,
    source, alpha=1) (KV-cache writes, MoE combines): the rank-1 index
    reshaped and expanded to the source's shape, then the IR's scatter."""
    if _arg(node, 4, "alpha", 1) != 1:
        raise Unmapped("alpha = %r" % (_arg(node, 4, "alpha", 1),))
    dst, dim = _dst_dim(conv, node)
    idx = conv.value(_arg(node, 2, "index"))
    src = conv.value(_arg(node, 3, "source"))
    idt, ishape = conv.types[idx]
    sshape = conv.types[src][1]
    if len(ishape) > 1 or len(sshape) != len(conv.types[dst][1]):
        raise Unmapped("an index of rank %d or a source of rank %d"
                       % (len(ishape), len(sshape)))
    n = _numel(ishape)
    if sshape[dim] != n:
        raise Unmapped("%d indices for %d source slices" % (n, sshape[dim]))
    along = [1] * len(sshape)
    along[dim] = n
    v = idx
    if list(ishape) != along:
        v = conv.emit("reshape", [v], idt, along, hint=node.name + ".index")
    if list(along) != list(sshape):
        v = conv.emit("expand", [v], idt, list(sshape),
                      hint=node.name + ".index")
    return _scatter_emit(conv, node, dst, dim, v, src,
                         _name(node) == "aten.index_add")


@register("aten.cumsum")
def _cumsum(conv, node):
    """cumsum(x, dim, dtype=None): x cast to the result's element type
    (i64 for integer x without dtype), then the IR's cumsum {dim}; bf16 and
    f16 sums accumulate in fp32 on both sides."""
    dt, shape = _result(conv, node)
    v = conv.cast(conv.value(node.args[0]), dt)
    rank = len(conv.types[v][1])
    if rank == 0:
        raise Unmapped("a rank-0 tensor")
    dim = int(_arg(node, 1, "dim")) % rank
    return conv.emit("cumsum", [v], dt, shape, {"dim": dim}, hint=node.name)


def _last_dim_of(node, i, name, rank, default=-1):
    d = int(_arg(node, i, name, default))
    if d % rank != rank - 1:
        raise Unmapped("dim %d is not the last dimension" % d)


@register("aten.topk")
def _topk(conv, node):
    v = conv.value(node.args[0])
    vdt, vshape = conv.types[v]
    if not vshape:
        raise Unmapped("a rank-0 tensor")
    k = int(_arg(node, 1, "k"))
    _last_dim_of(node, 2, "dim", len(vshape))
    largest = bool(_arg(node, 3, "largest", True))
    if not bool(_arg(node, 4, "sorted", True)):
        # Any order is then correct; the IR's is sorted, eager's may not be.
        raise Unmapped("sorted=False")
    shape = tuple(vshape[:-1]) + (k,)
    attrs = {"k": k}
    if not largest:
        attrs["largest"] = False
    return conv.emit_results("topk", [v], [(node.name + ".values", vdt, shape),
                                           (node.name + ".indices", "i64",
                                            shape)], attrs, hint=node.name)


def _sort_results(conv, node, v, descending):
    vdt, vshape = conv.types[v]
    if not vshape:
        raise Unmapped("a rank-0 tensor")
    attrs = {"descending": True} if descending else {}
    return conv.emit_results("sort", [v], [(node.name + ".values", vdt, vshape),
                                           (node.name + ".indices", "i64",
                                            vshape)], attrs, hint=node.name)


@register("aten.sort")
def _sort(conv, node):
    v = conv.value(node.args[0])
    rank = len(conv.types[v][1])
    if "stable" in node.kwargs:
        # sort.stable(x, *, stable, dim, descending): keyword arguments only.
        _last_dim_of(node, 99, "dim", rank)
        descending = bool(node.kwargs.get("descending", False))
    else:
        _last_dim_of(node, 1, "dim", rank)
        descending = bool(_arg(node, 2, "descending", False))
    return _sort_results(conv, node, v, descending)


@register("aten.argsort")
def _argsort(conv, node):
    v = conv.value(node.args[0])
    _last_dim_of(node, 1, "dim", len(conv.types[v][1]))
    descending = bool(_arg(node, 2, "descending", False))
    return _sort_results(conv, node, v, descending)[1]


# -- casts ----------------------------------------------------------------------


@register("aten._to_copy", "aten.to", "prims.convert_element_type",
          "aten.type_as")
def _to(conv, node):
    v = conv.value(node.args[0])
    dt, shape = _result(conv, node)
    return conv.cast(v, dt, hint=node.name)


# -- pointwise ------------------------------------------------------------------


def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and \
        math.isfinite(x)


def _binary(irop):
    def fn(conv, node, quotient_only=False):
        a, b = node.args[0], node.args[1]
        alpha = _arg(node, 2, "alpha", 1)
        if alpha != 1:
            raise Unmapped("alpha = %r" % (alpha,))
        mode = node.kwargs.get("rounding_mode")
        if mode is not None and not quotient_only:
            if irop != "div" or mode not in ("floor", "trunc"):
                raise Unmapped("rounding_mode %r" % (mode,))
            # div(a, b, rounding_mode): the quotient, then floor or trunc.
            dt, shape = _result(conv, node)
            q = fn(conv, node, True)
            if mode == "floor":
                return conv.emit("floor", [q], dt, shape, hint=node.name)
            return _trunc_build(conv, node.name, q, dt, shape)
        dt, shape = _result(conv, node)
        # A folded constant of one value (a scalar_tensor, a full) is a
        # number when the other operand gives the result's shape.
        for x, y, i in ((a, b, 1), (b, a, 0)):
            if isinstance(y, torch.fx.Node) and conv.const(y) is not None \
                    and isinstance(x, torch.fx.Node) and \
                    conv.const(x) is None and \
                    tuple(tensor_meta(x)[1]) == tuple(shape):
                n = _const_number(conv, y)
                if n is not None and math.isfinite(n):
                    if i == 1:
                        b = n
                    else:
                        a = n
        if isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node):
            va, vb = conv.cast(conv.value(a), dt), conv.cast(conv.value(b), dt)
            return conv.emit(irop, [va, vb], dt, shape, hint=node.name)
        # x + 0, x - 0, x * 1, x / 1 (a mask that masks nothing, folded to
        # its one value) are x.
        if isinstance(a, torch.fx.Node) and _is_number(b) and (
                (irop in ("add", "sub") and b == 0) or
                (irop in ("mul", "div") and b == 1)) and \
                tuple(tensor_meta(a)[1]) == tuple(shape):
            conv.elided["%s by %r" % (irop, b)] += 1
            return conv.cast(conv.value(a), dt)
        # A number operand is the IR's attribute 'scalar', which stands for
        # the last operand: x op s directly; s op x for the commutative ops,
        # and s - x, s / x as -x + s, recip(x) * s.
        if isinstance(a, torch.fx.Node) and _is_number(b):
            v = conv.cast(conv.value(a), dt)
            return conv.emit(irop, [v], dt, shape, {"scalar": float(b)},
                             hint=node.name)
        if isinstance(b, torch.fx.Node) and _is_number(a):
            v = conv.cast(conv.value(b), dt)
            if irop in ("add", "mul", "maximum", "minimum"):
                return conv.emit(irop, [v], dt, shape, {"scalar": float(a)},
                                 hint=node.name)
            if irop in ("sub", "div"):
                inv = conv.emit("neg" if irop == "sub" else "recip", [v], dt,
                                shape, hint=node.name + ".inv")
                return conv.emit("add" if irop == "sub" else "mul", [inv], dt,
                                 shape, {"scalar": float(a)}, hint=node.name)
        raise Unmapped("operands %r, %r" % (a, b))
    return fn


@register("aten.rsub")
def _rsub(conv, node):
    """rsub(x, s) = s - x."""
    x, s = node.args[0], node.args[1]
    if _arg(node, 2, "alpha", 1) != 1 or not _is_number(s):
        raise Unmapped("alpha or a tensor other")
    dt, shape = _result(conv, node)
    v = conv.cast(conv.value(x), dt)
    n = conv.emit("neg", [v], dt, shape, hint=node.name + ".neg")
    return conv.emit("add", [n], dt, shape, {"scalar": float(s)},
                     hint=node.name)


for _op in ("add", "sub", "mul", "div"):
    register("aten." + _op)(_binary(_op))


def _unary(irop, check=None):
    def fn(conv, node):
        if check:
            check(node)
        dt, shape = _result(conv, node)
        v = conv.cast(conv.value(node.args[0]), dt)
        return conv.emit(irop, [v], dt, shape, hint=node.name)
    return fn


def _exact_gelu(node):
    if _arg(node, 1, "approximate", "none") != "none":
        raise Unmapped("tanh-approximate gelu")


register("aten.relu")(_unary("relu"))
register("aten.gelu")(_unary("gelu", _exact_gelu))
register("aten.silu")(_unary("silu"))
register("aten.exp")(_unary("exp"))
register("aten.neg")(_unary("neg"))
for _op, _ir in (("rsqrt", "rsqrt"), ("sin", "sin"), ("cos", "cos"),
                 ("sigmoid", "sigmoid"), ("tanh", "tanh"), ("sqrt", "sqrt"),
                 ("abs", "abs"), ("reciprocal", "recip")):
    register("aten." + _op)(_unary(_ir))
for _op in ("maximum", "minimum"):
    register("aten." + _op)(_binary(_op))


register("aten.pow")(_binary("pow"))


@register("aten.where")
def _where(conv, node):
    if len(node.args) != 3 or not all(isinstance(a, torch.fx.Node)
                                      for a in node.args):
        raise Unmapped("a number operand")
    dt, shape = _result(conv, node)
    c = conv.value(node.args[0])
    a = conv.cast(conv.value(node.args[1]), dt)
    b = conv.cast(conv.value(node.args[2]), dt)
    return conv.emit("where", [c, a, b], dt, shape, hint=node.name)


# -- reductions -------------------------------------------------------------------


def _one_dim(node, dims, rank):
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) != 1):
        raise Unmapped("reduces over %r, not one dimension" % (dims,))
    d = dims[0] if isinstance(dims, (list, tuple)) else dims
    return d - rank if d >= 0 else d


def _reduce(irop):
    def fn(conv, node):
        v = conv.value(node.args[0])
        rank = len(conv.types[v][1])
        d = _one_dim(node, _arg(node, 1, "dim"), rank)
        keep = bool(_arg(node, 2, "keepdim", False))
        dt, shape = _result(conv, node)
        v = conv.cast(v, dt)
        attrs = {"dim": d}
        if keep:
            attrs["keepdim"] = True
        return conv.emit(irop, [v], dt, shape, attrs, hint=node.name)
    return fn


register("aten.sum")(_reduce("sum"))
register("aten.amax")(_reduce("max"))


@register("aten.prod")
def _prod(conv, node):
    """prod(x, dim, keepdim=False, dtype=None): x cast to the result's
    element type (i64 for integer x without dtype), then the IR's
    prod {dim, keepdim}; prod(x) of every element is x reshaped to one
    dimension, then prod {dim = 0}."""
    dt, shape = _result(conv, node)
    v = conv.cast(conv.value(node.args[0]), dt)
    vshape = conv.types[v][1]
    dim = _arg(node, 1, "dim")
    attrs = {}
    if dim is None:
        v = conv.emit("reshape", [v], dt, (_numel(vshape),),
                      hint=node.name + ".flat")
        attrs["dim"] = 0
    else:
        if not vshape:
            raise Unmapped("a rank-0 tensor")
        attrs["dim"] = int(dim) % len(vshape)
        if _arg(node, 2, "keepdim", False):
            attrs["keepdim"] = True
    return conv.emit("prod", [v], dt, shape, attrs, hint=node.name)


@register("aten._softmax", "aten.softmax")
def _softmax(conv, node):
    v = conv.value(node.args[0])
    rank = len(conv.types[v][1])
    d = node.args[1]
    if d not in (-1, rank - 1):
        raise Unmapped("softmax over dimension %d, not the last" % d)
    dt, shape = _result(conv, node)
    # _softmax(x, dim, half_to_float) and softmax(x, dim, dtype) both give
    # the result type in meta: compute in it.
    return conv.emit("softmax", [conv.cast(v, dt)], dt, shape, hint=node.name)


# -- matmuls ----------------------------------------------------------------------


def _matmul(conv, a, b, dt, shape, hint):
    return _matmul_values(conv, conv.value(a), conv.value(b), dt, shape, hint)


def _matmul_values(conv, va, vb, dt, shape, hint):
    ta, tb = conv.types[va], conv.types[vb]
    if ta[0] != tb[0] or ta[0] not in ("f32", "f16", "bf16"):
        raise Unmapped("operands %s and %s" % (ta[0], tb[0]))
    ra, rb = len(ta[1]), len(tb[1])
    if ra < 2 or not (rb == 2 or rb == ra):
        raise Unmapped("ranks %d x %d" % (ra, rb))
    if rb == ra and tuple(ta[1][:-2]) != tuple(tb[1][:-2]):
        raise Unmapped("broadcast batch dimensions")
    return conv.emit("matmul", [va, vb], ta[0], shape, hint=hint)


@register("aten.mm", "aten.bmm", "aten.matmul")
def _mm(conv, node):
    dt, shape = _result(conv, node)
    return _matmul(conv, node.args[0], node.args[1], dt, shape, node.name)


@register("aten.addmm")
def _addmm(conv, node):
    if _arg(node, 3, "beta", 1) != 1 or _arg(node, 4, "alpha", 1) != 1:
        raise Unmapped("beta/alpha")
    dt, shape = _result(conv, node)
    mm = _matmul(conv, node.args[1], node.args[2], dt, shape, node.name + ".mm")
    bias = conv.cast(conv.value(node.args[0]), dt)
    return conv.emit("add", [mm, bias], dt, shape, hint=node.name)


@register("aten.linear")
def _linear(conv, node):
    w = node.args[1]
    dt, shape = _result(conv, node)
    if w in conv.transposed_fx:
        mm = _matmul(conv, node.args[0], w, dt, shape, node.name + ".mm")
    else:
        # A weight the graph takes as an input (Dynamo lifts a module's
        # parameters to graph inputs): x W^T reads it through a transpose.
        vw = conv.value(w)
        tw = conv.types[vw]
        if len(tw[1]) != 2:
            raise Unmapped("weight of rank %d" % len(tw[1]))
        wt = conv.emit("transpose", [vw], tw[0], (tw[1][1], tw[1][0]),
                       {"perm": [1, 0]}, hint=node.name + ".wt")
        mm = _matmul_values(conv, conv.value(node.args[0]), wt, dt, shape,
                            node.name + ".mm")
    b = _arg(node, 2, "bias")
    if b is None:
        return mm
    return conv.emit("add", [mm, conv.cast(conv.value(b), dt)], dt, shape,
                     hint=node.name)


# -- RMSNorm ----------------------------------------------------------------------

_CASTS = ("aten._to_copy", "aten.to", "prims.convert_element_type")


def _name(n):
    return op_name(n.target) if isinstance(n, torch.fx.Node) and \
        n.op == "call_function" else None


def _strip_casts(n):
    while isinstance(n, torch.fx.Node) and _name(n) in _CASTS:
        n = n.args[0]
    return n


def _last_dim(dims, rank):
    return dims is not None and len(dims) == 1 and dims[0] in (-1, rank - 1)


def _mean_last(m):
    """The operand of mean(v, [-1], keepdim=True) (also spelled
    sum(v, [-1], True) / N), or None."""
    if _name(m) == "aten.mean":
        v = m.args[0]
        rank = len(tensor_meta(v)[1])
        if _last_dim(_arg(m, 1, "dim"), rank) and _arg(m, 2, "keepdim", False):
            return v
        return None
    if _name(m) == "aten.div" and not isinstance(m.args[1], torch.fx.Node):
        s = m.args[0]
        if _name(s) != "aten.sum":
            return None
        v = s.args[0]
        shape = tensor_meta(v)[1]
        if _last_dim(_arg(s, 1, "dim"), len(shape)) and \
                _arg(s, 2, "keepdim", False) and m.args[1] == shape[-1]:
            return v
    return None


def _match_rsqrt_norm(t):
    """t == x * rsqrt(mean(x^2, [-1], keepdim) + eps) -> (x, eps) or None."""
    if _name(t) != "aten.mul":
        return None
    for xf, r in ((t.args[0], t.args[1]), (t.args[1], t.args[0])):
        if _name(r) != "aten.rsqrt":
            continue
        add = r.args[0]
        if _name(add) != "aten.add" or isinstance(add.args[1], torch.fx.Node):
            continue
        eps = float(add.args[1])
        p = _mean_last(add.args[0])
        if p is None:
            continue
        if _name(p) == "aten.pow":
            if p.args[1] != 2 or _strip_casts(p.args[0]) is not _strip_casts(xf):
                continue
        elif _name(p) == "aten.mul":
            if not (_strip_casts(p.args[0]) is _strip_casts(xf) and
                    _strip_casts(p.args[1]) is _strip_casts(xf)):
                continue
        else:
            continue
        return _strip_casts(xf), eps
    return None


def _rmsnorm_emit(conv, node, x, w, eps):
    dt, shape = _result(conv, node)
    vx = conv.value(x)
    vw = conv.value(w)
    if conv.types[vw][1] != (shape[-1],) or dt not in ("f32", "f16", "bf16"):
        raise Unmapped("not an RMSNorm over the last dimension")
    conv.rmsnorms += 1
    return conv.emit("rmsnorm", [conv.cast(vx, dt), conv.cast(vw, dt)], dt,
                     shape, {"eps": float(eps)}, hint=node.name)


def _mul(conv, node):
    a, b = node.args[0], node.args[1]
    if isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node):
        # x * sigmoid(x), silu decomposed.
        for x, sg in ((a, b), (b, a)):
            if _name(sg) == "aten.sigmoid" and sg.args[0] is x:
                dt, shape = _result(conv, node)
                return conv.emit("silu", [conv.cast(conv.value(x), dt)], dt,
                                 shape, hint=node.name)
        for w, t in ((a, b), (b, a)):
            m = _match_rsqrt_norm(_strip_casts(t))
            if m is not None:
                try:
                    return _rmsnorm_emit(conv, node, m[0], w, m[1])
                except Unmapped:
                    pass
    return _binary("mul")(conv, node)


OPS["aten.mul"] = _mul


@register("aten.rms_norm")
def _rms_norm(conv, node):
    w = _arg(node, 2, "weight")
    eps = _arg(node, 3, "eps")
    if w is None or len(node.args[1]) != 1:
        raise Unmapped("no weight, or not over the last dimension")
    if eps is None:
        eps = torch.finfo(node.args[0].meta["val"].dtype).eps
    return _rmsnorm_emit(conv, node, node.args[0], w, eps)


# -- collectives --------------------------------------------------------------------

_SPELLINGS = (
    ("all_reduce", ("all_reduce", "allreduce")),
    ("all_gather", ("all_gather", "allgather")),
    ("reduce_scatter", ("reduce_scatter", "reducescatter")),
    ("all_to_all", ("all_to_all", "alltoall")),
)
_REDUCE_OPS = {"sum", "avg", "max", "min", "product", "premul_sum"}


def collective_kind_in(name):
    """The collective a name spells (docs/IR.md's rule), or None."""
    low = name.lower()
    for kind, spellings in _SPELLINGS:
        if any(s in low for s in spellings):
            return kind
    return None


def _emit_collective(conv, node, kind, x, group, size, reduce="sum", dim=0):
    dt, shape = _result(conv, node)
    v = conv.value(x)
    vdt, vshape = conv.types[v]
    if vdt != dt:
        raise Unmapped("changes the element type")
    g = conv.group(group, size)
    expect = list(vshape)
    if kind == "all_gather":
        expect[dim] *= size
    elif kind == "reduce_scatter":
        if expect[dim] % size:
            raise Unmapped("dimension %d of size %d does not split into %d"
                           % (dim, expect[dim], size))
        expect[dim] //= size
    if tuple(expect) != tuple(shape):
        raise Unmapped("result shape %s, expected %s for %d ranks"
                       % (list(shape), expect, size))
    attrs = {}
    if reduce in ("sum", "max", "min", "avg") and kind in (
            "all_reduce", "reduce_scatter"):
        attrs["reduce"] = reduce
    elif kind in ("all_reduce", "reduce_scatter"):
        raise Unmapped("reduction %r" % (reduce,))
    attrs["group"] = g
    if kind != "all_reduce" and dim != 0:
        attrs["dim"] = dim
    return conv.emit(kind, [v], dt, shape, attrs, hint=node.name)


def _size_of(conv, name, default):
    from . import collectives
    ours = conv.group_names.get(name, name)
    return collectives.group_size(ours, default)


@register("mtsched.all_reduce")
def _mt_all_reduce(conv, node):
    return _emit_collective(conv, node, "all_reduce", node.args[0],
                            node.args[1], int(node.args[2]))


@register("mtsched.all_gather", "mtsched.reduce_scatter", "mtsched.all_to_all")
def _mt_dim_collective(conv, node):
    kind = _name(node).split(".")[1]
    x, dim, group, size = node.args[:4]
    rank = len(conv.types[conv.value(x)][1])
    return _emit_collective(conv, node, kind, x, group, int(size),
                            dim=int(dim) % rank)


@register("_c10d_functional.all_reduce")
def _f_all_reduce(conv, node):
    x, reduce, group = node.args[:3]
    return _emit_collective(conv, node, "all_reduce", x, group,
                            _size_of(conv, group, conv.world_size),
                            reduce=str(reduce).lower())


@register("_c10d_functional.all_gather_into_tensor")
def _f_all_gather(conv, node):
    x, size, group = node.args[:3]
    return _emit_collective(conv, node, "all_gather", x, group, int(size))


@register("_c10d_functional.reduce_scatter_tensor")
def _f_reduce_scatter(conv, node):
    x, reduce, size, group = node.args[:4]
    return _emit_collective(conv, node, "reduce_scatter", x, group, int(size),
                            reduce=str(reduce).lower())


@register("_c10d_functional.all_to_all_single")
def _f_all_to_all(conv, node):
    x, out_splits, in_splits, group = node.args[:4]
    size = len(in_splits) if in_splits else _size_of(conv, group,
                                                     conv.world_size)
    if out_splits and len(set(int(s) for s in out_splits)) != 1 or \
            in_splits and len(set(int(s) for s in in_splits)) != 1:
        raise Unmapped("unequal splits")
    return _emit_collective(conv, node, "all_to_all", x, group, size)


def _generic_collective(conv, node, kind):
    """vLLM-style custom collectives: the first tensor argument is the input,
    the first string that is not a reduction is the group, an int argument
    is the world size; else the shapes tell it."""
    tensors = [a for a in node.args if isinstance(a, torch.fx.Node)]
    if not tensors:
        raise Unmapped("no tensor operand")
    x = tensors[0]
    strings = [a for a in list(node.args) + list(node.kwargs.values())
               if isinstance(a, str)]
    group = next((s for s in strings if s.lower() not in _REDUCE_OPS), "world")
    reduce = next((s.lower() for s in strings if s.lower() in _REDUCE_OPS),
                  "sum")
    ints = [a for a in list(node.args) + list(node.kwargs.values())
            if isinstance(a, int) and not isinstance(a, bool) and a > 0]
    xin = tensor_meta(x)[1]
    out = conv.meta(node)[1]
    size = None
    dim = 0
    if kind in ("all_gather", "reduce_scatter"):
        diff = [i for i, (p, q) in enumerate(zip(xin, out)) if p != q]
        if len(diff) == 1:
            dim = diff[0]
            size = (out[dim] // xin[dim] if kind == "all_gather"
                    else xin[dim] // out[dim])
    if size is None:
        size = ints[-1] if ints else _size_of(conv, group, conv.world_size)
    return _emit_collective(conv, node, kind, x, group, size, reduce, dim)


# -- Core ATen: reductions, norms and pointwise ops built from the IR's ----------
#
# IR ops the import-ops work adds (docs/IR.md); until an op is listed here
# the mappings that need it decline and the op stays custom.
IR_EXTRA = {"layernorm", "gelu_tanh", "where_scalars", "bool", "log", "erf",
            "log1p", "expm1", "floor", "ceil", "round", "sign", "fmod",
            "remainder", "eq", "ne", "lt", "le", "gt", "ge", "logical_not",
            "logical_and", "logical_or", "gather"}


def _have(op):
    if op not in IR_EXTRA:
        raise Unmapped("the IR has no '%s' op yet" % op)


def _dims_of(node, i, name, rank):
    dims = _arg(node, i, name)
    if dims is None or (isinstance(dims, (list, tuple)) and not dims):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted(set(int(d) % rank for d in dims))


def _sum_dims(conv, v, dims, keep, hint, scale=None):
    """sum of v over dims (keepdim as asked), times scale (a number)."""
    dt, shape = conv.types[v]
    shape = list(shape)
    if len(dims) == 1:
        d = dims[0]
        out = [s for i, s in enumerate(shape) if i != d] if not keep else \
            shape[:d] + [1] + shape[d + 1:]
        attrs = {"dim": d - len(shape)}
        if keep:
            attrs["keepdim"] = True
        v = conv.emit("sum", [v], dt, tuple(out), attrs,
                      hint=hint + (".sum" if scale not in (None, 1) else ""))
        if scale is not None and scale != 1:
            v = conv.emit("mul", [v], dt, tuple(out),
                          {"scalar": float(scale)}, hint=hint)
        return v
    for d in sorted(dims, reverse=True):
        shape[d] = 1
        v = conv.emit("sum", [v], dt, tuple(shape),
                      {"dim": d - len(shape), "keepdim": True},
                      hint=hint + ".sum")
    if scale is not None and scale != 1:
        v = conv.emit("mul", [v], dt, tuple(shape), {"scalar": float(scale)},
                      hint=hint + ".scale")
    if not keep:
        out = [s for i, s in enumerate(shape) if i not in dims]
        v = conv.emit("reshape", [v], dt, tuple(out), hint=hint)
    return v


def _float_result(conv, node):
    dt, shape = _result(conv, node)
    if dt not in ("f32", "f16", "bf16"):
        raise Unmapped("result of type %s" % dt)
    return dt, shape


@register("aten.mean")
def _mean(conv, node):
    """mean(x, dims, keepdim): sums over each dim, times 1/N."""
    dt, shape = _float_result(conv, node)
    v = conv.cast(conv.value(node.args[0]), dt)
    vshape = conv.types[v][1]
    if not vshape:
        return v
    dims = _dims_of(node, 1, "dim", len(vshape))
    n = _numel([vshape[d] for d in dims])
    return _sum_dims(conv, v, dims, bool(_arg(node, 2, "keepdim", False)),
                     node.name, 1.0 / n)


def _correction(node, i_unbiased=2):
    c = node.kwargs.get("correction")
    if c is not None:
        return float(c)
    u = node.kwargs.get("unbiased")
    if u is None and len(node.args) > i_unbiased and \
            isinstance(node.args[i_unbiased], bool):
        u = node.args[i_unbiased]
    return 1.0 if u is None or u else 0.0


def _var_parts(conv, node, v, dims, keep, corr):
    """(mean with keepdim, variance as asked) of v over dims."""
    dt, vshape = conv.types[v]
    n = _numel([vshape[d] for d in dims])
    if n - corr <= 0:
        raise Unmapped("variance of %d elements with correction %g"
                       % (n, corr))
    mean = _sum_dims(conv, v, dims, True, node.name + ".mean", 1.0 / n)
    xc = conv.emit("sub", [v, mean], dt, vshape, hint=node.name + ".xc")
    sq = conv.emit("mul", [xc, xc], dt, vshape, hint=node.name + ".sq")
    var = _sum_dims(conv, sq, dims, keep, node.name + ".var",
                    1.0 / (n - corr))
    conv.last_centred = xc
    return mean, var


def _var_dims(node, rank):
    dims = _arg(node, 1, "dim")
    if isinstance(dims, bool):  # var(x, unbiased)
        dims = None
    if dims is None or (isinstance(dims, (list, tuple)) and not dims):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted(set(int(d) % rank for d in dims))


@register("aten.var", "aten.std", "aten.var_mean", "aten.std_mean")
def _var(conv, node):
    """var/std(x, dims, correction, keepdim) and var_mean/std_mean:
    sum((x - mean)^2) / (N - correction) (sqrt for std)."""
    name = _name(node)
    tdt, _ = _first_meta(node)
    dt = conv.dtype(tdt, node.name)
    if dt not in ("f32", "f16", "bf16"):
        raise Unmapped("result of type %s" % dt)
    v = conv.cast(conv.value(node.args[0]), dt)
    vshape = conv.types[v][1]
    dims = _var_dims(node, len(vshape))
    keep = bool(node.kwargs.get("keepdim", _arg(node, 3, "keepdim", False)
                                if len(node.args) > 3 and
                                isinstance(node.args[3], bool) else False))
    mean, var = _var_parts(conv, node, v, dims, keep, _correction(node))
    if name.startswith("aten.std"):
        var = conv.emit("sqrt", [var], dt, conv.types[var][1],
                        hint=node.name + ".std")
    if not name.endswith("_mean"):
        return var
    if not keep:
        out = [s for i, s in enumerate(vshape) if i not in dims]
        mean = conv.emit("reshape", [mean], dt, tuple(out),
                         hint=node.name + ".m")
    return [var, mean]


def _first_meta(node):
    """(dtype, shape) of a node's first result (its getitem 0's where the
    trace recorded none for the tuple)."""
    import operator
    m = tensor_meta(node)
    if isinstance(m, list):
        m = m[0]
    if m is None:
        for u in node.users:
            if u.target is operator.getitem and u.args[1] == 0:
                m = tensor_meta(u)
    if m is None:
        raise Unmapped("no result type")
    return m


def _layer_norm(conv, node, x, nshape, w, b, eps):
    dt, shape = _first_meta(node)
    dt = conv.dtype(dt, node.name)
    if dt not in ("f32", "f16", "bf16"):
        raise Unmapped("result of type %s" % dt)
    v = conv.cast(conv.value(x), dt)
    vshape = conv.types[v][1]
    k = len(nshape)
    if k < 1 or tuple(vshape[-k:]) != tuple(int(d) for d in nshape):
        raise Unmapped("normalized shape %s of %s" % (list(nshape),
                                                      list(vshape)))
    dims = list(range(len(vshape) - k, len(vshape)))
    wv = None if w is None else conv.cast(conv.value(w), dt)
    bv = None if b is None else conv.cast(conv.value(b), dt)
    if k == 1 and "layernorm" in IR_EXTRA:
        ops = [v] + ([wv] if wv is not None else []) + \
            ([bv] if bv is not None and wv is not None else [])
        if bv is not None and wv is None:
            ops.append(conv.emit("full_like", [bv], dt, conv.types[bv][1],
                                 {"scalar": 1.0}, hint=node.name + ".one"))
            ops.append(bv)
        out = conv.emit("layernorm", ops, dt, vshape, {"eps": float(eps)},
                        hint=node.name)
        return out, None
    mean, var = _var_parts(conv, node, v, dims, True, 0.0)
    xc = conv.last_centred
    ve = conv.emit("add", [var], dt, conv.types[var][1], {"scalar": float(eps)},
                   hint=node.name + ".ve")
    rstd = conv.emit("rsqrt", [ve], dt, conv.types[ve][1],
                     hint=node.name + ".rstd")
    y = conv.emit("mul", [xc, rstd], dt, vshape, hint=node.name + ".n")
    if wv is not None:
        y = conv.emit("mul", [y, wv], dt, vshape, hint=node.name + ".w")
    if bv is not None:
        y = conv.emit("add", [y, bv], dt, vshape, hint=node.name + ".b")
    return y, (mean, rstd)


@register("aten.native_layer_norm")
def _native_layer_norm(conv, node):
    """native_layer_norm(x, shape, w, b, eps) -> (y, mean, rstd): the IR's
    layernorm over the last dimension where it has one, else its
    decomposition (mean, centred square sum, rsqrt, scale and shift)."""
    x, nshape, w, b, eps = node.args[:5]
    y, parts = _layer_norm(conv, node, x, nshape, w, b, eps)
    if parts is None:
        return [y, None, None]
    return [y, parts[0], parts[1]]


@register("aten.layer_norm")
def _layer_norm_op(conv, node):
    x, nshape = node.args[:2]
    w, b = _arg(node, 2, "weight"), _arg(node, 3, "bias")
    eps = _arg(node, 4, "eps", 1e-5)
    return _layer_norm(conv, node, x, nshape, w, b, eps)[0]


@register("aten.gelu")
def _gelu(conv, node):
    """gelu: the IR's (erf) gelu; approximate='tanh' as the IR's gelu_tanh
    where it has one, else its formula 0.5 x (1 + tanh(sqrt(2/pi) (x +
    0.044715 x^3)))."""
    dt, shape = _float_result(conv, node)
    v = conv.cast(conv.value(node.args[0]), dt)
    if _arg(node, 1, "approximate", "none") == "none":
        return conv.emit("gelu", [v], dt, shape, hint=node.name)
    if "gelu_tanh" in IR_EXTRA:
        return conv.emit("gelu_tanh", [v], dt, shape, hint=node.name)
    h = node.name
    x2 = conv.emit("mul", [v, v], dt, shape, hint=h + ".x2")
    x3 = conv.emit("mul", [x2, v], dt, shape, hint=h + ".x3")
    c = conv.emit("mul", [x3], dt, shape, {"scalar": 0.044715}, hint=h + ".c")
    inner = conv.emit("add", [v, c], dt, shape, hint=h + ".in")
    s = conv.emit("mul", [inner], dt, shape,
                  {"scalar": math.sqrt(2.0 / math.pi)}, hint=h + ".s")
    t = conv.emit("tanh", [s], dt, shape, hint=h + ".t")
    t1 = conv.emit("add", [t], dt, shape, {"scalar": 1.0}, hint=h + ".t1")
    hx = conv.emit("mul", [v], dt, shape, {"scalar": 0.5}, hint=h + ".hx")
    return conv.emit("mul", [hx, t1], dt, shape, hint=h)


@register("aten.clamp", "aten.clamp_min", "aten.clamp_max", "aten.hardtanh",
          "aten.relu6")
def _clamp(conv, node):
    """clamp(x, lo, hi) and its spellings: maximum / minimum with a number
    (a NaN x gives what the IR's maximum gives: not PyTorch's NaN)."""
    name = _name(node)
    lo = hi = None
    if name == "aten.clamp":
        lo, hi = _arg(node, 1, "min"), _arg(node, 2, "max")
    elif name == "aten.clamp_min":
        lo = _arg(node, 1, "min")
    elif name == "aten.clamp_max":
        hi = _arg(node, 1, "max")
    elif name == "aten.hardtanh":
        lo, hi = _arg(node, 1, "min_val", -1.0), _arg(node, 2, "max_val", 1.0)
    else:
        lo, hi = 0.0, 6.0
    for b in (lo, hi):
        if b is not None and not _is_number(b):
            raise Unmapped("bound %r (a finite number needed)" % (b,))
    dt, shape = _result(conv, node)
    v = conv.cast(conv.value(node.args[0]), dt)
    if lo is not None:
        v = conv.emit("maximum", [v], dt, shape, {"scalar": float(lo)},
                      hint=node.name + (".lo" if hi is not None else ""))
    if hi is not None:
        v = conv.emit("minimum", [v], dt, shape, {"scalar": float(hi)},
                      hint=node.name)
    return v


@register("aten.amin")
def _amin(conv, node):
    dt, shape = _result(conv, node)
    v = conv.cast(conv.value(node.args[0]), dt)
    n = conv.emit("neg", [v], dt, conv.types[v][1], hint=node.name + ".neg")
    rank = len(conv.types[v][1])
    d = _one_dim(node, _arg(node, 1, "dim"), rank)
    attrs = {"dim": d}
    if _arg(node, 2, "keepdim", False):
        attrs["keepdim"] = True
    m = conv.emit("max", [n], dt, shape, attrs, hint=node.name + ".max")
    return conv.emit("neg", [m], dt, shape, hint=node.name)


@register("aten.baddbmm")
def _baddbmm(conv, node):
    """baddbmm(self, a, b, beta, alpha) = beta * self + alpha * (a @ b)."""
    beta, alpha = _arg(node, 3, "beta", 1), _arg(node, 4, "alpha", 1)
    dt, shape = _result(conv, node)
    mm = _matmul(conv, node.args[1], node.args[2], dt, shape,
                 node.name + ".mm")
    if alpha != 1:
        mm = conv.emit("mul", [mm], dt, shape, {"scalar": float(alpha)},
                       hint=node.name + ".alpha")
    if beta == 0:
        return mm
    s = conv.cast(conv.value(node.args[0]), dt)
    if beta != 1:
        s = conv.emit("mul", [s], dt, conv.types[s][1],
                      {"scalar": float(beta)}, hint=node.name + ".beta")
    return conv.emit("add", [mm, s], dt, shape, hint=node.name)


@register("aten.fill")
def _fill(conv, node):
    """fill(x, v) (a functionalised fill_): full_like(x) {scalar}."""
    value = _arg(node, 1, "value")
    if isinstance(value, torch.fx.Node):
        t = conv.const(value)
        if t is None or t.numel() != 1:
            raise Unmapped("a tensor fill value")
        value = t.item()
    if isinstance(value, bool):
        value = int(value)
    if not _is_number(value):
        raise Unmapped("fill value %r (a finite number needed)" % (value,))
    v = conv.value(node.args[0])
    dt, shape = _result(conv, node)
    return conv.emit("full_like", [v], dt, shape, {"scalar": float(value)},
                     hint=node.name)


@register("aten.copy")
def _copy(conv, node):
    """copy(dst, src) (a functionalised copy_): src broadcast to dst's shape,
    in dst's type."""
    dt, shape = _result(conv, node)
    v = conv.value(node.args[1])
    if tuple(conv.types[v][1]) != tuple(shape):
        v = conv.emit("expand", [v], conv.types[v][0], shape,
                      hint=node.name + ".expand")
    return conv.cast(v, dt, hint=node.name)


@register("aten.slice_scatter")
def _slice_scatter(conv, node):
    """slice_scatter(x, src, dim, start, end, 1) (x[..., a:b] = src,
    functionalised): the slices of x around src, concatenated."""
    x = conv.value(node.args[0])
    src = conv.value(node.args[1])
    dt, xshape = conv.types[x]
    rank = len(xshape)
    dim = int(_arg(node, 2, "dim", 0)) % rank
    if _arg(node, 5, "step", 1) != 1:
        raise Unmapped("step")
    size = xshape[dim]
    start = _arg(node, 3, "start") or 0
    end = _arg(node, 4, "end")
    end = size if end is None else end
    start = max(0, min(size, start + size if start < 0 else start))
    end = max(0, min(size, end + size if end < 0 else end))
    src = conv.cast(src, dt)
    parts = []
    if start > 0:
        parts.append(_slice_of(conv, x, dim, 0, start, node.name + ".head"))
    parts.append(src)
    if end < size:
        parts.append(_slice_of(conv, x, dim, end, size, node.name + ".tail"))
    if len(parts) == 1:
        return src
    return conv.emit("concat", parts, dt, xshape, {"dim": dim},
                     hint=node.name)


@register("aten.select_scatter")
def _select_scatter(conv, node):
    """select_scatter(x, src, dim, i) (x[..., i] = src)."""
    x = conv.value(node.args[0])
    dt, xshape = conv.types[x]
    dim = int(node.args[2]) % len(xshape)
    i = int(node.args[3])
    i = i + xshape[dim] if i < 0 else i
    src = conv.cast(conv.value(node.args[1]), dt)
    sh = list(xshape)
    sh[dim] = 1
    src = conv.emit("reshape", [src], dt, tuple(sh), hint=node.name + ".src")
    parts = []
    if i > 0:
        parts.append(_slice_of(conv, x, dim, 0, i, node.name + ".head"))
    parts.append(src)
    if i + 1 < xshape[dim]:
        parts.append(_slice_of(conv, x, dim, i + 1, xshape[dim],
                               node.name + ".tail"))
    if len(parts) == 1:
        return src
    return conv.emit("concat", parts, dt, xshape, {"dim": dim},
                     hint=node.name)


@register("aten.index")
def _index(conv, node):
    """x[idx] with one index tensor on one dimension (w[expert_ids],
    table[positions]): index_select over that dimension, the indices
    flattened and the result reshaped to the index's shape."""
    v = conv.value(node.args[0])
    vdt, vshape = conv.types[v]
    idxs = list(node.args[1])
    used = [(d, i) for d, i in enumerate(idxs) if i is not None]
    if len(used) != 1:
        raise Unmapped("%d index tensors (one supported)" % len(used))
    d, i = used[0]
    it = tensor_meta(i)
    if it is None or it[0] == torch.bool:
        raise Unmapped("a boolean mask index (data-dependent shape)")
    t = conv.const(i)
    if t is not None:
        # Constant indices (Falcon's x[..., [-2], :]): negative ones wrap
        # as in PyTorch; a range or repeat is a slice or an expand.
        t = t.to(torch.int64) % vshape[d]
        out = _const_index_select(conv, node, v, d, t, node.name + ".c") \
            if t.dim() == 1 else None
        if out is None:
            sh = list(vshape)
            sh[d] = t.numel()
            ids = conv.materialize(i, t.reshape(-1), hint=node.name + ".ids")
            out = conv.emit("index_select", [v, ids], vdt, tuple(sh),
                            {"dim": d}, hint=node.name + ".rows")
        dt, shape = _result(conv, node)
        if tuple(conv.types[out][1]) != tuple(shape):
            out = conv.emit("reshape", [out], vdt, shape, hint=node.name)
        return conv.cast(out, dt)
    ids = conv.value(i)
    n = _numel(conv.types[ids][1])
    flat = _indices(conv, ids, node.name + ".ids")
    sh = list(vshape)
    sh[d] = n
    rows = conv.emit("index_select", [v, flat], vdt, tuple(sh), {"dim": d},
                     hint=node.name + ".rows")
    dt, shape = _result(conv, node)
    if tuple(shape) != tuple(sh):
        rows = conv.emit("reshape", [rows], vdt, shape, hint=node.name)
    return conv.cast(rows, dt)


def _const_number(conv, a):
    """a as a number: a Python number, or a folded constant all of whose
    elements are one number (then it broadcasts like one)."""
    if _is_number(a) or isinstance(a, float):
        return float(a)
    t = conv.const(a)
    if t is not None and t.numel() >= 1:
        f = t.reshape(-1)
        if bool((f == f[0]).all()):
            return float(f[0])
    return None


def _where3(conv, node, c, a, b):
    """where(c, a, b) with a and b tensors or numbers."""
    dt, shape = _result(conv, node)
    ct = conv.const(c)
    if ct is not None:
        ct = ct.bool()
        if bool(ct.all()) or not bool(ct.any()):
            pick = a if bool(ct.all()) else b
            n = _const_number(conv, pick)
            if n is not None and not isinstance(pick, torch.fx.Node):
                raise Unmapped("a constant result")
            v = conv.cast(conv.value(pick), dt)
            if tuple(conv.types[v][1]) != tuple(shape):
                v = conv.emit("expand", [v], dt, shape, hint=node.name)
            conv.elided["where with a constant condition"] += 1
            return v
        # A constant condition and a number on one side: an additive mask
        # (0 where the tensor is kept, the number elsewhere) for -inf and
        # other large fills, exact for a finite tensor; else the IR's where
        # of the condition as a constant.
        for keep_if, tensor_side, num_side in ((True, a, b), (False, b, a)):
            n = _const_number(conv, num_side) if not isinstance(
                num_side, torch.fx.Node) or conv.const(num_side) is not None \
                else None
            if n is None or not isinstance(tensor_side, torch.fx.Node) or \
                    conv.const(tensor_side) is not None:
                continue
            keep = ct if keep_if else ~ct
            tv = conv.cast(conv.value(tensor_side), dt)
            if math.isinf(n) or abs(n) >= 1e30:
                add = torch.zeros(keep.shape, dtype=torch.float32)
                add = add.masked_fill(~keep, n)
                m = conv.materialize(c, add, hint=node.name + ".mask")
                m = conv.cast(m, dt)
                return conv.emit("add", [tv, m], dt, shape, hint=node.name)
            cond = conv.materialize(c, keep, hint=node.name + ".cond")
            return conv.emit("where", [cond, tv], dt, shape,
                             {"scalar": float(n)}, hint=node.name)
    cv = conv.value(c)
    an, bn = (_const_number(conv, x) if not isinstance(x, torch.fx.Node) or
              conv.const(x) is not None else None for x in (a, b))
    if an is None and bn is None:
        va = conv.cast(conv.value(a), dt)
        vb = conv.cast(conv.value(b), dt)
        return conv.emit("where", [cv, va, vb], dt, shape, hint=node.name)
    if an is not None and bn is not None:
        vb = conv.emit("full_like", [cv], dt, conv.types[cv][1],
                       {"scalar": bn}, hint=node.name + ".b")
        nc = conv.emit("logical_not", [cv], "bool", conv.types[cv][1],
                       hint=node.name + ".not")
        return conv.emit("where", [nc, vb], dt, shape, {"scalar": an},
                         hint=node.name)
    # The IR's where takes a number as its last operand (attribute
    # 'scalar', infinities included): where(c, x, v) as it is, where(c,
    # v, x) as where(!c, x, v).
    if bn is not None:
        vx = conv.cast(conv.value(a), dt)
        return conv.emit("where", [cv, vx], dt, shape, {"scalar": bn},
                         hint=node.name)
    nc = conv.emit("logical_not", [cv], "bool", conv.types[cv][1],
                   hint=node.name + ".not")
    vx = conv.cast(conv.value(b), dt)
    return conv.emit("where", [nc, vx], dt, shape, {"scalar": an},
                     hint=node.name)


@register("aten.where", "prims.where")
def _where_any(conv, node):
    if len(node.args) != 3:
        raise Unmapped("where(condition) (data-dependent shape)")
    return _where3(conv, node, *node.args)


@register("aten.masked_fill")
def _masked_fill(conv, node):
    """masked_fill(x, mask, v) = where(mask, v, x)."""
    return _where3(conv, node, node.args[1], node.args[2], node.args[0])


def _index_pattern(t):
    """A constant rank-1 index vector as ('range', a, b) (arange(a, b)),
    ('repeat', n, r) (arange(n).repeat_interleave(r)), ('tile', n, r)
    (arange(n).repeat(r)), or None."""
    t = t.reshape(-1).to(torch.int64)
    m = t.numel()
    if m == 0:
        return None
    a = int(t[0])
    if bool((t == torch.arange(a, a + m)).all()):
        return ("range", a, a + m)
    for r in range(2, m + 1):
        if m % r == 0:
            n = m // r
            if bool((t == torch.arange(n).repeat_interleave(r)).all()):
                return ("repeat", n, r)
            if bool((t == torch.arange(n).repeat(r)).all()):
                return ("tile", n, r)
    return None


def _const_index_select(conv, node, v, dim, t, hint):
    """index_select(v, dim, constant indices) as slice / expand + reshape
    when the indices are a range or a repeat (repeat_interleave's GQA
    heads); None otherwise."""
    dt, vshape = conv.types[v]
    p = _index_pattern(t)
    if p is None:
        return None
    if p[0] == "range":
        if p[2] > vshape[dim]:
            return None
        return _slice_of(conv, v, dim, p[1], p[2], hint)
    kind, n, r = p
    if n != vshape[dim]:
        return None
    sh = list(vshape)
    if kind == "repeat":
        ins = sh[:dim + 1] + [1] + sh[dim + 1:]
        exp = sh[:dim + 1] + [r] + sh[dim + 1:]
    else:
        ins = sh[:dim] + [1] + sh[dim:]
        exp = sh[:dim] + [r] + sh[dim:]
    out = list(sh)
    out[dim] = n * r
    x = conv.emit("reshape", [v], dt, tuple(ins), hint=hint + ".r")
    x = conv.emit("expand", [x], dt, tuple(exp), hint=hint + ".e")
    return conv.emit("reshape", [x], dt, tuple(out), hint=hint)


@register("aten.index_select")
def _index_select2(conv, node):
    v = conv.value(node.args[0])
    vdt, vshape = conv.types[v]
    if vshape:
        t = conv.const(_arg(node, 2, "index"))
        if t is not None:
            dim = int(_arg(node, 1, "dim")) % len(vshape)
            out = _const_index_select(conv, node, v, dim, t, node.name)
            if out is not None:
                dt, _ = _result(conv, node)
                return conv.cast(out, dt)
    return _index_select(conv, node)


def _conv_args(node):
    """(x, w, bias, stride, padding, dilation, groups) of a convolution."""
    x, w = node.args[0], node.args[1]
    b = _arg(node, 2, "bias")
    if _name(node) in ("aten.conv2d", "aten.conv1d"):
        n = 2 if _name(node) == "aten.conv2d" else 1
        stride = _arg(node, 3, "stride", [1] * n)
        pad = _arg(node, 4, "padding", [0] * n)
        dil = _arg(node, 5, "dilation", [1] * n)
        groups = _arg(node, 6, "groups", 1)
        if isinstance(pad, str):
            raise Unmapped("padding=%r" % pad)
        return x, w, b, stride, pad, dil, groups, False
    stride, pad, dil, transposed = node.args[3:7]
    return x, w, b, stride, pad, dil, node.args[8], transposed


def _pairs(v, n):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return [int(x) for x in (v * n if len(v) == 1 else v)]


@register("aten.convolution", "aten.conv2d", "aten.conv1d")
def _convolution(conv, node):
    """grouped and depthwise 2-D convolutions to the IR's conv2d (stride,
    padding, dilation, groups, bias), a patch embedding or unit-stride 1x1
    convolution to one GEMM, dense 2-D and all 1-D ones exactly by im2col
    (layout ops and a batched matmul).

    Dense (groups = 1) convolutions stay im2col because their GEMM runs on
    the tensor cores and conv2d's implicit GEMM does not yet: on one H200
    (docs/BENCHMARKS.md, "conv2d on the GPU") the zoo's ResNet block took
    41 us with conv2d against 16 us by im2col, and a ResNet-50 3x3 conv at
    batch 32 462 us against cuDNN's 111; grouped and depthwise ones, where
    im2col is one small GEMM per group, are faster as conv2d (ConvNeXt's
    7x7 depthwise block 17 us against 23, MobileNet-v2's 14 against 19).
    conv2d takes the bias as its third operand. A 2-D stride equal to the
    kernel without padding (a patch embedding, and a 1x1 convolution of
    stride 1) needs no im2col: x is reshaped and transposed into its
    patches for one GEMM, which runs on the tensor cores where conv2d's
    kernel does not. 1-D convolutions (and 2-D ones of an element type
    conv2d does not take) are im2col: zero padding is concatenated around
    x, each of the kh x kw kernel offsets is a strided slice (the IR's
    slice step is the stride, the offset times the dilation its start),
    the offsets are concatenated into patches [N, C, kh*kw, Ho, Wo], and
    one matmul per group multiplies them by the weight reshaped to [g,
    O/g, C/g*kh*kw]. Transposed convolutions stay custom."""
    x, w, b, stride, pad, dil, groups, transposed = _conv_args(node)
    if transposed:
        raise Unmapped("a transposed convolution")
    xv, wv = conv.value(x), conv.value(w)
    dt, xs = conv.types[xv]
    wdt, ws = conv.types[wv]
    if len(xs) not in (3, 4) or len(ws) != len(xs):
        raise Unmapped("a %d-D convolution (1-D and 2-D are mapped)"
                       % (len(xs) - 2))
    h = node.name
    rdt, rshape = _result(conv, node)
    one_d = len(xs) == 3
    nsp = 1 if one_d else 2
    stride, pad, dil = (_pairs(stride, nsp), _pairs(pad, nsp),
                        _pairs(dil, nsp))
    if one_d:
        xv = conv.emit("reshape", [xv], dt, (xs[0], xs[1], 1, xs[2]),
                       hint=h + ".x2d")
        wv = conv.emit("reshape", [wv], wdt, (ws[0], ws[1], 1, ws[2]),
                       hint=h + ".w2d")
        stride, pad, dil = [1] + stride, [0] + pad, [1] + dil
        xs = conv.types[xv][1]
        ws = conv.types[wv][1]
    wv = conv.cast(wv, dt)
    n, c, hh, ww = xs
    o, cg, kh, kw = ws
    g = int(groups)
    if g < 1 or c % g or o % g or cg != c // g:
        raise Unmapped("groups %d with %d channels" % (g, c))
    sh, sw = stride
    ph, pw = pad
    dh, dw = dil
    if [sh, sw] == [kh, kw] and ph == pw == 0 and dh == dw == 1 and \
            g == 1 and hh % kh == 0 and ww % kw == 0:
        # A patch embedding: x's patches by reshape and transpose alone.
        qh, qw = hh // kh, ww // kw
        p = conv.emit("reshape", [xv], dt, (n, c, qh, kh, qw, kw),
                      hint=h + ".patches")
        p = conv.emit("transpose", [p], dt, (n, qh, qw, c, kh, kw),
                      {"perm": [0, 2, 4, 1, 3, 5]}, hint=h + ".t")
        p = conv.emit("reshape", [p], dt, (n * qh * qw, c * kh * kw),
                      hint=h + ".rows")
        wm = conv.emit("reshape", [wv], dt, (o, c * kh * kw), hint=h + ".w")
        wm = conv.emit("transpose", [wm], dt, (c * kh * kw, o),
                       {"perm": [1, 0]}, hint=h + ".wt")
        y = conv.emit("matmul", [p, wm], dt, (n * qh * qw, o),
                      hint=h + ".mm")
        if b is not None:
            y = conv.emit("add", [y, conv.cast(conv.value(b), dt)], dt,
                          (n * qh * qw, o), hint=h + ".bias")
        y = conv.emit("reshape", [y], dt, (n, qh, qw, o), hint=h + ".nhwc")
        y = conv.emit("transpose", [y], dt, (n, o, qh, qw),
                      {"perm": [0, 3, 1, 2]}, hint=h + ".nchw")
        if tuple(conv.types[y][1]) != tuple(rshape):
            y = conv.emit("reshape", [y], dt, rshape, hint=h)
        return conv.cast(y, rdt)
    if not one_d and g > 1 and dt in ("bf16", "f16", "f32"):
        # The IR's own convolution: one kernel, the bias added in it.
        ops = [xv, wv]
        if b is not None:
            ops.append(conv.cast(conv.value(b), dt))
        attrs = {}
        for key, v, default in (("stride", [sh, sw], [1, 1]),
                                ("padding", [ph, pw], [0, 0]),
                                ("dilation", [dh, dw], [1, 1])):
            if v != default:
                attrs[key] = v
        if g != 1:
            attrs["groups"] = g
        hp, wp = hh + 2 * ph, ww + 2 * pw
        ho = (hp - dh * (kh - 1) - 1) // sh + 1
        wo = (wp - dw * (kw - 1) - 1) // sw + 1
        if ho < 1 or wo < 1:
            raise Unmapped("an empty output")
        y = conv.emit("conv2d", ops, dt, (n, o, ho, wo), attrs or None,
                      hint=h)
        if tuple(conv.types[y][1]) != tuple(rshape):
            y = conv.emit("reshape", [y], dt, rshape, hint=h + ".r")
        return conv.cast(y, rdt)
    # Zero padding.
    for dim, p in ((2, ph), (3, pw)):
        if p <= 0:
            continue
        cur = conv.types[xv][1]
        edge = _slice_of(conv, xv, dim, 0, 1, "%s.edge%d" % (h, dim))
        z = conv.emit("full_like", [edge], dt, conv.types[edge][1],
                      {"scalar": 0.0}, hint="%s.zero%d" % (h, dim))
        zs = list(cur)
        zs[dim] = p
        z = conv.emit("expand", [z], dt, tuple(zs), hint="%s.pad%d" % (h, dim))
        full = list(cur)
        full[dim] += 2 * p
        xv = conv.emit("concat", [z, xv, z], dt, tuple(full), {"dim": dim},
                       hint="%s.padded%d" % (h, dim))
    hp, wp = conv.types[xv][1][2:]
    ho = (hp - dh * (kh - 1) - 1) // sh + 1
    wo = (wp - dw * (kw - 1) - 1) // sw + 1
    if ho < 1 or wo < 1:
        raise Unmapped("an empty output")
    cols = []
    for i in range(kh):
        r = xv
        s0 = i * dh
        if not (s0 == 0 and sh == 1 and ho == hp):
            r = conv.emit("slice", [xv], dt, (n, c, ho, wp), {
                "dim": 2, "start": s0, "end": s0 + (ho - 1) * sh + 1,
                "step": sh}, hint="%s.row%d" % (h, i))
        for j in range(kw):
            t = r
            s1 = j * dw
            if not (s1 == 0 and sw == 1 and wo == wp):
                t = conv.emit("slice", [r], dt, (n, c, ho, wo), {
                    "dim": 3, "start": s1, "end": s1 + (wo - 1) * sw + 1,
                    "step": sw}, hint="%s.tap%d_%d" % (h, i, j))
            cols.append(conv.emit("reshape", [t], dt, (n, c, 1, ho, wo),
                                  hint="%s.col%d_%d" % (h, i, j)))
    k = kh * kw
    p = cols[0] if k == 1 else conv.emit(
        "concat", cols, dt, (n, c, k, ho, wo), {"dim": 2},
        hint=h + ".patches")
    ck = cg * k
    p = conv.emit("reshape", [p], dt, (n, g, ck, ho * wo), hint=h + ".pg")
    p = conv.emit("transpose", [p], dt, (g, ck, n, ho * wo),
                  {"perm": [1, 2, 0, 3]}, hint=h + ".pt")
    p = conv.emit("reshape", [p], dt, (g, ck, n * ho * wo), hint=h + ".cols")
    wm = conv.emit("reshape", [wv], dt, (g, o // g, ck), hint=h + ".w")
    y = conv.emit("matmul", [wm, p], dt, (g, o // g, n * ho * wo),
                  hint=h + ".mm")
    y = conv.emit("reshape", [y], dt, (g, o // g, n, ho * wo), hint=h + ".y")
    y = conv.emit("transpose", [y], dt, (n, g, o // g, ho * wo),
                  {"perm": [2, 0, 1, 3]}, hint=h + ".yt")
    y = conv.emit("reshape", [y], dt, (n, o, ho, wo), hint=h + ".nchw")
    if b is not None:
        bv = conv.cast(conv.value(b), dt)
        bv = conv.emit("reshape", [bv], dt, (o, 1, 1), hint=h + ".b")
        y = conv.emit("add", [y, bv], dt, (n, o, ho, wo), hint=h + ".bias")
    if tuple(conv.types[y][1]) != tuple(rshape):
        y = conv.emit("reshape", [y], dt, rshape, hint=h)
    return conv.cast(y, rdt)


# -- the IR's Core ATen pointwise ops, comparisons and logical ops ------------------

for _op in ("log", "erf", "log1p", "expm1", "floor", "ceil", "sign"):
    register("aten." + _op)(_unary(_op))


@register("aten.round")
def _round(conv, node):
    if node.kwargs.get("decimals", 0):
        raise Unmapped("decimals")
    return _unary("round")(conv, node)


for _op in ("fmod", "remainder"):
    register("aten." + _op)(_binary(_op))

_SWAP = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt",
         "ge": "le"}


def _promoted(a, b):
    """The dtype PyTorch compares a and b in (FX nodes or numbers)."""
    ta = a.meta["val"] if isinstance(a, torch.fx.Node) and "val" in a.meta \
        else None
    tb = b.meta["val"] if isinstance(b, torch.fx.Node) and "val" in b.meta \
        else None
    if ta is None and isinstance(a, torch.fx.Node):
        ta = torch.empty(0, dtype=tensor_meta(a)[0])
    if tb is None and isinstance(b, torch.fx.Node):
        tb = torch.empty(0, dtype=tensor_meta(b)[0])
    return torch.result_type(ta if ta is not None else a,
                             tb if tb is not None else b)


def _compare(irop):
    def fn(conv, node):
        a, b = node.args[0], node.args[1]
        _, shape = conv.meta(node)
        cdt = conv.dtype(_promoted(a, b), node.name)
        for x, y, i in ((a, b, 1), (b, a, 0)):
            if isinstance(y, torch.fx.Node) and conv.const(y) is not None \
                    and isinstance(x, torch.fx.Node) and \
                    conv.const(x) is None and \
                    tuple(tensor_meta(x)[1]) == tuple(shape):
                n = _const_number(conv, y)
                if n is not None:
                    if i == 1:
                        b = n
                    else:
                        a = n
        if isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node):
            va = conv.cast(conv.value(a), cdt)
            vb = conv.cast(conv.value(b), cdt)
            return conv.emit(irop, [va, vb], "bool", shape, hint=node.name)
        op = irop
        if not isinstance(a, torch.fx.Node):
            a, b, op = b, a, _SWAP[irop]
        if isinstance(b, bool):
            b = int(b)
        if not isinstance(b, (int, float)):
            raise Unmapped("operand %r" % (b,))
        va = conv.cast(conv.value(a), cdt)
        return conv.emit(op, [va], "bool", shape, {"scalar": float(b)},
                         hint=node.name)
    return fn


for _op in ("eq", "ne", "lt", "le", "gt", "ge"):
    register("aten." + _op)(_compare(_op))


@register("aten.isnan")
def _isnan(conv, node):
    v = conv.value(node.args[0])
    return conv.emit("ne", [v, v], "bool", conv.types[v][1], hint=node.name)


@register("aten.isinf")
def _isinf(conv, node):
    v = conv.value(node.args[0])
    a = conv.emit("abs", [v], conv.types[v][0], conv.types[v][1],
                  hint=node.name + ".abs")
    return conv.emit("eq", [a], "bool", conv.types[v][1],
                     {"scalar": float("inf")}, hint=node.name)


@register("aten.logical_not", "aten.bitwise_not")
def _logical_not(conv, node):
    v = conv.value(node.args[0])
    if _name(node) == "aten.bitwise_not" and conv.types[v][0] != "bool":
        raise Unmapped("bitwise_not of an integer")
    _, shape = conv.meta(node)
    return conv.emit("logical_not", [v], "bool", shape, hint=node.name)


def _logical(irop):
    def fn(conv, node):
        a, b = node.args[0], node.args[1]
        if not all(isinstance(x, torch.fx.Node) for x in (a, b)):
            raise Unmapped("a number operand")
        va, vb = conv.value(a), conv.value(b)
        if _name(node).startswith("aten.bitwise") and not (
                conv.types[va][0] == conv.types[vb][0] == "bool"):
            raise Unmapped("bitwise op on integers")
        _, shape = conv.meta(node)
        return conv.emit(irop, [va, vb], "bool", shape, hint=node.name)
    return fn


register("aten.logical_and", "aten.bitwise_and")(_logical("logical_and"))
register("aten.logical_or", "aten.bitwise_or")(_logical("logical_or"))


@register("aten.gather")
def _gather(conv, node):
    if node.kwargs.get("sparse_grad"):
        pass  # only the gradient
    v = conv.value(node.args[0])
    rank = len(conv.types[v][1])
    if rank == 0:
        raise Unmapped("a rank-0 tensor")
    dim = int(node.args[1]) % rank
    idx = conv.value(node.args[2])
    if conv.types[idx][0] not in ("i32", "i64"):
        raise Unmapped("indices of type %s" % conv.types[idx][0])
    dt, shape = _result(conv, node)
    return conv.cast(conv.emit("gather", [v, idx], conv.types[v][0], shape,
                               {"dim": dim}, hint=node.name), dt)


@register("aten.leaky_relu")
def _leaky_relu(conv, node):
    slope = float(_arg(node, 1, "negative_slope", 0.01))
    dt, shape = _float_result(conv, node)
    v = conv.cast(conv.value(node.args[0]), dt)
    pos = conv.emit("gt", [v], "bool", shape, {"scalar": 0.0},
                    hint=node.name + ".pos")
    neg = conv.emit("mul", [v], dt, shape, {"scalar": slope},
                    hint=node.name + ".neg")
    return conv.emit("where", [pos, v, neg], dt, shape, hint=node.name)


# -- scaled_dot_product_attention (PyTorch 2.x) -------------------------------------


@register("aten.scaled_dot_product_attention",
          "aten._scaled_dot_product_flash_attention_for_cpu",
          "aten._scaled_dot_product_flash_attention",
          "aten._scaled_dot_product_efficient_attention")
def _sdpa(conv, node):
    """SDPA(q, k, v, attn_mask, dropout_p, is_causal, *, scale, enable_gqa):
    the IR's attention {causal, scale} without a mask (is_causal only with
    Sq = Skv: PyTorch aligns its causal mask to the top left, the IR to the
    end of the keys, and the two agree only then); with a mask known only
    at run time (additive, or boolean as 0 / -inf) that broadcasts to
    [B, Hq, Sq, Skv] along whole keys, attention with that mask operand;
    with a constant mask (or a causal Sq != Skv) the same computation spelled out
    -- q k^T * scale (+ the additive mask, or where(mask, s, -inf) for a
    boolean one), softmax, @ v -- which the attention pass turns back into
    attention (causal, or with the constant as its mask). The flash/efficient
    variants (their results are tuples: output first) take the same
    leading arguments."""
    name = _name(node)
    q, k, v = node.args[:3]
    if name.endswith(".scaled_dot_product_attention"):
        mask = _arg(node, 3, "attn_mask")
        p = _arg(node, 4, "dropout_p", 0.0)
        causal = bool(_arg(node, 5, "is_causal", False))
        scale = node.kwargs.get("scale", _arg(node, 6, "scale"))
        gqa = bool(node.kwargs.get("enable_gqa", False))
    elif name == "aten._scaled_dot_product_efficient_attention":
        mask = _arg(node, 3, "attn_bias")
        p = _arg(node, 5, "dropout_p", 0.0)
        causal = bool(_arg(node, 6, "is_causal", False))
        scale = node.kwargs.get("scale")
        gqa = False
    else:
        mask = node.kwargs.get("attn_mask")
        p = _arg(node, 3, "dropout_p", 0.0)
        causal = bool(_arg(node, 4, "is_causal", False))
        scale = node.kwargs.get("scale")
        gqa = False
    if p:
        raise Unmapped("dropout_p = %r (inference has none)" % (p,))
    vq, vk, vv = conv.value(q), conv.value(k), conv.value(v)
    dt, qs = conv.types[vq]
    ks, vs = conv.types[vk][1], conv.types[vv][1]
    if len(qs) != 4 or len(ks) != 4 or tuple(vs) != tuple(ks) or \
            dt not in ("f32", "f16", "bf16") or conv.types[vk][0] != dt or \
            conv.types[vv][0] != dt:
        raise Unmapped("q %s, k %s, v %s (the IR's attention needs [B, H, S, "
                       "D] of one floating type and v shaped as k)"
                       % (list(qs), list(ks), list(vs)))
    b, hq, sq, d = qs
    hkv, skv = ks[1], ks[2]
    if hq % hkv or (hq != hkv and not gqa and
                    name.endswith(".scaled_dot_product_attention")):
        raise Unmapped("%d query heads and %d kv heads without enable_gqa"
                       % (hq, hkv))
    s = float(scale) if scale is not None else 1.0 / math.sqrt(d)
    oshape = (b, hq, sq, d)
    if mask is None and (not causal or sq == skv):
        out = conv.emit("attention", [vq, vk, vv], dt, oshape,
                        {"causal": causal, "scale": s}, hint=node.name)
        return out if name.endswith(".scaled_dot_product_attention") else [out]
    if mask is not None and (not causal or sq == skv) and \
            (tensor_meta(mask)[0] != torch.bool or conv.const(mask) is None):
        # A mask known only at run time: attention's additive mask operand
        # (a boolean one as 0 where it keeps, -inf elsewhere). A constant
        # boolean mask is spelled out below, so that a causal one becomes
        # the causal flag again.
        mv = conv.value(mask)
        md, ms = conv.types[mv]
        if md == "bool":
            zero = conv.emit("mul", [conv.cast(mv, dt)], dt, ms,
                             {"scalar": 0.0}, hint=node.name + ".mask.zero")
            mv = conv.emit("where", [mv, zero], dt, ms,
                           {"scalar": float("-inf")},
                           hint=node.name + ".mask.add")
        elif md not in (dt, "f32"):
            mv = conv.cast(mv, dt)
        new = []
        m4 = mask_operand(conv, mv, (b, hq, sq, skv), b, hq, sq, skv, new,
                          node.name + ".mask")
        if m4 is not None:
            out = conv.emit("attention", [vq, vk, vv, m4], dt, oshape,
                            {"causal": causal, "scale": s}, hint=node.name)
            return out if name.endswith(".scaled_dot_product_attention") \
                else [out]
    # Spelled out.
    h = node.name
    if hq != hkv:
        r = hq // hkv
        parts = []
        for val, hint in ((vk, ".k"), (vv, ".v")):
            x = conv.emit("reshape", [val], dt, (b, hkv, 1, skv, d),
                          hint=h + hint + ".r")
            x = conv.emit("expand", [x], dt, (b, hkv, r, skv, d),
                          hint=h + hint + ".e")
            parts.append(conv.emit("reshape", [x], dt, (b, hq, skv, d),
                                   hint=h + hint + ".g"))
        vk, vv = parts
    kt = conv.emit("transpose", [vk], dt, (b, hq, d, skv),
                   {"perm": [0, 1, 3, 2]}, hint=h + ".kt")
    sc = conv.emit("matmul", [vq, kt], dt, (b, hq, sq, skv), hint=h + ".s")
    sc = conv.emit("mul", [sc], dt, (b, hq, sq, skv), {"scalar": s},
                   hint=h + ".scaled")
    shape = (b, hq, sq, skv)
    if causal:
        keep = torch.ones(sq, skv, dtype=torch.bool).tril()
        add = torch.zeros(sq, skv).masked_fill(~keep, float("-inf"))
        m = conv.cast(conv.materialize(node, add, hint=h + ".causal"), dt)
        sc = conv.emit("add", [sc, m], dt, shape, hint=h + ".causal.add")
    if mask is not None:
        mt = tensor_meta(mask)
        if mt[0] == torch.bool:
            t = conv.const(mask)
            if t is not None:
                add = torch.zeros(t.shape).masked_fill(~t, float("-inf"))
                m = conv.cast(conv.materialize(mask, add, hint=h + ".mask"),
                              dt)
                sc = conv.emit("add", [sc, m], dt, shape, hint=h + ".masked")
            else:
                mv = conv.value(mask)
                sc = conv.emit("where", [mv, sc], dt, shape,
                               {"scalar": float("-inf")}, hint=h + ".masked")
        else:
            mv = conv.cast(conv.value(mask), dt)
            sc = conv.emit("add", [sc, mv], dt, shape, hint=h + ".masked")
    pr = conv.emit("softmax", [sc], dt, shape, hint=h + ".p")
    out = conv.emit("matmul", [pr, vv], dt, oshape, hint=h)
    return out if name.endswith(".scaled_dot_product_attention") else [out]


# -- ops refused on purpose, and why (the op table in docs/IMPORT.md) ---------------

REFUSED = {
    "aten.nonzero": "its result's shape depends on the data",
    "aten.masked_select": "its result's shape depends on the data",
    "aten.unique": "its result's shape depends on the data",
    "aten._local_scalar_dense": ".item() of a value computed at run time: "
    "a data-dependent scalar",
    "aten.rand": "random: no result to check against eager",
    "aten.randn": "random: no result to check against eager",
    "aten.randperm": "random: no result to check against eager",
    "aten.bernoulli": "random: no result to check against eager",
    "aten.resize_": "changes a tensor's shape in place",
    "aten.as_strided": "an arbitrary strided view (no dense equivalent the "
    "IR's layout ops express in general)",
    "aten.diagonal": "a strided view (the IR has no diagonal)",
    "aten.index_put": "writes at indices computed at run time along several "
    "dimensions (scatter covers one dimension; not mapped yet)",
    "aten.atan2": "the IR has no inverse trigonometric functions",
    "aten.asin": "the IR has no inverse trigonometric functions",
    "aten.acos": "the IR has no inverse trigonometric functions",
    "aten.atan": "the IR has no inverse trigonometric functions",
    "aten.asinh": "the IR has no inverse hyperbolic functions",
    "aten.acosh": "the IR has no inverse hyperbolic functions",
    "aten.atanh": "the IR has no inverse hyperbolic functions",
    "aten.bitwise_xor": "integer bit operations (the IR's logical ops are "
    "on bool)",
    "aten.embedding_bag": "bags: offsets computed at run time",
    "aten._embedding_bag": "bags: offsets computed at run time",
    "aten.grid_sampler_2d": "sampling at coordinates computed at run time "
    "with interpolation (not in the IR)",
    "aten.upsample_bilinear2d": "interpolation weights (not mapped yet; a "
    "constant-matrix form would be exact)",
    "aten.col2im": "not in the IR (an inverse im2col: overlapping sums)",
    "aten._cdist_forward": "pairwise distances (not mapped)",
    "aten._pdist_forward": "pairwise distances (not mapped)",
    "aten._fft_r2c": "complex results: the IR has no complex type",
    "aten.max_pool2d_with_indices_backward": "training only",
    "aten.avg_pool2d_backward": "training only",
    "aten.convolution_backward": "training only",
    "aten.embedding_dense_backward": "training only",
    "aten.native_layer_norm_backward": "training only",
    "aten.native_group_norm_backward": "training only",
    "aten._adaptive_avg_pool2d_backward": "training only",
    "aten.sym_size": "symbolic shapes: the importer takes static shapes, "
    "which a static trace never queries",
    "aten.sym_numel": "symbolic shapes: the importer takes static shapes",
    "aten.sym_stride": "symbolic shapes: the importer takes static shapes",
    "aten.sym_storage_offset": "symbolic shapes: the importer takes static "
    "shapes",
    "aten.empty_strided": "uninitialised memory (folded at import where "
    "something fills it)",
    "aten.empty": "uninitialised memory (folded at import where something "
    "fills it)",
    "aten.arange": "a factory: folded at import (refused only beyond the "
    "2^24-element folding bound)",
    "aten.full": "a factory: folded at import (refused only beyond the "
    "2^24-element folding bound)",
    "aten.scalar_tensor": "a factory: folded at import",
    "aten._adaptive_avg_pool3d": "3-D pooling (the 2-D mapping does not "
    "extend to it yet)",
    "aten.avg_pool3d": "3-D pooling (not mapped yet)",
    "aten.max_pool3d_with_indices": "3-D pooling (not mapped yet)",
    "aten.avg_pool1d": "1-D pooling (not mapped yet; F.avg_pool1d traces "
    "to avg_pool2d on 1.13)",
    "aten.adaptive_avg_pool1d": "1-D pooling (not mapped yet)",
}


# -- more Core ATen: reductions by index, pooling, padding, norms ------------------


@register("aten.sum")
def _sum_any(conv, node):
    """sum(x, dims, keepdim, dtype): one IR sum per dimension (all of them
    without dims), in the result's type."""
    dt, shape = _result(conv, node)
    v = conv.cast(conv.value(node.args[0]), dt)
    vshape = conv.types[v][1]
    if not vshape:
        return v
    dims = _dims_of(node, 1, "dim", len(vshape))
    out = _sum_dims(conv, v, dims, bool(_arg(node, 2, "keepdim", False)),
                    node.name)
    if tuple(conv.types[out][1]) != tuple(shape):
        out = conv.emit("reshape", [out], dt, shape, hint=node.name + ".r")
    return out


def _to_last(conv, v, dim, hint):
    """v with dimension dim moved last (a transpose), and the perm."""
    rank = len(conv.types[v][1])
    if dim == rank - 1:
        return v, None
    perm = [d for d in range(rank) if d != dim] + [dim]
    sh = tuple(conv.types[v][1][d] for d in perm)
    return conv.emit("transpose", [v], conv.types[v][0], sh, {"perm": perm},
                     hint=hint), perm


def _top1(conv, node, v, dim, keep, largest, hint):
    """(values, indices) of the largest (smallest) element along dim: the
    IR's topk with k = 1 (ties: the lowest index, as PyTorch's max/argmax
    return the first occurrence)."""
    dt, vshape = conv.types[v]
    rank = len(vshape)
    t, perm = _to_last(conv, v, dim, hint + ".last")
    tsh = conv.types[t][1]
    ksh = tuple(tsh[:-1]) + (1,)
    attrs = {"k": 1}
    if not largest:
        attrs["largest"] = False
    vals, idx = conv.emit_results("topk", [t], [(hint + ".values", dt, ksh),
                                                (hint + ".indices", "i64",
                                                 ksh)], attrs, hint=hint)
    outs = []
    for x, xdt in ((vals, dt), (idx, "i64")):
        if perm is not None:
            inv = [perm.index(d) for d in range(rank)]
            sh = tuple(ksh[i] for i in inv)
            x = conv.emit("transpose", [x], xdt, sh, {"perm": inv},
                          hint=x + ".back")
        if not keep:
            sh = tuple(s for i, s in enumerate(vshape) if i != dim)
            x = conv.emit("reshape", [x], xdt, sh, hint=x + ".squeeze")
        outs.append(x)
    return outs


@register("aten.argmax", "aten.argmin")
def _argmax(conv, node):
    v = conv.value(node.args[0])
    vshape = conv.types[v][1]
    dim = _arg(node, 1, "dim")
    keep = bool(_arg(node, 2, "keepdim", False))
    if dim is None:
        v = conv.emit("reshape", [v], conv.types[v][0], (_numel(vshape),),
                      hint=node.name + ".flat")
        dim, keep = 0, False
    dim = int(dim) % len(conv.types[v][1])
    return _top1(conv, node, v, dim, keep, _name(node) == "aten.argmax",
                 node.name)[1]


@register("aten.max", "aten.min")
def _max_dim(conv, node):
    """max(x, dim, keepdim) -> (values, indices) by topk k = 1; max(x) of
    the whole tensor as a reduction; max(a, b) as maximum."""
    if len(node.args) >= 2 and isinstance(node.args[1], torch.fx.Node):
        return _binary("maximum" if _name(node) == "aten.max"
                       else "minimum")(conv, node)
    v = conv.value(node.args[0])
    largest = _name(node) == "aten.max"
    if len(node.args) < 2 and "dim" not in node.kwargs:
        dt, vshape = conv.types[v]
        flat = conv.emit("reshape", [v], dt, (_numel(vshape),),
                         hint=node.name + ".flat")
        vals, _ = _top1(conv, node, flat, 0, False, largest, node.name)
        return vals
    dim = int(_arg(node, 1, "dim")) % len(conv.types[v][1])
    return _top1(conv, node, v, dim, bool(_arg(node, 2, "keepdim", False)),
                 largest, node.name)


@register("aten.any", "aten.all")
def _any(conv, node):
    """any / all over dims: max / min of the values as 0/1 (f32), back to
    bool."""
    v = conv.value(node.args[0])
    vdt, vshape = conv.types[v]
    b = v if vdt == "bool" else conv.emit("ne", [v], "bool", vshape,
                                          {"scalar": 0.0},
                                          hint=node.name + ".nz")
    f = conv.cast(b, "f32", hint=node.name + ".f")
    if _name(node) == "aten.all":
        f = conv.emit("neg", [f], "f32", vshape, hint=node.name + ".neg")
    dims = _dims_of(node, 1, "dim", len(vshape)) if vshape else []
    sh = list(vshape)
    for d in sorted(dims, reverse=True):
        sh[d] = 1
        f = conv.emit("max", [f], "f32", tuple(sh),
                      {"dim": d - len(sh), "keepdim": True},
                      hint=node.name + ".max")
    if _name(node) == "aten.all":
        f = conv.emit("neg", [f], "f32", tuple(sh), hint=node.name + ".pos")
    _, shape = conv.meta(node)
    if tuple(sh) != tuple(shape):
        f = conv.emit("reshape", [f], "f32", shape, hint=node.name + ".r")
    return conv.emit("ne", [f], "bool", shape, {"scalar": 0.0},
                     hint=node.name)


def _unary_chain(build):
    def fn(conv, node):
        dt, shape = _float_result(conv, node)
        v = conv.cast(conv.value(node.args[0]), dt)
        return build(conv, node.name, v, dt, shape)
    return fn


def _log_base(base):
    def build(conv, h, v, dt, shape):
        lg = conv.emit("log", [v], dt, shape, hint=h + ".ln")
        return conv.emit("mul", [lg], dt, shape,
                         {"scalar": 1.0 / math.log(base)}, hint=h)
    return build


register("aten.log2")(_unary_chain(_log_base(2.0)))
register("aten.log10")(_unary_chain(_log_base(10.0)))


def _trunc_build(conv, h, v, dt, shape):
    a = conv.emit("abs", [v], dt, shape, hint=h + ".abs")
    f = conv.emit("floor", [a], dt, shape, hint=h + ".floor")
    sg = conv.emit("sign", [v], dt, shape, hint=h + ".sign")
    return conv.emit("mul", [sg, f], dt, shape, hint=h)


register("aten.trunc")(_unary_chain(_trunc_build))


def _tan_build(conv, h, v, dt, shape):
    s = conv.emit("sin", [v], dt, shape, hint=h + ".sin")
    c = conv.emit("cos", [v], dt, shape, hint=h + ".cos")
    return conv.emit("div", [s, c], dt, shape, hint=h)


def _hyp_build(sign):
    def build(conv, h, v, dt, shape):
        e = conv.emit("exp", [v], dt, shape, hint=h + ".ep")
        n = conv.emit("neg", [v], dt, shape, hint=h + ".neg")
        en = conv.emit("exp", [n], dt, shape, hint=h + ".en")
        t = conv.emit("sub" if sign < 0 else "add", [e, en], dt, shape,
                      hint=h + ".t")
        return conv.emit("mul", [t], dt, shape, {"scalar": 0.5}, hint=h)
    return build


register("aten.tan")(_unary_chain(_tan_build))
register("aten.sinh")(_unary_chain(_hyp_build(-1)))
register("aten.cosh")(_unary_chain(_hyp_build(1)))


@register("aten.logical_xor")
def _logical_xor(conv, node):
    """a xor b = (a != 0) != (b != 0), as bools."""
    a, b = node.args[0], node.args[1]
    if not all(isinstance(x, torch.fx.Node) for x in (a, b)):
        raise Unmapped("a number operand")
    _, shape = conv.meta(node)
    va, vb = conv.value(a), conv.value(b)
    na = conv.emit("logical_not", [va], "bool", conv.types[va][1],
                   hint=node.name + ".a")
    nb = conv.emit("logical_not", [vb], "bool", conv.types[vb][1],
                   hint=node.name + ".b")
    return conv.emit("ne", [na, nb], "bool", shape, hint=node.name)


@register("aten.elu")
def _elu(conv, node):
    """elu(x, alpha, scale, input_scale) = scale * (x > 0 ? x :
    alpha * expm1(x * input_scale))."""
    alpha = float(_arg(node, 1, "alpha", 1.0))
    scale = float(_arg(node, 2, "scale", 1.0))
    iscale = float(_arg(node, 3, "input_scale", 1.0))
    dt, shape = _float_result(conv, node)
    v = conv.cast(conv.value(node.args[0]), dt)
    h = node.name
    xi = v if iscale == 1 else conv.emit("mul", [v], dt, shape,
                                         {"scalar": iscale}, hint=h + ".in")
    e = conv.emit("expm1", [xi], dt, shape, hint=h + ".expm1")
    e = conv.emit("mul", [e], dt, shape, {"scalar": alpha}, hint=h + ".a")
    pos = conv.emit("gt", [v], "bool", shape, {"scalar": 0.0},
                    hint=h + ".pos")
    y = conv.emit("where", [pos, v, e], dt, shape, hint=h + ".w")
    if scale == 1:
        return y
    return conv.emit("mul", [y], dt, shape, {"scalar": scale}, hint=h)


def _channel_affine(conv, v, w, b, c_dim, hint):
    """v * w + b with w, b of one value per channel (dimension c_dim)."""
    dt, vshape = conv.types[v]
    sh = [1] * len(vshape)
    sh[c_dim] = vshape[c_dim]
    for x, op in ((w, "mul"), (b, "add")):
        if x is None:
            continue
        xv = conv.cast(conv.value(x), dt)
        xv = conv.emit("reshape", [xv], dt, tuple(sh), hint=hint + "." + op)
        v = conv.emit(op, [v, xv], dt, vshape, hint=hint + "." + op + "ed")
    return v


@register("aten.native_group_norm")
def _group_norm(conv, node):
    """native_group_norm(x, w, b, N, C, HxW, group, eps) -> (y, mean, rstd):
    x as [N, G, C/G * HxW], normalised over the last dimension (the IR's
    layernorm), back to x's shape, then the per-channel affine."""
    x, w, b = node.args[:3]
    g, eps = int(node.args[6]), float(node.args[7])
    v = conv.value(x)
    dt, vshape = conv.types[v]
    n, c = vshape[0], vshape[1]
    rest = _numel(vshape) // (n * c)
    if c % g:
        raise Unmapped("%d channels in %d groups" % (c, g))
    r = conv.emit("reshape", [v], dt, (n, g, (c // g) * rest),
                  hint=node.name + ".groups")
    y = conv.emit("layernorm", [r], dt, conv.types[r][1], {"eps": eps},
                  hint=node.name + ".norm")
    y = conv.emit("reshape", [y], dt, vshape, hint=node.name + ".y")
    return [_channel_affine(conv, y, w, b, 1, node.name), None, None]


@register("aten._native_batch_norm_legit_no_training",
          "aten.native_batch_norm", "aten._native_batch_norm_legit")
def _batch_norm(conv, node):
    """Inference batch norm: (x - running_mean) * rsqrt(running_var + eps)
    * w + b per channel (dimension 1)."""
    name = _name(node)
    x, w, b, rm, rv = node.args[:5]
    if name == "aten._native_batch_norm_legit_no_training":
        eps = float(node.args[6])
    else:
        if bool(node.args[5]):
            raise Unmapped("training mode (batch statistics)")
        eps = float(node.args[7])
    v = conv.value(x)
    dt, vshape = conv.types[v]
    sh = [1] * len(vshape)
    sh[1] = vshape[1]
    h = node.name
    mean = conv.emit("reshape", [conv.cast(conv.value(rm), dt)], dt,
                     tuple(sh), hint=h + ".mean")
    var = conv.emit("reshape", [conv.cast(conv.value(rv), dt)], dt,
                    tuple(sh), hint=h + ".var")
    ve = conv.emit("add", [var], dt, tuple(sh), {"scalar": eps},
                   hint=h + ".ve")
    rs = conv.emit("rsqrt", [ve], dt, tuple(sh), hint=h + ".rstd")
    y = conv.emit("sub", [v, mean], dt, vshape, hint=h + ".c")
    y = conv.emit("mul", [y, rs], dt, vshape, hint=h + ".n")
    return [_channel_affine(conv, y, w, b, 1, h), None, None]


def _pad_dim(conv, v, dim, lo, hi, value, hint):
    """v padded along dim with lo / hi elements of value (negative: cut)."""
    dt, sh = conv.types[v]
    if lo < 0 or hi < 0:
        v = _slice_of(conv, v, dim, max(0, -lo), sh[dim] - max(0, -hi),
                      hint + ".cut")
        lo, hi = max(0, lo), max(0, hi)
        dt, sh = conv.types[v]
    parts = []
    for k, where in ((lo, "lo"), (hi, "hi")):
        if k <= 0:
            parts.append(None)
            continue
        edge = _slice_of(conv, v, dim, 0, 1, "%s.%s.edge" % (hint, where))
        z = conv.emit("full_like", [edge], dt, conv.types[edge][1],
                      {"scalar": float(value)}, hint="%s.%s.fill" % (hint,
                                                                    where))
        zs = list(sh)
        zs[dim] = k
        if zs != list(conv.types[z][1]):
            z = conv.emit("expand", [z], dt, tuple(zs),
                          hint="%s.%s" % (hint, where))
        parts.append(z)
    ops = [p for p in (parts[0], v, parts[1]) if p is not None]
    if len(ops) == 1:
        return v
    out = list(sh)
    out[dim] += max(lo, 0) + max(hi, 0)
    return conv.emit("concat", ops, dt, tuple(out), {"dim": dim},
                     hint=hint)


@register("aten.constant_pad_nd", "aten.pad")
def _constant_pad(conv, node):
    """constant_pad_nd(x, pad, value): per dimension from the last, pad[2i]
    before and pad[2i+1] after (negative pads cut), as concat with
    full_like slices."""
    if _name(node) == "aten.pad" and _arg(node, 2, "mode",
                                          "constant") != "constant":
        raise Unmapped("mode %r" % _arg(node, 2, "mode"))
    v = conv.value(node.args[0])
    pad = list(node.args[1])
    value = _arg(node, 2, "value", 0.0) if _name(node) == \
        "aten.constant_pad_nd" else (_arg(node, 3, "value", 0.0) or 0.0)
    rank = len(conv.types[v][1])
    for i in range(len(pad) // 2):
        v = _pad_dim(conv, v, rank - 1 - i, int(pad[2 * i]),
                     int(pad[2 * i + 1]), value or 0.0,
                     "%s.%d" % (node.name, i))
    dt, _ = _result(conv, node)
    return conv.cast(v, dt)


def _index_along(conv, v, dim, idx, hint):
    """v gathered along dim at constant indices idx (a list)."""
    t = torch.tensor(idx, dtype=torch.int64)
    out = _const_index_select(conv, None, v, dim, t, hint)
    if out is not None:
        return out
    dt, sh = conv.types[v]
    name = conv.unique(hint + ".idx")
    conv.graph.inputs.append((name, "i64", (len(idx),),
                              "constant %s (indices, folded at import)"
                              % hint))
    conv.types[name] = ("i64", (len(idx),))
    conv.constants[name] = t
    conv.input_infos.append({
        "ir_name": name, "kind": "constant", "torch_name": name,
        "transposed": False, "dtype": "i64", "shape": [len(idx)]})
    out = list(sh)
    out[dim] = len(idx)
    return conv.emit("index_select", [v, name], dt, tuple(out), {"dim": dim},
                     hint=hint)


@register("aten.reflection_pad1d", "aten.reflection_pad2d",
          "aten.reflection_pad3d", "aten.replication_pad1d",
          "aten.replication_pad2d", "aten.replication_pad3d")
def _index_pad(conv, node):
    """Reflection and replication padding: index_select along each padded
    dimension at constant indices."""
    v = conv.value(node.args[0])
    pad = list(node.args[1])
    rank = len(conv.types[v][1])
    refl = "reflection" in _name(node)
    for i in range(len(pad) // 2):
        d = rank - 1 - i
        n = conv.types[v][1][d]
        lo, hi = int(pad[2 * i]), int(pad[2 * i + 1])
        idx = []
        for j in range(-lo, n + hi):
            if refl:
                k = abs(j)
                k = 2 * (n - 1) - k if k > n - 1 else k
            else:
                k = min(max(j, 0), n - 1)
            idx.append(k)
        v = _index_along(conv, v, d, idx, "%s.%d" % (node.name, i))
    return v


@register("aten.flip")
def _flip(conv, node):
    v = conv.value(node.args[0])
    rank = len(conv.types[v][1])
    for d in node.args[1]:
        d = int(d) % rank
        n = conv.types[v][1][d]
        v = _index_along(conv, v, d, list(range(n - 1, -1, -1)),
                         "%s.%d" % (node.name, d))
    return v


@register("aten.upsample_nearest2d", "aten.upsample_nearest1d")
def _upsample_nearest(conv, node):
    """Nearest upsampling: index_select along each spatial dimension at
    floor(i * in / out) (PyTorch's 'nearest')."""
    v = conv.value(node.args[0])
    _, shape = _result(conv, node)
    rank = len(shape)
    for d in range(2, rank):
        n_in, n_out = conv.types[v][1][d], shape[d]
        if n_in == n_out:
            continue
        idx = [min(int(math.floor(i * (n_in / n_out))), n_in - 1)
               for i in range(n_out)]
        v = _index_along(conv, v, d, idx, "%s.%d" % (node.name, d))
    return v


def _pool(conv, node, v, k, stride, pad, dil, ceil, kind, hint):
    """Max or average pooling over the last two dimensions by im2col
    slices: the taps as a new dimension, reduced by max or sum."""
    dt, xs = conv.types[v]
    if ceil:
        raise Unmapped("ceil_mode")
    kh, kw = k
    sh, sw = stride
    ph, pw = pad
    dh, dw = dil
    fill = float("-inf") if kind == "max" else 0.0
    v = _pad_dim(conv, v, len(xs) - 2, ph, ph, fill, hint + ".ph")
    v = _pad_dim(conv, v, len(xs) - 1, pw, pw, fill, hint + ".pw")
    hp, wp = conv.types[v][1][-2:]
    lead = tuple(conv.types[v][1][:-2])
    ho = (hp - dh * (kh - 1) - 1) // sh + 1
    wo = (wp - dw * (kw - 1) - 1) // sw + 1
    taps = []
    r = len(xs)
    for i in range(kh):
        rows = conv.emit("slice", [v], dt, lead + (ho, wp), {
            "dim": r - 2, "start": i * dh, "end": i * dh + (ho - 1) * sh + 1,
            "step": sh}, hint="%s.r%d" % (hint, i))
        for j in range(kw):
            t = conv.emit("slice", [rows], dt, lead + (ho, wo), {
                "dim": r - 1, "start": j * dw,
                "end": j * dw + (wo - 1) * sw + 1, "step": sw},
                hint="%s.t%d_%d" % (hint, i, j))
            taps.append(conv.emit("reshape", [t], dt, lead + (ho, wo, 1),
                                  hint="%s.c%d_%d" % (hint, i, j)))
    p = taps[0] if len(taps) == 1 else conv.emit(
        "concat", taps, dt, lead + (ho, wo, kh * kw), {"dim": r},
        hint=hint + ".taps")
    red = conv.emit("max" if kind == "max" else "sum", [p], dt,
                    lead + (ho, wo), {"dim": -1}, hint=hint + ".red")
    return red, kh * kw


def _two(v):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return [int(x) for x in (v * 2 if len(v) == 1 else v)]


@register("aten.max_pool2d_with_indices", "aten.max_pool2d")
def _max_pool(conv, node):
    """max_pool2d: the max over each window's taps; the indices result
    (used by unpooling, not inference) stays unmapped."""
    v = conv.value(node.args[0])
    k = _two(node.args[1])
    stride = _two(_arg(node, 2, "stride", None) or k)
    pad = _two(_arg(node, 3, "padding", 0))
    dil = _two(_arg(node, 4, "dilation", 1))
    out, _ = _pool(conv, node, v, k, stride, pad, dil,
                   bool(_arg(node, 5, "ceil_mode", False)), "max", node.name)
    return out if _name(node) == "aten.max_pool2d" else [out, None]


@register("aten.avg_pool2d")
def _avg_pool(conv, node):
    v = conv.value(node.args[0])
    k = _two(node.args[1])
    stride = _two(_arg(node, 2, "stride", None) or k)
    pad = _two(_arg(node, 3, "padding", 0))
    if any(pad) and not bool(_arg(node, 5, "count_include_pad", True)):
        raise Unmapped("count_include_pad=False with padding")
    if _arg(node, 6, "divisor_override") is not None:
        raise Unmapped("divisor_override")
    s, n = _pool(conv, node, v, k, stride, pad, [1, 1],
                 bool(_arg(node, 4, "ceil_mode", False)), "avg", node.name)
    dt, shape = conv.types[s]
    return conv.emit("mul", [s], dt, shape, {"scalar": 1.0 / n},
                     hint=node.name)


@register("aten._adaptive_avg_pool2d", "aten.adaptive_avg_pool2d")
def _adaptive_avg_pool(conv, node):
    """Adaptive average pooling to sizes that divide the input: average
    pooling with kernel = stride = in / out (to 1 x 1: the mean)."""
    v = conv.value(node.args[0])
    dt, xs = conv.types[v]
    oh, ow = _two(node.args[1])
    ih, iw = xs[-2:]
    if ih % oh or iw % ow:
        raise Unmapped("output %dx%d does not divide input %dx%d"
                       % (oh, ow, ih, iw))
    if (oh, ow) == (1, 1):
        r = len(xs)
        return _sum_dims(conv, v, [r - 2, r - 1], True, node.name,
                         1.0 / (ih * iw))
    k = [ih // oh, iw // ow]
    s, n = _pool(conv, node, v, k, k, [0, 0], [1, 1], False, "avg",
                 node.name)
    return conv.emit("mul", [s], dt, conv.types[s][1], {"scalar": 1.0 / n},
                     hint=node.name)


@register("aten.index_put")
def _index_put(conv, node):
    """x[idx] = v (index_put(x, [idx], v, accumulate)) with one index
    tensor on dimension 0: the IR's scatter along 0 (reduce = "add" when
    accumulating), idx and v expanded to the rows they write."""
    x = conv.value(node.args[0])
    idxs = list(node.args[1])
    if len(idxs) != 1 or idxs[0] is None:
        raise Unmapped("%d index tensors (one on dimension 0 is mapped)"
                       % len(idxs))
    it = tensor_meta(idxs[0])
    if it is None or it[0] == torch.bool:
        raise Unmapped("a boolean mask index (data-dependent shape)")
    dt, xs = conv.types[x]
    idx = _indices(conv, conv.value(idxs[0]), node.name + ".ids")
    n = conv.types[idx][1][0]
    rows = (n,) + tuple(xs[1:])
    vals = node.args[2]
    if isinstance(vals, torch.fx.Node):
        vv = conv.cast(conv.value(vals), dt)
        if tuple(conv.types[vv][1]) != rows:
            vv = conv.emit("expand", [vv], dt, rows, hint=node.name + ".v")
    else:
        raise Unmapped("values %r" % (vals,))
    ish = (n,) + (1,) * (len(xs) - 1)
    ix = conv.emit("reshape", [idx], conv.types[idx][0], ish,
                   hint=node.name + ".i")
    if rows != ish:
        ix = conv.emit("expand", [ix], conv.types[idx][0], rows,
                       hint=node.name + ".ie")
    attrs = {"dim": 0}
    if bool(_arg(node, 3, "accumulate", False)):
        attrs["reduce"] = "add"
    return conv.emit("scatter", [x, ix, vv], dt, xs, attrs, hint=node.name)


@register("aten.native_dropout")
def _native_dropout(conv, node):
    """native_dropout(x, p, train): the identity when not training (and the
    keep mask all ones)."""
    if _arg(node, 2, "train", True) not in (False, None):
        raise Unmapped("training mode")
    v = conv.value(node.args[0])
    return [v, None]


@register("aten.floor_divide")
def _floor_divide(conv, node):
    dt, shape = _result(conv, node)
    q = _binary("div")(conv, node)
    return conv.emit("floor", [q], dt, shape, hint=node.name + ".floor")
