//===- AttentionKernels.cpp - CUDA kernels of the attention op ------------===//
//
// Both templates read the shape from #defines, so one source text serves
// every tile: the flash kernel's thread mappings are fixed by the tile (a
// thread owns score columns j = tid % BKV and output columns d = tid % D,
// with rows strided by the threads left over) and fall back to a flat
// element loop where D does not divide the block.
//
//===----------------------------------------------------------------------===//
#include "GemmCodegen.h"
#include "mtsched/Backend/Cuda/AttentionCodegen.h"
#include "mtsched/IR/Attention.h"
#include "llvm/Support/Format.h"

using namespace mtsched;
using namespace mtsched::codegen;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

/// LOAD(x) converts one stored element to float.
static const char *loadMacro(DType T) {
  switch (T) {
  case DType::BF16:
    return "#define LOAD(x) mt_bf16_to_f32(x)\n";
  case DType::F16:
    return "#define LOAD(x) mt_f16_to_f32(x)\n";
  default:
    return "#define LOAD(x) ((float)(x))\n";
  }
}

/// The end of a split-KV CTA (`#if SPLITS > 1`), after it has written its
/// partial accumulators `part[row * D_ + d]`, running max (log2 units; -inf
/// for a row that saw no key) and sum to the workspace: the last split of
/// the tile to finish (a counter per tile, left at zero again) combines
///   out = sum_s acc_s 2^(m_s - M) / sum_s l_s 2^(m_s - M), M = max_s m_s.
/// Each row's weights 2^(m_s - M) / L are worked out once, into shared
/// memory; the partials are then read 4 floats at a time where the layout
/// allows, with independent loads per split (L2 latency, not bandwidth,
/// bounds a one-warp CTA's combine). Loads bypass L1 (`__ldcg`): other
/// CTAs wrote the partials. Both templates emit it (emitWithCombine)
/// between the pieces of their bodies.
static const char *const SplitCombine =
    R"(    __threadfence();
    __syncthreads();
    __shared__ int mt_last;
    __shared__ float mt_w[BQ * SPLITS];
    unsigned *count = (unsigned *)(ws + (long long)gridDim.x * gridDim.y *
                                            SPLITS * (BQ * D_ + 2 * BQ)) +
                      tile;
    if (tid == 0)
      mt_last = atomicAdd(count, 1u) == SPLITS - 1;
    __syncthreads();
    if (!mt_last)
      return;
    __threadfence();
#define PSTRIDE (BQ * D_ + 2 * BQ) // floats of one split's partials
    const float *parts = ws + tile * SPLITS * PSTRIDE;
    for (int i = tid; i < BQ; i += THREADS) {
      float M = MT_NEG_INF;
#pragma unroll
      for (int z = 0; z < SPLITS; ++z)
        M = fmaxf(M, __ldcg(parts + z * PSTRIDE + BQ * D_ + i));
      float L = 0.f;
#pragma unroll
      for (int z = 0; z < SPLITS; ++z) {
        const float m = __ldcg(parts + z * PSTRIDE + BQ * D_ + i);
        // A split that saw no key of this row adds nothing.
        const float w = m == MT_NEG_INF ? 0.f : exp2f(m - M);
        mt_w[i * SPLITS + z] = w;
        L += __ldcg(parts + z * PSTRIDE + BQ * D_ + BQ + i) * w;
      }
      const float inv = L > 0.f ? 1.f / L : 0.f;
#pragma unroll
      for (int z = 0; z < SPLITS; ++z)
        mt_w[i * SPLITS + z] *= inv;
    }
    __syncthreads();
#if D_ % 4 == 0 && BQ % 2 == 0
#define CV 4 // PSTRIDE and every row start are multiples of 4 floats
#else
#define CV 1
#endif
    for (int e = tid * CV; e < BQ * D_; e += THREADS * CV) {
      const int i = e / D_, d = e % D_;
      const long long r = r0 + i;
      if (r >= ROWS)
        continue;
      float o[CV];
#pragma unroll
      for (int c = 0; c < CV; ++c)
        o[c] = 0.f;
#pragma unroll
      for (int z = 0; z < SPLITS; ++z) {
        const float w = mt_w[i * SPLITS + z];
#if CV == 4
        const float4 p = __ldcg((const float4 *)(parts + z * PSTRIDE + e));
        o[0] += p.x * w;
        o[1] += p.y * w;
        o[2] += p.z * w;
        o[3] += p.w * w;
#else
        o[0] += __ldcg(parts + z * PSTRIDE + e) * w;
#endif
      }
      const long long h = hk * GROUP + r / SQ;
#pragma unroll
      for (int c = 0; c < CV; ++c)
        out[((b * HQ + h) * SQ + r % SQ) * D_ + d + c] = STORE(o[c]);
    }
    if (tid == 0)
      *count = 0u;
  }
)";

/// Emits Pieces with the split-KV combine between consecutive ones (each
/// piece but the last ends where a `#if SPLITS > 1` branch has written its
/// partials).
static void emitWithCombine(llvm::raw_ostream &OS,
                            llvm::ArrayRef<const char *> Pieces) {
  for (size_t I = 0; I < Pieces.size(); ++I)
    OS << (I ? SplitCombine : "") << Pieces[I];
}

