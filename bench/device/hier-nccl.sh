#!/usr/bin/env bash
# The emulated two-node run of issue 40, for ONE machine of 4 GPUs (NGPU=8
# for 8): a --topology file splits the GPUs into two "hosts" of NGPU/2; the
# graph's collectives run over every rank (tp groups of NGPU). Checked on
# the cuda backend, thread ranks and (where mpirun exists) MPI ranks:
#   - the summary lists the choice set per group: the world group loses
#     one_shot/two_shot/p2p ("removed: ... spans 2 hosts") and gets `hier`;
#   - `hier` is timed (status ok) for all_reduce, all_gather, reduce_scatter;
#   - the fused `hier` all_reduce (the residual + RMSNorm on each rank's
#     shard between NCCL's steps) is timed too (fused_ms) at every size;
#   - one pre-sync per graph, identical decisions on every rank;
#   - twice: NCCL as it is (NVLink), and NCCL forced off peer-to-peer and
#     shared memory (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1), so its traffic
#     takes the network path, as between real hosts (it affects every pair,
#     the emulated intra-host ones too: NCCL has no per-pair switch);
#   - NCCL's own all_reduce at the same sizes (torch.distributed, same
#     settings) for the table in docs/BENCHMARKS.md.
# Run from the repo root after `bash scripts/gpu-test.sh --pack` (binaries
# in .device/); results (at most 8 files) go to $OUT. Budget: ~3 minutes.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT=$PWD
D=$ROOT/.device
OUT=${OUT:-$ROOT/hier-results}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
DEFAULT_OPT=$D/bin/mtsched-opt
NGPU=${NGPU:-4}
# BACKEND=sim OPT=build/tools/mtsched-opt/mtsched-opt runs the same checks
# on the simulator, without GPUs (how this script was tested).
BACKEND=${BACKEND:-cuda}
OPT=${OPT:-$DEFAULT_OPT}
HAVE=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
echo "GPUs: $HAVE (need $NGPU), backend $BACKEND" | tee "$OUT/hier-summary.txt"
if [ "$BACKEND" = cuda ] && [ "$HAVE" -lt "$NGPU" ]; then echo "not enough GPUs"; exit 1; fi
W=$(mktemp -d)
HALF=$((NGPU / 2))

# Two emulated hosts of NGPU/2 ranks each.
python3 - "$NGPU" > "$W/topo.json" <<'PY'
import json, sys
n = int(sys.argv[1]); h = n // 2
print(json.dumps({"hosts": [{"name": "emu-a", "ranks": list(range(h))},
                            {"name": "emu-b", "ranks": list(range(h, n))}]}))
PY
# All_reduce at 64 KB, 1 MB, 16 MB and 128 MB (bf16 rows of 4096), with the
# residual + RMSNorm epilogue the flat peer-memory choices fuse; an
# all_gather and a reduce_scatter of 1 MB per rank.
ROWS="8 128 2048 16384"
{
  echo "graph @hier(%g: bf16[4096], %x8: bf16[8,4096], %x128: bf16[128,4096], %x2048: bf16[2048,4096], %x16384: bf16[16384,4096], %y: bf16[128,4096], %z: bf16[$((128 * NGPU)),4096]) attributes {world_size = $NGPU} {"
  for R in $ROWS; do
    echo "  %r$R = all_reduce(%x$R) {reduce = \"sum\"} : bf16[$R,4096]"
    echo "  %s$R = add(%r$R, %x$R) : bf16[$R,4096]"
    echo "  %n$R = rmsnorm(%s$R, %g) {eps = 1.0e-05} : bf16[$R,4096]"
  done
  echo "  %ag = all_gather(%y) : bf16[$((128 * NGPU)),4096]"
  echo "  %rs = reduce_scatter(%z) {reduce = \"sum\"} : bf16[128,4096]"
  echo "  return %n8, %n128, %n2048, %n16384, %ag, %rs"
  echo "}"
} > "$W/hier.mir"
cp "$W/hier.mir" "$W/topo.json" "$OUT/" 2>/dev/null

