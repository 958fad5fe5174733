"""Decoder blocks written the way their upstream projects write them
(nanoGPT / Hugging Face GPT-2, HF Llama, Qwen2, Gemma, Mistral, GPT-J).
Small sizes: the zoo test runs them on the CPU."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


# -- GPT-2 (nanoGPT's CausalSelfAttention, HF's gelu_new) ---------------------


class NewGELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(
            math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(0.1)
        self.resid_dropout = nn.Dropout(0.1)
        self.n_head = n_head
        self.n_embd = n_embd
        self.register_buffer("bias", torch.tril(
            torch.ones(block_size, block_size)).view(1, 1, block_size,
                                                     block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class GPT2Block(nn.Module):
    def __init__(self, n_embd=64, n_head=4, block_size=64):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = GPT2Attention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.ModuleDict(dict(
            c_fc=nn.Linear(n_embd, 4 * n_embd),
            c_proj=nn.Linear(4 * n_embd, n_embd),
            act=NewGELU(), dropout=nn.Dropout(0.1)))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        m = self.mlp
        x = x + m.dropout(m.c_proj(m.act(m.c_fc(self.ln_2(x)))))
        return x


# -- Llama (Hugging Face modeling_llama) ------------------------------------------


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance +
                                                    self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, position_ids):
        inv_freq = self.inv_freq[None, :, None].float().expand(
            position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        freqs = (inv_freq @ pos).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(
        batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen,
                                 head_dim)


class LlamaAttention(nn.Module):
    def __init__(self, hidden=64, heads=4, kv_heads=2, bias=False,
                 gqa="repeat_kv", window=None):
        super().__init__()
        self.head_dim = hidden // heads
        self.num_heads = heads
        self.num_key_value_heads = kv_heads
        self.num_key_value_groups = heads // kv_heads
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.rotary_emb = LlamaRotaryEmbedding(self.head_dim)
        self.gqa = gqa
        self.window = window

    def _mask(self, q_len, dtype, device):
        mask = torch.full((q_len, q_len), torch.finfo(dtype).min,
                          device=device)
        mask = torch.triu(mask, diagonal=1)
        if self.window is not None:
            # Mistral: a key more than `window` tokens back is masked too.
            old = torch.tril(torch.ones(q_len, q_len, device=device,
                                        dtype=torch.bool),
                             diagonal=-self.window)
            mask = mask.masked_fill(old, torch.finfo(dtype).min)
        return mask[None, None, :, :]

    def forward(self, hidden_states, position_ids):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)
        query_states = query_states.view(bsz, q_len, self.num_heads,
                                         self.head_dim).transpose(1, 2)
        key_states = key_states.view(bsz, q_len, self.num_key_value_heads,
                                     self.head_dim).transpose(1, 2)
        value_states = value_states.view(bsz, q_len, self.num_key_value_heads,
                                         self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(value_states, position_ids)
        query_states, key_states = apply_rotary_pos_emb(query_states,
                                                        key_states, cos, sin)
        if self.gqa == "repeat_interleave":  # Qwen2's older code
            key_states = key_states.repeat_interleave(
                self.num_key_value_groups, dim=1)
            value_states = value_states.repeat_interleave(
                self.num_key_value_groups, dim=1)
        else:
            key_states = repeat_kv(key_states, self.num_key_value_groups)
            value_states = repeat_kv(value_states, self.num_key_value_groups)
        if HAS_SDPA and self.window is None:
            attn_output = F.scaled_dot_product_attention(
                query_states, key_states, value_states, is_causal=q_len > 1)
        else:
            attn_weights = torch.matmul(query_states, key_states.transpose(
                2, 3)) / math.sqrt(self.head_dim)
            attn_weights = attn_weights + self._mask(
                q_len, attn_weights.dtype, attn_weights.device)
            attn_weights = nn.functional.softmax(
                attn_weights, dim=-1, dtype=torch.float32).to(
                    query_states.dtype)
            attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, q_len, -1)
        return self.o_proj(attn_output)


class LlamaMLP(nn.Module):
    def __init__(self, hidden=64, inter=128, act="silu", bias=False):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=bias)
        self.up_proj = nn.Linear(hidden, inter, bias=bias)
        self.down_proj = nn.Linear(inter, hidden, bias=bias)
        self.act = act

    def forward(self, x):
        g = self.gate_proj(x)
        if self.act == "gelu_pytorch_tanh":
            g = F.gelu(g, approximate="tanh")
        else:
            g = F.silu(g)
        return self.down_proj(g * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, hidden=64, heads=4, kv_heads=2, inter=128,
                 attn_bias=False, gqa="repeat_kv", window=None):
        super().__init__()
        self.self_attn = LlamaAttention(hidden, heads, kv_heads, attn_bias,
                                        gqa, window)
        self.mlp = LlamaMLP(hidden, inter)
        self.input_layernorm = LlamaRMSNorm(hidden)
        self.post_attention_layernorm = LlamaRMSNorm(hidden)

    def forward(self, hidden_states, position_ids):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, position_ids)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return residual + hidden_states


# -- Gemma (HF modeling_gemma) --------------------------------------------------


class GemmaRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


class GemmaModel(nn.Module):
    """Embedding (scaled by sqrt(hidden)), one decoder layer with GeGLU and
    (1 + w) RMSNorms, the final norm."""

    def __init__(self, vocab=128, hidden=64, heads=4, kv_heads=1, inter=128):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layer = LlamaDecoderLayer(hidden, heads, kv_heads, inter)
        self.layer.mlp.act = "gelu_pytorch_tanh"
        self.layer.input_layernorm = GemmaRMSNorm(hidden)
        self.layer.post_attention_layernorm = GemmaRMSNorm(hidden)
        self.norm = GemmaRMSNorm(hidden)
        self.hidden = hidden

    def forward(self, input_ids):
        h = self.embed_tokens(input_ids)
        normalizer = torch.tensor(self.hidden ** 0.5, dtype=h.dtype)
        h = h * normalizer
        position_ids = torch.arange(input_ids.shape[1],
                                    device=input_ids.device).unsqueeze(0)
        h = self.layer(h, position_ids)
        return self.norm(h)


# -- GPT-J (HF modeling_gptj: partial rotary, parallel residual) ----------------


def rotate_every_two(x):
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)


class GPTJBlock(nn.Module):
    def __init__(self, hidden=64, heads=4, rotary_dim=8, max_pos=64):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden)
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, hidden, bias=False)
        self.v_proj = nn.Linear(hidden, hidden, bias=False)
        self.out_proj = nn.Linear(hidden, hidden, bias=False)
        self.fc_in = nn.Linear(hidden, 4 * hidden)
        self.fc_out = nn.Linear(4 * hidden, hidden)
        self.heads = heads
        self.head_dim = hidden // heads
        self.rotary_dim = rotary_dim
        inv_freq = 1.0 / (10000 ** (torch.arange(0, rotary_dim, 2,
                                                 dtype=torch.float) /
                                    rotary_dim))
        sinusoid = torch.einsum("i , j -> i j",
                                torch.arange(max_pos, dtype=torch.float),
                                inv_freq).float()
        self.register_buffer("embed_positions", torch.cat(
            (torch.sin(sinusoid), torch.cos(sinusoid)), dim=1),
            persistent=False)
        self.register_buffer("bias", torch.tril(torch.ones(
            (max_pos, max_pos), dtype=torch.bool)).view(1, 1, max_pos,
                                                        max_pos),
            persistent=False)

    def _split_heads(self, x):
        return x.view(x.size()[:-1] + (self.heads, self.head_dim))

    def _rotary(self, t, sin, cos):
        sin = torch.repeat_interleave(sin[:, :, None, :], 2, 3)
        cos = torch.repeat_interleave(cos[:, :, None, :], 2, 3)
        return (t * cos) + (rotate_every_two(t) * sin)

    def forward(self, hidden_states, position_ids):
        residual = hidden_states
        h = self.ln_1(hidden_states)
        q = self._split_heads(self.q_proj(h))
        k = self._split_heads(self.k_proj(h))
        v = self._split_heads(self.v_proj(h)).permute(0, 2, 1, 3)
        sincos = self.embed_positions[position_ids]
        sin, cos = torch.split(sincos, sincos.shape[-1] // 2, dim=-1)
        k_rot = self._rotary(k[:, :, :, : self.rotary_dim], sin, cos)
        q_rot = self._rotary(q[:, :, :, : self.rotary_dim], sin, cos)
        k = torch.cat([k_rot, k[:, :, :, self.rotary_dim:]], dim=-1)
        q = torch.cat([q_rot, q[:, :, :, self.rotary_dim:]], dim=-1)
        k = k.permute(0, 2, 1, 3)
        q = q.permute(0, 2, 1, 3)
        T = q.size(-2)
        causal_mask = self.bias[:, :, :T, :T]
        q = q.to(torch.float32)
        k = k.to(torch.float32)
        w = torch.matmul(q, k.transpose(-1, -2))
        mask_value = torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype)
        w = torch.where(causal_mask, w, mask_value)
        w = w / math.sqrt(self.head_dim)
        w = nn.functional.softmax(w, dim=-1)
        a = torch.matmul(w.to(v.dtype), v)
        a = a.permute(0, 2, 1, 3).contiguous()
        a = a.view(a.size()[:-2] + (self.heads * self.head_dim,))
        attn_output = self.out_proj(a)
        ff = self.fc_out(F.gelu(self.fc_in(h), approximate="tanh"))
        return attn_output + ff + residual