static const char *const FlashBody[] = {R"(
#define NW (THREADS / 32)
#define KS (D_ + 1)   // padded key row: lanes read different keys
#define SS (BKV + 1)  // padded score row
#define SC_RG (THREADS / BKV)
#define SC_R (BQ / SC_RG)
#define MT_NEG_INF (-__int_as_float(0x7f800000))
#if THREADS % D_ == 0 && BQ % (THREADS / D_) == 0
#define PV_SPLIT 1    // a thread owns column tid % D_ of rows strided by PV_RG
#define PV_RG (THREADS / D_)
#define PV_N (BQ / PV_RG)
#else
#define PV_SPLIT 0    // a thread owns elements tid + n * THREADS of the tile
#define PV_N ((BQ * D_ + THREADS - 1) / THREADS)
#endif
  extern __shared__ __align__(16) float mt_smem[];
  float *sQ = mt_smem;          // [BQ][D_], scaled by SCALE_LOG2
  float *sK = sQ + BQ * D_;     // [BKV][KS]
  float *sV = sK + BKV * KS;    // [BKV][D_]
  float *sS = sV + BKV * D_;    // [BQ][SS] scores, then probabilities
  float *sM = sS + BQ * SS;     // running max (log2 units)
  float *sL = sM + BQ;          // running sum
  float *sA = sL + BQ;          // this tile's rescale factor
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const long long b = blockIdx.y / HKV, hk = blockIdx.y % HKV;
  const long long r0 = (long long)blockIdx.x * BQ;
  const long long kvBase = (b * HKV + hk) * (long long)SKV * D_;
  // Packed row r is query r % SQ of query head hk * GROUP + r / SQ.
  for (int e = tid; e < BQ * D_; e += THREADS) {
    const long long r = r0 + e / D_;
    float x = 0.f;
    if (r < ROWS) {
      const long long h = hk * GROUP + r / SQ;
      x = LOAD(q[((b * HQ + h) * SQ + r % SQ) * D_ + e % D_]) * SCALE_LOG2;
    }
    sQ[e] = x;
  }
  for (int i = tid; i < BQ; i += THREADS) {
    sM[i] = MT_NEG_INF;
    sL[i] = 0.f;
  }
  long long kvEnd = SKV;
#if CAUSAL
  {
    // The tile's last query sees the most keys.
    const long long rl = (r0 + BQ < ROWS ? r0 + BQ : ROWS) - 1;
    const long long qmax = (r0 / SQ != rl / SQ) ? SQ - 1 : rl % SQ;
    kvEnd = SKV - SQ + qmax + 1;
  }
#endif
  float acc[PV_N];
#pragma unroll
  for (int n = 0; n < PV_N; ++n)
    acc[n] = 0.f;
  const int sj = tid % BKV, sg = tid / BKV;
  long long kvBegin = 0;
#if SPLITS > 1
  {
    // Split z of SPLITS takes its share of whole key tiles.
    const long long tiles = (kvEnd + BKV - 1) / BKV;
    const long long per = (tiles + SPLITS - 1) / SPLITS;
    kvBegin = blockIdx.z * per * BKV;
    kvEnd = kvEnd < kvBegin + per * BKV ? kvEnd : kvBegin + per * BKV;
  }
#endif
  for (long long j0 = kvBegin; j0 < kvEnd; j0 += BKV) {
    __syncthreads(); // the previous tile is consumed
    for (int e = tid; e < BKV * D_; e += THREADS) {
      const int j = e / D_, d = e % D_;
      float kx = 0.f, vx = 0.f;
      if (j0 + j < SKV) {
        kx = LOAD(k[kvBase + (j0 + j) * D_ + d]);
        vx = LOAD(v[kvBase + (j0 + j) * D_ + d]);
      }
      sK[j * KS + d] = kx;
      sV[j * D_ + d] = vx;
    }
    __syncthreads();
    {
      float s[SC_R];
#pragma unroll
      for (int t = 0; t < SC_R; ++t)
        s[t] = 0.f;
      for (int d = 0; d < D_; ++d) {
        const float kd = sK[sj * KS + d];
#pragma unroll
        for (int t = 0; t < SC_R; ++t)
          s[t] += sQ[(sg + t * SC_RG) * D_ + d] * kd;
      }
      const long long jj = j0 + sj;
#pragma unroll
      for (int t = 0; t < SC_R; ++t) {
        const int i = sg + t * SC_RG;
        const long long r = r0 + i;
        bool ok = r < ROWS && jj < SKV;
#if CAUSAL
        ok = ok && jj <= SKV - SQ + r % SQ;
#endif
        sS[i * SS + sj] = ok ? s[t] : MT_NEG_INF;
      }
    }
    __syncthreads();
    // Online softmax, a warp per row: rescale what was summed so far by
    // 2^(old max - new max).
    for (int i = warp; i < BQ; i += NW) {
      float mx = MT_NEG_INF;
      for (int j = lane; j < BKV; j += 32)
        mx = fmaxf(mx, sS[i * SS + j]);
      mx = mt_warp_max(mx);
      const float mold = sM[i], mnew = fmaxf(mold, mx);
      // A row that has seen no key yet has nothing to rescale.
      const float alpha = mnew == MT_NEG_INF ? 1.f : exp2f(mold - mnew);
      float sum = 0.f;
      for (int j = lane; j < BKV; j += 32) {
        const float x = sS[i * SS + j];
        const float p = x == MT_NEG_INF ? 0.f : exp2f(x - mnew);
        sS[i * SS + j] = p;
        sum += p;
      }
      sum = mt_warp_sum(sum);
      if (lane == 0) {
        sM[i] = mnew;
        sL[i] = sL[i] * alpha + sum;
        sA[i] = alpha;
      }
    }
    __syncthreads();
#if PV_SPLIT
    {
      const int d = tid % D_, g = tid / D_;
#pragma unroll
      for (int n = 0; n < PV_N; ++n)
        acc[n] *= sA[g + n * PV_RG];
      for (int j = 0; j < BKV; ++j) {
        const float vx = sV[j * D_ + d];
#pragma unroll
        for (int n = 0; n < PV_N; ++n)
          acc[n] += sS[(g + n * PV_RG) * SS + j] * vx;
      }
    }
#else
#pragma unroll
    for (int n = 0; n < PV_N; ++n) {
      const int e = tid + n * THREADS;
      if (e < BQ * D_) {
        const int i = e / D_, d = e % D_;
        float a = acc[n] * sA[i];
        for (int j = 0; j < BKV; ++j)
          a += sS[i * SS + j] * sV[j * D_ + d];
        acc[n] = a;
      }
    }
#endif
  }
  __syncthreads();
#if SPLITS > 1
  // Each split writes its unnormalised accumulators, running max and sum
  // to the workspace; the last split of the tile to finish (a counter per
  // tile, left at zero again) combines them:
  //   out = sum_s acc_s 2^(m_s - M) / sum_s l_s 2^(m_s - M), M = max_s m_s.
  {
    const long long tile = (long long)blockIdx.y * gridDim.x + blockIdx.x;
    float *part = ws + (tile * SPLITS + blockIdx.z) * (BQ * D_ + 2 * BQ);
#pragma unroll
    for (int n = 0; n < PV_N; ++n) {
#if PV_SPLIT
      part[(tid / D_ + n * PV_RG) * D_ + tid % D_] = acc[n];
#else
      if (tid + n * THREADS < BQ * D_)
        part[tid + n * THREADS] = acc[n];
#endif
    }
    for (int i = tid; i < BQ; i += THREADS) {
      part[BQ * D_ + i] = sM[i];
      part[BQ * D_ + BQ + i] = sL[i];
    }
)",
    R"(#else
#pragma unroll
  for (int n = 0; n < PV_N; ++n) {
#if PV_SPLIT
    const int i = tid / D_ + n * PV_RG, d = tid % D_;
#else
    const int e = tid + n * THREADS;
    if (e >= BQ * D_)
      continue;
    const int i = e / D_, d = e % D_;
#endif
    const long long r = r0 + i;
    if (r < ROWS) {
      const long long h = hk * GROUP + r / SQ;
      const float l = sL[i];
      out[((b * HQ + h) * SQ + r % SQ) * D_ + d] =
          STORE(l > 0.f ? acc[n] / l : 0.f);
    }
  }
#endif
}
)"};

