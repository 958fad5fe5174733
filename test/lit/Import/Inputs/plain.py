"""A plain module factory (no device or dtype argument): compare places
the module itself. It has a 0-d parameter (a learned scale), a 0-d
buffer, an unused parameter and an unused buffer."""

import torch
import torch.nn as nn


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.alpha = nn.Parameter(torch.tensor(0.5))
        self.register_buffer("beta", torch.tensor(2.0))
        self.unused = nn.Parameter(torch.ones(3))
        self.register_buffer("unused_buffer", torch.zeros(5))

    def forward(self, x):
        return self.fc(x) * self.alpha + self.beta


def scaled():
    return Scaled()
