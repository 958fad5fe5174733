//===- WgmmaGemm.cpp - The Hopper GEMM template (wgmma + TMA) -------------===//
//
// `gemm_wg_BMxBNxBK_sS`, bf16/f16 in, fp32 accumulators, sm_90a only. The
// CTA is one producer warpgroup and BM/64 consumer warpgroups:
//
//   * the producer's first thread streams k-tiles of A (BM x 64) and B
//     (64 x BN, as BN/64 boxes of 64 columns) into S shared-memory stages
//     with TMA (`cp.async.bulk.tensor`), 128-byte swizzled, zeros out of
//     bounds; each stage has a `full` mbarrier (the copies' bytes landed)
//     and an `empty` one (every consumer is done reading it);
//   * consumer warpgroup w multiplies rows [64w, 64w + 64) of the tile with
//     `wgmma.mma_async.m64nBNk16` straight from shared memory: A is K-major,
//     B ([K, N] row-major) is MN-major ("transposed" in wgmma's terms). It
//     keeps one k-tile of MMAs in flight and frees the stage of the one
//     before;
//   * `setmaxnreg` moves registers from the producer (which needs few) to
//     the consumers (BN/2 accumulators each);
//   * the consumers then run the shared epilogue straight from registers:
//     the fused chain, a row reduction through shared memory (a named
//     barrier of the consumers only), and masked 32-bit paired stores.
//
// A persistent tile (`_p`) walks several output tiles per CTA, the stages
// one ring across them. It stores a 16-bit result through shared memory
// with TMA, which drains while the next tile's main loop runs; at 4096^3
// on an H100 that took the 128x256 tile from 192.5 to 172.6 us, cuBLAS's
// time (docs/BENCHMARKS.md). In clusters of two (`_p_c2`) the CTAs take
// tiles side by side down M and multicast half of the shared B tile each;
// `_p_d` tiles claim their tiles from a counter instead of striding.
//
// The merged SwiGLU's persistent tiles are this template with both
// weights' columns in each B stage (GemmSetup::SwiGlu, SwiGluGemm.cpp).
// The device helpers and accumulator walks the wgmma templates share are
// in WgmmaHelpers.cpp.
//
//===----------------------------------------------------------------------===//
#include "GemmCodegen.h"
#include "llvm/ADT/Twine.h"

using namespace mtsched;
using namespace mtsched::codegen;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

/// Dynamic shared memory one CTA may opt into on sm_90 (227 KB).
static constexpr int64_t MaxSharedBytes = 227 * 1024;
/// What the producer keeps: it only computes coordinates.
static constexpr int ProducerRegs = WgmmaProducerRegs;
/// Registers a consumer needs besides its accumulators (descriptors, loop
/// state, epilogue addresses).
static constexpr int ConsumerOverheadRegs = 40;

/// The GEMM tile's #defines, before WgmmaHelpers.
static const char *WgmmaTileDefines = R"(
#define THREADS ((CONSUMERS + 1) * 128)
#define A_STAGE (BM * BK * 2)     // bytes of one A stage: BM rows of 128 bytes
#define B_BOX (BK * 128)          // bytes of one 64-column box of B
#define B_STAGE (BN / 64 * B_BOX) // bytes of one B stage
)";

/// WgmmaTileDefines; for the merged SwiGLU a B stage holds the gate's BN
/// columns, then the up's.
static std::string tileDefines(bool SwiGlu) {
  std::string S = WgmmaTileDefines;
  if (SwiGlu) {
    llvm::StringRef From = "(BN / 64 * B_BOX) // bytes of one B stage";
    S.replace(S.find(From.str()), From.size(),
              "(2 * BN / 64 * B_BOX) // bytes of one B stage: gate, then up");
  }
  return S;
}

/// A persistent kernel's tiles: MT_TILE(t) binds tile t's batch `bz` and
/// corner (m0, n0) in the grouped raster of the other templates (GROUP_M
/// tile rows down each column, defined first), so the tiles the CTAs run at
/// once share their B tiles in L2. A cluster's CTAs (CLUSTER, rank MT_RANK)
/// take the tiles of one cluster tile, side by side down the column.
static const char *PersistentTiles =
    R"(#define TILES_M ((int)((M_ + BM - 1) / BM))
