"""Stand-ins for the custom collectives of vLLM-style engines (any op whose
name contains all_reduce / all_gather / reduce_scatter / all_to_all), with
meta kernels so they trace: the importer must turn them into IR collectives
with their group and world size."""

import torch
import torch.nn as nn

_lib = torch.library.Library("vllm", "DEF")
_lib.define("all_reduce(Tensor x, str group_name) -> Tensor")
_lib.define("tensor_model_parallel_all_gather(Tensor x, int dim, "
            "int world_size) -> Tensor")
_lib.define("reduce_scatter(Tensor x, int world_size, str group_name) "
            "-> Tensor")


def _below_autograd(fn):
    def kernel(*args):
        guard = torch._C._AutoDispatchBelowAutograd()
        try:
            return fn(*args)
        finally:
            del guard
    return kernel


def _impl(name, fn):
    _lib.impl(name, fn, "CompositeExplicitAutograd")
    _lib.impl(name, _below_autograd(getattr(torch.ops.vllm, name)),
              "AutogradMeta")


_impl("all_reduce", lambda x, g: x.clone())
_impl("tensor_model_parallel_all_gather",
      lambda x, d, w: torch.cat([x] * w, dim=d))
_impl("reduce_scatter", lambda x, w, g: x.narrow(0, 0, x.shape[0] // w).clone())


class VllmBlock(nn.Module):
    """all_gather on the last dimension (4 ranks of "tp"), a projection,
    all_reduce on "tp", reduce_scatter on a 2-rank group "dp"."""

    def __init__(self, device=None, dtype=torch.float32):
        super().__init__()
        self.proj = nn.Linear(64, 32, bias=False, device=device, dtype=dtype)

    def forward(self, x):
        h = torch.ops.vllm.tensor_model_parallel_all_gather(x, 1, 4)
        y = torch.ops.vllm.all_reduce(self.proj(h), "tp")
        return torch.ops.vllm.reduce_scatter(y, 2, "dp")


def vllm_block(world_size=4, device=None, dtype=torch.float32):
    return VllmBlock(device, dtype)