/// The tensor-core template: warp w owns MR m16 tiles of packed rows
/// (16 * MR rows from 16 * MR * w). q kᵀ and p v are mma.sync m16n8k16
/// products with fp32 accumulators (the fragment layouts of the PTX ISA:
/// lane = 4 g + t holds rows g and g + 8, columns 2t and 2t + 1 of each n8
/// tile); the scores never leave registers: the online softmax works on the
/// accumulator fragments, which are exactly the A fragments of p v once
/// rounded to 16 bits. k and v tiles stream through STAGES shared-memory
/// stages by cp.async, so the next tiles load while this one is multiplied
/// (a one-warp decode CTA has few tiles: deeper stages put more of them in
/// flight at once). With MR = 2 each k and
/// v fragment read from shared memory feeds two MMAs (shared memory, not
/// the tensor cores, bounds MR = 1 at prefill), and q's fragments are read
/// again per tile rather than held in registers.
static const char *const MmaBody[] = {R"(
#define NW (THREADS / 32)
#if BQ == 16 * NW || BQ == 32 * NW
#define KW 1              // each warp has rows of its own
#else
#define KW NW             // a 16-row tile: the warps split each stage's keys
#endif
#define MR (BQ * KW / (16 * NW)) // m16 row tiles per warp: 1 or 2
#define KT (KW * BKV)     // keys of one pipeline stage
#define DP (D_ + 8)       // padded 16-bit row: ldmatrix rows hit different banks
#define CH (D_ / 8)       // 16-byte chunks of a row
#define NKD (D_ / 16)     // k16 steps of q kᵀ
#define NS (BKV / 8)      // n8 score tiles of a key tile
#define NO (D_ / 8)       // n8 output tiles
#define MT_NEG_INF (-__int_as_float(0x7f800000))
  extern __shared__ __align__(16) unsigned short mt_smem[];
  unsigned short *sQ = mt_smem;        // [BQ][DP]
  unsigned short *sK = sQ + BQ * DP;   // [STAGES][KT][DP]
  unsigned short *sV = sK + STAGES * KT * DP;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const long long b = blockIdx.y / HKV, hk = blockIdx.y % HKV;
#if CAUSAL
  // The last query tiles see the most keys: start them first.
  const long long r0 = (long long)(gridDim.x - 1 - blockIdx.x) * BQ;
#else
  const long long r0 = (long long)blockIdx.x * BQ;
#endif
  const long long kvBase = (b * HKV + hk) * (long long)SKV * D_;
  // Packed row r is query r % SQ of query head hk * GROUP + r / SQ.
  for (int c = tid; c < BQ * CH; c += THREADS) {
    const int i = c / CH, col = (c % CH) * 8;
    const long long r = r0 + i;
    const bool ok = r < ROWS;
    const long long h = hk * GROUP + (ok ? r / SQ : 0);
    mt_cp_async16(sQ + i * DP + col,
                  ok ? q + ((b * HQ + h) * SQ + r % SQ) * D_ + col : q,
                  ok ? 16 : 0);
  }
  mt_cp_async_commit();
  long long kvEnd = SKV;
#if CAUSAL
  {
    // The tile's last query sees the most keys.
    const long long rl = (r0 + BQ < ROWS ? r0 + BQ : ROWS) - 1;
    const long long qmax = (r0 / SQ != rl / SQ) ? SQ - 1 : rl % SQ;
    kvEnd = SKV - SQ + qmax + 1;
  }
#endif
  long long kvBegin = 0;
#if SPLITS > 1
  {
    // Split z of SPLITS takes its share of whole stages of keys.
    const long long tiles = (kvEnd + KT - 1) / KT;
    const long long per = (tiles + SPLITS - 1) / SPLITS;
    kvBegin = blockIdx.z * per * KT;
    kvEnd = kvEnd < kvBegin + per * KT ? kvEnd : kvBegin + per * KT;
  }
#endif
  // Row ra[m] of tile m and rb[m] = ra[m] + 8 are this thread's; the last
  // key each sees (rows past ROWS see all: their zero queries are never
  // stored), and the range over the warp: a key tile past every row's last
  // key is skipped, one before every row's first masked key needs no mask.
  // The warp's first row in the tile, and its share of a stage's keys.
  const int wr = KW > 1 ? 0 : warp * 16 * MR, kg = KW > 1 ? warp : 0;
  long long lastA[MR], lastB[MR];
  long long warpMin = SKV - 1, warpMax = 0;
#pragma unroll
  for (int m = 0; m < MR; ++m) {
    const long long ra = r0 + wr + m * 16 + g, rb = ra + 8;
#if CAUSAL
    lastA[m] = ra < ROWS ? SKV - SQ + ra % SQ : SKV - 1;
    lastB[m] = rb < ROWS ? SKV - SQ + rb % SQ : SKV - 1;
#else
    lastA[m] = lastB[m] = SKV - 1;
#endif
    warpMin = min(warpMin, min(lastA[m], lastB[m]));
    warpMax = max(warpMax, max(lastA[m], lastB[m]));
  }
  for (int o = 16; o > 0; o >>= 1) {
    warpMin = min(warpMin, __shfl_xor_sync(0xffffffffu, warpMin, o));
    warpMax = max(warpMax, __shfl_xor_sync(0xffffffffu, warpMax, o));
  }
  auto loadKV = [&](int stage, long long j0) {
    for (int c = tid; c < KT * CH; c += THREADS) {
      const int j = c / CH, col = (c % CH) * 8;
      const bool ok = j0 + j < SKV;
      const long long off = kvBase + (j0 + j) * D_ + col;
      mt_cp_async16(sK + (stage * KT + j) * DP + col, ok ? k + off : k,
                    ok ? 16 : 0);
      mt_cp_async16(sV + (stage * KT + j) * DP + col, ok ? v + off : v,
                    ok ? 16 : 0);
    }
  };
  const int nTiles =
      kvBegin < kvEnd ? (int)((kvEnd - kvBegin + KT - 1) / KT) : 0;
  // Groups: q, then one per key tile (empty past the last), so before
  // iteration it's wait the tiles after it number STAGES - 2.
#pragma unroll
  for (int p = 0; p < STAGES - 1; ++p) {
    if (p < nTiles)
      loadKV(p, kvBegin + (long long)p * KT);
    mt_cp_async_commit();
  }
  MT_CP_ASYNC_WAIT(STAGES - 1); // q has landed
  __syncthreads();
#if MR == 1
  unsigned qf[NKD][4];
#pragma unroll
  for (int kd = 0; kd < NKD; ++kd)
    mt_ldmatrix_x4(qf[kd], sQ + (wr + (lane & 15)) * DP + kd * 16 +
                               (lane >> 4) * 8);
#endif
  float o[MR][NO][4];
#pragma unroll
  for (int m = 0; m < MR; ++m)
#pragma unroll
    for (int n = 0; n < NO; ++n)
      o[m][n][0] = o[m][n][1] = o[m][n][2] = o[m][n][3] = 0.f;
  // Running max (log2 units) and this thread's share of the running sum of
  // rows ra and rb; the four lanes of a row agree on the max.
  float mA[MR], mB[MR], lA[MR], lB[MR];
#pragma unroll
  for (int m = 0; m < MR; ++m) {
    mA[m] = mB[m] = MT_NEG_INF;
    lA[m] = lB[m] = 0.f;
  }
  for (int it = 0; it < nTiles; ++it) {
    const long long js = kvBegin + (long long)it * KT; // the stage's keys
    const long long j0 = js + kg * BKV;                // this warp's
    const int st = it % STAGES;
    MT_CP_ASYNC_WAIT(STAGES - 2); // tile it has landed
    // Every warp is done with tile it - 1, whose stage is loaded next.
    __syncthreads();
    if (it + STAGES - 1 < nTiles)
      loadKV((it + STAGES - 1) % STAGES, js + (long long)(STAGES - 1) * KT);
    mt_cp_async_commit();
    if (j0 <= warpMax && j0 < kvEnd) {
      const unsigned short *kt = sK + (st * KT + kg * BKV) * DP;
      const unsigned short *vt = sV + (st * KT + kg * BKV) * DP;
      float s[MR][NS][4];
#pragma unroll
      for (int m = 0; m < MR; ++m)
#pragma unroll
        for (int n = 0; n < NS; ++n)
          s[m][n][0] = s[m][n][1] = s[m][n][2] = s[m][n][3] = 0.f;
#pragma unroll
      for (int kd = 0; kd < NKD; ++kd) {
#if MR == 1
        const unsigned(*qk)[4] = &qf[kd];
#else
        unsigned qk[MR][4];
#pragma unroll
        for (int m = 0; m < MR; ++m)
          mt_ldmatrix_x4(qk[m], sQ + (wr + m * 16 + (lane & 15)) * DP +
                                    kd * 16 + (lane >> 4) * 8);
#endif
#pragma unroll
        for (int n = 0; n < NS; n += 2) {
          unsigned bk[4];
          mt_ldmatrix_x4(bk, kt + (n * 8 + (lane >> 4) * 8 + (lane & 7)) * DP +
                                 kd * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
          for (int m = 0; m < MR; ++m) {
            mt_mma(s[m][n], qk[m], bk);
            mt_mma(s[m][n + 1], qk[m], bk + 2);
          }
        }
      }
      const bool mask = j0 + BKV - 1 > warpMin;
      unsigned pf[MR][NS / 2][4];
#pragma unroll
      for (int m = 0; m < MR; ++m) {
        float mxA = MT_NEG_INF, mxB = MT_NEG_INF;
#pragma unroll
        for (int n = 0; n < NS; ++n) {
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const long long jj = j0 + n * 8 + 2 * t4 + c;
            float x = s[m][n][c] * SCALE_LOG2, y = s[m][n][2 + c] * SCALE_LOG2;
            if (mask) {
              x = jj > lastA[m] ? MT_NEG_INF : x;
              y = jj > lastB[m] ? MT_NEG_INF : y;
            }
            s[m][n][c] = x;
            s[m][n][2 + c] = y;
            mxA = fmaxf(mxA, x);
            mxB = fmaxf(mxB, y);
          }
        }
#pragma unroll
        for (int w = 1; w < 4; w <<= 1) {
          mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, w));
          mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, w));
        }
        const float nA = fmaxf(mA[m], mxA), nB = fmaxf(mB[m], mxB);
        // A row that has seen no key yet subtracts 0: exp2(-inf) is 0, and
        // -inf - -inf would be NaN.
        const float uA = nA == MT_NEG_INF ? 0.f : nA;
        const float uB = nB == MT_NEG_INF ? 0.f : nB;
        const float aA = exp2f(mA[m] - uA), aB = exp2f(mB[m] - uB);
        mA[m] = nA;
        mB[m] = nB;
        lA[m] *= aA;
        lB[m] *= aB;
