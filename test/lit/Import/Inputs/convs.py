import torch, torch.nn as nn
class C(nn.Module):
    def __init__(s, **kw):
        super().__init__(); s.c = nn.Conv2d(**kw)
    def forward(s, x): return s.c(x)
class C1(nn.Module):
    def __init__(s):
        super().__init__(); s.c = nn.Conv1d(8, 16, 3, padding=1)
    def forward(s, x): return torch.nn.functional.gelu(s.c(x))
def c3(): return C(in_channels=4, out_channels=8, kernel_size=3, padding=1)
def s2(): return C(in_channels=4, out_channels=8, kernel_size=3, stride=2, padding=1, bias=False)
def dw(): return C(in_channels=8, out_channels=8, kernel_size=7, padding=3, groups=8)
def gd(): return C(in_channels=8, out_channels=4, kernel_size=3, padding=2, dilation=2, groups=2)
def pe(): return C(in_channels=3, out_channels=8, kernel_size=4, stride=4)
def c1(): return C1()
