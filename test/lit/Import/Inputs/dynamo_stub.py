"""torch._dynamo for the backend's tests on PyTorch 1.13, which has none:
a module whose register_backend records each backend in REGISTERED, and a
version that lets mtsched_torch.backend import. Shared by
backend_stub_dynamo.py and backend_ranks_gloo.py; call install() before
importing mtsched_torch.backend."""

import sys
import types

import torch

REGISTERED = {}


def register_backend(name=None):
    def deco(fn):
        REGISTERED[name] = fn
        return fn
    return deco


def install():
    torch.__version__ = "2.0.0+stub"
    stub = types.ModuleType("torch._dynamo")
    stub.register_backend = register_backend
    sys.modules["torch._dynamo"] = stub
    torch._dynamo = stub