#pragma unroll
        for (int n = 0; n < NO; ++n) {
          o[m][n][0] *= aA;
          o[m][n][1] *= aA;
          o[m][n][2] *= aB;
          o[m][n][3] *= aB;
        }
        // p as the A fragments of p v: k16 step kk is score tiles 2kk and
        // 2kk + 1.
#pragma unroll
        for (int n = 0; n < NS; ++n) {
          const float p0 = exp2f(s[m][n][0] - uA), p1 = exp2f(s[m][n][1] - uA);
          const float p2 = exp2f(s[m][n][2] - uB), p3 = exp2f(s[m][n][3] - uB);
          lA[m] += p0 + p1;
          lB[m] += p2 + p3;
          pf[m][n / 2][(n & 1) * 2] = mt_pack2(p0, p1);
          pf[m][n / 2][(n & 1) * 2 + 1] = mt_pack2(p2, p3);
        }
      }
#pragma unroll
      for (int kk = 0; kk < NS / 2; ++kk) {
#pragma unroll
        for (int n = 0; n < NO; n += 2) {
          unsigned bv[4];
          mt_ldmatrix_x4_trans(bv, vt + (kk * 16 + ((lane >> 3) & 1) * 8 +
                                         (lane & 7)) * DP +
                                       n * 8 + (lane >> 4) * 8);
#pragma unroll
          for (int m = 0; m < MR; ++m) {
            mt_mma(o[m][n], pf[m][kk], bv);
            mt_mma(o[m][n + 1], pf[m][kk], bv + 2);
          }
        }
      }
    }
  }
