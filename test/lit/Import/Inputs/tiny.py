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
        return y.to(torch.bfloat16), torch.tanh(y)


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
