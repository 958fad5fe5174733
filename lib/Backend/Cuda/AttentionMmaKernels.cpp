//===- AttentionMmaKernels.cpp - Tensor-core attention tiles --------------===//
//
// The `attn_mma_BQxBKV_wW[_sS][_kvK]` template of an attention node: the
// flash tiling of AttentionKernels.cpp (packed GQA rows, causal stop,
// split-KV combine) with q kᵀ and p v on mma.sync. Its body reads the shape
// from #defines, as the CUDA-core template's does.
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
  // Split z takes its share of whole stages of keys.
  long long kvBegin, kvEnd;
  mt_key_range(r0, BQ, KT, SPLITS, blockIdx.z, kvBegin, kvEnd);
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
#if HAS_MASK
  // This thread's mask rows, found once: a key tile reads them at its keys
  // (rows past ROWS read none). Two adjacent keys per load where aligned.
  const MASK_T *mrA[MR], *mrB[MR];
  const bool mvec =
      ((unsigned long long)mask & (2 * sizeof(MASK_T) - 1)) == 0;
#pragma unroll
  for (int m = 0; m < MR; ++m) {
    const long long ra = r0 + wr + m * 16 + g, rb = ra + 8;
    mrA[m] = ra < ROWS ? MASK_ROW(b, hk * GROUP + ra / SQ, ra % SQ) : nullptr;
    mrB[m] = rb < ROWS ? MASK_ROW(b, hk * GROUP + rb / SQ, rb % SQ) : nullptr;
  }
#endif
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
      // Whether a key of this tile is past a row's last (every tile reads
      // the additive mask, if there is one).
      const bool edge = j0 + BKV - 1 > warpMin;
      unsigned pf[MR][NS / 2][4];
#pragma unroll
      for (int m = 0; m < MR; ++m) {
        float mxA = MT_NEG_INF, mxB = MT_NEG_INF;
#pragma unroll
        for (int n = 0; n < NS; ++n) {
#if HAS_MASK
          // Loading the tile's mask before q kᵀ instead (to hide its
          // latency, and to skip tiles it hides) was slower on an H200:
          // 2141 against 1925 us at 2048 x 4096, 32 heads (not profiled;
          // it holds 16 to 32 more floats per thread across the MMAs).
          float mkA[2] = {0.f, 0.f}, mkB[2] = {0.f, 0.f};
          if (mrA[m])
            mt_mask_pair(mrA[m], j0 + n * 8 + 2 * t4, lastA[m], mvec, mkA[0],
                         mkA[1]);
          if (mrB[m])
            mt_mask_pair(mrB[m], j0 + n * 8 + 2 * t4, lastB[m], mvec, mkB[0],
                         mkB[1]);
#endif
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const long long jj = j0 + n * 8 + 2 * t4 + c;
            float x = s[m][n][c] * SCALE_LOG2, y = s[m][n][2 + c] * SCALE_LOG2;
#if HAS_MASK
            x += mkA[c];
            y += mkB[c];
#endif
            if (edge) {
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
        STORE(fL[i] > 0.f ? fO[e] / fL[i] : MT_EMPTY_ROW);
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
      const float inv = l > 0.f ? 1.f / l : MT_EMPTY_ROW;
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

/// Packs two floats as the 16-bit pair of an mma operand, the first in the
/// low half (the lower column).
const char *const codegen::PackHelper =
    R"(__device__ __forceinline__ unsigned mt_pack2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn." MMA_TYPE "x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
)";

llvm::Expected<KernelSource>
mtsched::generateMmaAttentionKernel(const MultiTemplateBufferNode &N,
                                    const AttentionTile &T) {
  std::optional<AttentionShape> S = attentionShapeOf(N);
  if (!S)
    return err("'%" + N.getName() + "' is not a well-formed attention");
  if (!mmaAttentionSupports(*S, T.BQ, T.BKV, T.Warps, T.Stages) ||
      T.Splits <= 0 || T.Splits > 1024)
    return err("tile " + attentionChoiceName(T) +
               " cannot run: the tensor-core template needs bf16 or f16, a "
               "head dimension that is a multiple of 16 up to 128, BQ = 16 or "
               "32 times the warps, BKV a multiple of 16 up to 128 and 2 to 8 "
               "stages (got " +
               dtypeName(S->Dtype) + ", D = " + llvm::Twine(S->D) + ")");
  std::string Helpers = std::string("#define MMA_TYPE \"") +
                        (S->Dtype == DType::BF16 ? "bf16" : "f16") + "\"\n" +
                        MmaHelpers + PackHelper;
  return buildFlashKernel(
      N, T, *S, 32 * T.Warps,
      mmaAttentionSharedBytes(T.BQ, T.BKV, T.Warps, S->D, T.Stages), Helpers,
      "#define STAGES " + std::to_string(T.Stages) + "\n", MmaBody);
}
