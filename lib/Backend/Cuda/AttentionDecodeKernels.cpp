//===- AttentionDecodeKernels.cpp - Hopper decode attention (TMA) ---------===//
//
// `attn_dec_16xBKV_wW_sS[_kvN]`, bf16/f16, head dimension 64 or 128, no
// additive mask, sm_90 only: decode steps are memory-bound (every key and
// value is read once), and the mma.sync tiles' cp.async copies from the
// computing warps keep too few bytes in flight per SM. Here one producer
// warp streams the keys of a CTA's split through a ring of STAGES stages of
// BKV keys with TMA (k and v as D / 64 boxes of 64 columns, 128-byte
// swizzled; keys past the end are zero-filled by the copy), and W consumer
// warps take whole stages in turn (warp c the stages c, c + W, ...), each
// with the 16 packed query rows (the query heads of the kv head, then their
// queries, as in AttentionMmaKernels.cpp) and an online softmax of its own
// on the mma.sync fragments. At the end the consumers' partial results are
// combined in the freed stages; with SPLITS > 1 each CTA then writes its
// partials and the last split of a tile combines them (SplitCombine).
//
//===----------------------------------------------------------------------===//
#include "AttentionCodegenImpl.h"
#include "GemmCodegen.h"
#include "mtsched/Backend/Cuda/AttentionCodegen.h"
#include "mtsched/IR/Attention.h"

using namespace mtsched;
using namespace mtsched::codegen;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

/// ldmatrix from a shared-memory address, and the m16n8k16 MMA (the
/// GEMM's MmaHelpers would define mt_smem_addr a second time beside
/// WgmmaHelpers).
static const char *const DecHelpers = R"(
__device__ __forceinline__ void mt_ldsm_x4(unsigned *r, unsigned a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void mt_ldsm_x4_trans(unsigned *r, unsigned a) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void mt_mma(float *d, const unsigned *a,
                                       const unsigned *b) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32." MMA_TYPE "." MMA_TYPE
      ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// A float at the same shared-memory address in the cluster's CTA `rank`.
__device__ __forceinline__ float mt_ld_cluster(const float *p, unsigned rank) {
  unsigned a;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(a) : "r"(mt_smem_addr(p)), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(a) : "memory");
  return v;
}
__device__ __forceinline__ void mt_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n"
               "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The byte offset of 16-byte chunk `chunk` (of D_ / 8) of row `row` in a
// tile of D_ / 64 boxes of BKV rows x 128 bytes in the TMA's 128-byte
// swizzle: within each 1024-byte block chunk c of row r sits at c ^ (r % 8).
// With ONE_BOX the tile is one box of BKV * ROW_BOXES rows of 128 bytes,
// a key's ROW_BOXES rows consecutive (as in global memory); for ldmatrix's
// eight keys of one chunk that is a 2-way bank conflict at D = 128.
__device__ __forceinline__ unsigned mt_swz(int row, int chunk) {
#if ONE_BOX
  const int br = row * ROW_BOXES + (chunk >> 3);
  return br * 128 + (((chunk & 7) ^ (br & 7)) << 4);
#else
  return (chunk >> 3) * KV_BOX + row * 128 + (((chunk & 7) ^ (row & 7)) << 4);
#endif
}
)";

/// The kernel body (after the shape's #defines), in pieces: its start up
/// to the end of a stage's copies (a prefetch may follow), the consumers'
/// loop up to a stage's math (decTileMath, shared with the persistent
/// form), the end up to the split combine, then the unsplit output.
static const char *const DecStart = R"(
#define NC (THREADS / 32 - 1) // consumer warps; warp NC is the producer
#define CH (D_ / 8)           // 16-byte chunks of a row
#define DP (D_ + 8)           // padded q row
#define NKD (D_ / 16)         // k16 steps of q kᵀ
#define NS (BKV / 8)          // n8 score tiles of a stage
#define NO (D_ / 8)           // n8 output tiles
#define MT_NEG_INF (-__int_as_float(0x7f800000))
  extern __shared__ __align__(1024) unsigned char mt_smem[];
  MT_TL_START
  // 128-byte swizzled boxes start at 1024-byte boundaries.
  const unsigned raw = mt_smem_addr(mt_smem);
  const unsigned sK = (raw + 1023) & ~1023u;
  const unsigned sV = sK + STAGES * KV_TILE;
  unsigned char *region = mt_smem + (sK - raw); // stages, then the combine
  unsigned short *sQ = (unsigned short *)(region + REGION); // [16][DP]
  const unsigned full = sK + REGION + 16 * DP * 2; // 8-byte mbarriers
  const unsigned empty = full + 8 * STAGES;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const long long bh = blockIdx.y, b = bh / HKV, hk = bh % HKV;
