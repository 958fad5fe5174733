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
        mask_value = torch.tensor(torch.finfo(w.dtype).min,
                                  dtype=w.dtype).to(w.device)
        w = torch.where(causal_mask, w, mask_value)
        w = w / math.sqrt(self.head_dim)
        w = nn.functional.softmax(w, dim=-1)
        a = torch.matmul(w.to(v.dtype), v)
        a = a.permute(0, 2, 1, 3).contiguous()
        a = a.view(a.size()[:-2] + (self.heads * self.head_dim,))
        attn_output = self.out_proj(a)
        ff = self.fc_out(F.gelu(self.fc_in(h), approximate="tanh"))
        return attn_output + ff + residual


# -- Phi-2 (HF modeling_phi: partial rotary, parallel attention and MLP) ------------


class PhiDecoderLayer(nn.Module):
    def __init__(self, hidden=64, heads=4, partial_rotary_factor=0.5,
                 inter=128):
        super().__init__()
        self.head_dim = hidden // heads
        self.num_heads = heads
        self.rotary_ndims = int(partial_rotary_factor * self.head_dim)
        self.input_layernorm = nn.LayerNorm(hidden, eps=1e-5)
        self.q_proj = nn.Linear(hidden, hidden)
        self.k_proj = nn.Linear(hidden, hidden)
        self.v_proj = nn.Linear(hidden, hidden)
        self.dense = nn.Linear(hidden, hidden)
        self.fc1 = nn.Linear(hidden, inter)
        self.fc2 = nn.Linear(inter, hidden)
        self.rotary_emb = LlamaRotaryEmbedding(self.rotary_ndims)
        self.resid_dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, position_ids):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads,
                                            self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(bsz, q_len, self.num_heads,
                                            self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, self.num_heads,
                                            self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(v, position_ids)
        q_rot, q_pass = (q[..., : self.rotary_ndims],
                         q[..., self.rotary_ndims:])
        k_rot, k_pass = (k[..., : self.rotary_ndims],
                         k[..., self.rotary_ndims:])
        q_rot, k_rot = apply_rotary_pos_emb(q_rot, k_rot, cos, sin)
        q = torch.cat((q_rot, q_pass), dim=-1)
        k = torch.cat((k_rot, k_pass), dim=-1)
        # Phi upcasts q and k before the scores.
        attn_weights = torch.matmul(q.to(torch.float32),
                                    k.to(torch.float32).transpose(2, 3)) / \
            math.sqrt(self.head_dim)
        mask = torch.full((q_len, q_len), float("-inf"),
                          device=hidden_states.device).triu(1)
        attn_weights = attn_weights + mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1,
                                             dtype=torch.float32).to(v.dtype)
        attn_output = torch.matmul(attn_weights, v)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, -1)
        attn_outputs = self.dense(attn_output)
        ff = self.fc2(NewGELU()(self.fc1(hidden_states)))
        return self.resid_dropout(attn_outputs) + self.resid_dropout(ff) + \
            residual


# -- Falcon (HF modeling_falcon: fused QKV, multi-query, parallel attention) -----


