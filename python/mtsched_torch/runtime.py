"""libmtsched_runtime from Python, through ctypes (no build dependency).

    from mtsched_torch import runtime
    mod = runtime.Module(open("decided.mir").read())
    g = mod.graph(device="cpu")           # or "cuda"
    outs = g.run([x, w])                  # numpy arrays (cpu)
    outs = g.run_torch([x_cuda, w_cuda])  # torch tensors (cuda, current stream)
    g.stats()   # {"runs": 2, "kernels_cached": ..., "captures": ...}

The library is found by ``find_library``: $MTSCHED_RUNTIME_LIB, else
``<build>/lib/RuntimeApi/libmtsched_runtime.so`` for the build directory
given (or $MTSCHED_BUILD_DIR, or the source tree's ``build/``), else an
installed ``<prefix>/lib/libmtsched_runtime.so`` above this package.
docs/RUNTIME.md describes the C API underneath.
"""

import ctypes
import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
LIBNAME = "libmtsched_runtime.so"

# mtsched_dtype -> (IR name, numpy storage type). bf16 and fp8 have no numpy
# type: they are held as their raw bits (uint16 / uint8).
DTYPES = {
    0: ("f32", np.float32),
    1: ("f16", np.float16),
    2: ("bf16", np.uint16),
    3: ("i32", np.int32),
    4: ("i64", np.int64),
    5: ("f8e4m3", np.uint8),
    6: ("f8e5m2", np.uint8),
    7: ("bool", np.bool_),
}


class RuntimeError_(RuntimeError):
    """An error the library reported (its message)."""


def find_library(build_dir=None):
    """The path of libmtsched_runtime.so (see the module's docstring)."""
    env = os.environ.get("MTSCHED_RUNTIME_LIB")
    if env:
        return env
    cands = []
    for b in [build_dir, os.environ.get("MTSCHED_BUILD_DIR"),
              os.path.join(ROOT, "build")]:
        if b:
            cands += [os.path.join(b, "lib", "RuntimeApi", LIBNAME),
                      os.path.join(b, "lib", LIBNAME), os.path.join(b, LIBNAME)]
    # Installed: <prefix>/lib/libmtsched_runtime.so, the package somewhere
    # under <prefix>.
    d = os.path.dirname(os.path.abspath(__file__))
    for _ in range(6):
        d = os.path.dirname(d)
        cands.append(os.path.join(d, "lib", LIBNAME))
    for c in cands:
        if os.path.isfile(c):
            return c
    raise FileNotFoundError(
        "%s not found (build the mtsched_runtime target, pass the build "
        "directory, or set MTSCHED_RUNTIME_LIB); looked in: %s"
        % (LIBNAME, ", ".join(cands)))


_LIBS = {}


def load_library(path=None, build_dir=None):
    """The library as a ctypes.CDLL with its prototypes declared (loaded
    once per path)."""
    path = os.path.abspath(path or find_library(build_dir))
    lib = _LIBS.get(path)
    if lib is not None:
        return lib
    lib = ctypes.CDLL(path)
    P, I, I64, S = (ctypes.c_void_p, ctypes.c_int, ctypes.c_int64,
                    ctypes.c_size_t)
    EP = ctypes.POINTER(ctypes.c_void_p)
    C = ctypes.c_char_p
    protos = {
        "mtsched_runtime_api_version": (I, []),
        "mtsched_module_load": (P, [C, S, EP]),
        "mtsched_module_destroy": (None, [P]),
        "mtsched_module_num_graphs": (I, [P]),
        "mtsched_module_graph_name": (C, [P, I]),
        "mtsched_graph_prepare": (P, [P, C, C, C, EP]),
        "mtsched_graph_destroy": (None, [P]),
        "mtsched_graph_num_inputs": (I, [P]),
        "mtsched_graph_num_outputs": (I, [P]),
        "mtsched_graph_input_name": (C, [P, I]),
        "mtsched_graph_output_name": (C, [P, I]),
        "mtsched_graph_input_dtype": (I, [P, I]),
        "mtsched_graph_output_dtype": (I, [P, I]),
        "mtsched_graph_input_rank": (I, [P, I]),
        "mtsched_graph_output_rank": (I, [P, I]),
        "mtsched_graph_input_dim": (I64, [P, I, I]),
        "mtsched_graph_output_dim": (I64, [P, I, I]),
        "mtsched_graph_run": (I, [P, EP, EP, P, EP]),
        "mtsched_free_error": (None, [P]),
    }
    for name, (res, args) in protos.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    # Newer than the rest of version 1: a library without it reports no
    # counters (Graph.stats() is then empty).
    if hasattr(lib, "mtsched_graph_stat"):
        lib.mtsched_graph_stat.restype = I64
        lib.mtsched_graph_stat.argtypes = [P, C]
    # Version 2 added several ranks (mtsched_comm_id,
    # mtsched_module_set_ranks); a version 1 library runs one rank.
    if hasattr(lib, "mtsched_comm_id"):
        lib.mtsched_comm_id.restype = I
        lib.mtsched_comm_id.argtypes = [C, P, S, EP]
        lib.mtsched_module_set_ranks.restype = I
        lib.mtsched_module_set_ranks.argtypes = [P, I, I, C, S, EP]
    if lib.mtsched_runtime_api_version() not in (1, 2):
        raise RuntimeError_("%s has API version %d; this module speaks 1 "
                            "and 2"
                            % (path, lib.mtsched_runtime_api_version()))
    _LIBS[path] = lib
    return lib