#if CLUSTER_SPLITS
  // A tile's splits are the consecutive CTAs of a cluster along x.
  const int zs = blockIdx.x % SPLITS, xt = blockIdx.x / SPLITS,
            nt = gridDim.x / SPLITS;
#else
  const int zs = blockIdx.z, xt = blockIdx.x, nt = gridDim.x;
#endif
#if CAUSAL
  const long long r0 = (long long)(nt - 1 - xt) * BQ;
#else
  const long long r0 = (long long)xt * BQ;
#endif
  (void)nt;
  long long kvBegin, kvEnd;
  mt_key_range(r0, BQ, BKV, SPLITS, zs, kvBegin, kvEnd);
  const int nTiles =
      kvBegin < kvEnd ? (int)((kvEnd - kvBegin + BKV - 1) / BKV) : 0;
#if STAGGER
  // Loop step it reads key tile (it + rot) % nTiles: the CTAs of
  // consecutive (batch, kv head) pairs start spread over their ranges.
  const int rot = nTiles ? (int)((long long)bh * nTiles / gridDim.y) : 0;
#define MT_TILE(it) (((it) + rot) % nTiles)
#else
#define MT_TILE(it) (it)
#endif
  // Tile it into stage it % STAGES: k and v, D_ / 64 boxes each.
  auto issue = [&](int it) {
    const int s = it % STAGES;
    mt_mbar_expect(full + 8 * s, 2 * KV_TILE);
    const int y = (int)(kvBegin + (long long)MT_TILE(it) * BKV);
#if ONE_BOX
    // The stage's keys are BKV * ROW_BOXES contiguous rows of 128 bytes.
    mt_tma_load(sK + s * KV_TILE, tm_k, full + 8 * s, 0, y * ROW_BOXES,
                (int)bh);
    mt_tma_load(sV + s * KV_TILE, tm_v, full + 8 * s, 0, y * ROW_BOXES,
                (int)bh);
#else
#pragma unroll
    for (int h = 0; h < D_ / 64; ++h) {
      mt_tma_load(sK + s * KV_TILE + h * KV_BOX, tm_k, full + 8 * s, h * 64,
                  y, (int)bh);
      mt_tma_load(sV + s * KV_TILE + h * KV_BOX, tm_v, full + 8 * s, h * 64,
                  y, (int)bh);
    }
#endif
)";

static const char *const DecLoop = R"(  };
  // The producer starts the first stages' copies at once; the consumers
  // load q meanwhile.
  if (warp == NC) {
    if (lane == 0) {
      for (int s = 0; s < STAGES; ++s) {
        mt_mbar_init(full + 8 * s, 1);
        mt_mbar_init(empty + 8 * s, 1);
      }
#if TAIL
      mt_mbar_init(empty + 8 * STAGES, 1); // the count's copy (below)
#endif
      // Make the initialised barriers visible to the TMA unit.
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#if PRE_WAIT
      // Launched with PDL, this CTA may be resident while the kernel before
      // still runs (where that one triggers early): the first PRE_WAIT key
      // tiles go into L2 meanwhile, evict-last so that the kernel before's
      // own stream leaves them there. A prefetch changes no value: the
      // kernel before's writes land in L2 too.
      for (int it = 0; it < PRE_WAIT && it < nTiles; ++it) {
        const int yp = (int)(kvBegin + (long long)MT_TILE(it) * BKV);
#pragma unroll
        for (int h = 0; h < D_ / 64; ++h) {
          mt_tma_prefetch_last(tm_k, h * 64, yp, (int)bh);
          mt_tma_prefetch_last(tm_v, h * 64, yp, (int)bh);
        }
      }
#endif
      // Launched with PDL: the kernel before may still be finishing; its
      // writes are complete and visible after the wait.
      asm volatile("griddepcontrol.wait;" ::: "memory");
      for (int it = 0; it < DEPTH && it < nTiles; ++it)
        issue(it);
#if TAIL
      mt_mbar_expect(empty + 8 * STAGES, 16);
      mt_bulk_load16(empty + 8 * STAGES + 16, ws, empty + 8 * STAGES);
#endif
    }
  } else {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    // Packed row r is query r % SQ of query head hk * GROUP + r / SQ.
    for (int c = tid; c < BQ * CH; c += NC * 32) {
      const int i = c / CH, col = (c % CH) * 8;
      const long long r = r0 + i;
      uint4 x = make_uint4(0u, 0u, 0u, 0u);
      if (r < ROWS)
        x = *(const uint4 *)(q +
                             ((b * HQ + hk * GROUP + r / SQ) * SQ + r % SQ) *
                                 D_ +
                             col);
      *(uint4 *)(sQ + i * DP + col) = x;
    }
  }
  // The kernel after this one (launched with PDL) may start now: its CTAs
  // take only the slots this grid leaves, and its own wait still holds it
  // until this grid has finished.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  // The barriers are initialised and q is in shared memory.
  __syncthreads();
