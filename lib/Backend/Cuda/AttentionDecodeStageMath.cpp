//===- AttentionDecodeStageMath.cpp - attn_dec's per-stage math -----------===//
//
// A consumer warp's math on one stage of the decode template (stage s, its
// first key j0, k and v at kt and vt): the scores, the online softmax and
// the p v product, in two operand orders.
//
// The default takes the 16 packed query rows as the m16n8k16 MMA's rows
// and the stage's keys as its columns (scores q kᵀ, output p v). `_sw`
// swaps them: a decode step of Llama-3-8B has 4 packed query rows (the 4
// query heads of a kv head, one query each), which the default pads to
// 16; with the keys as the MMA's 16 rows and the query rows as its 8
// columns (scores k qᵀ, 16 keys x 8 rows; output vᵀ pᵀ, 16 columns of D
// x 8 rows) a stage takes half the MMAs and half the accumulators. pᵀ's B
// fragments come from the scores' C fragments by `movmatrix` (an 8x8
// transpose in registers). Only for tiles whose packed rows are 8 or fewer.
//
// The edge mask, the rows' running max and the rescale between the two
// MMA steps are one text for both (DecSoftmax): SWAP_AB, a constant, picks
// the fragment layout in a few index expressions, which the compiler folds.
//
//===----------------------------------------------------------------------===//
#include "AttentionCodegenImpl.h"

using namespace mtsched;

const char *const codegen::DecSwapHelper = R"(
// The transpose of the 8x8 16-bit matrix whose row g, columns 2 t4 and
// 2 t4 + 1 this thread holds in `x` (the MMA's fragment layout).
__device__ __forceinline__ unsigned mt_movt(unsigned x) {
  unsigned y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;"
               : "=r"(y) : "r"(x));
  return y;
}
)";

/// The scores of the default order: sc[n] the C fragment of keys n * 8 to
/// n * 8 + 7 (qf[kd] q's A fragment of d-step kd).
static const char *const DecScores = R"(      float sc[NS][4];
#pragma unroll
      for (int n = 0; n < NS; ++n)
        sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;
#pragma unroll
      for (int kd = 0; kd < NKD; ++kd)
#pragma unroll
        for (int n = 0; n < NS; n += 2) {
          unsigned bk[4];
          mt_ldsm_x4(bk, kt + mt_swz(n * 8 + (lane >> 4) * 8 + (lane & 7),
                                     kd * 2 + ((lane >> 3) & 1)));
          mt_mma(sc[n], qf[kd], bk);
          mt_mma(sc[n + 1], qf[kd], bk + 2);
        }
)";

/// The scores of `_sw`: sc[n] the C fragment of keys n * 16 to n * 16 + 15
/// (qf[kd] q's B fragment of d-step kd).
static const char *const DecScoresSwap = R"(      float sc[BKV / 16][4];
#pragma unroll
      for (int n = 0; n < BKV / 16; ++n)
        sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;
#pragma unroll
      for (int kd = 0; kd < NKD; ++kd)
#pragma unroll
        for (int n = 0; n < BKV / 16; ++n) {
          unsigned ak[4];
          mt_ldsm_x4(ak, kt + mt_swz(n * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                     kd * 2 + (lane >> 4)));
          mt_mma(sc[n], ak, qf[kd]);
        }
)";

/// Both orders: a score sc[n][i] is of key n * 8 + 2 t4 + (i & 1), row ra
/// for i < 2 and rb else (default), or of key n * 16 + g + 8 (i >> 1),
/// row ra for even i and rb for odd (`_sw`); o[n] (n < D / 8, or D / 16
/// with `_sw`) holds row ra in [0] and rb in [3], [1] and [2] rows ra, rb
/// (default) or rb, ra (`_sw`).
static const char *const DecSoftmax =
    R"(      // Keys past a row's last (a causal diagonal, the end of the split or
      // of the keys: the zero-filled rows) score -inf.
      const bool edge = j0 + BKV - 1 > warpMin || j0 + BKV > kvEnd;
      float mxA = MT_NEG_INF, mxB = MT_NEG_INF;