#pragma unroll
  for (int m = 0; m < MR; ++m)
#pragma unroll
    for (int w = 1; w < 4; w <<= 1) {
      lA[m] += __shfl_xor_sync(0xffffffffu, lA[m], w);
      lB[m] += __shfl_xor_sync(0xffffffffu, lB[m], w);
    }
#if KW > 1
  // The warps hold partial results of the same 16 rows over disjoint keys:
  // combine them through the k/v stages, free once every copy has landed
  // (mmaAttentionSharedBytes: they are large enough).
  MT_CP_ASYNC_WAIT(0);
  __syncthreads();
  float *cO = (float *)sK;        // [KW][16][D_] unnormalised accumulators
  float *cM = cO + KW * 16 * D_;  // [KW][16] running max (log2 units)
  float *cL = cM + KW * 16;       // [KW][16] running sum
  float *cW = cL + KW * 16;       // [KW][16] each warp's weight
  float *fO = cW + KW * 16;       // [16][D_] the tile's combined accumulators
  float *fM = fO + 16 * D_, *fL = fM + 16;
#pragma unroll
  for (int n = 0; n < NO; ++n) {
    const int d = n * 8 + 2 * t4;
    cO[(kg * 16 + g) * D_ + d] = o[0][n][0];
    cO[(kg * 16 + g) * D_ + d + 1] = o[0][n][1];
    cO[(kg * 16 + g + 8) * D_ + d] = o[0][n][2];
    cO[(kg * 16 + g + 8) * D_ + d + 1] = o[0][n][3];
  }
  if (t4 == 0) {
    cM[kg * 16 + g] = mA[0];
    cM[kg * 16 + g + 8] = mB[0];
    cL[kg * 16 + g] = lA[0];
    cL[kg * 16 + g + 8] = lB[0];
  }
  __syncthreads();
  for (int i = tid; i < 16; i += THREADS) {
    float M = MT_NEG_INF, L = 0.f;
    for (int w = 0; w < KW; ++w)
      M = fmaxf(M, cM[w * 16 + i]);
    for (int w = 0; w < KW; ++w) {
      // A warp that saw no key of this row adds nothing.
      const float x = cM[w * 16 + i] == MT_NEG_INF ? 0.f
                                                  : exp2f(cM[w * 16 + i] - M);
      cW[w * 16 + i] = x;
      L += cL[w * 16 + i] * x;
    }
    fM[i] = M;
    fL[i] = L;
  }
  __syncthreads();
  for (int e = tid; e < 16 * D_; e += THREADS) {
    const int i = e / D_;
    float x = 0.f;
    for (int w = 0; w < KW; ++w)
      x += cO[w * 16 * D_ + e] * cW[w * 16 + i];
    fO[e] = x;
  }
  __syncthreads();
