"""Mixture-of-experts blocks in gpt-fast's dense-gather form: the router's
top-k picks, each token's expert weights gathered with ``w[expert_ids]``
and applied with einsum (Mixtral); Qwen-MoE adds a shared expert with a
sigmoid gate."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ConditionalFeedForward(nn.Module):
    def __init__(self, num_experts, dim, intermediate_size):
        super().__init__()
        self.w1 = nn.Parameter(torch.empty(num_experts, intermediate_size, dim))
        self.w2 = nn.Parameter(torch.empty(num_experts, dim, intermediate_size))
        self.w3 = nn.Parameter(torch.empty(num_experts, intermediate_size, dim))

    def forward(self, x, expert_indices):
        w1_weights = self.w1[expert_indices]  # [T, A, D, D]
        w3_weights = self.w3[expert_indices]
        w2_weights = self.w2[expert_indices]
        x1 = F.silu(torch.einsum("ti,taoi -> tao", x, w1_weights))
        x3 = torch.einsum("ti, taoi -> tao", x, w3_weights)
        return torch.einsum("tao, taio -> tai", (x1 * x3), w2_weights)


class MOEFeedForward(nn.Module):
    def __init__(self, dim=64, num_experts=4, intermediate_size=64,
                 num_activated_experts=2, shared_expert=False):
        super().__init__()
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.cond_ffn = ConditionalFeedForward(num_experts, dim,
                                               intermediate_size)
        self.dim = dim
        self.num_activated_experts = num_activated_experts
        self.shared = shared_expert
        if shared_expert:  # Qwen2-MoE
            self.shared_expert = nn.ModuleDict(dict(
                gate_proj=nn.Linear(dim, intermediate_size, bias=False),
                up_proj=nn.Linear(dim, intermediate_size, bias=False),
                down_proj=nn.Linear(intermediate_size, dim, bias=False)))
            self.shared_expert_gate = nn.Linear(dim, 1, bias=False)

    def forward(self, x):
        x = x.view(-1, self.dim)
        scores = self.gate(x)
        expert_weights = F.softmax(scores, dim=-1)
        expert_weights, expert_indices = torch.topk(
            expert_weights, self.num_activated_experts, dim=-1)
        expert_weights /= expert_weights.sum(dim=-1, keepdim=True)
        expert_outs = self.cond_ffn(x, expert_indices)
        out = torch.einsum("tai,ta -> ti", expert_outs, expert_weights)
        if self.shared:
            s = self.shared_expert
            y = s["down_proj"](F.silu(s["gate_proj"](x)) * s["up_proj"](x))
            out = out + torch.sigmoid(self.shared_expert_gate(x)) * y
        return out
