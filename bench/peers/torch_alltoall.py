# Independent peer for all_to_all (bench/all-to-all.sh): torch.distributed's
# all_to_all_single on this machine's GPUs (NCCL), at the rows of
# bench/all-to-all.mir (4096 bf16 per row).
#   even:   equal splits, launches captured in a CUDA graph (device time, as
#           mtsched times its even all_to_all);
#   uneven: split sizes as mtsched's raggedCounts gives them (rank r sends
#           rank p Per*(1+2((r+p) mod N))/N rows, Per = rows/N), the sizes
#           read from a device tensor by .tolist() every call, as MoE code
#           does and as mtsched's uneven all_to_all does; timed eagerly.
# Writes {rows: {"even_us": .., "uneven_us": ..}} from rank 0 to argv[1].
import os, sys, json, statistics
import torch, torch.distributed as dist, torch.multiprocessing as mp

ROWS = [32, 256, 4096]
HIDDEN = 4096


def graph_time(fn, iters=15, warm=10, loop=20):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s0 = torch.cuda.Stream()
    with torch.cuda.stream(s0):
        with torch.cuda.graph(g, stream=s0):
            for _ in range(loop):
                fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(); g.replay(); e.record(); e.synchronize()
        ts.append(s.elapsed_time(e) * 1000.0 / loop)
    return statistics.median(ts)


def eager_time(fn, iters=15, warm=10, loop=20):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        dist.barrier()
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(loop):
            fn()
        e.record(); e.synchronize()
        ts.append(s.elapsed_time(e) * 1000.0 / loop)
    return statistics.median(ts)


def worker(rank, world, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29557")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    res = {}
    for rows in ROWS:
        x = torch.randn(rows, HIDDEN, dtype=torch.bfloat16, device="cuda")
        y = torch.empty_like(x)
        row = {"even_us": graph_time(lambda: dist.all_to_all_single(y, x))}
        per = rows // world
        cnt = [[per * (1 + 2 * ((r + p) % world)) // world for p in range(world)]
               for r in range(world)]
        send = torch.tensor(cnt[rank], device="cuda")
        recv = torch.tensor([cnt[p][rank] for p in range(world)], device="cuda")
        yu = torch.empty(sum(cnt[p][rank] for p in range(world)), HIDDEN,
                         dtype=torch.bfloat16, device="cuda")

        def uneven():
            dist.all_to_all_single(yu, x[: int(send.sum())], recv.tolist(), send.tolist())
        row["uneven_us"] = eager_time(uneven)
        res[str(rows)] = row
    if rank == 0:
        json.dump(res, open(out, "w"), indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    world = torch.cuda.device_count()
    mp.spawn(worker, args=(world, sys.argv[1]), nprocs=world)
    print(json.dumps(json.load(open(sys.argv[1]))))