#if SPLITS > 1
  {
    const long long tile = (long long)blockIdx.y * gridDim.x + blockIdx.x;
    float *part = ws + (tile * SPLITS + blockIdx.z) * (BQ * D_ + 2 * BQ);
    for (int e = tid; e < 16 * D_; e += THREADS)
      part[e] = fO[e];
    for (int i = tid; i < 16; i += THREADS) {
      part[BQ * D_ + i] = fM[i];
      part[BQ * D_ + BQ + i] = fL[i];
    }
)",
    R"(#else
  for (int e = tid; e < 16 * D_; e += THREADS) {
    const int i = e / D_;
    const long long r = r0 + i;
    if (r >= ROWS)
      continue;
    const long long h = hk * GROUP + r / SQ;
    out[((b * HQ + h) * SQ + r % SQ) * D_ + e % D_] =
        STORE(fL[i] > 0.f ? fO[e] / fL[i] : 0.f);
  }
#endif
#elif SPLITS > 1
  {
    const long long tile = (long long)blockIdx.y * gridDim.x + blockIdx.x;
    float *part = ws + (tile * SPLITS + blockIdx.z) * (BQ * D_ + 2 * BQ);
#pragma unroll
    for (int m = 0; m < MR; ++m) {
      const int ia = wr + m * 16 + g, ib = ia + 8;
#pragma unroll
      for (int n = 0; n < NO; ++n) {
        const int d = n * 8 + 2 * t4;
        part[ia * D_ + d] = o[m][n][0];
        part[ia * D_ + d + 1] = o[m][n][1];
        part[ib * D_ + d] = o[m][n][2];
        part[ib * D_ + d + 1] = o[m][n][3];
      }
      if (t4 == 0) {
        part[BQ * D_ + ia] = mA[m];
        part[BQ * D_ + ib] = mB[m];
        part[BQ * D_ + BQ + ia] = lA[m];
        part[BQ * D_ + BQ + ib] = lB[m];
      }
    }
)",
    R"(#else
#pragma unroll
  for (int m = 0; m < MR; ++m) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const long long r = r0 + wr + m * 16 + g + 8 * half;
      if (r >= ROWS)
        continue;
      const float l = half ? lB[m] : lA[m];
      const float inv = l > 0.f ? 1.f / l : 0.f;
      const long long h = hk * GROUP + r / SQ;
      unsigned short *dst = out + ((b * HQ + h) * SQ + r % SQ) * D_ + 2 * t4;
#pragma unroll
      for (int n = 0; n < NO; ++n)
        *(unsigned *)(dst + n * 8) =
            mt_pack2(o[m][n][2 * half] * inv, o[m][n][2 * half + 1] * inv);
    }
  }
#endif
}
)"};

static const char *MathBody = R"(
#define NW (THREADS / 32)
#define MT_NEG_INF (-__int_as_float(0x7f800000))
  __shared__ float sq[D_];
  __shared__ float red[NW];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const long long R = blockIdx.x; // a row of [B, HQ, SQ]
  const long long qi = R % SQ, h = (R / SQ) % HQ, b = R / (SQ * HQ);
  const long long kvBase = (b * HKV + h / GROUP) * (long long)SKV * D_;
  float *w = ws + R * (long long)SKV;
  for (int d = tid; d < D_; d += THREADS)
    sq[d] = LOAD(q[R * D_ + d]) * SCALE_LOG2;
  __syncthreads();
#if CAUSAL
  const long long last = SKV - SQ + qi;
#else
  const long long last = SKV - 1;
  (void)qi;