class FalconDecoderLayer(nn.Module):
    def __init__(self, hidden=64, heads=4):
        super().__init__()
        self.num_heads = heads
        self.head_dim = hidden // heads
        self.input_layernorm = nn.LayerNorm(hidden, eps=1e-5)
        self.query_key_value = nn.Linear(hidden, hidden + 2 * self.head_dim,
                                         bias=False)
        self.dense = nn.Linear(hidden, hidden, bias=False)
        self.dense_h_to_4h = nn.Linear(hidden, 4 * hidden, bias=False)
        self.dense_4h_to_h = nn.Linear(4 * hidden, hidden, bias=False)
        self.act = nn.GELU()
        self.rotary_emb = LlamaRotaryEmbedding(self.head_dim)

    def _split_heads(self, fused_qkv):
        batch_size, seq_length, _ = fused_qkv.shape
        fused_qkv = fused_qkv.view(batch_size, seq_length,
                                   self.num_heads + 2, self.head_dim)
        return (fused_qkv[..., :-2, :], fused_qkv[..., [-2], :],
                fused_qkv[..., [-1], :])

    def forward(self, hidden_states, position_ids):
        residual = hidden_states
        attention_layernorm_out = self.input_layernorm(hidden_states)
        fused_qkv = self.query_key_value(attention_layernorm_out)
        (query_layer, key_layer, value_layer) = self._split_heads(fused_qkv)
        batch_size, query_length, _, _ = query_layer.shape
        query_layer = query_layer.transpose(1, 2)
        key_layer = key_layer.transpose(1, 2)
        value_layer = value_layer.transpose(1, 2)
        cos, sin = self.rotary_emb(value_layer, position_ids)
        query_layer, key_layer = apply_rotary_pos_emb(query_layer, key_layer,
                                                      cos, sin)
        if HAS_SDPA:
            attn_output = F.scaled_dot_product_attention(
                query_layer, key_layer.expand_as(query_layer),
                value_layer.expand_as(query_layer),
                is_causal=query_length > 1)
        else:
            mask = torch.triu(torch.ones(query_length, query_length,
                                         dtype=torch.bool,
                                         device=query_layer.device), 1)
            scores = query_layer @ key_layer.transpose(-1, -2)
            scores /= math.sqrt(self.head_dim)
            scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
            attn_output = F.softmax(scores, dim=-1) @ value_layer
        attn_output = attn_output.permute(0, 2, 1, 3).reshape(
            batch_size, query_length, self.num_heads * self.head_dim)
        attention_output = self.dense(attn_output)
        mlp_output = self.dense_4h_to_h(self.act(self.dense_h_to_4h(
            attention_layernorm_out)))
        return mlp_output + attention_output + residual


# -- DeepSeek-V2 multi-head latent attention (HF modeling_deepseek) -----------------