#if SWAP_AB
#define NOA (D_ / 16) // m16 output tiles (columns of D)
#else
#define NOA NO
#endif
  float o[NOA][4];
#pragma unroll
  for (int n = 0; n < NOA; ++n)
    o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  // Running max (log2 units) and this thread's share of the running sum of
  // rows ra and rb; the lanes of a row agree on the max.
  float mA = MT_NEG_INF, mB = MT_NEG_INF, lA = 0.f, lB = 0.f;
  if (warp == NC) {
#if TAIL
    // DEPTH (half the stages) tiles in flight until some CTA of the grid
    // has finished, then all STAGES: the last CTAs take the bandwidth the
    // finished ones left. The count of finished CTAs comes by the bulk
    // copy engine into shared memory, looked at once it has landed (a load
    // into a register held the copies: 74.8 against 65.9 us at batch 16 on
    // an H200, round 2).
    const unsigned pollBar = empty + 8 * STAGES;
    const volatile unsigned *pollVal =
        (const volatile unsigned *)(region + (pollBar + 16 - sK));
    bool deep = false;
    unsigned pollPar = 0u;
#endif
    if (lane == 0) {
      for (int it = DEPTH; it < nTiles; ++it) {
#if TAIL
        if (!deep) {
          // Tile it - DEPTH has been consumed.
          mt_mbar_wait(empty + 8 * ((it - DEPTH) % STAGES),
                       ((it - DEPTH) / STAGES) & 1);
          if (mt_mbar_test(pollBar, pollPar)) {
            deep = *pollVal != 0u;
            pollPar ^= 1u;
            if (!deep) {
              mt_mbar_expect(pollBar, 16);
              mt_bulk_load16(pollBar + 16, ws, pollBar);
            }
          }
        }
#endif
        // The stage's previous tile (it - STAGES) has been consumed.
        if (it >= STAGES)
          mt_mbar_wait(empty + 8 * (it % STAGES), ((it / STAGES) & 1) ^ 1);
        issue(it);
      }
#if TAIL
      // No copy may land in this CTA's shared memory after it has left.
      if (!deep)
        mt_mbar_wait(pollBar, pollPar);
#endif
    }
    __syncwarp();
  } else {
#if SWAP_AB
    const long long ra = r0 + 2 * t4, rb = ra + 1;
#else
    const long long ra = r0 + g, rb = ra + 8;
#endif
#if CAUSAL
    const long long lastA = ra < ROWS ? SKV - SQ + ra % SQ : SKV - 1;
    const long long lastB = rb < ROWS ? SKV - SQ + rb % SQ : SKV - 1;
#else
    const long long lastA = SKV - 1, lastB = SKV - 1;
#endif
    const long long rowMin = min(lastA, lastB);
    long long warpMin = rowMin;
    for (int w = 16; w > 0; w >>= 1)
      warpMin = min(warpMin, __shfl_xor_sync(0xffffffffu, warpMin, w));
#if SWAP_AB
    // q as the B operand (k16 = D, n8 = rows 0 to 7), two d-steps a load.
    unsigned qf[NKD][2];
#pragma unroll
    for (int kd = 0; kd < NKD; kd += 2) {
      unsigned r[4];
      mt_ldsm_x4(r, mt_smem_addr(sQ + (lane & 7) * DP + kd * 16 +
                                 (lane >> 3) * 8));
      qf[kd][0] = r[0];
      qf[kd][1] = r[1];
      qf[kd + 1][0] = r[2];
      qf[kd + 1][1] = r[3];
    }
#else
    unsigned qf[NKD][4];
#pragma unroll
    for (int kd = 0; kd < NKD; ++kd)
      mt_ldsm_x4(qf[kd], mt_smem_addr(sQ + (lane & 15) * DP + kd * 16 +
                                       (lane >> 4) * 8));
#endif
    for (int it = warp; it < nTiles; it += NC) {
      const int s = it % STAGES;
      const long long j0 = kvBegin + (long long)MT_TILE(it) * BKV;
      mt_mbar_wait(full + 8 * s, (it / STAGES) & 1);
      if (it == 0) {
        MT_TL_STAMP(2)
      }
      const unsigned kt = sK + s * KV_TILE, vt = sV + s * KV_TILE;
)";

/// The end of a consumer's loop: its last stage released, its row sums
/// reduced over the lanes of a row.
static const char *const DecEndRelease =
    R"(      // Every lane's reads of the stage are done: the producer may refill.
      __syncwarp();
      if (lane == 0)
        mt_mbar_arrive(empty + 8 * s);
    }
    // A row's lanes: its t4's eight (SWAP_AB) or its g's four.