#define TILES_N ((int)((N_ + BN - 1) / BN))
#define CTILES_M ((TILES_M + CLUSTER - 1) / CLUSTER) // cluster tiles down M
#define TILES (CTILES_M * TILES_N * BATCH)           // cluster tiles
#define CGROUP_M ((GROUP_M + CLUSTER - 1) / CLUSTER)
#define MT_TILE(t)                                                             \
  const long long bz = (t) / (CTILES_M * TILES_N);                             \
  const int pid = (t) % (CTILES_M * TILES_N);                                  \
  const int first_m = (pid / (CGROUP_M * TILES_N)) * CGROUP_M;                 \
  const int group_m = min(CTILES_M - first_m, CGROUP_M);                       \
  const int in_group = pid % (CGROUP_M * TILES_N);                             \
  const long long m0 =                                                         \
      (long long)((first_m + in_group % group_m) * CLUSTER + MT_RANK) * BM;    \
  const long long n0 = (long long)(in_group / group_m) * BN;                   \
  (void)bz
)";

/// A cluster's CTAs: their rank, arrivals on each other's barriers, a
/// barrier of all their threads and a TMA load multicast to several CTAs.
static const char *ClusterHelpers = R"(
__device__ __forceinline__ unsigned mt_cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// Arrives on the barrier at shared address `bar` in every CTA of the
// cluster (the same offset in each).
__device__ __forceinline__ void mt_release(unsigned bar) {
  #pragma unroll
  for (unsigned r = 0; r < CLUSTER; ++r) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(remote) : "r"(bar), "r"(r));
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote)
                 : "memory");
  }
}
__device__ __forceinline__ void mt_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n"
               "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// One box into the same offset of every CTA in `mask`; completes on the
// barrier at `bar`'s offset in each.
__device__ __forceinline__ void mt_tma_load_multicast(
    unsigned dst, const mt_tensor_map &map, unsigned bar, int x, int y, int z,
    unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::"
      "complete_tx::bytes.multicast::cluster [%0], [%1, {%3, %4, %5}], [%2], "
      "%6;" ::"r"(dst), "l"(&map), "r"(bar), "r"(x), "r"(y), "r"(z),
      "h"(mask) : "memory");
}
)";

/// The producer's B loads of the merged SwiGLU ($BLOADS of emitWgmmaGemm's
/// k-loop): the gate's BN / 64 boxes then the up's, one stage tile that a
/// single wgmma 2 * BN wide reads; in a cluster each CTA loads every other
/// box into both CTAs.
static const char *swigluBLoads(int Cluster) {
  if (Cluster > 1)
    return R"(        // Each CTA loads its half of the boxes of both weights (the
        // gate's, then the up's) into both.
        #pragma unroll
        for (int j = MT_RANK; j < 2 * BN / 64; j += CLUSTER)
          mt_tma_load_multicast(sB + s * B_STAGE + j * B_BOX,
                                j < BN / 64 ? tm_b : tm_u, full + 8 * s,
                                (int)n0 + j % (BN / 64) * 64, $K * BK,
                                (int)bz, (1 << CLUSTER) - 1);
)";
  return R"(        // The gate's boxes, then the up's: one wgmma reads both.
        #pragma unroll
        for (int j = 0; j < BN / 64; ++j) {
          mt_tma_load(sB + s * B_STAGE + j * B_BOX, tm_b, full + 8 * s,
                      (int)n0 + j * 64, $K * BK, (int)bz);
          mt_tma_load(sB + s * B_STAGE + (BN / 64 + j) * B_BOX, tm_u,
                      full + 8 * s, (int)n0 + j * 64, $K * BK, (int)bz);
        }
)";
}