#pragma unroll
      for (int n = 0; n < (SWAP_AB ? BKV / 16 : NS); ++n)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const long long jj =
              SWAP_AB ? j0 + n * 16 + g + 8 * c : j0 + n * 8 + 2 * t4 + c;
          float &sa = sc[n][SWAP_AB ? 2 * c : c];
          float &sb = sc[n][SWAP_AB ? 2 * c + 1 : 2 + c];
          float x = sa * SCALE_LOG2, y = sb * SCALE_LOG2;
          if (edge) {
            x = jj > lastA || jj >= kvEnd ? MT_NEG_INF : x;
            y = jj > lastB || jj >= kvEnd ? MT_NEG_INF : y;
          }
          sa = x;
          sb = y;
          mxA = fmaxf(mxA, x);
          mxB = fmaxf(mxB, y);
        }
      // A row's lanes: its g's four (t4) or with `_sw` its t4's eight (g).
#pragma unroll
      for (int w = SWAP_AB ? 4 : 1; w < (SWAP_AB ? 32 : 4); w <<= 1) {
        mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, w));
        mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, w));
      }
      const float nA = fmaxf(mA, mxA), nB = fmaxf(mB, mxB);
      // A row that has seen no key yet subtracts 0: exp2(-inf) is 0, and
      // -inf - -inf would be NaN.
      const float uA = nA == MT_NEG_INF ? 0.f : nA;
      const float uB = nB == MT_NEG_INF ? 0.f : nB;
      const float aA = exp2f(mA - uA), aB = exp2f(mB - uB);
      mA = nA;
      mB = nB;
      lA *= aA;
      lB *= aB;
#pragma unroll
      for (int n = 0; n < (SWAP_AB ? D_ / 16 : NO); ++n) {
        o[n][0] *= aA;
        o[n][1] *= SWAP_AB ? aB : aA;
        o[n][2] *= SWAP_AB ? aA : aB;
        o[n][3] *= aB;
      }
)";

/// p v of the default order: p's A fragments packed from the scores.
static const char *const DecPv = R"(      unsigned pf[NS / 2][4];
#pragma unroll
      for (int n = 0; n < NS; ++n) {
        const float p0 = exp2f(sc[n][0] - uA), p1 = exp2f(sc[n][1] - uA);
        const float p2 = exp2f(sc[n][2] - uB), p3 = exp2f(sc[n][3] - uB);
        lA += p0 + p1;
        lB += p2 + p3;
        pf[n / 2][(n & 1) * 2] = mt_pack2(p0, p1);
        pf[n / 2][(n & 1) * 2 + 1] = mt_pack2(p2, p3);
      }
#pragma unroll
      for (int kk = 0; kk < NS / 2; ++kk)
#pragma unroll
        for (int n = 0; n < NO; n += 2) {
          unsigned bv[4];
          mt_ldsm_x4_trans(bv, vt + mt_swz(kk * 16 + ((lane >> 3) & 1) * 8 +
                                               (lane & 7),
                                           n + (lane >> 4)));
          mt_mma(o[n], pf[kk], bv);
          mt_mma(o[n + 1], pf[kk], bv + 2);
        }
)";

/// vᵀ pᵀ of `_sw`: pᵀ's B fragments (keys 2 t4, 2 t4 + 1 (+ 8) of row g)
/// transposed from the scores' C fragments.
static const char *const DecPvSwap = R"(      unsigned pf[BKV / 16][2];
#pragma unroll
      for (int n = 0; n < BKV / 16; ++n) {
        const float p0 = exp2f(sc[n][0] - uA), p1 = exp2f(sc[n][1] - uB);
        const float p2 = exp2f(sc[n][2] - uA), p3 = exp2f(sc[n][3] - uB);
        lA += p0 + p2;
        lB += p1 + p3;
        pf[n][0] = mt_movt(mt_pack2(p0, p1));
        pf[n][1] = mt_movt(mt_pack2(p2, p3));
      }
#pragma unroll
      for (int kk = 0; kk < BKV / 16; ++kk)
#pragma unroll
        for (int n = 0; n < D_ / 16; ++n) {
          unsigned av[4];
          mt_ldsm_x4_trans(av, vt + mt_swz(kk * 16 + (lane & 7) + (lane >> 4) * 8,
                                           n * 2 + ((lane >> 3) & 1)));
          mt_mma(o[n], av, pf[kk]);
        }
)";

std::string codegen::decTileMath(bool SwapAB) {
  return std::string(SwapAB ? DecScoresSwap : DecScores) + DecSoftmax +
         (SwapAB ? DecPvSwap : DecPv);
}