#pragma unroll
    for (int w = SWAP_AB ? 4 : 1; w < (SWAP_AB ? 32 : 4); w <<= 1) {
      lA += __shfl_xor_sync(0xffffffffu, lA, w);
      lB += __shfl_xor_sync(0xffffffffu, lB, w);
    }
)";

/// (DecEndRelease, then with the early combine DecEarlyPartials, then:)
static const char *const DecEndSync = R"(  }
  // Every copy has landed (each was waited for) and every stage is read.
  __syncthreads();
  MT_TL_STAMP(3)
#if TAIL
  // This CTA's copies are done; the last to count leaves the count at 0.
  if (tid == 0 && atomicAdd((unsigned *)ws, 1u) ==
                      gridDim.x * gridDim.y * gridDim.z - 1)
    *(volatile unsigned *)ws = 0u;
#endif
)";

/// The old end's combine: the consumers' partial results combined in the
/// stages' memory after the barrier, only for the tile's VR rows that are
/// query rows (a decode step of Llama-3-8B has 4 of 16).
static const char *const DecEndPartials =
    R"(  const int VR = ROWS - r0 < 16 ? (int)(ROWS - r0) : 16;
  float *cO = (float *)region;   // [NC][16][D_] unnormalised accumulators
  float *cM = cO + NC * 16 * D_; // [NC][16] running max (log2 units)
  float *cL = cM + NC * 16;      // [NC][16] running sum
  float *cW = cL + NC * 16;      // [NC][16] each warp's weight
  float *fO = cW + NC * 16;      // [16][D_] the tile's combined accumulators
  float *fM = fO + 16 * D_, *fL = fM + 16;
#if SWAP_AB
  if (warp < NC) {
    // o[n]: columns n * 16 + g (+ 8) of rows ra, rb; rows 8 to 15 empty.
    const int ra = 2 * t4, rb = ra + 1;
#pragma unroll
    for (int n = 0; n < NOA; ++n) {
      const int d = n * 16 + g;
      if (ra < VR) {
        cO[(warp * 16 + ra) * D_ + d] = o[n][0];
        cO[(warp * 16 + ra) * D_ + d + 8] = o[n][2];
      }
      if (rb < VR) {
        cO[(warp * 16 + rb) * D_ + d] = o[n][1];
        cO[(warp * 16 + rb) * D_ + d + 8] = o[n][3];
      }
    }
    if (g < 2) {
      cM[warp * 16 + g * 8 + ra] = g ? MT_NEG_INF : mA;
      cM[warp * 16 + g * 8 + rb] = g ? MT_NEG_INF : mB;
      cL[warp * 16 + g * 8 + ra] = g ? 0.f : lA;
      cL[warp * 16 + g * 8 + rb] = g ? 0.f : lB;
    }
  }
