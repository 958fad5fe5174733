"""Gallery factories: the real configurations of Llama-3-8B / 70B,
Mixtral-8x7B, a DeepSeek-MoE block and a Megatron sequence-parallel block.

Each factory takes ``world_size`` (the tensor- or expert-parallel degree:
the per-rank weights are sharded by it), ``device`` and ``dtype``, and
returns an nn.Module; ``GALLERY`` in gallery.py says which inputs each takes
at decode and prefill sizes.
"""

import torch

from layers import EPMoEBlock, SPMLPBlock, TPDecoderLayer, TPMLPBlock

BF16 = torch.bfloat16

# name: hidden, intermediate, heads, kv heads, rms eps (from the models'
# config.json files)
LLAMA3 = {
    "8b": dict(hidden=4096, inter=14336, heads=32, kv_heads=8, eps=1e-5),
    "70b": dict(hidden=8192, inter=28672, heads=64, kv_heads=8, eps=1e-5),
}


def llama3_8b_mlp(world_size=2, device=None, dtype=BF16):
    """Llama-3-8B MLP block (RMSNorm, SwiGLU, all_reduce, residual), TP."""
    c = LLAMA3["8b"]
    return TPMLPBlock(c["hidden"], c["inter"], world_size, c["eps"], device,
                      dtype)


def llama3_70b_mlp(world_size=8, device=None, dtype=BF16):
    """Llama-3-70B MLP block, TP."""
    c = LLAMA3["70b"]
    return TPMLPBlock(c["hidden"], c["inter"], world_size, c["eps"], device,
                      dtype)


def llama3_8b_layer(world_size=2, device=None, dtype=BF16):
    """Llama-3-8B decoder layer (GQA attention with rotary and a KV cache,
    then the MLP block), TP."""
    return TPDecoderLayer(**_layer_args("8b", world_size, device, dtype))


def llama3_70b_layer(world_size=8, device=None, dtype=BF16):
    """Llama-3-70B decoder layer, TP."""
    return TPDecoderLayer(**_layer_args("70b", world_size, device, dtype))


def _layer_args(size, tp, device, dtype):
    c = LLAMA3[size]
    return dict(hidden=c["hidden"], inter=c["inter"], heads=c["heads"],
                kv_heads=c["kv_heads"], tp=tp, eps=c["eps"], device=device,
                dtype=dtype)


def mixtral_8x7b_moe(world_size=8, device=None, dtype=BF16):
    """Mixtral-8x7B sparse MoE block: 8 experts of 14336, top-2, expert
    parallel (8 / world_size experts per rank)."""
    return EPMoEBlock(4096, 14336, experts=8, top_k=2, ep=world_size,
                      norm_topk=True, eps=1e-5, device=device, dtype=dtype)


def deepseek_moe(world_size=8, device=None, dtype=BF16):
    """DeepSeek-V2-Lite MoE block: 64 routed experts of 1408, top-6, two
    shared experts, expert parallel."""
    return EPMoEBlock(2048, 1408, experts=64, top_k=6, ep=world_size,
                      shared=2, norm_topk=False, eps=1e-6, device=device,
                      dtype=dtype)


def megatron_sp_mlp(world_size=8, device=None, dtype=BF16):
    """Megatron-LM sequence-parallel MLP block with GPT-3 175B sizes (hidden
    12288, ffn 49152; RMSNorm for LayerNorm)."""
    return SPMLPBlock(12288, 49152, world_size, 1e-5, device, dtype)
