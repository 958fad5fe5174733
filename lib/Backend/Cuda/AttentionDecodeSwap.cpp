//===- AttentionDecodeSwap.cpp - attn_dec's _sw stage math ----------------===//
//
// `attn_dec_..._sw`: the decode template's stage math with the MMA's
// operands swapped. A decode step of Llama-3-8B has 4 packed query rows
// (the 4 query heads of a kv head, one query each), and the m16n8k16 MMA's
// 16 rows of q padded 12 of them; here the keys take the MMA's 16 rows and
// the query rows its 8 columns: scores as k qᵀ (16 keys x 8 rows) and the
// output as vᵀ pᵀ (16 columns of D x 8 rows), half the MMAs of a stage and
// half the accumulators. pᵀ's B fragments come from the scores' C
// fragments by `movmatrix` (an 8x8 transpose in registers). Each thread
// holds query rows 2 t4 and 2 t4 + 1 (ra, rb: its running max and sum);
// a row's keys are spread over the lanes of one t4 (xor 4, 8, 16). Only
// for tiles whose packed rows are 8 or fewer.
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

/// One stage's scores, online softmax and vᵀ pᵀ of a consumer warp (stage
/// s, its first key j0, k and v at kt and vt), DecTileMath's counterpart:
/// qf[kd] is q's B fragment of d-step kd, o[n] the output's accumulators
/// of columns n * 16 to n * 16 + 15 (rows of the C fragment).
const char *const codegen::DecTileMathSwap = R"(      float sc[BKV / 16][4];
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
      // sc[n][2 c] is key j0 + n * 16 + g + 8 c of row ra, sc[n][2 c + 1]
      // of row rb. Keys past a row's last score -inf.
      const bool edge = j0 + BKV - 1 > warpMin || j0 + BKV > kvEnd;
      float mxA = MT_NEG_INF, mxB = MT_NEG_INF;
#pragma unroll
      for (int n = 0; n < BKV / 16; ++n)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const long long jj = j0 + n * 16 + g + 8 * c;
          float x = sc[n][2 * c] * SCALE_LOG2, y = sc[n][2 * c + 1] * SCALE_LOG2;
          if (edge) {
            x = jj > lastA || jj >= kvEnd ? MT_NEG_INF : x;
            y = jj > lastB || jj >= kvEnd ? MT_NEG_INF : y;
          }
          sc[n][2 * c] = x;
          sc[n][2 * c + 1] = y;
          mxA = fmaxf(mxA, x);
          mxB = fmaxf(mxB, y);
        }
#pragma unroll
      for (int w = 4; w < 32; w <<= 1) {
        mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, w));
        mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, w));
      }
      const float nA = fmaxf(mA, mxA), nB = fmaxf(mB, mxB);
      // A row that has seen no key yet subtracts 0 (as DecTileMath).
      const float uA = nA == MT_NEG_INF ? 0.f : nA;
      const float uB = nB == MT_NEG_INF ? 0.f : nB;
      const float aA = exp2f(mA - uA), aB = exp2f(mB - uB);
      mA = nA;
      mB = nB;
      lA *= aA;
      lB *= aB;
#pragma unroll
      for (int n = 0; n < D_ / 16; ++n) {
        o[n][0] *= aA;
        o[n][1] *= aB;
        o[n][2] *= aA;
        o[n][3] *= aB;
      }
      // pᵀ's B fragments: keys 2 t4, 2 t4 + 1 (+ 8) of row g.
      unsigned pf[BKV / 16][2];
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
