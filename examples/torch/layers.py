"""Building blocks of the gallery, written as their reference
implementations write them (HF transformers, Megatron-LM, vLLM), with
per-rank (sharded) weights and mtsched_torch.collectives for communication.

Every module takes ``device`` and ``dtype`` so it can be built on the meta
device (no memory) for tracing, and declares ``mtsched_groups`` (process
group name -> size) for the importer.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from mtsched_torch import collectives as C


def linear(n_in, n_out, bias, device, dtype):
    return nn.Linear(n_in, n_out, bias=bias, device=device, dtype=dtype)


class RMSNorm(nn.Module):
    """LlamaRMSNorm: normalise in fp32, cast back, scale."""

    def __init__(self, hidden, eps, device, dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden, device=device,
                                              dtype=dtype))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        h = x.to(torch.float32)
        var = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(var + self.eps)
        return self.weight * h.to(dtype)


class GatedMLP(nn.Module):
    """SwiGLU MLP: down(silu(gate(x)) * up(x)), column/row parallel."""

    def __init__(self, hidden, inter, device, dtype):
        super().__init__()
        self.gate_proj = linear(hidden, inter, False, device, dtype)
        self.up_proj = linear(hidden, inter, False, device, dtype)
        self.down_proj = linear(inter, hidden, False, device, dtype)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class TPMLPBlock(nn.Module):
    """x + all_reduce(mlp(rmsnorm(x))): a Llama MLP block, tensor parallel
    over ``tp`` ranks (intermediate size split). Input [tokens, hidden]."""

    def __init__(self, hidden, inter, tp, eps=1e-5, device=None,
                 dtype=torch.bfloat16):
        super().__init__()
        assert inter % tp == 0
        self.tp = tp
        self.norm = RMSNorm(hidden, eps, device, dtype)
        self.mlp = GatedMLP(hidden, inter // tp, device, dtype)
        self.mtsched_groups = {"tp": tp}

    def forward(self, x):
        y = self.mlp(self.norm(x))
        return x + C.all_reduce(y, "tp", self.tp)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, rep):
    """[L, kv, hd] -> [L, kv * rep, hd], each head repeated (HF's repeat_kv)."""
    n, kv, hd = x.shape
    return x[:, :, None, :].expand(n, kv, rep, hd).reshape(n, kv * rep, hd)


class TPAttentionBlock(nn.Module):
    """x + all_reduce(o_proj(attention(rmsnorm(x)))): Llama grouped-query
    attention with rotary embeddings and a KV cache, heads split over ``tp``
    ranks. Inputs: x [T, hidden], cos/sin [T, head_dim], the cache's keys
    and values [C, kv_heads/tp, head_dim] and an additive mask [T, C+T]."""

    def __init__(self, hidden, heads, kv_heads, tp, eps=1e-5, device=None,
                 dtype=torch.bfloat16):
        super().__init__()
        assert heads % tp == 0 and kv_heads % tp == 0
        self.tp = tp
        self.hd = hidden // heads
        self.nh = heads // tp
        self.nkv = kv_heads // tp
        self.norm = RMSNorm(hidden, eps, device, dtype)
        self.q_proj = linear(hidden, self.nh * self.hd, False, device, dtype)
        self.k_proj = linear(hidden, self.nkv * self.hd, False, device, dtype)
        self.v_proj = linear(hidden, self.nkv * self.hd, False, device, dtype)
        self.o_proj = linear(self.nh * self.hd, hidden, False, device, dtype)
        self.mtsched_groups = {"tp": tp}

    def forward(self, x, cos, sin, k_cache, v_cache, mask):
        t = x.shape[0]
        h = self.norm(x)
        q = self.q_proj(h).view(t, self.nh, self.hd)
        k = self.k_proj(h).view(t, self.nkv, self.hd)
        v = self.v_proj(h).view(t, self.nkv, self.hd)
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * c + rotate_half(q) * s
        k = k * c + rotate_half(k) * s
        k = torch.cat([k_cache, k], dim=0)
        v = torch.cat([v_cache, v], dim=0)
        rep = self.nh // self.nkv
        k = repeat_kv(k, rep).transpose(0, 1)  # [nh, C+T, hd]
        v = repeat_kv(v, rep).transpose(0, 1)
        q = q.transpose(0, 1)  # [nh, T, hd]
        scores = torch.bmm(q, k.transpose(1, 2)) * (self.hd ** -0.5)
        p = torch.softmax(scores.float() + mask, dim=-1).to(x.dtype)
        o = torch.bmm(p, v).transpose(0, 1).reshape(t, self.nh * self.hd)
        return x + C.all_reduce(self.o_proj(o), "tp", self.tp)


class TPDecoderLayer(nn.Module):
    """A Llama decoder layer: the attention block, then the MLP block."""

    def __init__(self, hidden, inter, heads, kv_heads, tp, eps=1e-5,
                 device=None, dtype=torch.bfloat16):
        super().__init__()
        self.attn = TPAttentionBlock(hidden, heads, kv_heads, tp, eps, device,
                                     dtype)
        self.mlp = TPMLPBlock(hidden, inter, tp, eps, device, dtype)
        self.mtsched_groups = {"tp": tp}

    def forward(self, x, cos, sin, k_cache, v_cache, mask):
        return self.mlp(self.attn(x, cos, sin, k_cache, v_cache, mask))


class SPMLPBlock(nn.Module):
    """Megatron-LM sequence parallelism: the residual stream is split along
    tokens; norm on the shard, all_gather to the full sequence, column- then
    row-parallel MLP (GeLU, biases), reduce_scatter back to the shard, add.
    Input [tokens/tp, hidden]."""

    def __init__(self, hidden, ffn, tp, eps=1e-5, device=None,
                 dtype=torch.bfloat16):
        super().__init__()
        self.tp = tp
        self.norm = RMSNorm(hidden, eps, device, dtype)
        self.fc1 = linear(hidden, ffn // tp, True, device, dtype)
        self.fc2 = linear(ffn // tp, hidden, False, device, dtype)
        self.fc2_bias = nn.Parameter(torch.zeros(hidden, device=device,
                                                 dtype=dtype))
        self.mtsched_groups = {"tp": tp}

    def forward(self, x):
        h = C.all_gather(self.norm(x), 0, "tp", self.tp)
        y = self.fc2(F.gelu(self.fc1(h)))
        # Megatron adds the row-parallel bias after the reduction.
        y = C.reduce_scatter(y, 0, "tp", self.tp) + self.fc2_bias
        return x + y


class EPMoEBlock(nn.Module):
    """Expert-parallel MoE block (Mixtral, DeepSeek-MoE) with dense
    dispatch: top-k softmax routing on every rank, every token sent to every
    expert rank with one all_to_all (chunk r to rank r), the rank's experts
    run on all received tokens as one batched GEMM, a second all_to_all
    returns the outputs, and the gates (zero for unselected experts) weight
    and sum them. Dense dispatch computes what capacity-based dispatch
    computes, with static shapes. ``shared`` shared experts (DeepSeek) run
    replicated. Input [tokens, hidden]."""

    def __init__(self, hidden, inter, experts, top_k, ep, shared=0,
                 shared_inter=None, norm_topk=True, eps=1e-5, device=None,
                 dtype=torch.bfloat16):
        super().__init__()
        assert experts % ep == 0
        self.ep, self.e, self.k = ep, experts, top_k
        self.el = experts // ep
        self.norm_topk = norm_topk
        self.norm = RMSNorm(hidden, eps, device, dtype)
        self.gate = linear(hidden, experts, False, device, dtype)
        # Local experts' weights, stacked: [E_local, in, out].
        self.w_gate = nn.Parameter(torch.empty(self.el, hidden, inter,
                                               device=device, dtype=dtype))
        self.w_up = nn.Parameter(torch.empty(self.el, hidden, inter,
                                             device=device, dtype=dtype))
        self.w_down = nn.Parameter(torch.empty(self.el, inter, hidden,
                                               device=device, dtype=dtype))
        self.shared = (GatedMLP(hidden, (shared_inter or inter) * shared,
                                device, dtype) if shared else None)
        self.mtsched_groups = {"ep": ep}

    def forward(self, x):
        t, hdim = x.shape
        h = self.norm(x)
        probs = torch.softmax(self.gate(h).float(), dim=-1)
        topv, topi = torch.topk(probs, self.k, dim=-1)
        if self.norm_topk:
            topv = topv / topv.sum(-1, keepdim=True)
        gates = torch.zeros_like(probs).scatter(1, topi, topv)  # [T, E]
        # Every token to every expert: [ep, E_local, T, H] -> all_to_all.
        send = h.unsqueeze(0).expand(self.e, t, hdim).reshape(self.e * t, hdim)
        recv = C.all_to_all(send, 0, "ep", self.ep)
        # recv chunk r holds rank r's tokens for my experts: [E_local, ep*T, H].
        recv = recv.view(self.ep, self.el, t, hdim).transpose(0, 1).reshape(
            self.el, self.ep * t, hdim)
        y = torch.bmm(F.silu(torch.bmm(recv, self.w_gate)) *
                      torch.bmm(recv, self.w_up), self.w_down)
        y = y.view(self.el, self.ep, t, hdim).transpose(0, 1).reshape(
            self.e * t, hdim)
        back = C.all_to_all(y, 0, "ep", self.ep).view(self.e, t, hdim)
        w = gates.t().to(x.dtype).unsqueeze(-1)  # [E, T, 1]
        out = (back * w).sum(0)
        if self.shared is not None:
            out = out + self.shared(h)
        return x + out