/// A dynamic persistent tile (`_p_d`): the producer's first thread claims
/// each next tile from the counter mt_sched[0] (its own first tile is
/// blockIdx.x, the others gridDim.x + the count) and hands it to the
/// consumers through a ring of two shared-memory slots, each with a `tfull`
/// (the producer wrote it) and a `tempty` (every consumer thread read it)
/// mbarrier; a tile past the last ends both loops. The tiles in flight then
/// stay a window of the grouped order however far some SMs run ahead, but
/// they start staggered where a static stride starts the CTAs sharing a
/// weight tile together: measured, not a default (docs/CUDA.md).
static const char *DynamicRing =
    R"(  // The tile ring after the scratch: two tfull and two tempty mbarriers,
  // then two 4-byte slots.
  const unsigned tfull = empty + 8 * STAGES + 2 * BM * 4;
  const unsigned tempty = tfull + 16, tslot = tempty + 16;
)";
static const char *DynamicProducerHead =
    R"(      // The stages form one ring across this CTA's tiles: `it` counts its
      // k-tiles so far.
      int it = 0;
      for (int n = 0;; ++n) {
      const int tile = n == 0 ? (int)blockIdx.x
                              : (int)gridDim.x + (int)atomicAdd(mt_sched, 1u);
      mt_mbar_wait(tempty + 8 * (n & 1), ((n >> 1) & 1) ^ 1);
      asm volatile("st.shared.u32 [%0], %1;" ::"r"(tslot + 4 * (n & 1)),
                   "r"(tile) : "memory");
      mt_mbar_arrive(tfull + 8 * (n & 1));
      if (tile >= TILES)
        break;
      MT_TILE(tile);
)";
/// After the producer's loop: the last CTA to finish claiming resets both
/// counters for the next launch (every CTA claimed its last tile before it
/// counts itself done).
static const char *DynamicProducerTail =
    R"(      __threadfence();
      if (atomicAdd(mt_sched + 1, 1u) == gridDim.x - 1) {
        mt_sched[0] = 0;
        mt_sched[1] = 0;
      }
)";
static const char *DynamicConsumerHead = R"(    int it = 0;
    for (int n = 0;; ++n) {
    mt_mbar_wait(tfull + 8 * (n & 1), (n >> 1) & 1);
    int tile;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(tile)
                 : "r"(tslot + 4 * (n & 1)) : "memory");
    mt_mbar_arrive(tempty + 8 * (n & 1));
    if (tile >= TILES)
      break;
    MT_TILE(tile);
)";

/// The epilogue's store through shared memory and TMA: MT_TILE_STORE(PACK)
/// stores the tile's 16-bit results, PACK being the 32-bit word of the
/// accumulator pair (v0, v1). Each consumer warpgroup stages its 64 rows
/// C_COLS columns at a time, as 64-column boxes in the TMA's 128-byte
/// swizzle (the 8 rows one store instruction writes land in 8 different
/// 16-byte chunks: no bank conflict), and one of its threads stores them
/// with TMA, clipped to the output. The store drains while the consumers
/// start the next tile; only the staging's next use waits for it.
static const char *TileStore = R"(
__device__ __forceinline__ void mt_st_shared(unsigned a, unsigned v) {
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(a), "r"(v) : "memory");
}
__device__ __forceinline__ void mt_tma_store(const mt_tensor_map &map,
                                             unsigned src, int x, int y,
                                             int z) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group "
               "[%0, {%2, %3, %4}], [%1];" ::"l"(&map), "r"(src), "r"(x),
               "r"(y), "r"(z) : "memory");
}
// The consumer warpgroup's own barrier (1 is all consumers').
#define MT_WG_SYNC() \
  asm volatile("bar.sync %0, 128;" ::"r"(2 + cw) : "memory")