#endif
  // Scores, a warp per key: lanes read consecutive elements of its row.
  float mx = MT_NEG_INF;
  for (long long j = warp; j <= last; j += NW) {
    float p = 0.f;
    for (int d = lane; d < D_; d += 32)
      p += sq[d] * LOAD(k[kvBase + j * D_ + d]);
    p = mt_warp_sum(p);
    if (lane == 0)
      w[j] = p;
    mx = fmaxf(mx, p);
  }
  mx = mt_block_max(mx, red);
  float sum = 0.f;
  for (long long j = tid; j <= last; j += THREADS) {
    const float p = exp2f(w[j] - mx);
    w[j] = p;
    sum += p;
  }
  // Its barriers also make the probabilities visible to the whole block.
  sum = mt_block_sum(sum, red);
  const float inv = 1.f / sum;
  for (int d = tid; d < D_; d += THREADS) {
    float a = 0.f;
    for (long long j = 0; j <= last; ++j)
      a += w[j] * LOAD(v[kvBase + j * D_ + d]);
    out[R * D_ + d] = STORE(a * inv);
  }
}
)";

/// The shape, type and signature every attention kernel starts with.
static llvm::Expected<AttentionShape>
emitHeader(llvm::raw_ostream &OS, const MultiTemplateBufferNode &N,
           llvm::StringRef Name, llvm::StringRef Choice, int Threads,
           bool Workspace, llvm::StringRef Helpers = "") {
  std::optional<AttentionShape> S = attentionShapeOf(N);
  if (!S)
    return err("'%" + N.getName() + "' is not a well-formed attention");
  DType Dt = S->Dtype;
  if (Dt != DType::BF16 && Dt != DType::F16 && Dt != DType::F32)
    return err("attention kernels need bf16, f16 or f32, got " + dtypeName(Dt));
  const char *T = storageType(Dt);
  OS << Prelude << "\n// attention %" << N.getName() << ": q [" << S->B << ", "
     << S->Hq << ", " << S->Sq << ", " << S->D << "], k/v [" << S->B << ", "
     << S->Hkv << ", " << S->Skv << ", " << S->D << "]"
     << (S->Causal ? ", causal" : "") << ", choice " << Choice << "\n";
  OS << "#define HQ " << S->Hq << "LL\n#define HKV " << S->Hkv
     << "LL\n#define SQ " << S->Sq << "LL\n#define SKV " << S->Skv
     << "LL\n#define D_ " << S->D << "\n#define GROUP " << S->group()
     << "LL\n#define ROWS (GROUP * SQ) // packed query rows per kv head\n"
     << "#define CAUSAL " << (S->Causal ? 1 : 0) << "\n#define THREADS "
     << Threads << "\n"
     << "#define SCALE_LOG2 "
     << llvm::format("%.9ef", S->Scale * 1.4426950408889634)
     << " // scale * log2(e): softmax with exp2f\n"
     << loadMacro(Dt) << "#define STORE(x) " << storeExpr(Dt, "(x)") << "\n"
     << Helpers;
  OS << "extern \"C\" __global__ void __launch_bounds__(THREADS) " << Name
     << "(const " << T << " *__restrict__ q, const " << T
     << " *__restrict__ k, const " << T << " *__restrict__ v, " << T
     << " *__restrict__ out" << (Workspace ? ", float *__restrict__ ws" : "")
     << ") {\n";
  return *S;
}

llvm::Expected<KernelSource>
mtsched::generateFlashAttentionKernel(const MultiTemplateBufferNode &N,
                                      const AttentionTile &T) {
  if (T.Mma)
    return generateMmaAttentionKernel(N, T);
  std::string ChoiceName = attentionChoiceName(T);
  int Threads = 32 * T.Warps;
  if (T.Warps <= 0 || T.Warps > 32 || T.BQ <= 0 || T.BKV <= 0 ||
      T.Splits <= 0 || T.Splits > 1024 || Threads % T.BKV ||
      T.BQ % (Threads / T.BKV))
    return err("tile " + ChoiceName +
               " cannot run: BKV must divide the block's threads and the "
               "threads left over must divide BQ");
  KernelSource K;
  K.Name = sanitizeIdentifier(N.getName() + "_" + ChoiceName);
  std::string Src;
  llvm::raw_string_ostream OS(Src);
  llvm::Expected<AttentionShape> S =
      emitHeader(OS, N, K.Name, ChoiceName, Threads, T.Splits > 1);
  if (!S)
    return S.takeError();
  int64_t Smem = flashAttentionSharedBytes(T.BQ, T.BKV, S->D);
  if (Smem > FlashAttentionMaxSharedBytes)
    return err("tile " + ChoiceName + " needs " + llvm::Twine(Smem) +
               " bytes of shared memory at head dimension " +
               llvm::Twine(S->D) + ", more than a CTA may use");
  int64_t Tiles = (S->group() * S->Sq + T.BQ - 1) / T.BQ;
  if (Tiles > 0x7fffffff || S->B * S->Hkv > 65535)
    return err("the flash grid exceeds CUDA's limits");
  OS << "#define BQ " << T.BQ << "\n#define BKV " << T.BKV
     << "\n#define SPLITS " << T.Splits << "\n"
     ;
  emitWithCombine(OS, FlashBody);
  K.Source = OS.str();
  K.Inputs = {N.getOperand(0), N.getOperand(1), N.getOperand(2)};
  K.Outputs = {N.getResult()};
  K.GridX = unsigned(std::max<int64_t>(1, Tiles));
  K.GridY = unsigned(std::max<int64_t>(1, S->B * S->Hkv));
  K.GridZ = unsigned(T.Splits);
  if (T.Splits > 1) {
    // Per CTA its accumulators, running max and sum; per tile a counter.
    uint64_t TilesXY = uint64_t(K.GridX) * K.GridY;
    K.WorkspaceBytes =
        TilesXY * T.Splits * (uint64_t(T.BQ) * S->D + 2 * T.BQ) * 4 +
        TilesXY * 4;
  }
  K.BlockX = Threads;
  K.SharedBytes = unsigned(Smem);
  return K;
}