COMMON=(--pipeline=default --quiet --no-cache --backend="$BACKEND" --bench-runs=10
  --topology="$W/topo.json" --autotune-summary)

# check NAME: the report's pre-sync, decisions and hier statuses.
check() {
  python3 - "$OUT/$1.json" "$1" <<'PY' | tee -a "$OUT/hier-summary.txt"
import json, sys
r = json.load(open(sys.argv[1])); name = sys.argv[2]
ok = True
def need(c, what):
    global ok
    if not c:
        ok = False
        print(f"  {name}: FAIL: {what}")
need(r["sync"]["count"] == 1 and r["sync"]["ok"], f"one pre-sync, ok: {r['sync']}")
need(all(k["decisions"] == r["ranks"][0]["decisions"] for k in r["ranks"]),
     "identical decisions on every rank")
for n in r["nodes"]:
    names = [c["name"] for c in n["choices"]]
    need("hier" in names, f"{n['name']} offers hier: {names}")
    need(not any(c in names for c in ("one_shot", "two_shot", "p2p")),
         f"{n['name']} offers no peer-memory choice: {names}")
    for c in n["choices"]:
        if c["name"] == "hier":
            need(c["status"] == "ok", f"{n['name']} hier timed: {c}")
            # Every all_reduce here carries the residual + RMSNorm.
            if n["epilogue"]:
                need(c.get("fused_ms") is not None,
                     f"{n['name']} hier fused timed: {c}")
    def ms(v):
        return "-" if v is None else f"{v:.4f}"
    print(f"  {name} {n['name']}: " + ", ".join(
        f"{c['name']}={ms(c.get('ms'))}ms" +
        (f"/fused {ms(c.get('fused_ms'))}ms" if n["epilogue"] else "") +
        f"({c['status']})" for c in n["choices"])
        + f" -> {n.get('chosen')}" + (" fused" if n.get("epilogue_fused") else "")
        + (f", epilogue {ms(n.get('epilogue_ms'))}ms" if n["epilogue"] else ""))
print(f"{name}: {'PASS' if ok else 'FAIL'}")
PY
}

run_threads() { # NAME [ENV...]
  local NAME=$1; shift
  env "$@" timeout 100 "$OPT" "${COMMON[@]}" --ranks="$NGPU" "$W/hier.mir" \
    --report="$OUT/$NAME.json" >/dev/null 2>"$W/$NAME.err"
  echo "$NAME: exit $?" | tee -a "$OUT/hier-summary.txt"
  grep -E '^AUTOTUNE|removed:|  (hier|nccl) ' "$W/$NAME.err" | head -40 >> "$OUT/hier-summary.txt"
  check "$NAME"
}
run_threads threads-nvlink
run_threads threads-net NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
if command -v mpirun >/dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # The packed plugin beside the packed driver (a build tree finds its own).
  PLUG=()
  if [ -f "$D/lib/mtsched/libmtsched_mpi.so" ]; then
    export MTSCHED_MPI_PLUGIN=$D/lib/mtsched/libmtsched_mpi.so
    PLUG=(-x MTSCHED_MPI_PLUGIN)
  fi
  timeout 100 mpirun --allow-run-as-root --oversubscribe -np "$NGPU" \
    -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 -x NCCL_NVLS_ENABLE \
    -x LD_LIBRARY_PATH "${PLUG[@]}" \
    "$OPT" "${COMMON[@]}" "$W/hier.mir" --report="$OUT/mpi-net.json" \
    >/dev/null 2>"$W/mpi.err"
  echo "mpi-net: exit $?" | tee -a "$OUT/hier-summary.txt"
  grep -E '^AUTOTUNE topology' "$W/mpi.err" >> "$OUT/hier-summary.txt"
  check mpi-net
fi