class DeepseekV2Attention(nn.Module):
    """Low-rank q and kv projections, a decoupled rotary part shared by the
    heads (k_pe), RMSNorms on the latents, softmax scale 1/sqrt(q_head_dim),
    v_head_dim != qk head dim."""

    def __init__(self, hidden=64, heads=4, q_lora_rank=32, kv_lora_rank=32,
                 qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16):
        super().__init__()
        self.num_heads = heads
        self.q_lora_rank = q_lora_rank
        self.kv_lora_rank = kv_lora_rank
        self.qk_nope_head_dim = qk_nope_head_dim
        self.qk_rope_head_dim = qk_rope_head_dim
        self.v_head_dim = v_head_dim
        self.q_head_dim = qk_nope_head_dim + qk_rope_head_dim
        self.q_a_proj = nn.Linear(hidden, q_lora_rank, bias=False)
        self.q_a_layernorm = LlamaRMSNorm(q_lora_rank)
        self.q_b_proj = nn.Linear(q_lora_rank, heads * self.q_head_dim,
                                  bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(
            hidden, kv_lora_rank + qk_rope_head_dim, bias=False)
        self.kv_a_layernorm = LlamaRMSNorm(kv_lora_rank)
        self.kv_b_proj = nn.Linear(
            kv_lora_rank, heads * (self.q_head_dim - qk_rope_head_dim +
                                   v_head_dim), bias=False)
        self.o_proj = nn.Linear(heads * v_head_dim, hidden, bias=False)
        self.rotary_emb = LlamaRotaryEmbedding(qk_rope_head_dim)
        self.softmax_scale = self.q_head_dim ** (-0.5)

    def forward(self, hidden_states, position_ids):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden_states)))
        q = q.view(bsz, q_len, self.num_heads, self.q_head_dim).transpose(1, 2)
        q_nope, q_pe = torch.split(
            q, [self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)
        compressed_kv = self.kv_a_proj_with_mqa(hidden_states)
        compressed_kv, k_pe = torch.split(
            compressed_kv, [self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        k_pe = k_pe.view(bsz, q_len, 1, self.qk_rope_head_dim).transpose(1, 2)
        kv = self.kv_b_proj(self.kv_a_layernorm(compressed_kv)).view(
            bsz, q_len, self.num_heads,
            self.qk_nope_head_dim + self.v_head_dim).transpose(1, 2)
        k_nope, value_states = torch.split(
            kv, [self.qk_nope_head_dim, self.v_head_dim], dim=-1)
        cos, sin = self.rotary_emb(value_states, position_ids)
        q_pe, k_pe = apply_rotary_pos_emb(q_pe, k_pe, cos, sin)
        query_states = k_pe.new_empty(bsz, self.num_heads, q_len,
                                      self.q_head_dim)
        query_states[:, :, :, : self.qk_nope_head_dim] = q_nope
        query_states[:, :, :, self.qk_nope_head_dim:] = q_pe
        key_states = k_pe.new_empty(bsz, self.num_heads, q_len,
                                    self.q_head_dim)
        key_states[:, :, :, : self.qk_nope_head_dim] = k_nope
        key_states[:, :, :, self.qk_nope_head_dim:] = k_pe
        attn_weights = torch.matmul(query_states, key_states.transpose(
            2, 3)) * self.softmax_scale
        mask = torch.full((q_len, q_len), torch.finfo(
            attn_weights.dtype).min, device=attn_weights.device).triu(1)
        attn_weights = attn_weights + mask[None, None]
        attn_weights = nn.functional.softmax(attn_weights, dim=-1,
                                             dtype=torch.float32).to(
                                                 query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous().reshape(
            bsz, q_len, self.num_heads * self.v_head_dim)
        return self.o_proj(attn_output)


# -- Megatron-LM's tensor-parallel transformer layer --------------------------------


class MegatronParallelLayer(nn.Module):
    """A column-parallel QKV and fc1, row-parallel proj and fc2 each
    followed by an all-reduce over the TP group (bias added after it), as
    Megatron's ColumnParallelLinear / RowParallelLinear compute per rank;
    LayerNorm, erf GELU, causal attention via the -10000 additive mask."""

    def __init__(self, hidden=64, heads=4, ffn=128, tp=1):
        super().__init__()
        from mtsched_torch import collectives as C
        self.C = C
        self.tp = tp
        self.mtsched_groups = {"tp": tp}
        self.heads = heads // tp
        self.d = hidden // heads
        self.input_layernorm = nn.LayerNorm(hidden)
        self.query_key_value = nn.Linear(hidden, 3 * hidden // tp)
        self.dense = nn.Linear(hidden // tp, hidden, bias=False)
        self.dense_bias = nn.Parameter(torch.zeros(hidden))
        self.post_attention_layernorm = nn.LayerNorm(hidden)
        self.dense_h_to_4h = nn.Linear(hidden, ffn // tp)
        self.dense_4h_to_h = nn.Linear(ffn // tp, hidden, bias=False)
        self.dense_4h_to_h_bias = nn.Parameter(torch.zeros(hidden))

    def forward(self, hidden_states):
        # [s, b, h], Megatron's layout.
        s, b, _ = hidden_states.shape
        ln = self.input_layernorm(hidden_states)
        mixed = self.query_key_value(ln).view(s, b, self.heads, 3 * self.d)
        q, k, v = torch.split(mixed, self.d, dim=-1)
        q = q.permute(1, 2, 0, 3)
        k = k.permute(1, 2, 0, 3)
        v = v.permute(1, 2, 0, 3)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d)
        causal = torch.tril(torch.ones(1, 1, s, s, device=q.device)) < 0.5
        scores.masked_fill_(causal, -10000.0)
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).permute(2, 0, 1, 3).reshape(s, b, -1)
        out = self.C.all_reduce(self.dense(ctx), "tp", self.tp)
        hidden_states = hidden_states + out + self.dense_bias
        ln2 = self.post_attention_layernorm(hidden_states)
        h = F.gelu(self.dense_h_to_4h(ln2))
        out = self.C.all_reduce(self.dense_4h_to_h(h), "tp", self.tp)
        return hidden_states + out + self.dense_4h_to_h_bias


# -- GPT-NeoX (HF modeling_gpt_neox: per-head fused qkv, partial rotary) ----------


class GPTNeoXLayer(nn.Module):
    def __init__(self, hidden=64, heads=4, rotary_pct=0.25, inter=256):
        super().__init__()
        self.num_attention_heads = heads
        self.head_size = hidden // heads
        self.rotary_ndims = int(self.head_size * rotary_pct)
        self.input_layernorm = nn.LayerNorm(hidden)
        self.post_attention_layernorm = nn.LayerNorm(hidden)
        self.query_key_value = nn.Linear(hidden, 3 * hidden)
        self.dense = nn.Linear(hidden, hidden)
        self.dense_h_to_4h = nn.Linear(hidden, inter)
        self.dense_4h_to_h = nn.Linear(inter, hidden)
        self.rotary_emb = LlamaRotaryEmbedding(self.rotary_ndims)
        self.norm_factor = self.head_size ** 0.5
        max_pos = 64
        self.register_buffer("bias", torch.tril(torch.ones(
            (max_pos, max_pos), dtype=torch.bool)).view(
                1, 1, max_pos, max_pos), persistent=False)
        self.register_buffer("masked_bias", torch.tensor(-1e9),
                             persistent=False)

    def forward(self, hidden_states, position_ids):
        ln = self.input_layernorm(hidden_states)
        qkv = self.query_key_value(ln)
        new_qkv_shape = qkv.size()[:-1] + (self.num_attention_heads,
                                           3 * self.head_size)
        qkv = qkv.view(*new_qkv_shape)
        query = qkv[..., : self.head_size].permute(0, 2, 1, 3)
        key = qkv[..., self.head_size: 2 * self.head_size].permute(0, 2, 1, 3)
        value = qkv[..., 2 * self.head_size:].permute(0, 2, 1, 3)
        query_rot = query[..., : self.rotary_ndims]
        query_pass = query[..., self.rotary_ndims:]
        key_rot = key[..., : self.rotary_ndims]
        key_pass = key[..., self.rotary_ndims:]
        cos, sin = self.rotary_emb(value, position_ids)
        query, key = apply_rotary_pos_emb(query_rot, key_rot, cos, sin)
        query = torch.cat((query, query_pass), dim=-1)
        key = torch.cat((key, key_pass), dim=-1)
        batch_size, num_attention_heads, query_length, attn_head_size = \
            query.size()
        key_length = key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length: key_length,
                                :key_length]
        query = query.view(batch_size * num_attention_heads, query_length,
                           attn_head_size)
        key = key.view(batch_size * num_attention_heads, key_length,
                       attn_head_size)
        attn_scores = torch.zeros(
            batch_size * num_attention_heads, query_length, key_length,
            dtype=query.dtype, device=key.device)
        attn_scores = torch.baddbmm(
            attn_scores, query, key.transpose(1, 2), beta=1.0,
            alpha=(torch.tensor(1.0, dtype=self.norm_factor.__class__ and
                                torch.float32) / self.norm_factor).item())
        attn_scores = attn_scores.view(batch_size, num_attention_heads,
                                       query_length, key_length)
        mask_value = torch.finfo(attn_scores.dtype).min
        mask_value = torch.tensor(mask_value, dtype=attn_scores.dtype).to(
            attn_scores.device)
        attn_scores = torch.where(causal_mask, attn_scores, mask_value)
        attn_weights = nn.functional.softmax(attn_scores, dim=-1)
        attn_output = torch.matmul(attn_weights, value)
        attn_output = attn_output.permute(0, 2, 1, 3).contiguous()
        attn_output = attn_output.view(attn_output.size(0),
                                       attn_output.size(1),
                                       num_attention_heads * attn_head_size)
        attn_output = self.dense(attn_output)
        mlp = self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(
            self.post_attention_layernorm(hidden_states))))
        return mlp + attn_output + hidden_states


# -- Llama-3 decode step with a KV cache (HF DynamicCache.update: cat) ------------


class LlamaKVDecode(nn.Module):
    """One decode step of q_len new tokens against a cache of past ones:
    the new k/v concatenated to the cache, the causal mask of HF's
    _prepare_4d_causal_attention_mask (triu with diagonal past + 1, so the
    new tokens see the whole cache); returns the output and the new cache."""

    def __init__(self, hidden=64, heads=4, kv_heads=2):
        super().__init__()
        self.attn = LlamaAttention(hidden, heads, kv_heads)

    def forward(self, hidden_states, past_key, past_value, position_ids):
        a = self.attn
        bsz, q_len, _ = hidden_states.size()
        q = a.q_proj(hidden_states).view(bsz, q_len, a.num_heads,
                                         a.head_dim).transpose(1, 2)
        k = a.k_proj(hidden_states).view(bsz, q_len, a.num_key_value_heads,
                                         a.head_dim).transpose(1, 2)
        v = a.v_proj(hidden_states).view(bsz, q_len, a.num_key_value_heads,
                                         a.head_dim).transpose(1, 2)
        cos, sin = a.rotary_emb(v, position_ids)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        key_states = torch.cat([past_key, k], dim=-2)
        value_states = torch.cat([past_value, v], dim=-2)
        past = past_key.shape[-2]
        kv_len = past + q_len
        mask = torch.full((q_len, kv_len), torch.finfo(q.dtype).min,
                          device=q.device)
        mask = torch.triu(mask, diagonal=past + 1)
        ks = repeat_kv(key_states, a.num_key_value_groups)
        vs = repeat_kv(value_states, a.num_key_value_groups)
        w = torch.matmul(q, ks.transpose(2, 3)) / math.sqrt(a.head_dim)
        w = w + mask[None, None, :, :]
        w = nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, vs).transpose(1, 2).reshape(bsz, q_len, -1)
        return a.o_proj(out), key_states, value_states


# -- OPT (HF modeling_opt: learned positions offset by 2, ReLU, q scaling) --------


class OPTModel(nn.Module):
    def __init__(self, vocab=128, hidden=64, heads=4, ffn=128, max_pos=64):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden, padding_idx=1)
        self.embed_positions = nn.Embedding(max_pos + 2, hidden)
        self.self_attn_layer_norm = nn.LayerNorm(hidden)
        self.q_proj = nn.Linear(hidden, hidden)
        self.k_proj = nn.Linear(hidden, hidden)
        self.v_proj = nn.Linear(hidden, hidden)
        self.out_proj = nn.Linear(hidden, hidden)
        self.final_layer_norm = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)
        self.num_heads = heads
        self.head_dim = hidden // heads
        self.scaling = self.head_dim ** -0.5

    def forward(self, input_ids, attention_mask):
        bsz, tgt_len = input_ids.shape
        h = self.embed_tokens(input_ids)
        positions = (torch.cumsum(attention_mask, dim=1).type_as(
            attention_mask) * attention_mask).long() - 1
        h = h + self.embed_positions(positions + 2)
        # The 4-D mask: causal plus padding, finfo.min where masked.
        causal = torch.full((tgt_len, tgt_len), torch.finfo(h.dtype).min,
                            device=h.device)
        mask_cond = torch.arange(tgt_len, device=h.device)
        causal = causal.masked_fill(
            mask_cond < (mask_cond + 1).view(tgt_len, 1), 0.0).to(h.dtype)
        pad = (1.0 - attention_mask[:, None, None, :].to(h.dtype)).masked_fill(
            attention_mask[:, None, None, :] == 0, torch.finfo(h.dtype).min)
        mask = causal[None, None] + pad
        residual = h
        h = self.self_attn_layer_norm(h)
        q = (self.q_proj(h) * self.scaling).view(
            bsz, tgt_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(bsz, tgt_len, self.num_heads,
                                self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(bsz, tgt_len, self.num_heads,
                                self.head_dim).transpose(1, 2)
        w = torch.matmul(q, k.transpose(-1, -2)) + mask
        w = torch.max(w, torch.tensor(torch.finfo(w.dtype).min,
                                      device=w.device))
        w = nn.functional.softmax(w, dim=-1)
        o = torch.matmul(w, v).transpose(1, 2).reshape(bsz, tgt_len, -1)
        h = residual + self.out_proj(o)
        residual = h
        h = self.fc2(nn.functional.relu(self.fc1(self.final_layer_norm(h))))
        return residual + h


# -- BLOOM (HF modeling_bloom: ALiBi, baddbmm, fused qkv) ------------------------


def build_alibi_tensor(attention_mask, num_heads, dtype):
    batch_size, seq_length = attention_mask.shape
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))),
                        device=attention_mask.device, dtype=torch.float32)
    powers = torch.arange(1, 1 + closest_power_of_2,
                          device=attention_mask.device, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) *
                     attention_mask)[:, None, :]
    alibi = slopes[..., None] * arange_tensor
    return alibi.reshape(batch_size * num_heads, 1, seq_length).to(dtype)


