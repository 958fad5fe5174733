"""Traceable collectives for models that mtsched imports.

Model code calls the helpers of this module (``all_reduce``, ``all_gather``,
``reduce_scatter``, ``all_to_all``) instead of ``torch.distributed`` so that
the same module can be

* traced without GPUs or real process groups on PyTorch 1.13 (Debian 12's
  ``python3-torch``), which has no functional collectives: the helpers call
  small ``torch.library`` ops, ``mtsched::all_reduce(Tensor x, str group,
  int world_size)`` and friends, whose kernels work on meta and CPU tensors;
* exported with ``torch.export`` on PyTorch 2.x, where the helpers call the
  functional collectives (``torch.ops._c10d_functional.all_reduce`` and its
  ``wait_tensor``) on a fake process group, as real programs do;
* run eagerly on one rank (``set_mode("local")``): every collective of a
  one-rank group is the identity, which is what the GPU comparison runs.

The ``mtsched::`` kernels compute the right *shapes* for any world size but
real values only on one rank (all_reduce and all_to_all return a copy,
all_gather repeats the input, reduce_scatter keeps the first slice): they
exist for tracing, never for running a multi-rank model.

The importer (``mtsched_torch.convert``) recognises both spellings, plus any
custom op whose name contains all_reduce / all_gather / reduce_scatter /
all_to_all (vLLM's ``vllm.all_reduce``, ...).
"""

import contextlib
import sys

import torch

__all__ = [
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "set_mode",
    "get_mode", "mode", "group_size", "group_name_of", "setup_groups",
    "functional_available", "use_process_group",
]

# -- the mtsched:: library ops ---------------------------------------------

_LIB = None


