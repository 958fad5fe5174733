"""Modules that use the Core ATen ops the zoo does not (each factory a
handful of ops), for coreops.mir: imported with no custom op and checked
against eager through the fp64 interpreter."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Fn(nn.Module):
    def __init__(self, fn, **mods):
        super().__init__()
        self.fn = fn
        for k, m in mods.items():
            setattr(self, k, m)

    def forward(self, *xs):
        return self.fn(self, *xs)


def reductions():
    def f(m, x):
        v, i = x.max(dim=1)
        return (v, i, x.argmax(-1), x.argmin(0), torch.amin(x, 1),
                (x > 0.5).any(-1), (x > -3).all(1), x.sum((0, 1)),
                x.min(), x.prod(1), torch.prod(x, 0, keepdim=True),
                (x * 4).int().prod(-1), x.prod())
    return Fn(f)


def pointwise():
    def f(m, x, y):
        return (torch.log2(x.abs() + 1), torch.log10(x.abs() + 1),
                torch.trunc(x * 3), torch.tan(x * 0.5), torch.sinh(x),
                torch.cosh(x), torch.logical_xor(x > 0, y > 0),
                F.elu(x), torch.div(x, y.abs() + 0.5, rounding_mode="floor"),
                torch.div(x, y.abs() + 0.5, rounding_mode="trunc"),
                torch.remainder(x, 0.7), torch.floor_divide(x, 0.3),
                torch.isnan(x), torch.where(x > y, x, y),
                x.masked_fill(y > 0, float("-inf")).softmax(-1),
                torch.erf(x), torch.log1p(x.abs()), torch.expm1(x),
                torch.sign(y), torch.round(x * 4), torch.ceil(x),
                F.gelu(x, approximate="tanh"), F.leaky_relu(y, 0.2),
                torch.clamp(x, -0.5, 0.5), F.hardtanh(y), F.relu6(x * 8))
    return Fn(f)


def norms():
    def f(m, x):
        return (m.gn(x), m.bn(x), F.instance_norm(x) if False else m.ln(x))
    return Fn(f, gn=nn.GroupNorm(2, 4), bn=nn.BatchNorm2d(4),
              ln=nn.LayerNorm([5, 6]))


def pads():
    def f(m, x):
        return (F.pad(x, (1, 2, 0, 1)), F.pad(x, (2, 1, 1, 2), "reflect"),
                F.pad(x, (1, 1, 2, 0), "replicate"), torch.flip(x, [2, 3]),
                F.interpolate(x, scale_factor=2, mode="nearest"),
                F.pad(x, (-1, 1), value=0.5))
    return Fn(f)


def pools():
    def f(m, x):
        return (F.max_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 2),
                F.avg_pool2d(x, 3, 1, 1), F.adaptive_avg_pool2d(x, 1),
                F.adaptive_avg_pool2d(x, (3, 3)))
    return Fn(f)


def indexing():
    def f(m, x, ids):
        y = x.clone()
        y[ids] = x[:ids.shape[0]] * 2
        z = torch.zeros_like(x)
        z.index_put_((ids,), x[:ids.shape[0]], accumulate=True)
        g = torch.gather(x, 1, ids.view(-1, 1).expand(-1, 2) % x.shape[1])
        return y, z, g, x[ids], x[:, [0, -1]]
    return Fn(f)


def more():
    def f(m, x, y):
        z = x.clone()
        z[:, 0] = y[:, 1]
        w = torch.zeros_like(x).scatter_reduce(
            1, (y.abs() * 3).long() % x.shape[1], x, "sum")
        c = torch.empty_like(x)
        c.copy_(y)
        return (torch.exp(x), torch.floor(x * 2), torch.fmod(x, 0.4),
                torch.isinf(x / (y > 0).float()),
                torch.logical_and(x > 0, y > 0), torch.logical_or(x > 0, y < 0),
                torch.logical_not(x > 0), ~(y > 0), torch.amax(x, 1),
                torch.var(x, 1), torch.std(x, 0, unbiased=False),
                F.log_softmax(x, -1), x.repeat(2, 1), z, w, c,
                F.pad(x[None], (2, 1), "reflect")[0],
                F.dropout(x, 0.5, training=False))
    return Fn(f)