#define MT_TILE_STORE(PACK)                                                    \
  _Pragma("unroll") for (int h = 0; h < BN / C_COLS; ++h) {                    \
    if (tid % 128 == 0)                                                        \
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");           \
    MT_WG_SYNC();                                                              \
    _Pragma("unroll") for (int jj = 0; jj < C_COLS / 8; ++jj)                  \
    _Pragma("unroll") for (int i = 0; i < 4; i += 2) {                         \
      const int j = h * (C_COLS / 8) + jj;                                     \
      const int row = warp * 16 + (lane >> 2) + ((i & 2) ? 8 : 0);             \
      const float v0 = acc[j * 4 + i], v1 = acc[j * 4 + i + 1];                \
      mt_st_shared(sC + cw * C_STAGE + (jj >> 3) * C_BOX + row * 128 +         \
                       (((jj & 7) ^ (row & 7)) << 4) + (lane & 3) * 4,         \
                   PACK);                                                      \
    }                                                                          \
    /* The TMA unit reads what the threads wrote. */                           \
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");               \
    MT_WG_SYNC();                                                              \
    if (tid % 128 == 0) {                                                      \
      _Pragma("unroll") for (int b = 0; b < C_COLS / 64; ++b)                  \
        mt_tma_store(tm_c, sC + cw * C_STAGE + b * C_BOX,                      \
                     (int)n0 + h * C_COLS + b * 64, (int)m0 + cw * 64,         \
                     (int)bz);                                                 \
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");                \
    }                                                                          \
  }
)";

/// What a wgmma tile needs of the problem and the device, worked out before
/// any text is written: its consumer warpgroups and their registers, the
/// CTA's shared memory and whether the result is stored with TMA.
struct WgmmaLayout {
  int Consumers = 0, ConsumerRegs = 0, Cluster = 1, CCols = 0;
  int64_t Smem = 0, StagingBytes = 0;
  bool Store = false;
};

static llvm::Expected<WgmmaLayout> wgmmaLayout(const GemmSetup &S) {
  const GemmTileConfig &T = S.T;
  const std::string Name = S.SwiGlu ? swigluChoiceName(T) : gemmChoiceName(T);
  WgmmaLayout L;
  if (S.Dt != DType::BF16 && S.Dt != DType::F16)
    return err("the wgmma template needs bf16 or f16 operands, got " +
               dtypeName(S.Dt));
  if (std::string Problem = wgmmaTileProblem(T); !Problem.empty())
    return err("tile " + Name + ": " + Problem);
  if (T.Persistent && T.SplitK > 1)
    return err("tile " + Name +
               ": a persistent wgmma tile cannot also split K");
  // The merged SwiGLU's one wgmma is 2 * BN wide, and wgmma's N is at most
  // 256; its plain tiles are SwiGluGemm.cpp's own kernel.
  if (S.SwiGlu && (!T.Persistent || T.SplitK > 1 || T.BN > 128))
    return err("tile " + Name +
               ": a merged gate+up tile on the GEMM template is persistent, "
               "does not split K and has BN up to 128 (one wgmma 2 * BN "
               "wide)");
  // The boxes of 64 columns of each stage's B tile (both weights' for the
  // merged SwiGLU).
  const int Boxes = (S.SwiGlu ? 2 : 1) * T.BN / 64;
  const int Cluster = L.Cluster = std::max(1, T.Cluster);
  if (Cluster > 1 && !T.Persistent)
    return err("tile " + Name +
               ": only a persistent wgmma tile can run in clusters");
  if (T.Dynamic && (!T.Persistent || Cluster > 1))
    return err("tile " + Name +
               ": only a persistent wgmma tile without a cluster claims its "
               "tiles dynamically");
  if (Cluster > 2 || Boxes % Cluster)
    return err("tile " + Name +
               ": a cluster is 2 CTAs, which split the B tile's " +
               llvm::Twine(Boxes) + " 64-column boxes between them");
  if (S.K % 8 || S.N % 8)
    return err("the wgmma template needs K and N multiples of 8 (TMA row "
               "strides are multiples of 16 bytes), got K = " +
               llvm::Twine(S.K) + ", N = " + llvm::Twine(S.N));
  const int Consumers = L.Consumers = T.BM / 64;
  // One CTA per SM: the producer gives its registers to the consumers.
  const int Accs = Boxes * 32; // fp32 accumulators per consumer thread
  if (Consumers > 1) {
    L.ConsumerRegs = wgmmaConsumerRegs(Consumers);
    if (Accs + ConsumerOverheadRegs > L.ConsumerRegs)
      return err("tile " + Name + ": " + llvm::Twine(Accs) +
                 " accumulators per thread do not fit in the " +
                 llvm::Twine(L.ConsumerRegs) + " registers of " +
                 llvm::Twine(Consumers) + " consumer warpgroups");
  }
  // A persistent tile stores a 16-bit result with TMA (TileStore) when the
  // staging fits beside the stages: 64 rows by 128 columns (64 where BN is
  // not a multiple of 128) per consumer warpgroup.
  L.CCols = T.BN % 128 == 0 ? 128 : 64;
  L.StagingBytes = int64_t(Consumers) * 64 * L.CCols * 2;
  L.Smem =
      1024 + int64_t(T.Stages) * (T.BM + Boxes * 64) * T.BK * 2 + 16 * T.Stages;
  if (T.Persistent)
    L.Smem += 2 * int64_t(T.BM) * 4; // the row reduction's scratch
  if (T.Dynamic)
    L.Smem += 40; // the tile ring: two pairs of mbarriers, two slots
  // (An epilogue through a transpose stores each element at its mapped
  // index instead: the tile is not a box of the output.)
  L.Store = T.Persistent && dtypeBytes(S.OutType) == 2 && !S.Epi->Permuted &&
            L.Smem + L.StagingBytes <= MaxSharedBytes;
  if (L.Store)
    L.Smem += L.StagingBytes;
  if (L.Smem > MaxSharedBytes)
    return err("tile " + Name + ": " + llvm::Twine(T.Stages) + " stages take " +
               llvm::Twine(L.Smem) +
               " bytes of shared memory, more than the 227 KB of an sm_90 "
               "CTA");
  return L;
}