def _register_library():
    """Defines the mtsched:: ops once per process."""
    global _LIB
    if _LIB is not None:
        return
    try:
        # Already defined (e.g. the module was imported twice under two
        # names): reuse it.
        torch.ops.mtsched.all_reduce.default
        _LIB = True
        return
    except (AttributeError, RuntimeError):
        pass
    lib = torch.library.Library("mtsched", "DEF")
    lib.define("all_reduce(Tensor x, str group, int world_size) -> Tensor")
    lib.define("all_gather(Tensor x, int dim, str group, int world_size) -> Tensor")
    lib.define("reduce_scatter(Tensor x, int dim, str group, int world_size) -> Tensor")
    lib.define("all_to_all(Tensor x, int dim, str group, int world_size) -> Tensor")

    def _all_reduce(x, group, world_size):
        return x.clone()

    def _all_gather(x, dim, group, world_size):
        return torch.cat([x] * world_size, dim=dim)

    def _reduce_scatter(x, dim, group, world_size):
        return x.narrow(dim, 0, x.shape[dim] // world_size).clone()

    def _all_to_all(x, dim, group, world_size):
        return x.clone()

    kernels = {
        "all_reduce": _all_reduce,
        "all_gather": _all_gather,
        "reduce_scatter": _reduce_scatter,
        "all_to_all": _all_to_all,
    }
    for name, fn in kernels.items():
        lib.impl(name, fn, "CompositeExplicitAutograd")
        # PyTorch 1.13 has no autograd fallthrough for meta tensors: step
        # below autograd and call the op again, so a tracer records it.
        # (2.x has an autograd fallback for custom ops and may refuse this.)
        try:
            lib.impl(name, _below_autograd(name), "AutogradMeta")
        except (RuntimeError, ValueError):
            pass
    _LIB = lib


def _below_autograd(name):
    def kernel(*args):
        guard = torch._C._AutoDispatchBelowAutograd()
        try:
            return getattr(torch.ops.mtsched, name)(*args)
        finally:
            del guard
    return kernel


_register_library()

# -- modes -------------------------------------------------------------------

_MODE = "auto"
_GROUPS = {}  # our group name -> (size, torch ProcessGroup or None)
_NAMES = {}  # our group name -> a real process group's name (use_process_group)


def functional_available():
    """True when this PyTorch has the functional collectives (2.x)."""
    try:
        torch.ops._c10d_functional.all_reduce.default
        torch.ops._c10d_functional.wait_tensor.default
        return True
    except (AttributeError, RuntimeError):
        return False


def set_mode(mode):
    """Selects how the helpers are spelled in a trace.

    ``"mtsched"``: the mtsched:: library ops (any PyTorch);
    ``"functional"``: ``torch.ops._c10d_functional`` + ``wait_tensor``
    (PyTorch 2.x); ``"local"``: the identity, for eager runs on one rank;
    ``"auto"``: functional where available, else mtsched.
    """
    global _MODE
    if mode not in ("auto", "mtsched", "functional", "local"):
        raise ValueError("unknown collectives mode %r" % mode)
    if mode == "functional" and not functional_available():
        raise RuntimeError("this PyTorch (%s) has no functional collectives"
                           % torch.__version__)
    _MODE = mode


def get_mode():
    """The effective mode ("auto" resolved)."""
    if _MODE == "auto":
        return "functional" if functional_available() else "mtsched"
    return _MODE


@contextlib.contextmanager
def mode(m):
    """``with collectives.mode("local"): ...``"""
    old = _MODE
    set_mode(m)
    try:
        yield
    finally:
        set_mode(old)


def setup_groups(groups, world_size):
    """Makes the process groups ``{name: size}`` known for functional mode.

    On PyTorch 2.x with a fake process-group backend this initialises a fake
    world of ``world_size`` ranks and one subgroup per name, so functional
    collectives carry real group names; without one the group names are
    passed as they are (tracing needs only shapes). Returns a dict
    ``{torch group name: our name}`` for the importer.
    """
    _GROUPS.clear()
    _NAMES.clear()
    reverse = {}
    pgs = {}
    if get_mode() == "functional":
        pgs = _fake_groups(groups, world_size)
    for name, size in groups.items():
        pg = pgs.get(name)
        _GROUPS[name] = (size, pg)
        reverse[group_name_of(name)] = name
    return reverse


def _fake_groups(groups, world_size):
    try:
        import torch.distributed as dist
        from torch.testing._internal.distributed.fake_pg import FakeStore
    except Exception as e:  # noqa: BLE001 - any import problem means "none"
        print("mtsched_torch: warning: no fake process group in this PyTorch "
              "(%s); functional collectives use bare group names" % e,
              file=sys.stderr)
        return {}
    try:
        if not dist.is_initialized():
            dist.init_process_group("fake", store=FakeStore(), rank=0,
                                    world_size=world_size)
        out = {}
        for name, size in groups.items():
            out[name] = dist.new_group(ranks=list(range(size)))
        return out
    except Exception as e:  # noqa: BLE001
        print("mtsched_torch: warning: cannot set up a fake process group "
              "(%s); functional collectives use bare group names" % e,
              file=sys.stderr)
        return {}


def use_process_group(group, pg, size):
    """Our group ``group`` is the real process group ``pg`` of ``size``
    ranks (a program run under mpirun or torchrun): in functional mode
    the helpers then pass its name, so that eager runs really communicate
    and Dynamo's graph names a group torch.distributed knows."""
    _GROUPS[group] = (size, pg)
    # The name, resolved now: code Dynamo traces then reads a string, not
    # an attribute of a ProcessGroup.
    _NAMES[group] = _pg_name(pg) or group


def _pg_name(pg):
    """torch.distributed's name of process group pg (what functional
    collectives take), None if this PyTorch has none."""
    name = getattr(pg, "group_name", None)
    if name:
        return name
    try:
        from torch.distributed import distributed_c10d as c10d
    except ImportError:
        return None
    get = getattr(c10d, "_get_process_group_name", None)
    if get is not None:
        try:
            return get(pg)
        except Exception:  # noqa: BLE001 - not a known group: look below
            pass
    return getattr(getattr(c10d, "_world", None), "pg_names", {}).get(pg)


def group_size(group, default):
    """The size of a group made by setup_groups, else default."""
    return _GROUPS.get(group, (default, None))[0]


def group_name_of(group):
    """The name functional collectives pass for our group ``group``."""
    if group in _NAMES:
        return _NAMES[group]
    pg = _GROUPS.get(group, (None, None))[1]
    if pg is not None:
        name = getattr(pg, "group_name", None)
        if name:
            return name
    return group


# -- the helpers ------------------------------------------------------------


def _functional():
    return torch.ops._c10d_functional


def all_reduce(x, group="tp", world_size=1):
    """Sum of x over the ranks of ``group``."""
    m = get_mode()
    if m == "local":
        return x
    if m == "functional":
        f = _functional()
        return f.wait_tensor(f.all_reduce(x, "sum", group_name_of(group)))
    return torch.ops.mtsched.all_reduce(x, group, world_size)


def all_gather(x, dim=0, group="tp", world_size=1):
    """The ranks' x concatenated along ``dim``."""
    m = get_mode()
    if m == "local":
        return torch.cat([x] * world_size, dim=dim) if world_size > 1 else x
    if m == "functional":
        f = _functional()
        if dim != 0:
            x = x.movedim(dim, 0).contiguous()
        y = f.wait_tensor(f.all_gather_into_tensor(x.contiguous(), world_size,
                                                   group_name_of(group)))
        return y.movedim(0, dim) if dim != 0 else y
    return torch.ops.mtsched.all_gather(x, dim, group, world_size)


def reduce_scatter(x, dim=0, group="tp", world_size=1):
    """This rank's slice along ``dim`` of the sum of x over ``group``."""
    m = get_mode()
    if m == "local":
        return x.narrow(dim, 0, x.shape[dim] // world_size)
    if m == "functional":
        f = _functional()
        if dim != 0:
            x = x.movedim(dim, 0)
        y = f.wait_tensor(f.reduce_scatter_tensor(x.contiguous(), "sum",
                                                  world_size,
                                                  group_name_of(group)))
        return y.movedim(0, dim) if dim != 0 else y
    return torch.ops.mtsched.reduce_scatter(x, dim, group, world_size)


def all_to_all(x, dim=0, group="ep", world_size=1):
    """Equal-split all-to-all along ``dim`` (chunk r goes to rank r)."""
    m = get_mode()
    if m == "local":
        return x
    if m == "functional":
        f = _functional()
        if dim != 0:
            x = x.movedim(dim, 0)
        split = [x.shape[0] // world_size] * world_size
        y = f.wait_tensor(f.all_to_all_single(x.contiguous(), split, split,
                                              group_name_of(group)))
        return y.movedim(0, dim) if dim != 0 else y
    return torch.ops.mtsched.all_to_all(x, dim, group, world_size)