class BloomBlock(nn.Module):
    def __init__(self, hidden=64, heads=4):
        super().__init__()
        self.num_heads = heads
        self.head_dim = hidden // heads
        self.input_layernorm = nn.LayerNorm(hidden)
        self.query_key_value = nn.Linear(hidden, 3 * hidden)
        self.dense = nn.Linear(hidden, hidden)
        self.post_attention_layernorm = nn.LayerNorm(hidden)
        self.dense_h_to_4h = nn.Linear(hidden, 4 * hidden)
        self.dense_4h_to_h = nn.Linear(4 * hidden, hidden)
        self.inv_norm_factor = 1.0 / math.sqrt(self.head_dim)

    def forward(self, hidden_states, attention_mask):
        b, q_length, _ = hidden_states.shape
        alibi = build_alibi_tensor(attention_mask, self.num_heads,
                                   hidden_states.dtype)
        ln = self.input_layernorm(hidden_states)
        fused = self.query_key_value(ln).view(b, q_length, self.num_heads, 3,
                                              self.head_dim)
        q = fused[..., 0, :].transpose(1, 2).reshape(
            b * self.num_heads, q_length, self.head_dim)
        k = fused[..., 1, :].permute(0, 2, 3, 1).reshape(
            b * self.num_heads, self.head_dim, q_length)
        v = fused[..., 2, :].transpose(1, 2).reshape(
            b * self.num_heads, q_length, self.head_dim)
        matmul_result = alibi.baddbmm(batch1=q, batch2=k, beta=1.0,
                                      alpha=self.inv_norm_factor)
        scores = matmul_result.view(b, self.num_heads, q_length, q_length)
        causal = torch.triu(torch.ones(q_length, q_length, dtype=torch.bool,
                                       device=scores.device), 1)
        pad = (attention_mask == 0)[:, None, None, :]
        scores = scores.masked_fill(causal | pad, torch.finfo(
            scores.dtype).min)
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(
            hidden_states.dtype)
        probs = probs.view(b * self.num_heads, q_length, q_length)
        ctx = torch.bmm(probs, v).view(b, self.num_heads, q_length,
                                       self.head_dim)
        ctx = ctx.permute(0, 2, 1, 3).reshape(b, q_length, -1)
        h = hidden_states + self.dense(ctx)
        mlp = self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(
            self.post_attention_layernorm(h)), approximate="tanh"))
        return h + mlp