llvm::Error codegen::emitWgmmaGemm(llvm::raw_ostream &OS, KernelSource &K,
                                   const GemmSetup &S) {
  const GemmTileConfig &T = S.T;
  llvm::Expected<WgmmaLayout> L = wgmmaLayout(S);
  if (!L)
    return L.takeError();
  const int Consumers = L->Consumers, ConsumerRegs = L->ConsumerRegs,
            Cluster = L->Cluster, CCols = L->CCols;
  const int64_t Smem = L->Smem;
  const bool Store = L->Store, SwiGlu = S.SwiGlu;
  const char *Type = S.Dt == DType::BF16 ? "bf16" : "f16";
  int Split = std::max(1, T.SplitK);
  if (T.Persistent)
    OS << "#define BATCH " << S.Batch << "\n#define GROUP_M "
       << (T.GroupM ? T.GroupM : GroupedRasterRows) << "\n#define CLUSTER "
       << Cluster << " // CTAs per cluster, side by side down M, sharing B\n"
       << "#define MT_RANK " << (Cluster > 1 ? "mt_rank" : "0") << "\n"
       << PersistentTiles;
  OS << "#define STAGES " << T.Stages << "\n#define CONSUMERS " << Consumers
     << " // consumer warpgroups, 64 rows each\n#define SPLITK " << Split
     << " // CTAs per output tile, each over a slice of K\n"
     << tileDefines(SwiGlu) << WgmmaHelpers
     << wgmmaFunction(SwiGlu ? 2 * T.BN : T.BN, Type);
  if (Cluster > 1)
    OS << ClusterHelpers;
  else
    OS << "__device__ __forceinline__ void mt_release(unsigned bar) {\n"
       << "  mt_mbar_arrive(bar);\n}\n";
  if (Store)
    OS << "#define C_COLS " << CCols
       << " // columns a consumer warpgroup stages at a time\n"
       << "#define C_BOX (64 * 128) // bytes of one staged 64 x 64 box\n"
       << "#define C_STAGE (64 * C_COLS * 2) // bytes of one warpgroup's "
          "staging\n"
       << TileStore;
  OS << WgmmaAccMacros;
  OS << "extern \"C\" __global__ void __launch_bounds__(THREADS, 1) " << K.Name
     << "(\n    const __grid_constant__ mt_tensor_map tm_a,\n"
     << "    const __grid_constant__ mt_tensor_map tm_b, "
     << (SwiGlu ? "const __grid_constant__ mt_tensor_map tm_u,\n    " : "")
     << (Store ? "const __grid_constant__ mt_tensor_map tm_c,\n    " : "")
     << S.P->signature() << (Split > 1 ? ", float *__restrict__ mt_ws" : "")
     << (T.Dynamic ? ", unsigned *__restrict__ mt_sched" : "") << ") {\n"
     << "  extern __shared__ __align__(1024) unsigned char mt_smem[];\n"
     << "  // 128-byte swizzled stages start at 1024-byte boundaries.\n"
     << "  const unsigned sA = (mt_smem_addr(mt_smem) + 1023) & ~1023u;\n"
     << "  const unsigned sB = sA + STAGES * A_STAGE;\n"
     << (Store
             ? "  // The epilogue's staging, 1024-byte aligned as the swizzle "
               "needs.\n  const unsigned sC = sB + STAGES * B_STAGE;\n"
               "  const unsigned full = sC + CONSUMERS * C_STAGE; // "
               "8-byte mbarriers\n"
             : "  const unsigned full = sB + STAGES * B_STAGE; // 8-byte "
               "mbarriers\n")
     << "  const unsigned empty = full + 8 * STAGES;\n"
     << "  const int tid = threadIdx.x;\n";
  if (Cluster > 1)
    OS << "  const unsigned mt_rank = mt_cluster_rank();\n";
  if (T.Persistent)
    OS << "  // The row reduction's scratch, after the barriers: the stages "
          "may hold\n  // the next tile's k-tiles while the epilogue runs.\n"
       << "  unsigned char *const mt_scratch =\n"
       << "      mt_smem + (empty + 8 * STAGES - mt_smem_addr(mt_smem));\n"
       << "  (void)mt_scratch;\n"
       << (T.Dynamic ? DynamicRing : "");
  else {
    OS << "  // blockIdx.z: the batch, then the slice of K (SPLITK per "
          "batch).\n"
       << "  const long long bz = blockIdx.z / SPLITK;\n"
       << "  const int split = blockIdx.z % SPLITK;\n"
       << "  (void)split;\n";
    emitGroupedRaster(OS);
  }
  OS << R"(  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mt_mbar_init(full + 8 * s, 1);
)"
     << (Cluster > 1 ? "      // Every consumer of the cluster frees a stage: "
                       "the other CTA's\n      // producer fills half of "
                       "its B.\n      mt_mbar_init(empty + 8 * s, CONSUMERS "
                       "* CLUSTER);\n"
                     : "      mt_mbar_init(empty + 8 * s, CONSUMERS);\n")
     << "    }\n"
     << (T.Dynamic ? "    for (int n = 0; n < 2; ++n) {\n"
                     "      mt_mbar_init(tfull + 8 * n, 1);\n"
                     "      mt_mbar_init(tempty + 8 * n, CONSUMERS * 128);\n"
                     "    }\n"
                   : "")
     << R"(    // Make the initialised barriers visible to the TMA unit.
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
)"
     << (Cluster > 1 ? "  // And to the other CTA of the cluster.\n"
                       "  mt_cluster_sync();\n"
                     : "  __syncthreads();\n");
  if (T.Persistent)
    OS << "  const int KT = (int)((K_ + BK - 1) / BK);\n";
  else
    OS << R"(  // This CTA's k-tiles: [kt0, kt0 + KT) of the KT_ALL of the row.
  const int KT_ALL = (int)((K_ + BK - 1) / BK);
  const int KT_SPLIT = (KT_ALL + SPLITK - 1) / SPLITK;
  const int kt0 = split * KT_SPLIT;
  const int KT = max(0, min(KT_ALL - kt0, KT_SPLIT));
)";
  OS << "  if (tid < 128) {\n";
  if (ConsumerRegs)
    OS << "    asm volatile(\"setmaxnreg.dec.sync.aligned.u32 " << ProducerRegs
       << ";\");\n";
  // One k-loop text for both kinds: $RING is the stage ring's position
  // (the k-tile for a plain kernel; across its tiles for a persistent one),
  // $K the k-tile's index in the row.
  auto Loop = [&](llvm::StringRef Text) {
    std::string Out = Text.str();
    auto Replace = [&](llvm::StringRef From, llvm::StringRef To) {
      for (size_t At; (At = Out.find(From.str())) != std::string::npos;)
        Out.replace(At, From.size(), To.str());
    };
    Replace(
        "$BLOADS",
        SwiGlu ? swigluBLoads(Cluster)
        : Cluster > 1
            ? R"(        // Each CTA loads its half of the boxes of B into both.
        #pragma unroll
        for (int j = MT_RANK; j < BN / 64; j += CLUSTER)
          mt_tma_load_multicast(sB + s * B_STAGE + j * B_BOX, tm_b,
                                full + 8 * s, (int)n0 + j * 64, $K * BK,
                                (int)bz, (1 << CLUSTER) - 1);
)"
            : R"(        #pragma unroll
        for (int j = 0; j < BN / 64; ++j)
          mt_tma_load(sB + s * B_STAGE + j * B_BOX, tm_b, full + 8 * s,
                      (int)n0 + j * 64, $K * BK, (int)bz);
)");
    Replace("$STEP", T.Persistent ? "++kt, ++it" : "++kt");
    Replace("$ACCS", SwiGlu ? "BN" : "BN / 2");
    Replace("$RING", T.Persistent ? "it" : "kt");
    Replace("$K", T.Persistent ? "kt" : "(kt0 + kt)");
    return Out;
  };
  OS << R"(    if (tid == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(&tm_a) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(&tm_b) : "memory");
)";
  if (SwiGlu)
    OS << "      asm volatile(\"prefetch.tensormap [%0];\" ::\"l\"(&tm_u) : "
          "\"memory\");\n";
  if (T.Dynamic)
    OS << DynamicProducerHead;
  else if (T.Persistent)
    OS << R"(      // The stages form one ring across this CTA's tiles: `it` counts its
      // k-tiles so far.
      int it = 0;
      for (int tile = blockIdx.x / CLUSTER; tile < TILES;
           tile += gridDim.x / CLUSTER) {
      MT_TILE(tile);
)";
  OS << Loop(R"(      for (int kt = 0; kt < KT; $STEP) {
        const int s = $RING % STAGES;
        // Wait until every consumer has freed the stage (the first lap
        // passes at once).
        mt_mbar_wait(empty + 8 * s, (($RING / STAGES) & 1) ^ 1);
        // Out-of-bounds parts of a box are zero-filled and still counted.
        mt_mbar_expect(full + 8 * s, A_STAGE + B_STAGE);
        mt_tma_load(sA + s * A_STAGE, tm_a, full + 8 * s, $K * BK,
                    (int)m0, (int)bz);
$BLOADS      }
)");
  if (T.Persistent)
    OS << "      }\n";
  if (T.Dynamic)
    OS << DynamicProducerTail;
  OS << "    }\n  } else {\n";
  if (ConsumerRegs)
    OS << "    asm volatile(\"setmaxnreg.inc.sync.aligned.u32 " << ConsumerRegs
       << ";\");\n";
  OS << "    const int cw = tid / 128 - 1, warp = (tid / 32) % 4, lane = tid % "
        "32;\n";
  if (T.Dynamic)
    OS << DynamicConsumerHead;
  else if (T.Persistent)
    OS << R"(    int it = 0;
    for (int tile = blockIdx.x / CLUSTER; tile < TILES;
         tile += gridDim.x / CLUSTER) {
    MT_TILE(tile);
)";
  OS << Loop(R"(    float acc[$ACCS];
    #pragma unroll
    for (int i = 0; i < $ACCS; ++i)
      acc[i] = 0.f;
    for (int kt = 0; kt < KT; $STEP) {
      const int s = $RING % STAGES;
      mt_mbar_wait(full + 8 * s, ($RING / STAGES) & 1);
      const unsigned a = sA + s * A_STAGE + cw * 64 * 128;
      const unsigned b = sB + s * B_STAGE;
      mt_wgmma_fence();
      #pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk)
        // A: 8-row groups 1024 bytes apart, k16 steps 32 bytes into the
        // swizzled row. B: 8-row groups 1024 bytes apart, 64-column boxes
        // B_BOX apart, k16 steps 16 rows (2048 bytes).
        mt_wgmma(acc, mt_desc(a + kk * 32, 16, 1024),
                 mt_desc(b + kk * 2048, B_BOX, 1024));
      mt_wgmma_commit();
      // This k-tile's MMAs stay in flight; the previous one's are done, so
      // its stage can be refilled.
      MT_WGMMA_WAIT(1);
      if (kt > 0 && tid % 128 == 0)
        mt_release(empty + 8 * (($RING - 1) % STAGES));
    }
    MT_WGMMA_WAIT(0);
)");
  if (T.Persistent)
    OS << R"(    // The tile's last stage is free as well: the producer refills it with
    // the next tile's k-tiles while this epilogue runs.
    if (KT > 0 && tid % 128 == 0)
      mt_release(empty + 8 * ((it - 1) % STAGES));
)";
  if (SwiGlu)
    OS << R"(    #pragma unroll
    for (int i = 0; i < BN; ++i)
      mt_fence_acc(acc[i]);
    // silu(g) * u in f32 (the store rounds once): the gate's accumulators
    // are the first BN / 2, the up's the next BN / 2, column for column.
    #pragma unroll
    for (int i = 0; i < BN / 2; ++i) {
      const float g = acc[i];
      acc[i] = g / (1.f + expf(-g)) * acc[BN / 2 + i];
    }
)";
  else
    OS << R"(    #pragma unroll
    for (int i = 0; i < BN / 2; ++i)
      mt_fence_acc(acc[i]);
)";
  EpilogueThreads Threads;
  Threads.Sync = "asm volatile(\"bar.sync 1, " +
                 std::to_string(Consumers * 128) + ";\" ::: \"memory\")";
  Threads.Tid = "(tid - 128)";
  Threads.Count = "(CONSUMERS * 128)";
  Threads.InBounds = "INTERIOR || (r < ROWS && c < N_)";
  Threads.PairStores = true;
  Threads.QuadRowSums = true;
  Threads.ClampedAcc = true;
  if (T.Persistent)
    Threads.Scratch = "mt_scratch";
  Threads.TileStore = Store;
  // Consumers only: the producer warpgroup takes no part in the reduction.
  emitSplitKReduce(OS, Threads);
  emitInteriorAndEdgeTails(OS, *S.Epi, S.OutName, S.OutType, Threads);
  if (T.Persistent)
    OS << "    }\n";
  if (Store)
    OS << "    // The last tile's stores must finish reading shared memory.\n"
       << "    if (tid % 128 == 0)\n"
       << "      asm volatile(\"cp.async.bulk.wait_group 0;\" ::: "
          "\"memory\");\n";
  OS << "  }\n";
  if (Cluster > 1)
    OS << "  // No CTA leaves while the other may still arrive on its "
          "barriers.\n  mt_cluster_sync();\n";
  OS << "}\n";

  K.BlockX = unsigned((Consumers + 1) * 128);
  K.SharedBytes = unsigned(Smem);
  K.NeedsSm90a = true;
  // A as [batch][M][K], B as [batch][K][N] (without a batched B, batch is
  // 1 and M counts all of A's rows).
  int64_t ARows = S.M, Batch = S.Batch;
  K.TensorMaps = {wgmmaTensorMap(0, S.K, ARows, Batch, 64, T.BM),
                  wgmmaTensorMap(1, S.N, S.K, Batch, 64, T.BK)};
  if (SwiGlu)
    // The up weights, the third pointer parameter (after %h and %wg).
    K.TensorMaps.push_back(wgmmaTensorMap(2, S.N, S.K, Batch, 64, T.BK));
  if (Store)
    // The result, [batch][M][N], in 64 x 64 boxes: the last pointer
    // parameter (ParamList puts the result after any `writes`).
    K.TensorMaps.push_back(
        wgmmaTensorMap(unsigned(S.P->Inputs.size() + S.P->Outputs.size() - 1),
                       S.N, ARows, Batch, 64, 64));
  K.ClusterX = unsigned(Cluster);
  if (T.Dynamic)
    K.WorkspaceBytes = 8; // the tile counter and the CTAs that are done
  return llvm::Error::success();
}
