"""torch.compile(backend="mtsched") on a tensor-parallel Llama-3-8B-shaped
decoder layer, one process per GPU, under mpirun (or torchrun):

    mpirun --allow-run-as-root -np 2 python3 examples/torch/compile_tp.py \\
        --build-dir .device

Every rank builds its shard of the layer (TP=2: half the heads and half the
MLP's intermediate width; its all_reduces are torch's functional
collectives over the world), runs it eagerly (the reference: torch's NCCL)
and compiled with backend="mtsched": rank 0 decides the graph once with
mtsched-opt --ranks=<world> (one pre-sync), every rank loads the same
decisions and runs them, its collectives through the runtime's own NCCL
communicator (docs/RUNTIME.md "Several ranks"). Rank 0 prints one table:
per rank the error against eager, the decisions' hash, the pre-syncs, the
first call's seconds and the time per call beside eager's.

The world comes from Open MPI's OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK
(else RANK / WORLD_SIZE / LOCAL_RANK); MASTER_ADDR defaults to 127.0.0.1,
MASTER_PORT to 29531. Exit status 0 when every rank ran the layer through
mtsched, matched eager within bf16 tolerance and held the same decisions,
decided with one pre-sync.
"""

import argparse
import datetime
import hashlib
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import gallery  # noqa: E402
import models  # noqa: E402
from mtsched_torch import collectives  # noqa: E402
from mtsched_torch.compare import (TOLERANCE, errors, init_weights,  # noqa
                                   random_inputs)
from mtsched_torch.ranks import DISABLED_CHOICES  # noqa: E402


def env_int(*names, default=None):
    for n in names:
        if os.environ.get(n) is not None:
            return int(os.environ[n])
    return default