#else
  if (warp < NC) {
)";
/// (DecPartialsToShared, then the rest of the end.)
static const char *const DecEndAfterPartials = R"(  }
#endif
  __syncthreads();
  MT_TL_STAMP(8)
  for (int i = tid; i < 16; i += THREADS) {
    float M = MT_NEG_INF, L = 0.f;
    for (int w = 0; w < NC; ++w)
      M = fmaxf(M, cM[w * 16 + i]);
    for (int w = 0; w < NC; ++w) {
      // A warp that saw no key of this row adds nothing.
      const float x =
          cM[w * 16 + i] == MT_NEG_INF ? 0.f : exp2f(cM[w * 16 + i] - M);
      cW[w * 16 + i] = x;
      L += cL[w * 16 + i] * x;
    }
    fM[i] = M;
    fL[i] = L;
  }
  __syncthreads();
  MT_TL_STAMP(9)
  for (int e = tid; e < VR * D_; e += THREADS) {
    const int i = e / D_;
    float x = 0.f;
    for (int w = 0; w < NC; ++w)
      x += cO[w * 16 * D_ + e] * cW[w * 16 + i];
    fO[e] = x;
  }
  __syncthreads();
  MT_TL_STAMP(4)
#if CLUSTER_SPLITS
  // The splits' combine (as SplitCombine's) by the cluster's first CTA,
  // reading the others' fO, fM and fL in their shared memory.
  mt_cluster_sync();
  if (zs == 0) {
    __shared__ float mt_cw[16 * SPLITS];
    for (int i = tid; i < VR; i += THREADS) {
      float M = MT_NEG_INF, L = 0.f;
#pragma unroll
      for (int z = 0; z < SPLITS; ++z)
        M = fmaxf(M, mt_ld_cluster(fM + i, z));
#pragma unroll
      for (int z = 0; z < SPLITS; ++z) {
        const float m = mt_ld_cluster(fM + i, z);
        // A split that saw no key of this row adds nothing.
        const float w = m == MT_NEG_INF ? 0.f : exp2f(m - M);
        mt_cw[i * SPLITS + z] = w;
        L += mt_ld_cluster(fL + i, z) * w;
      }
      const float inv = L > 0.f ? 1.f / L : MT_EMPTY_ROW;
#pragma unroll
      for (int z = 0; z < SPLITS; ++z)
        mt_cw[i * SPLITS + z] *= inv;
    }
    __syncthreads();
    for (int e = tid; e < VR * D_; e += THREADS) {
      const int i = e / D_;
      float x = 0.f;
#pragma unroll
      for (int z = 0; z < SPLITS; ++z)
        x += mt_ld_cluster(fO + e, z) * mt_cw[i * SPLITS + z];
      const long long r = r0 + i, h = hk * GROUP + r / SQ;
      out[((b * HQ + h) * SQ + r % SQ) * D_ + e % D_] = STORE(x);
    }
  }
  // The others' shared memory stays until the first CTA has read it.
  mt_cluster_sync();
#elif SPLITS > 1
  {
    const long long tile = (long long)blockIdx.y * gridDim.x + blockIdx.x;
    float *part = ws + (tile * SPLITS + blockIdx.z) * (BQ * D_ + 2 * BQ);
    for (int e = tid; e < VR * D_; e += THREADS)
      part[e] = fO[e];
    for (int i = tid; i < 16; i += THREADS) {
      part[BQ * D_ + i] = fM[i];
      part[BQ * D_ + BQ + i] = fL[i];
    }
)";

static const char *const DecOutput = R"(#else
  for (int e = tid; e < VR * D_; e += THREADS) {
    const int i = e / D_;
    const long long r = r0 + i;
    const long long h = hk * GROUP + r / SQ;
    out[((b * HQ + h) * SQ + r % SQ) * D_ + e % D_] =
        STORE(fL[i] > 0.f ? fO[e] / fL[i] : MT_EMPTY_ROW);
  }
#endif
  MT_TL_END
}
)";

/// A persistent tile's CTAs at most (work items of launchGridX): its
/// workspace holds a partial result per CTA and kv head boundary.
static constexpr int64_t DecPersistentMaxCtas = 512;
/// `_ps`: the kv heads a CTA takes tiles of after its own (SMAX), and the
/// partial results a kv head's list holds (LCAP: its owner's and the
/// stealers' after it).
static constexpr int64_t DecStealMaxHeads = 4;
static constexpr int64_t DecStealListEntries = 8;
/// `_ps`: the key tiles one claim takes (CLAIM; bench/device/
/// attn-dec-timeline.py times 1, 4 and 8 beside it).
static constexpr int64_t DecStealClaimTiles = 2;

