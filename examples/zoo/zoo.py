"""The zoo: every architecture at a decode-like and a prefill-like size
(small enough for the CPU: the zoo test runs each through the fp64
interpreter). ``ZOO`` lists (name, factory, inputs(size) -> [(name,
tensor)]); factories are plain: they take no device (the importer and the
comparison place the module themselves)."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import decoders  # noqa: E402
import encoders  # noqa: E402
import moe  # noqa: E402
import vision  # noqa: E402

SEQ = {"decode": 8, "prefill": 32}
HIDDEN = 64


def _hidden(size, batch=1):
    return [("x", torch.randn(batch, SEQ[size], HIDDEN))]


def _hidden_pos(size):
    s = SEQ[size]
    return [("x", torch.randn(1, s, HIDDEN)),
            ("position_ids", torch.arange(s).unsqueeze(0))]


def _ids(size, vocab=128):
    return [("input_ids", torch.randint(2, vocab, (1, SEQ[size])))]


def _ids_mask(size):
    s = SEQ[size]
    mask = torch.ones(2, s, dtype=torch.long)
    mask[1, s - 3:] = 0  # the second sequence is padded
    return [("input_ids", torch.randint(2, 128, (2, s))),
            ("attention_mask", mask)]


def _tokens(size):
    return [("x", torch.randn(SEQ[size], HIDDEN))]


def _image(size):
    return [("x", torch.randn(1 if size == "decode" else 4, 3, 16, 16))]


class Entry:
    def __init__(self, name, factory, inputs, upstream):
        self.name = name
        self.factory = factory
        self.inputs = inputs
        self.upstream = upstream


ZOO = [
    Entry("gpt2", lambda: decoders.GPT2Block(), _hidden,
          "nanoGPT block, HF gelu_new, tril buffer + masked_fill"),
    Entry("llama", lambda: decoders.LlamaDecoderLayer(), _hidden_pos,
          "HF Llama: RMSNorm, rotary, repeat_kv GQA, SDPA (2.x) or triu mask"),
    Entry("qwen2", lambda: decoders.LlamaDecoderLayer(
        attn_bias=True, gqa="repeat_interleave"), _hidden_pos,
        "QKV bias, repeat_interleave GQA"),
    Entry("mistral", lambda: decoders.LlamaDecoderLayer(window=4),
          _hidden_pos, "sliding-window mask (triu + tril masked_fill)"),
    Entry("gemma", lambda: decoders.GemmaModel(), _ids,
          "embedding * sqrt(d), (1 + w) RMSNorm, GeGLU (tanh), MQA"),
    Entry("gptj", lambda: decoders.GPTJBlock(), _hidden_pos,
          "partial rotary (rotate_every_two), parallel residual, where mask"),
    Entry("bert", lambda: encoders.BertModel(), _ids_mask,
          "embeddings, additive padding mask, post-LN, erf GELU"),
    Entry("roberta", lambda: encoders.BertModel(roberta=True), _ids_mask,
          "BERT + positions from the non-padding tokens (ne, cumsum)"),
    Entry("t5_encoder", lambda: encoders.T5EncoderLayer(), _hidden,
          "relative position buckets (log, where), RMS LayerNorm, no scale"),
    Entry("whisper_encoder", lambda: encoders.WhisperEncoderLayer(), _hidden,
          "pre-LN, q scaled before bmm, 3-D bmm attention"),
    Entry("mixtral_moe", lambda: moe.MOEFeedForward(), _tokens,
          "gpt-fast: topk router, w[expert_ids] gathers, einsum, in-place /="),
    Entry("qwen_moe", lambda: moe.MOEFeedForward(shared_expert=True),
          _tokens, "gpt-fast MoE + sigmoid-gated shared expert"),
    Entry("vit", lambda: vision.VisionTransformer(), _image,
          "timm: conv patch embed, class token, fused qkv, unbind"),
]

ZOO += [
    Entry("phi", lambda: decoders.PhiDecoderLayer(), _hidden_pos,
          "Phi-2: partial rotary, parallel attention + MLP, fp32 scores"),
    Entry("falcon", lambda: decoders.FalconDecoderLayer(), _hidden_pos,
          "fused QKV with multi-query [-2]/[-1] indexing, in-place /="),
    Entry("deepseek_mla", lambda: decoders.DeepseekV2Attention(), _hidden_pos,
          "MLA: low-rank q/kv, decoupled rope, new_empty + slice assignment"),
    Entry("megatron_tp", lambda: decoders.MegatronParallelLayer(),
          lambda size: [("x", torch.randn(SEQ[size], 2, HIDDEN))],
          "[s, b, h], all_reduce after row-parallel layers, masked_fill_"),
    Entry("resnet_block", lambda: vision.BasicBlock(),
          lambda size: [("x", torch.randn(1 if size == "decode" else 4, 8,
                                          16, 16))],
          "torchvision BasicBlock: 3x3 convs, eval BatchNorm, inplace ReLU"),
    Entry("convnext_block", lambda: vision.ConvNeXtBlock(),
          lambda size: [("x", torch.randn(1 if size == "decode" else 4, 16,
                                          8, 8))],
          "timm: depthwise 7x7, channels-last LayerNorm, layer scale"),
]


def _kv_decode(size):
    past, new = (15, 1) if size == "decode" else (16, 16)
    return [("x", torch.randn(1, new, HIDDEN)),
            ("past_key", torch.randn(1, 2, past, 16)),
            ("past_value", torch.randn(1, 2, past, 16)),
            ("position_ids", torch.arange(past, past + new).unsqueeze(0))]


ZOO += [
    Entry("gpt_neox", lambda: decoders.GPTNeoXLayer(), _hidden_pos,
          "per-head fused qkv, 25% rotary, baddbmm scores, where mask"),
    Entry("llama3_kv", lambda: decoders.LlamaKVDecode(), _kv_decode,
          "decode with a KV cache: cat, triu(diagonal=past+1), new cache out"),
    Entry("opt", lambda: encoders_free_opt(), _ids_mask,
          "learned positions + 2, causal + padding mask, max(w, min), ReLU"),
    Entry("bloom", lambda: decoders.BloomBlock(),
          lambda size: [("x", torch.randn(2, SEQ[size], HIDDEN)),
                        ("attention_mask", _ids_mask(size)[1][1])],
          "ALiBi from the mask, baddbmm, causal | padding masked_fill"),
    Entry("clip_text", lambda: decoders.CLIPEncoderLayer(), _hidden,
          "empty + fill_ + triu_ mask, bmm attention, quick_gelu"),
    Entry("mobilenet_v2", lambda: vision.InvertedResidual(),
          lambda size: [("x", torch.randn(1 if size == "decode" else 4, 16,
                                          8, 8))],
          "1x1 / depthwise 3x3 convs, eval BatchNorm, ReLU6"),
]


def encoders_free_opt():
    return decoders.OPTModel()