def time_us(fn, calls):
    """Mean microseconds per call over a fixed number of calls: every rank
    makes the same calls (each has collectives), so no count adapts."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    e0 = torch.cuda.Event(enable_timing=True)
    e1 = torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(calls):
        fn()
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) * 1000.0 / calls


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"),
                   help="where mtsched-opt and libmtsched_runtime.so are")
    p.add_argument("--size", choices=["decode", "prefill"], default="decode")
    p.add_argument("--calls", type=int, default=200,
                   help="calls timed per variant (the same on every rank)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    os.environ["MTSCHED_BUILD_DIR"] = os.path.abspath(a.build_dir)
    for name in ["MTSCHED_OPT", "MTSCHED_RUNTIME_LIB"]:
        os.environ.pop(name, None)
    rank = env_int("OMPI_COMM_WORLD_RANK", "RANK", default=0)
    world = env_int("OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", default=1)
    local = env_int("OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", default=rank)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    try:
        from mtsched_torch import backend
    except ImportError as e:
        print("compile_tp: the mtsched backend is unavailable: %s" % e,
              file=sys.stderr)
        return 2
    if not torch.cuda.is_available() or torch.cuda.device_count() <= local:
        print("compile_tp: rank %d needs CUDA device %d" % (rank, local),
              file=sys.stderr)
        return 2
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            timeout=datetime.timedelta(minutes=10))
    # The layer's "tp" group is the world: its all_reduces are functional
    # collectives over it (eager: torch's NCCL; compiled: the IR's).
    collectives.use_process_group("tp", dist.group.WORLD, world)
    tokens = 1 if a.size == "decode" else gallery.PREFILL
    ctx = gallery.CTX if a.size == "decode" else 2 * tokens
    specs = gallery._llama_layer_inputs("8b", tokens, ctx, world)
    torch.manual_seed(a.seed + rank)
    model = models.llama3_8b_layer(world_size=world, device=dev)
    model.eval()
    init_weights(model, a.seed + 1000 * rank)  # each rank its own shard
    # The activations are replicated (the same on every rank), the KV
    # cache is this rank's heads.
    inputs = random_inputs(specs, dev, a.seed)
    kv = random_inputs(specs[3:5], dev, a.seed + 7 * rank + 1)
    inputs[3:5] = kv
    status = "match"
    with torch.no_grad(), collectives.mode("functional"):
        ref = model(*inputs)
        eager_us = time_us(lambda: model(*inputs), a.calls)
        compiled = torch.compile(model, backend="mtsched", dynamic=False)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            t0 = time.time()
            out = compiled(*inputs)
            torch.cuda.synchronize()
            first = time.time() - t0
        for x in w:
            print("rank %d: warning: %s" % (rank, x.message), file=sys.stderr)
        _, nrm = errors(out.float().cpu().numpy(), ref.float().cpu().numpy())
        if nrm > TOLERANCE["bf16"]:
            status = "MISMATCH"
        us = time_us(lambda: compiled(*inputs), a.calls)
    recs = [r for r in backend.GRAPHS if r.get("world_size") == world]
    decisions = [sorted(r.get("decisions", {}).items()) for r in recs]
    dhash = hashlib.sha256(repr(decisions).encode()).hexdigest()[:12]
    mine = {
        "rank": rank, "device": torch.cuda.get_device_name(dev),
        "graphs_mtsched": backend.STATS["mtsched"],
        "graphs_eager": list(backend.STATS["eager"]),
        "presyncs": [r.get("presyncs") for r in recs],
        "decided": [r.get("decided") for r in recs],
        "decisions": decisions, "decisions_hash": dhash,
        "first_s": first, "eager_us": eager_us, "us": us, "err": nrm,
        "status": status, "opt_runs": backend.OPT_RUNS[0],
        "stats": [backend.live_stats(r["name"]) for r in recs],
    }
    everyone = [None] * world
    dist.all_gather_object(everyone, mine)
    ok = all(r["status"] == "match" and r["graphs_mtsched"] > 0 and
             not r["graphs_eager"] for r in everyone)
    same = len({r["decisions_hash"] for r in everyone}) == 1
    presync_ok = all(all(x == 1 for x in r["presyncs"]) and r["presyncs"]
                     for r in everyone)
    if rank == 0:
        print("Llama-3-8B decoder layer, TP=%d, %s (%d tokens, context %d), "
              "bf16, %s, torch.compile(backend=\"mtsched\") on every rank"
              % (world, a.size, tokens, ctx, mine["device"]))
        print("| rank | graphs by mtsched | decided | pre-syncs | "
              "decisions (hash) | mtsched-opt runs | first call s | "
              "eager us | mtsched us | vs eager | norm rel err | status |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in everyone:
            print("| %d | %d | %s | %s | %s | %d | %.1f | %.1f | %.1f | "
                  "%.2fx | %.1e | %s |" % (
                      r["rank"], r["graphs_mtsched"],
                      ",".join(str(x) for x in r["decided"]),
                      ",".join(str(x) for x in r["presyncs"]),
                      r["decisions_hash"], r["opt_runs"], r["first_s"],
                      r["eager_us"], r["us"], r["us"] / r["eager_us"],
                      r["err"], r["status"]))
        for r in everyone:
            for why in r["graphs_eager"]:
                print("rank %d: a graph ran eagerly: %s" % (r["rank"], why))
        print("decisions (rank 0):")
        for g in mine["decisions"]:
            for node, choice in g:
                print("  %%%s: %s" % (node, choice))
        print("runtime counters (rank 0): %s" % mine["stats"])
        print("collective choices: NCCL only (--disable-choices=%s: the "
              "runtime does not run peer-memory collectives across "
              "processes; docs/RUNTIME.md)" % DISABLED_CHOICES)
        print("same decisions on every rank: %s" % ("yes" if same else "NO"))
        print("one pre-sync per decided graph: %s"
              % ("yes" if presync_ok else "NO"))
        print("outputs equal to eager's (bf16 tolerance %g) on every rank: %s"
              % (TOLERANCE["bf16"], "yes" if ok else "NO"))
    dist.barrier()
    dist.destroy_process_group()
    return 0 if ok and same and presync_ok else 1


if __name__ == "__main__":
    sys.exit(main())