/// The decode kernel's helpers and the #defines they read, for tile T at
/// shape S: k or v bytes a stage KvTile, PreWait tiles prefetched before
/// the wait. The tiles with the shared loop carry the evict-last prefetch
/// and the evict-first copy whether they use them or not (EVICT_FIRST and
/// PRE_WAIT switch them), so that bench/device/attn-dec-timeline.py can
/// time each way by editing a #define.
static std::string decHelpers(const AttentionShape &S, const AttentionTile &T,
                              int64_t KvTile, int64_t PreWait) {
  // The copies evict-first with PRE_WAIT: without, the prefetched tiles
  // gained nothing.
  bool EvictFirst = T.EvictFirst || PreWait;
  // KV_BOX and KV_TILE first: the helpers' swizzle reads them.
  return std::string("#define EVICT_FIRST ") + (EvictFirst ? "1" : "0") +
         " // the copies evict-first (mt_tma_load_ef)\n#define MMA_TYPE \"" +
         (S.Dtype == DType::BF16 ? "bf16" : "f16") + "\"\n#define KV_BOX " +
         std::to_string(T.BKV * 128) + " // bytes of a k or v box\n" +
         "#define KV_TILE " + std::to_string(KvTile) +
         " // bytes of a stage's k (or v)\n#define ONE_BOX " +
         (T.OneBox ? "1" : "0") + "\n#define ROW_BOXES " +
         std::to_string(S.D / 64) + " // 128-byte rows of a key\n" + KeyRange +
         PackHelper + WgmmaHelpers + DecHelpers + DecTimelineHelper +
         (T.Prefetch ? PrefetchHelper : "") +
         (T.Persistent ? "" : PrefetchLastHelper) +
         (T.Persistent && !T.EvictFirst ? "" : EvictFirstHelper) +
         (T.Tail ? TailHelper : "") + (T.SwapAB ? DecSwapHelper : "");
}

static llvm::Error checkDecTile(const AttentionShape &S, const AttentionTile &T,
                                const std::string &ChoiceName) {
  if (!decTileOptionsValid(T) || T.Splits <= 0 || T.Splits > 1024 ||
      T.Prefetch < 0 || T.Prefetch > 64 ||
      !decAttentionSupports(S, T.BQ, T.BKV, T.Warps, T.Stages, T.Persistent))
    return err("tile " + ChoiceName +
               " cannot run: the decode template needs bf16 or f16, head "
               "dimension 64 or 128, no mask, BQ = 16, BKV a multiple of 16 "
               "up to 128, 1 to 8 warps and 2 to 8 stages (a multiple of the "
               "warps) that fit in shared memory, 2 to 8 splits in a cluster, "
               "none and no stagger when persistent, no prefetch with warp "
               "partials or stealing, a tail depth only unsplit, not "
               "persistent, without "
               "prefetch and with half the stages a multiple of the warps, "
               "one box not persistent and without prefetch, swapped "
               "operands not persistent (got " +
               dtypeName(S.Dtype) + ", D = " + llvm::Twine(S.D) + ")");
  int64_t Tiles = (S.group() * S.Sq + T.BQ - 1) / T.BQ;
  // _sw: the packed rows are the MMA's 8 columns.
  if (T.SwapAB && (Tiles != 1 || S.group() * S.Sq > 8))
    return err("tile " + ChoiceName +
               " needs the packed query rows of a kv head to be 8 or fewer "
               "(got " +
               llvm::Twine(S.group() * S.Sq) + ")");
  if (T.Persistent && Tiles != 1)
    return err("tile " + ChoiceName +
               " needs the packed query rows of a kv "
               "head in one tile of 16 (got " +
               llvm::Twine(S.group() * S.Sq) + ")");
  if (Tiles * T.Splits > 0x7fffffff || S.B * S.Hkv > 65535 ||
      S.Skv * (T.OneBox ? S.D / 64 : 1) > 0x7fffffff)
    return err("the decode attention grid exceeds CUDA's limits");
  return llvm::Error::success();
}