# -- CLIP text encoder layer (HF modeling_clip: quick_gelu, causal mask) ----------


class CLIPEncoderLayer(nn.Module):
    def __init__(self, hidden=64, heads=4, inter=128):
        super().__init__()
        self.embed_dim = hidden
        self.num_heads = heads
        self.head_dim = hidden // heads
        self.scale = self.head_dim ** -0.5
        self.k_proj = nn.Linear(hidden, hidden)
        self.v_proj = nn.Linear(hidden, hidden)
        self.q_proj = nn.Linear(hidden, hidden)
        self.out_proj = nn.Linear(hidden, hidden)
        self.layer_norm1 = nn.LayerNorm(hidden)
        self.layer_norm2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, inter)
        self.fc2 = nn.Linear(inter, hidden)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads,
                           self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states):
        bsz, tgt_len, embed_dim = hidden_states.size()
        causal = torch.empty(bsz, tgt_len, tgt_len, dtype=hidden_states.dtype)
        causal.fill_(torch.finfo(hidden_states.dtype).min)
        causal.triu_(1)
        causal = causal.unsqueeze(1).to(hidden_states.device)
        residual = hidden_states
        hidden_states = self.layer_norm1(hidden_states)
        query_states = self.q_proj(hidden_states) * self.scale
        key_states = self._shape(self.k_proj(hidden_states), -1, bsz)
        value_states = self._shape(self.v_proj(hidden_states), -1, bsz)
        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(
            *proj_shape)
        key_states = key_states.view(*proj_shape)
        value_states = value_states.view(*proj_shape)
        w = torch.bmm(query_states, key_states.transpose(1, 2))
        w = w.view(bsz, self.num_heads, tgt_len, tgt_len) + causal
        w = w.view(bsz * self.num_heads, tgt_len, tgt_len)
        w = nn.functional.softmax(w, dim=-1)
        o = torch.bmm(w, value_states)
        o = o.view(bsz, self.num_heads, tgt_len, self.head_dim).transpose(
            1, 2).reshape(bsz, tgt_len, embed_dim)
        hidden_states = residual + self.out_proj(o)
        residual = hidden_states
        h = self.fc1(self.layer_norm2(hidden_states))
        h = h * torch.sigmoid(1.702 * h)  # quick_gelu
        return residual + self.fc2(h)