# NCCL's own all_reduce at the same sizes, both settings.
[ "$BACKEND" = cuda ] || { echo "(no torch NCCL without GPUs)"; rm -rf "$W"; exit 0; }
cat > "$W/nccl_ar.py" <<'PY'
import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
ROWS = [8, 128, 2048, 16384]
def work(rank, n, port, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=n)
    out = {}
    for r in ROWS:
        x = torch.randn(r, 4096, device="cuda", dtype=torch.bfloat16)
        for _ in range(5):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        # As nccl-tests time it: back-to-back calls between two events, the
        # mean per call (one call between events adds the host's launch
        # latency to every sample); the median of 5 such batches.
        ts = []
        for _ in range(5):
            a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(20):
                dist.all_reduce(x)
            b.record(); b.synchronize()
            ts.append(a.elapsed_time(b) * 1000 / 20)
        t = torch.tensor([sorted(ts)[len(ts) // 2]], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        out[r] = t.item()
    if rank == 0:
        q.put(out)
    dist.destroy_process_group()
if __name__ == "__main__":
    n = int(sys.argv[1]); port = int(sys.argv[2])
    ctx = mp.get_context("spawn"); q = ctx.Queue()
    mp.spawn(work, args=(n, port, q), nprocs=n)
    out = q.get()
    for r in ROWS:
        print(f"{r * 4096 * 2} {out[r]:.1f}")
PY
timeout 60 python3 "$W/nccl_ar.py" "$NGPU" 29511 > "$W/torch-nvlink.txt" 2>"$W/torch1.err" || tail -3 "$W/torch1.err"
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 timeout 60 python3 "$W/nccl_ar.py" "$NGPU" 29512 > "$W/torch-net.txt" 2>"$W/torch2.err" || tail -3 "$W/torch2.err"

# The table: per all_reduce size, mtsched's nccl + the separate epilogue
# kernel (the summary's unfused + epilogue), hier + the epilogue, hier
# fused (the epilogue on the shard), what was chosen, and torch's NCCL
# all_reduce alone, per setting.
python3 - "$OUT" "$W" <<'PY' > "$OUT/hier-table.md"
import json, sys, os, re
out, w = sys.argv[1], sys.argv[2]
def torch_us(name):
    p = os.path.join(w, f"torch-{name}.txt")
    if not os.path.exists(p): return {}
    return {int(a): float(b) for a, b in (l.split() for l in open(p) if l.strip())}
print("| setting | bytes | nccl us | epilogue us | nccl + epilogue us | hier + epilogue us | hier fused us | chosen | torch NCCL all_reduce us |")
print("|---|---:|---:|---:|---:|---:|---:|---|---:|")
def us(v):
    return None if v is None else round(v * 1000, 1)
def add(a, b):
    return None if a is None or b is None else round(a + b, 1)
for label, setting, f in (("nvlink, threads", "nvlink", "threads-nvlink"),
                          ("net, threads", "net", "threads-net"),
                          ("net, MPI", "net", "mpi-net")):
    p = os.path.join(out, f + ".json")
    if not os.path.exists(p): continue
    r = json.load(open(p)); t = torch_us(setting)
    for n in r["nodes"]:
        m = re.fullmatch(r"%r([0-9]+)", n["name"])
        if not m: continue
        rows = int(m.group(1)); b = rows * 4096 * 2
        c = {x["name"]: x for x in n["choices"]}
        nccl = us(c.get("nccl", {}).get("ms"))
        hier = us(c.get("hier", {}).get("ms"))
        fused = us(c.get("hier", {}).get("fused_ms"))
        epi = us(n.get("epilogue_ms"))
        chosen = f"{n.get('chosen')}" + (" fused" if n.get("epilogue_fused") else "")
        print(f"| {label} | {b} | {nccl} | {epi} | {add(nccl, epi)} | {add(hier, epi)} | {fused} | {chosen} | {t.get(b, 'n/a')} |")
PY
cat "$OUT/hier-table.md"
rm -rf "$W"
