"""Tiny models for the importer's lit tests (CPU, seconds)."""

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                "..", "examples", "torch"))
from layers import SPMLPBlock, TPMLPBlock  # noqa: E402

from mtsched_torch import collectives as C  # noqa: E402


def tiny_mlp(world_size=1, device=None, dtype=torch.float32):
    """A Llama MLP block with hidden 64, intermediate 256."""
    return TPMLPBlock(64, 256, world_size, 1e-5, device, dtype)


def tiny_sp(world_size=1, device=None, dtype=torch.float32):
    """A Megatron sequence-parallel block with hidden 64, ffn 256."""
    return SPMLPBlock(64, 256, world_size, 1e-5, device, dtype)


class Softmaxy(nn.Module):
    """Linear with bias, gelu, softmax, a cast, and an op with no mapping."""

    def __init__(self, device=None, dtype=torch.float32):
        super().__init__()
        self.fc = nn.Linear(32, 16, device=device, dtype=dtype)

    def forward(self, x):
        y = torch.softmax(F.gelu(self.fc(x)), dim=-1)
        return y.to(torch.bfloat16), torch.atan(y)


def softmaxy(world_size=1, device=None, dtype=torch.float32):
    return Softmaxy(device, dtype)


class Patterns(nn.Module):
    """Spellings the importer recognises: RMSNorm with x * x and sum / N,
    silu as x * sigmoid(x), an identity reshape, a bf16 * f32 promotion."""

    def __init__(self, device=None, dtype=torch.float32):
        super().__init__()
        self.w = nn.Parameter(torch.ones(32, device=device, dtype=dtype))
        self.scale = nn.Parameter(torch.ones(32, device=device,
                                             dtype=torch.float32))

    def forward(self, x):
        h = x.float()
        var = (h * h).sum(-1, keepdim=True) / 32
        n = (h * torch.rsqrt(var + 1e-6)).to(x.dtype) * self.w
        s = n * torch.sigmoid(n)
        s = s.reshape(s.shape[0], 32)
        return s * self.scale


def patterns(world_size=1, device=None, dtype=torch.bfloat16):
    return Patterns(device, dtype)


class Layouts(nn.Module):
    """The layout ops and the newer pointwise ops as models spell them:
    view/reshape/unsqueeze, transpose and permute, chunk (split), slicing,
    select, cat, expand; rsqrt, sin, cos, sigmoid, tanh, abs, maximum,
    minimum. Every one of them maps to an IR op."""

    def __init__(self, device=None, dtype=torch.float32):
        super().__init__()
        self.fc = nn.Linear(32, 64, bias=False, device=device, dtype=dtype)

    def forward(self, x, cos, sin):
        t = x.shape[0]
        q = self.fc(x).view(t, 4, 16)
        a, b = q.chunk(2, dim=-1)
        r = q * cos.unsqueeze(1) + torch.cat((-b, a), dim=-1) * sin.unsqueeze(1)
        h = r.transpose(0, 1).permute(0, 2, 1).reshape(4 * 16, t)
        s = h[8:40, 1:5] + h[:32, :4].abs()
        e = r[:, :, None, :].expand(t, 4, 2, 16).reshape(t, 8, 16)
        g = torch.rsqrt(torch.sigmoid(e) + e.abs()) * torch.tanh(e.select(1, 2)).unsqueeze(1)
        m = torch.minimum(torch.maximum(s, s.sin()), s.cos() + s)
        return m, g.cos()


def layouts(world_size=1, device=None, dtype=torch.float32):
    return Layouts(device, dtype)



class Gathers(nn.Module):
    """Embedding lookups and index_select, as a decoder's first layer and a
    MoE layer's token gather spell them."""

    def __init__(self, device=None, dtype=torch.float32):
        super().__init__()
        self.emb = nn.Embedding(50, 32, device=device, dtype=dtype)
        self.fc = nn.Linear(32, 16, bias=False, device=device, dtype=dtype)

    def forward(self, ids, pick):
        h = self.emb(ids)                       # [2, 4, 32] from ids [2, 4]
        t = h.reshape(8, 32).index_select(0, pick)
        y = self.fc(torch.sigmoid(t))
        return y.index_select(1, pick[:3]), h.sum(-1)


def gathers(world_size=1, device=None, dtype=torch.float32):
    return Gathers(device, dtype)


class Router(nn.Module):
    """A MoE router: the top experts of each token and their weights, the
    tokens ordered by expert, the chosen experts' rows gathered, and the
    dense gate matrix and expert mask scattered."""

    def __init__(self, device=None, dtype=torch.float32):
        super().__init__()
        self.gate = nn.Linear(32, 8, bias=False, device=device, dtype=dtype)
        self.experts = nn.Parameter(torch.randn(8, 16, device=device,
                                                dtype=dtype))

    def forward(self, x):
        probs = torch.softmax(self.gate(x), dim=-1)
        w, e = torch.topk(probs, 2)
        w = w / w.sum(dim=-1, keepdim=True)
        flat = e.reshape(-1)
        order = torch.sort(flat, stable=True)[1]  # ties in index order, as the IR
        ranked, _ = torch.sort(probs, dim=-1, descending=True)
        rows = self.experts.index_select(0, flat)
        # The dense gate matrix and the chosen-expert mask: zeros with the
        # weights (or ones) scattered in.
        gates = torch.zeros_like(probs).scatter(1, e, w)
        mask = torch.zeros_like(probs).scatter(1, e, 1.0)
        # Each token's place in its experts' queues, and the experts' loads
        # (integer running sums).
        place = torch.cumsum(mask, dim=0)
        load = torch.cumsum(e, dim=-1)
        # Combines: the gates summed into place, rows of x added back to
        # the tokens they came from (many to one), and rows written back in
        # a permuted order (distinct indices, as index_copy needs).
        summed = torch.zeros_like(probs).scatter_add(1, e, w)
        tok = flat + 8
        back = torch.zeros_like(x).index_add(0, tok, x.index_select(0, tok))
        x2 = torch.cat([x, x])
        perm = x2.index_copy(0, order, x2 * 2)
        return (w, order, ranked, rows, gates, mask, place, load, summed, back,
                perm)


def router(world_size=1, device=None, dtype=torch.float32):
    return Router(device, dtype)
