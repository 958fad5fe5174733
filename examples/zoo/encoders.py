"""Encoder blocks as their upstream projects write them: Hugging Face BERT
and RoBERTa (additive padding mask, post-LN), T5's encoder layer (relative
position bias, RMS LayerNorm without bias or mean), Whisper's encoder layer
(pre-LN, scaled q projection)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.num_attention_heads = heads
        self.attention_head_size = hidden // heads
        self.all_head_size = hidden
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.dropout = nn.Dropout(0.1)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads,
                                       self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer,
                                        key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(
            self.attention_head_size)
        attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_shape = context_layer.size()[:-2] + (self.all_head_size,)
        return context_layer.view(new_shape)


class BertLayer(nn.Module):
    def __init__(self, hidden=64, heads=4, inter=128, eps=1e-12):
        super().__init__()
        self.attention = BertSelfAttention(hidden, heads)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=eps)
        self.intermediate = nn.Linear(hidden, inter)
        self.output = nn.Linear(inter, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, attention_mask):
        a = self.attention(hidden_states, attention_mask)
        a = self.attn_norm(self.dropout(self.attn_out(a)) + hidden_states)
        i = F.gelu(self.intermediate(a))
        return self.out_norm(self.dropout(self.output(i)) + a)


class BertModel(nn.Module):
    """Embeddings (word + position + token type, LayerNorm), the extended
    attention mask from a 0/1 padding mask, one layer."""

    def __init__(self, vocab=128, hidden=64, heads=4, inter=128, max_pos=64,
                 roberta=False):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden, padding_idx=1)
        self.position_embeddings = nn.Embedding(max_pos, hidden)
        self.token_type_embeddings = nn.Embedding(2, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)
        self.register_buffer("position_ids",
                             torch.arange(max_pos).expand((1, -1)),
                             persistent=False)
        self.layer = BertLayer(hidden, heads, inter)
        self.roberta = roberta
        self.padding_idx = 1

    def forward(self, input_ids, attention_mask):
        seq_length = input_ids.size(1)
        if self.roberta:
            # RoBERTa: positions count the non-padding tokens, from
            # padding_idx + 1.
            mask = input_ids.ne(self.padding_idx).int()
            incremental = torch.cumsum(mask, dim=1).type_as(mask) * mask
            position_ids = incremental.long() + self.padding_idx
        else:
            position_ids = self.position_ids[:, :seq_length]
        token_type_ids = torch.zeros(input_ids.shape, dtype=torch.long,
                                     device=input_ids.device)
        e = self.word_embeddings(input_ids) + \
            self.token_type_embeddings(token_type_ids) + \
            self.position_embeddings(position_ids)
        e = self.LayerNorm(e)
        ext = attention_mask[:, None, None, :].to(e.dtype)
        ext = (1.0 - ext) * torch.finfo(e.dtype).min
        return self.layer(e, ext)


# -- T5 encoder layer (HF modeling_t5) --------------------------------------


class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1,
                                                               keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance +
                                                    self.variance_epsilon)
        # Back to half precision where the weights are (as HF's does).
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            hidden_states = hidden_states.to(self.weight.dtype)
        return self.weight * hidden_states


class T5Attention(nn.Module):
    def __init__(self, d_model, n_heads, d_kv, num_buckets=32,
                 max_distance=128):
        super().__init__()
        self.n_heads = n_heads
        self.key_value_proj_dim = d_kv
        self.inner_dim = n_heads * d_kv
        self.q = nn.Linear(d_model, self.inner_dim, bias=False)
        self.k = nn.Linear(d_model, self.inner_dim, bias=False)
        self.v = nn.Linear(d_model, self.inner_dim, bias=False)
        self.o = nn.Linear(self.inner_dim, d_model, bias=False)
        self.relative_attention_num_buckets = num_buckets
        self.relative_attention_max_distance = max_distance
        self.relative_attention_bias = nn.Embedding(num_buckets, n_heads)

    @staticmethod
    def _relative_position_bucket(relative_position, num_buckets=32,
                                  max_distance=128):
        relative_buckets = 0
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * \
            num_buckets
        relative_position = torch.abs(relative_position)
        max_exact = num_buckets // 2
        is_small = relative_position < max_exact
        relative_position_if_large = max_exact + (
            torch.log(relative_position.float() / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)).to(torch.long)
        relative_position_if_large = torch.min(
            relative_position_if_large,
            torch.full_like(relative_position_if_large, num_buckets - 1))
        relative_buckets += torch.where(is_small, relative_position,
                                        relative_position_if_large)
        return relative_buckets

    def compute_bias(self, query_length, key_length, device=None):
        context_position = torch.arange(query_length, dtype=torch.long,
                                        device=device)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long,
                                       device=device)[None, :]
        relative_position = memory_position - context_position
        bucket = self._relative_position_bucket(
            relative_position, num_buckets=self.relative_attention_num_buckets,
            max_distance=self.relative_attention_max_distance)
        values = self.relative_attention_bias(bucket)
        return values.permute([2, 0, 1]).unsqueeze(0)

    def forward(self, hidden_states):
        batch_size, seq_length = hidden_states.shape[:2]

        def shape(states):
            return states.view(batch_size, -1, self.n_heads,
                               self.key_value_proj_dim).transpose(1, 2)

        query_states = shape(self.q(hidden_states))
        key_states = shape(self.k(hidden_states))
        value_states = shape(self.v(hidden_states))
        scores = torch.matmul(query_states, key_states.transpose(3, 2))
        position_bias = self.compute_bias(seq_length, seq_length,
                                          device=scores.device)
        scores += position_bias
        attn_weights = nn.functional.softmax(scores.float(), dim=-1).type_as(
            scores)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous().view(
            batch_size, -1, self.inner_dim)
        return self.o(attn_output)


class T5EncoderLayer(nn.Module):
    def __init__(self, d_model=64, n_heads=4, d_kv=16, d_ff=128):
        super().__init__()
        self.SelfAttention = T5Attention(d_model, n_heads, d_kv)
        self.layer_norm = T5LayerNorm(d_model)
        self.ff_norm = T5LayerNorm(d_model)
        self.wi = nn.Linear(d_model, d_ff, bias=False)
        self.wo = nn.Linear(d_ff, d_model, bias=False)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states):
        normed = self.layer_norm(hidden_states)
        hidden_states = hidden_states + self.dropout(
            self.SelfAttention(normed))
        f = self.ff_norm(hidden_states)
        f = self.wo(self.dropout(nn.functional.relu(self.wi(f))))
        return hidden_states + self.dropout(f)


# -- Whisper encoder layer (HF modeling_whisper) --------------------------------


class WhisperEncoderLayer(nn.Module):
    def __init__(self, d_model=64, heads=4, ffn=128):
        super().__init__()
        self.num_heads = heads
        self.head_dim = d_model // heads
        self.scaling = self.head_dim ** -0.5
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model)
        self.q_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.self_attn_layer_norm = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, ffn)
        self.fc2 = nn.Linear(ffn, d_model)
        self.final_layer_norm = nn.LayerNorm(d_model)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads,
                           self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states = self.self_attn_layer_norm(hidden_states)
        bsz, tgt_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states) * self.scaling
        key_states = self._shape(self.k_proj(hidden_states), -1, bsz)
        value_states = self._shape(self.v_proj(hidden_states), -1, bsz)
        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(
            *proj_shape)
        key_states = key_states.reshape(*proj_shape)
        value_states = value_states.reshape(*proj_shape)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.bmm(attn_weights, value_states)
        attn_output = attn_output.view(bsz, self.num_heads, tgt_len,
                                       self.head_dim).transpose(1, 2)
        attn_output = attn_output.reshape(bsz, tgt_len, -1)
        hidden_states = residual + self.out_proj(attn_output)
        residual = hidden_states
        hidden_states = self.final_layer_norm(hidden_states)
        hidden_states = F.gelu(self.fc1(hidden_states))
        return residual + self.fc2(hidden_states)