def _take_error(lib, err):
    msg = ctypes.string_at(err.value).decode("utf-8", "replace") \
        if err.value else "(no message)"
    lib.mtsched_free_error(err)
    return RuntimeError_(msg.rstrip())


class Tensor:
    """An input or output of a graph: name, IR dtype name, shape, numpy
    storage type."""

    def __init__(self, name, code, shape):
        self.name = name
        self.code = code
        self.dtype, self.np_dtype = DTYPES[code]
        self.shape = tuple(shape)

    def __repr__(self):
        return "%%%s: %s%s" % (self.name, self.dtype, list(self.shape))


def bf16_bits(a):
    """float values -> bfloat16 bits (uint16), round to nearest even (NaN
    stays NaN)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(a, dtype=np.float32))
    return np.where(nan, np.uint16(0x7FC0), rounded)


def bf16_to_float(bits):
    """bfloat16 bits (uint16) -> float32 values."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16) \
        .view(np.float32)


# mtsched_graph_stat's counters (docs/RUNTIME.md).
STATS = ("runs", "kernels", "kernels_cached", "kernels_compiled", "captures",
         "graphs_kept", "staged_inputs", "staged_outputs", "arena_bytes",
         "allocations")


class Graph:
    """A prepared graph (mtsched_graph_prepare); run it on numpy arrays
    ("cpu") or torch tensors ("cuda")."""

    def __init__(self, module, name, device, kernel_cache_dir):
        self._lib = module._lib
        self._module = module  # the module must outlive the graph
        self.device = device
        err = ctypes.c_void_p()
        self._h = self._lib.mtsched_graph_prepare(
            module._h, name.encode() if name else None, device.encode(),
            kernel_cache_dir.encode() if kernel_cache_dir else None,
            ctypes.byref(err))
        if not self._h:
            raise _take_error(self._lib, err)
        L = self._lib

        def describe(n, nm, dt, rk, dim):
            out = []
            for i in range(n(self._h)):
                shape = [dim(self._h, i, d) for d in range(rk(self._h, i))]
                out.append(Tensor(nm(self._h, i).decode(), dt(self._h, i),
                                  shape))
            return out
        self.inputs = describe(L.mtsched_graph_num_inputs,
                               L.mtsched_graph_input_name,
                               L.mtsched_graph_input_dtype,
                               L.mtsched_graph_input_rank,
                               L.mtsched_graph_input_dim)
        self.outputs = describe(L.mtsched_graph_num_outputs,
                                L.mtsched_graph_output_name,
                                L.mtsched_graph_output_dtype,
                                L.mtsched_graph_output_rank,
                                L.mtsched_graph_output_dim)

    def stats(self):
        """The graph's counters (STATS) by name: kernels loaded, from the
        kernel cache, compiled by NVRTC, graphs captured, ... Empty with a
        library that keeps none."""
        f = getattr(self._lib, "mtsched_graph_stat", None)
        if f is None or not self._h:
            return {}
        return {k: f(self._h, k.encode()) for k in STATS}

    def close(self):
        if getattr(self, "_h", None):
            self._lib.mtsched_graph_destroy(self._h)
            self._h = None

    def __del__(self):
        self.close()

    def _run_ptrs(self, ins, outs, stream):
        n_in, n_out = len(self.inputs), len(self.outputs)
        in_arr = (ctypes.c_void_p * max(n_in, 1))(*ins)
        out_arr = (ctypes.c_void_p * max(n_out, 1))(*outs)
        err = ctypes.c_void_p()
        rc = self._lib.mtsched_graph_run(self._h, in_arr, out_arr, stream,
                                         ctypes.byref(err))
        if rc != 0:
            raise _take_error(self._lib, err)

    def _host_input(self, t, a):
        a = np.asarray(a)
        if a.shape != t.shape:
            raise ValueError("input %r: shape %s, expected %s"
                             % (t.name, a.shape, t.shape))
        if t.dtype == "bf16" and a.dtype != np.uint16:
            a = bf16_bits(a)
        return np.ascontiguousarray(a, dtype=t.np_dtype)

    def run(self, inputs, raw=False):
        """Runs on "cpu": inputs are numpy arrays (a list in the graph's
        order, or a dict by name) of the inputs' shapes; a bf16 input may
        be given as floats (rounded) or as uint16 bits. Returns the outputs
        as numpy arrays; bf16 ones as float32 unless raw."""
        if self.device != "cpu":
            raise ValueError("run() takes host arrays: this graph runs on %s "
                             "(use run_torch)" % self.device)
        if isinstance(inputs, dict):
            inputs = [inputs[t.name] for t in self.inputs]
        if len(inputs) != len(self.inputs):
            raise ValueError("%d inputs given, the graph has %d"
                             % (len(inputs), len(self.inputs)))
        ins = [self._host_input(t, a) for t, a in zip(self.inputs, inputs)]
        outs = [np.empty(t.shape, dtype=t.np_dtype) for t in self.outputs]
        self._run_ptrs([a.ctypes.data for a in ins],
                       [a.ctypes.data for a in outs], None)
        if not raw:
            outs = [bf16_to_float(a) if t.dtype == "bf16" else a
                    for t, a in zip(self.outputs, outs)]
        return outs

    def _torch_specs(self):
        """(input (shape, dtype) pairs, output (shape, dtype) pairs) as torch
        has them, made once: run_torch is on every call's path."""
        if getattr(self, "_specs", None) is None:
            import torch
            tdt = {"f32": torch.float32, "f16": torch.float16,
                   "bf16": torch.bfloat16, "i32": torch.int32,
                   "i64": torch.int64, "bool": torch.bool}
            self._specs = ([(t.shape, tdt.get(t.dtype)) for t in self.inputs],
                           [(t.shape, tdt.get(t.dtype))
                            for t in self.outputs])
            self._in_arr = (ctypes.c_void_p * max(len(self.inputs), 1))()
            self._out_arr = (ctypes.c_void_p * max(len(self.outputs), 1))()
            self._err = ctypes.c_void_p()
        return self._specs

    def torch_runner(self, device_index):
        """run_torch's work without its checks, as a callable inputs ->
        outputs on GPU device_index and its current stream: for a caller
        that guarantees what run_torch checks (each input contiguous, on
        that GPU, of the graph's shape and dtype), as the torch backend
        does behind Dynamo's guards. It is on every call's path, where
        run_torch's checks and a torch.cuda.Stream object per call cost
        CPU time: through run_torch the Llama-3-8B MLP (a 99 us graph) ran
        10% over --run's time of the same graph (docs/BENCHMARKS.md)."""
        import torch
        if self.device == "cpu":
            return self.run_torch
        _, outs_spec = self._torch_specs()
        lib, h, err = self._lib, self._h, self._err
        in_arr, out_arr = self._in_arr, self._out_arr
        dev = torch.device("cuda", device_index)
        empty = torch.empty
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is None:
            def stream():
                return torch.cuda.current_stream(dev).cuda_stream
        else:
            def stream():
                return raw(device_index)
        graph_run, byref = lib.mtsched_graph_run, ctypes.byref(err)

        def run(inputs):
            for i, x in enumerate(inputs):
                in_arr[i] = x.data_ptr()
            outs = [empty(shape, dtype=dt, device=dev)
                    for shape, dt in outs_spec]
            for i, o in enumerate(outs):
                out_arr[i] = o.data_ptr()
            if graph_run(h, in_arr, out_arr, stream(), byref) != 0:
                raise _take_error(lib, err)
            return outs
        return run

    def run_torch(self, inputs, outputs=None, stream=None):
        """Runs on "cuda" on torch tensors (contiguous, on the GPU, in the
        inputs' dtypes), on `stream` (default: torch's current stream).
        Returns the output tensors (new ones unless given)."""
        import torch
        ins, outs_spec = self._torch_specs()
        if len(inputs) != len(self.inputs):
            raise ValueError("%d inputs given, the graph has %d"
                             % (len(inputs), len(self.inputs)))
        for (shape, dt), t, x in zip(ins, self.inputs, inputs):
            if x.dtype != dt or x.shape != shape or not x.is_contiguous():
                raise ValueError("input %r: %s %s%s, expected a contiguous "
                                 "%s%s" % (t.name, x.dtype, list(x.shape),
                                           "" if x.is_contiguous() else
                                           " (not contiguous)", t.dtype,
                                           list(t.shape)))
        dev = inputs[0].device if inputs else torch.device("cuda")
        if outputs is None:
            outputs = [torch.empty(shape, dtype=dt, device=dev)
                       for shape, dt in outs_spec]
        if self.device == "cpu":
            host = self.run([x.detach().cpu().float().numpy()
                             if x.dtype == torch.bfloat16 else
                             x.detach().cpu().numpy() for x in inputs])
            for o, h in zip(outputs, host):
                o.copy_(torch.from_numpy(np.ascontiguousarray(h)))
            return outputs
        if stream is None:
            stream = torch.cuda.current_stream(dev).cuda_stream
        # The pointer arrays are reused: no ctypes array is built per call.
        in_arr, out_arr, err = self._in_arr, self._out_arr, self._err
        for i, x in enumerate(inputs):
            in_arr[i] = x.data_ptr()
        for i, o in enumerate(outputs):
            out_arr[i] = o.data_ptr()
        if self._lib.mtsched_graph_run(self._h, in_arr, out_arr, stream,
                                       ctypes.byref(err)) != 0:
            raise _take_error(self._lib, err)
        return outputs


