"""The runtime library's graphs of several ranks, without Dynamo: under
mpirun (one process per GPU), rank 0 decides a small SPMD graph (matmul,
all_reduce, all_gather, reduce_scatter) with mtsched-opt --ranks=<world>
--backend=cuda and only NCCL collective choices, broadcasts the decided
text and NCCL's id (mtsched_comm_id), and every rank runs it through
libmtsched_runtime (mtsched_module_set_ranks, "cuda:<local rank>") on torch
tensors. Each collective's output is checked against torch.distributed's
own collective on this rank's inputs to it; several runs replay the
captured CUDA graph.

    mpirun --allow-run-as-root -np 2 python3 bench/runtime_ranks_check.py \\
        --build-dir .device

Exit 0 when every rank matched. docs/RUNTIME.md "Several ranks".
"""

import argparse
import datetime
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from mtsched_torch import runtime  # noqa: E402

IR = """graph @ranks_check(%x: bf16[64,256], %w: bf16[256,512]) attributes {world_size = WORLD} {
  %m = matmul(%x, %w) : bf16[64,512]
  %a = all_reduce(%m) : bf16[64,512]
  %g = all_gather(%a) {dim = 0} : bf16[ROWS,512]
  %r = reduce_scatter(%g) {dim = 0} : bf16[64,512]
  return %m, %a, %g, %r
}
"""


def env_int(*names, default=None):
    for n in names:
        if os.environ.get(n) is not None:
            return int(os.environ[n])
    return default


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    p.add_argument("--runs", type=int, default=5)
    a = p.parse_args()
    b = os.path.abspath(a.build_dir)
    rank = env_int("OMPI_COMM_WORLD_RANK", "RANK", default=0)
    world = env_int("OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", default=1)
    local = env_int("OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", default=rank)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            timeout=datetime.timedelta(minutes=5))
    # Objects cross on the CPU: a waiting NCCL broadcast would spin on the
    # GPU that rank 0's mtsched-opt is timing.
    cpu = dist.new_group(backend="gloo")
    text = IR.replace("WORLD", str(world)).replace("ROWS", str(64 * world))
    # One kernel cache for mtsched-opt and every rank's runtime: the
    # kernels it compiled are not compiled again.
    kc = os.path.join(os.environ.get("MTSCHED_TORCH_CACHE") or
                      tempfile.gettempdir(), "ranks-check-kernels")
    box = [None, None]
    if rank == 0:
        opt = next(c for c in [os.path.join(b, "bin", "mtsched-opt"),
                               os.path.join(b, "tools", "mtsched-opt",
                                            "mtsched-opt")]
                   if os.path.exists(c))
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "g.mir")
            with open(src, "w") as f:
                f.write(text)
            pr = subprocess.run(
                [opt, "--pipeline=default", "--backend=cuda", "--quiet",
                 "--ranks=%d" % world, "--kernel-cache-dir=" + kc,
                 "--disable-choices=one_shot,two_shot,p2p,hier",
                 "--report=" + os.path.join(d, "r.json"), src],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                universal_newlines=True,
                # Not an MPI rank of this world: thread ranks of its own.
                env={k: v for k, v in os.environ.items()
                     if not k.startswith(("OMPI_", "PMI_", "PMIX_"))})
            if pr.returncode != 0:
                box = [None, "mtsched-opt failed: " + pr.stderr[-2000:]]
            else:
                import json
                with open(os.path.join(d, "r.json")) as f:
                    presyncs = json.load(f)["sync"]["count"]
                box = [(pr.stdout, runtime.comm_id(
                    "cuda", build_dir=b), presyncs), None]
    dist.broadcast_object_list(box, src=0, group=cpu)
    if box[1]:
        print("rank %d: %s" % (rank, box[1]))
        return 1
    decided, cid, presyncs = box[0]
    if rank == 0:
        for line in decided.splitlines():
            if " decided " in line:
                print("rank 0: %s ... decided %s" % (
                    line.split("=")[0].strip(),
                    line.split(" decided ")[1].split()[0]))
        print("rank 0: pre-syncs %d" % presyncs)
    mod = runtime.Module(decided, build_dir=b)
    mod.set_ranks(rank, world, cid)
    g = mod.graph(device="cuda:%d" % local, kernel_cache_dir=kc)
    torch.manual_seed(rank)
    x = (torch.randn(64, 256, device=dev) * 0.5).bfloat16()
    w = (torch.randn(256, 512, device=dev) * 0.05).bfloat16()
    ok = True
    for i in range(a.runs):
        m, ar, ag, rs = g.run_torch([x, w])
        torch.cuda.synchronize()
        # Each collective against torch's, on the same input.
        ref_a = m.float()
        dist.all_reduce(ref_a)
        ref_g = torch.empty(64 * world, 512, device=dev)
        dist.all_gather_into_tensor(ref_g, ar.float())
        ref_r = torch.empty(64, 512, device=dev)
        dist.reduce_scatter_tensor(ref_r, ag.float())
        ref_m = x.float() @ w.float()
        for name, ours, ref, tol in [("matmul", m, ref_m, 2e-2),
                                     ("all_reduce", ar, ref_a, 2e-2),
                                     ("all_gather", ag, ref_g, 0.0),
                                     ("reduce_scatter", rs, ref_r, 2e-2)]:
            err = ((ours.float() - ref).norm() /
                   ref.norm().clamp_min(1e-30)).item()
            good = err <= tol if tol else torch.equal(ours.float(), ref)
            ok &= good
            if i in (0, a.runs - 1):
                print("rank %d run %d: %s norm rel err %.1e %s" % (
                    rank, i, name, err, "ok" if good else "MISMATCH"))
    print("rank %d: counters %s" % (rank, g.stats()))
    oks = [None] * world
    dist.all_gather_object(oks, ok, group=cpu)
    if rank == 0:
        print("runtime ranks check: %s" % (
            "every rank matched" if all(oks) else "MISMATCH on ranks %s" %
            [r for r, o in enumerate(oks) if not o]))
    g.close()
    mod.close()
    dist.barrier(group=cpu)
    dist.destroy_process_group()
    return 0 if all(oks) else 1


if __name__ == "__main__":
    sys.exit(main())
