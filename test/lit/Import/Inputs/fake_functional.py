"""On PyTorch 1.13, defines torch.ops._c10d_functional with the schemas and
shape semantics of PyTorch 2.x's functional collectives, so the importer's
mapping of them (what torch.export produces) is tested where CI has no
PyTorch 2. On PyTorch 2.x it does nothing: the real ops are there."""

import torch

from mtsched_torch import collectives

if not collectives.functional_available():
    _lib = torch.library.Library("_c10d_functional", "DEF")
    _lib.define("all_reduce(Tensor input, str reduce_op, str group_name) "
                "-> Tensor")
    _lib.define("all_gather_into_tensor(Tensor input, int group_size, "
                "str group_name) -> Tensor")
    _lib.define("reduce_scatter_tensor(Tensor input, str reduce_op, "
                "int group_size, str group_name) -> Tensor")
    _lib.define("all_to_all_single(Tensor input, int[] output_split_sizes, "
                "int[] input_split_sizes, str group_name) -> Tensor")
    _lib.define("wait_tensor(Tensor tensor) -> Tensor")
    _kernels = {
        "all_reduce": lambda x, op, g: x.clone(),
        "all_gather_into_tensor": lambda x, n, g: torch.cat([x] * n, 0),
        "reduce_scatter_tensor":
            lambda x, op, n, g: x.narrow(0, 0, x.shape[0] // n).clone(),
        "all_to_all_single": lambda x, o, i, g: x.clone(),
        "wait_tensor": lambda x: x.clone(),
    }

    def _below(name):
        def kernel(*args):
            guard = torch._C._AutoDispatchBelowAutograd()
            try:
                return getattr(torch.ops._c10d_functional, name)(*args)
            finally:
                del guard
        return kernel

    for _n, _fn in _kernels.items():
        _lib.impl(_n, _fn, "CompositeExplicitAutograd")
        _lib.impl(_n, _below(_n), "AutogradMeta")

import os  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from tiny import tiny_mlp, tiny_sp  # noqa: E402,F401


def tiny_moe(world_size=4, device=None, dtype=torch.float32):
    """A small expert-parallel MoE block (8 experts, top-2)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                    "..", "..", "examples", "torch"))
    from layers import EPMoEBlock
    return EPMoEBlock(64, 128, experts=8, top_k=2, ep=world_size,
                      device=device, dtype=dtype)