llvm::Expected<KernelSource>
mtsched::generateDecAttentionKernel(const MultiTemplateBufferNode &N,
                                    const AttentionTile &T) {
  std::optional<AttentionShape> S = attentionShapeOf(N);
  if (!S)
    return err("'%" + N.getName() + "' is not a well-formed attention");
  std::string ChoiceName = attentionChoiceName(T);
  if (llvm::Error E = checkDecTile(*S, T, ChoiceName))
    return std::move(E);
  int64_t NBH = S->B * S->Hkv;
  int64_t Tiles = (S->group() * S->Sq + T.BQ - 1) / T.BQ;
  KernelSource K;
  K.Name = sanitizeIdentifier(N.getName() + "_" + ChoiceName);
  std::string Src;
  llvm::raw_string_ostream OS(Src);
  int Threads = 32 * (T.Warps + 1);
  int64_t KvTile = int64_t(T.BKV) * S->D * 2;
  int64_t Smem =
      decAttentionSharedBytes(T.BKV, T.Warps, S->D, T.Stages, T.Persistent);
  // The stages and the combine: overlapping, or one after the other.
  int64_t Region = Smem - 1024 - 16 * (S->D + 8) * 2 - 16 * int64_t(T.Stages);
  // _t: after the barriers, the count's barrier and its 16-byte copy.
  if (T.Tail)
    Smem += 32;
  if (Smem > FlashAttentionMaxSharedBytes)
    return err("tile " + ChoiceName + " needs " + llvm::Twine(Smem) +
               " bytes of shared memory, over the CTA's limit");
  int64_t PreWait = decPreWaitTiles(T, KvTile, Tiles * NBH * T.Splits);
  std::string Helpers = decHelpers(*S, T, KvTile, PreWait);
  // Two CTAs an SM where their shared memory fits and 65536 registers
  // leave each thread 200 (a decode step's split CTAs are short: more of
  // them at once hides each one's start and end); the kernel uses about
  // 210 unbounded and does not spill at 200. A persistent kernel runs one.
  int MinBlocks = !T.Persistent && 2 * (Smem + 1024) <= 228 * 1024 &&
                          Threads * 2 * 200 <= 65536
                      ? 2
                      : 1;
  int64_t Units = NBH * ((S->Skv + T.BKV - 1) / T.BKV);
  int64_t MaxCtas = std::min(Units, DecPersistentMaxCtas);
  bool Workspace = (T.Splits > 1 && !T.Cluster) || T.Persistent || T.Tail;
  llvm::Expected<AttentionShape> Header = emitAttentionHeader(
      OS, N, K.Name, ChoiceName, Threads, Workspace, Helpers,
      "const __grid_constant__ mt_tensor_map tm_k,\n    const "
      "__grid_constant__ mt_tensor_map tm_v,\n    ",
      MinBlocks);
  if (!Header)
    return Header.takeError();
  OS << "#define BQ " << T.BQ << "\n#define BKV " << T.BKV
     << "\n#define SPLITS " << T.Splits << "\n#define STAGES " << T.Stages;
  if (T.Persistent) {
    OS << "\n#define NBH " << NBH << "LL // batch x kv heads\n#define GMAX "
       << MaxCtas << " // CTAs at most\n#define PREFETCH " << T.Prefetch
       << "\n#define COMBINE " << Region - 2 * int64_t(T.Stages) * KvTile
       << " // bytes of the partial results\n#define SWAP_AB 0\n";
    if (T.Steal)
      OS << "#define SMAX " << DecStealMaxHeads
         << " // kv heads a CTA steals from\n#define LCAP "
         << DecStealListEntries << " // a kv head's partial results at most\n"
         << "#define CLAIM " << DecStealClaimTiles
         << "u // tiles a claim takes\n"
         << decStealBody();
    else if (T.WarpPartials)
      OS << decWarpPartialsBody();
    else
      OS << decPersistentBody();
  } else {
    OS << "\n#define CLUSTER_SPLITS " << (T.Cluster ? 1 : 0)
       << "\n#define STAGGER " << (T.Stagger ? 1 : 0) << "\n#define REGION "
       << Region << " // bytes of the stages (or the combine)\n";
    // Tiles in flight: every stage, or with _t half until a CTA finishes.
    OS << "#define TAIL " << (T.Tail ? 1 : 0) << "\n#define DEPTH "
       << (T.Tail ? T.Stages / 2 : T.Stages) << "\n#define SWAP_AB "
       << (T.SwapAB ? 1 : 0) << "\n#define PRE_WAIT " << PreWait
       << " // key tiles into L2 before the wait\n";
    if (T.Prefetch)
      OS << "#define PREFETCH " << T.Prefetch << "\n";
    OS << DecStart << (T.Prefetch ? IssuePrefetch : "") << DecLoop
       << decTileMath(T.SwapAB) << DecEndRelease;
    if (decEarlyCombine(T, S->D))
      OS << DecEarlyPartials << DecEndSync << DecEarlyCombine;
    else
      OS << DecEndSync << DecEndPartials << DecPartialsToShared
         << DecEndAfterPartials << SplitCombine << DecOutput;
  }
  K.Source = OS.str();
  K.Inputs = {N.getOperand(0), N.getOperand(1), N.getOperand(2)};
  K.Outputs = {N.getResult()};
  K.GridX = unsigned(std::max<int64_t>(1, Tiles));
  K.GridY = unsigned(std::max<int64_t>(1, NBH));
  K.GridZ = unsigned(T.Splits);
  if (T.Persistent) {
    // Equal shares of the flat key tiles, a CTA per SM (launchGridX); a
    // partial result per CTA and kv head boundary, a counter per kv head.
    K.GridX = unsigned(MaxCtas);
    K.GridY = 1;
    K.Persistent = true;
    // (_pw: a partial result per consumer warp. _ps: one per owned kv head
    // and per CTA and stolen head, and per kv head four counters and a
    // list, then the count of finished CTAs.)
    uint64_t Slots = uint64_t(MaxCtas + NBH) * (T.WarpPartials ? T.Warps : 1);
    uint64_t Counters = NBH;
    if (T.Steal) {
      Slots = uint64_t(NBH + MaxCtas * DecStealMaxHeads);
      Counters = uint64_t(NBH) * (3 + DecStealListEntries) + 1;
    }
    K.WorkspaceBytes = (Slots * (16 * S->D + 32) + Counters) * 4;
  } else if (T.Cluster) {
    K.GridX *= unsigned(T.Splits);
    K.GridZ = 1;
    K.ClusterX = unsigned(T.Splits);
  } else if (T.Tail) {
    // The count of finished CTAs (copied as 16 bytes).
    K.WorkspaceBytes = 16;
  } else if (T.Splits > 1) {
    // Per CTA its accumulators, running max and sum; per tile a counter.
    uint64_t TilesXY = uint64_t(K.GridX) * K.GridY;
    K.WorkspaceBytes =
        TilesXY * T.Splits * (uint64_t(T.BQ) * S->D + 2 * T.BQ) * 4 +
        TilesXY * 4;
  }
  K.BlockX = Threads;
  K.SharedBytes = unsigned(Smem);
  K.NeedsSm90a = true;
  // The tiles' producer and consumers wait (griddepcontrol.wait) before
  // their first copy and their first read of q; nothing touches global
  // memory before. (The persistent forms do not wait.)
  K.ProgrammaticWait = !T.Persistent;
  // k and v as [B * Hkv][Skv][D] in boxes of 64 columns x BKV keys, or
  // with _ob as [B * Hkv][Skv * D / 64][64] in boxes of a stage's rows.
  if (T.OneBox) {
    int64_t RowBoxes = S->D / 64;
    uint32_t Box = uint32_t(T.BKV * RowBoxes);
    K.TensorMaps = {wgmmaTensorMap(1, 64, S->Skv * RowBoxes, NBH, 64, Box),
                    wgmmaTensorMap(2, 64, S->Skv * RowBoxes, NBH, 64, Box)};
  } else {
    K.TensorMaps = {wgmmaTensorMap(1, S->D, S->Skv, NBH, 64, uint32_t(T.BKV)),
                    wgmmaTensorMap(2, S->D, S->Skv, NBH, 64, uint32_t(T.BKV))};
  }
  // With PRE_WAIT's prefetch and evict-first copies, copies that promote
  // nothing more into L2 than they read: at batch 16 on an H200 63.22
  // against 63.97 us with 256-byte promotion (docs/CUDA.md).
  if (PreWait)
    for (TensorMapParam &M : K.TensorMaps)
      M.L2PromotionBytes = 0;
  return K;
}