/// Packs two floats as the 16-bit pair of an mma operand, the first in the
/// low half (the lower column).
static const char *PackHelper =
    R"(__device__ __forceinline__ unsigned mt_pack2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn." MMA_TYPE "x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
)";

llvm::Expected<KernelSource>
mtsched::generateMmaAttentionKernel(const MultiTemplateBufferNode &N,
                                    const AttentionTile &T) {
  std::string ChoiceName = attentionChoiceName(T);
  std::optional<AttentionShape> Shape = attentionShapeOf(N);
  if (!Shape)
    return err("'%" + N.getName() + "' is not a well-formed attention");
  if (!mmaAttentionSupports(*Shape, T.BQ, T.BKV, T.Warps, T.Stages) ||
      T.Splits <= 0 || T.Splits > 1024)
    return err("tile " + ChoiceName +
               " cannot run: the tensor-core template needs bf16 or f16, a "
               "head dimension that is a multiple of 16 up to 128, BQ = 16 or "
               "32 times the warps, BKV a multiple of 16 up to 128 and 2 to 8 "
               "stages (got " +
               dtypeName(Shape->Dtype) + ", D = " + llvm::Twine(Shape->D) +
               ")");
  int64_t Smem =
      mmaAttentionSharedBytes(T.BQ, T.BKV, T.Warps, Shape->D, T.Stages);
  if (Smem > FlashAttentionMaxSharedBytes)
    return err("tile " + ChoiceName + " needs " + llvm::Twine(Smem) +
               " bytes of shared memory at head dimension " +
               llvm::Twine(Shape->D) + ", more than a CTA may use");
  int64_t Tiles = (Shape->group() * Shape->Sq + T.BQ - 1) / T.BQ;
  if (Tiles > 0x7fffffff || Shape->B * Shape->Hkv > 65535)
    return err("the attention grid exceeds CUDA's limits");
  KernelSource K;
  K.Name = sanitizeIdentifier(N.getName() + "_" + ChoiceName);
  std::string Helpers = std::string("#define MMA_TYPE \"") +
                        (Shape->Dtype == DType::BF16 ? "bf16" : "f16") +
                        "\"\n" + MmaHelpers + PackHelper;
  std::string Src;
  llvm::raw_string_ostream OS(Src);
  int Threads = 32 * T.Warps;
  llvm::Expected<AttentionShape> S =
      emitHeader(OS, N, K.Name, ChoiceName, Threads, T.Splits > 1, Helpers);
  if (!S)
    return S.takeError();
  OS << "#define BQ " << T.BQ << "\n#define BKV " << T.BKV
     << "\n#define SPLITS " << T.Splits << "\n#define STAGES " << T.Stages
     << "\n"
     ;
  emitWithCombine(OS, MmaBody);
  K.Source = OS.str();
  K.Inputs = {N.getOperand(0), N.getOperand(1), N.getOperand(2)};
  K.Outputs = {N.getResult()};
  K.GridX = unsigned(std::max<int64_t>(1, Tiles));
  K.GridY = unsigned(std::max<int64_t>(1, S->B * S->Hkv));
  K.GridZ = unsigned(T.Splits);
  if (T.Splits > 1) {
    uint64_t TilesXY = uint64_t(K.GridX) * K.GridY;
    K.WorkspaceBytes =
        TilesXY * T.Splits * (uint64_t(T.BQ) * S->D + 2 * T.BQ) * 4 +
        TilesXY * 4;
  }
  K.BlockX = Threads;
  K.SharedBytes = unsigned(Smem);
  return K;
}

llvm::Expected<KernelSource>
mtsched::generateMathAttentionKernel(const MultiTemplateBufferNode &N) {
  KernelSource K;
  K.Name = sanitizeIdentifier(N.getName() + "_" + AttentionMathChoice.str());
  std::string Src;
  llvm::raw_string_ostream OS(Src);
  constexpr int Threads = 128;
  llvm::Expected<AttentionShape> S = emitHeader(
      OS, N, K.Name, AttentionMathChoice, Threads, /*Workspace=*/true);
  if (!S)
    return S.takeError();
  int64_t Rows = S->B * S->Hq * S->Sq;
  if (Rows > 0x7fffffff)
    return err("attn_math runs a CTA per query row; " + llvm::Twine(Rows) +
               " rows exceed CUDA's grid");
  if (S->D * 4 > 32 * 1024)
    return err("attn_math keeps a query row in shared memory; head "
               "dimension " +
               llvm::Twine(S->D) + " is too large");
  OS << MathBody;
  K.Source = OS.str();
  K.Inputs = {N.getOperand(0), N.getOperand(1), N.getOperand(2)};
  K.Outputs = {N.getResult()};
  K.GridX = unsigned(std::max<int64_t>(1, Rows));
  K.BlockX = Threads;
  K.WorkspaceBytes = uint64_t(std::max<int64_t>(1, Rows)) *
                     uint64_t(std::max<int64_t>(1, S->Skv)) * 4;
  return K;
}

llvm::Expected<KernelSource>
mtsched::generateAttentionKernel(const MultiTemplateBufferNode &N,
                                 const Choice &C) {
  if (std::optional<AttentionTile> T = attentionTileOf(C))
    return generateFlashAttentionKernel(N, *T);
  if (C.Name == AttentionMathChoice)
    return generateMathAttentionKernel(N);
  return err("'" + C.Name + "' is not an attention choice");
}