COMM_ID_BYTES = 128


def comm_id(device="cuda", library=None, build_dir=None):
    """A new communicator id (bytes; NCCL's unique id) for the ranks of a
    graph of world_size > 1: made on rank 0 and handed to every rank
    (Module.set_ranks)."""
    lib = load_library(library, build_dir)
    if not hasattr(lib, "mtsched_comm_id"):
        raise RuntimeError_("this runtime library (API version %d) runs one "
                            "rank" % lib.mtsched_runtime_api_version())
    buf = ctypes.create_string_buffer(COMM_ID_BYTES)
    err = ctypes.c_void_p()
    if lib.mtsched_comm_id(device.encode(), buf, COMM_ID_BYTES,
                           ctypes.byref(err)) != 0:
        raise _take_error(lib, err)
    return buf.raw


class Module:
    """A loaded decided module (mtsched_module_load)."""

    def __init__(self, text, library=None, build_dir=None):
        self._lib = load_library(library, build_dir)
        data = text.encode() if isinstance(text, str) else bytes(text)
        err = ctypes.c_void_p()
        self._h = self._lib.mtsched_module_load(data, len(data),
                                                ctypes.byref(err))
        if not self._h:
            raise _take_error(self._lib, err)

    @property
    def graph_names(self):
        return [self._lib.mtsched_module_graph_name(self._h, i).decode()
                for i in range(self._lib.mtsched_module_num_graphs(self._h))]

    def set_ranks(self, rank, world_size, comm_id=None):
        """This process is `rank` of `world_size`; `comm_id` (comm_id() of
        rank 0, 128 bytes) is the ranks' communicator. Graphs prepared
        afterwards run their collectives over it; every rank prepares the
        same graph at the same time."""
        if not hasattr(self._lib, "mtsched_module_set_ranks"):
            raise RuntimeError_("this runtime library runs one rank")
        err = ctypes.c_void_p()
        data = bytes(comm_id) if comm_id is not None else None
        if self._lib.mtsched_module_set_ranks(
                self._h, int(rank), int(world_size), data,
                len(data) if data is not None else 0, ctypes.byref(err)) != 0:
            raise _take_error(self._lib, err)

    def graph(self, name=None, device="cpu", kernel_cache_dir=None):
        return Graph(self, name, device, kernel_cache_dir)

    def close(self):
        if getattr(self, "_h", None):
            self._lib.mtsched_module_destroy(self._h)
            self._h = None

    def __del__(self):
        self.close()
