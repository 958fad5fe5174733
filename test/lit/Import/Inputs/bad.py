import torch, torch.nn as nn
class M(nn.Module):
    def __init__(self):
        super().__init__(); self.l = nn.Linear(8, 8)
    def forward(self, x):
        return torch.atan(self.l(x))
class D(nn.Module):
    def forward(self, x):
        return torch.nonzero(x)
def m(): return M()
def d(): return D()
