"""Attention with an additive mask, written as models write it, for
attention-mask.mir: each becomes the IR's attention with its mask operand,
and the fp64 interpreter matches eager."""
import torch
import torch.nn as nn


def _repeat_kv(x, rep):
    """[L, kv, hd] -> [L, kv * rep, hd] (the gallery's repeat_kv)."""
    n, kv, hd = x.shape
    return x[:, :, None, :].expand(n, kv, rep, hd).reshape(n, kv * rep, hd)


class GalleryAttention(nn.Module):
    """The gallery's Llama attention (examples/torch/layers.py) without its
    norm, rotary and collectives: a KV cache, repeat_kv then the heads moved
    before the tokens, bmm, a scale, softmax in fp32 over the scores plus
    an additive mask input [T, C + T], bmm."""

    def __init__(self, hidden=64, heads=4, kv_heads=2):
        super().__init__()
        self.hd, self.nh, self.nkv = hidden // heads, heads, kv_heads
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(hidden, kv_heads * self.hd, bias=False)

    def forward(self, x, k_cache, v_cache, mask):
        t = x.shape[0]
        q = self.q(x).view(t, self.nh, self.hd)
        k = torch.cat([k_cache, self.k(x).view(t, self.nkv, self.hd)], 0)
        v = torch.cat([v_cache, self.v(x).view(t, self.nkv, self.hd)], 0)
        rep = self.nh // self.nkv
        k = _repeat_kv(k, rep).transpose(0, 1)
        v = _repeat_kv(v, rep).transpose(0, 1)
        q = q.transpose(0, 1)
        scores = torch.bmm(q, k.transpose(1, 2)) * (self.hd ** -0.5)
        p = torch.softmax(scores.float() + mask, dim=-1).to(x.dtype)
        return torch.bmm(p, v).transpose(0, 1).reshape(t, self.nh * self.hd)


class CausalPadding(nn.Module):
    """A causal constant (triu of -inf) and a padding mask input [B, S]
    turned into [B, 1, 1, S] with finfo.min: causal plus the mask operand."""

    def __init__(self, hidden=32, heads=4):
        super().__init__()
        self.h, self.d = heads, hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)

    def forward(self, x, keep):
        b, s, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=-1)
        q, k, v = (t.view(b, s, self.h, self.d).transpose(1, 2)
                   for t in (q, k, v))
        w = torch.matmul(q, k.transpose(-1, -2)) / self.d ** 0.5
        causal = torch.full((s, s), float("-inf")).triu(1)
        pad = (1.0 - keep[:, None, None, :]) * torch.finfo(x.dtype).min
        w = w + causal + pad
        y = torch.softmax(w, dim=-1) @ v
        return y.transpose(1, 2).reshape(b, s, c)


def gallery():
    # bf16 as the gallery's: the softmax's casts to and from fp32 are real.
    return GalleryAttention().to(torch.bfloat16)


def causal_padding():
    return CausalPadding()
