"""PyTorch 2.x's aten.scaled_dot_product_attention on PyTorch 1.13 (which
has none): the same schema and semantics as a torch.library op, mapped by
the importer exactly as the aten op is, so that the mapping is tested on
the CPU CI. Eager math: PyTorch's (is_causal aligned to the top left,
boolean masks keep where true, additive masks add)."""

import math

import torch
import torch.nn as nn

from mtsched_torch import opmap

_LIB = None
if hasattr(torch.ops.aten, "scaled_dot_product_attention") and False:
    sdpa = torch.ops.aten.scaled_dot_product_attention
else:
    _LIB = torch.library.Library("mtsched_sdpa", "DEF")
    _LIB.define("scaled_dot_product_attention(Tensor query, Tensor key, "
                "Tensor value, Tensor? attn_mask=None, float dropout_p=0.0, "
                "bool is_causal=False, *, float? scale=None, "
                "bool enable_gqa=False) -> Tensor")

    def _math(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False,
              scale=None, enable_gqa=False):
        s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
        if enable_gqa:
            r = q.shape[1] // k.shape[1]
            k = k.repeat_interleave(r, 1)
            v = v.repeat_interleave(r, 1)
        w = q @ k.transpose(-2, -1) * s
        if is_causal:
            keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool,
                              device=q.device).tril()
            w = w.masked_fill(~keep, float("-inf"))
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                w = w.masked_fill(~attn_mask, float("-inf"))
            else:
                w = w + attn_mask
        return w.softmax(-1) @ v

    def _meta(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False,
              scale=None, enable_gqa=False):
        return q.new_empty(q.shape[:-1] + (v.shape[-1],))

    _LIB.impl("scaled_dot_product_attention", _math, "CPU")
    _LIB.impl("scaled_dot_product_attention", _meta, "Meta")
    sdpa = torch.ops.mtsched_sdpa.scaled_dot_product_attention
    opmap.OPS["mtsched_sdpa.scaled_dot_product_attention"] = \
        opmap.OPS["aten.scaled_dot_product_attention"]


class Attn(nn.Module):
    """Projections around an SDPA call with the given flags."""

    def __init__(self, mask=None, causal=False, scale=None, gqa=False,
                 hidden=32, heads=4):
        super().__init__()
        self.heads, self.kv = heads, heads // 2 if gqa else heads
        self.d = hidden // heads
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, self.kv * self.d, bias=False)
        self.v = nn.Linear(hidden, self.kv * self.d, bias=False)
        self.mask, self.causal, self.scale, self.gqa = mask, causal, scale, gqa

    def forward(self, x, *extra):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.heads, self.d).transpose(1, 2)
        k = self.k(x).view(b, s, self.kv, self.d).transpose(1, 2)
        v = self.v(x).view(b, s, self.kv, self.d).transpose(1, 2)
        m = None
        if self.mask == "bool-const":
            m = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        elif self.mask == "bool-window":
            i = torch.arange(s, device=x.device)
            m = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - 3)
        elif self.mask == "additive-input":
            m = extra[0]
        elif self.mask == "bool-input":
            m = extra[0] >= 0
        y = sdpa(q, k, v, m, 0.0, self.causal, scale=self.scale,
                 enable_gqa=self.gqa)
        return y.transpose(1, 2).reshape(b, s, -1)


def causal():
    return Attn(causal=True)


def scaled_gqa():
    return Attn(scale=0.3, gqa=True)


def bool_const():
    return Attn(mask="bool-const")


def bool_window():
    return Attn(mask="bool-window")


def additive_input():
    return Attn(mask="additive-input")


def bool_input():
    return Attn(mask="bool-input")
