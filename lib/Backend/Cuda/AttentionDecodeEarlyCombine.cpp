//===- AttentionDecodeEarlyCombine.cpp - attn_dec's early combine ---------===//
//
// Device text of the unsplit decode tiles' end, inserted by
// generateDecAttentionKernel (AttentionDecodeKernels.cpp) where
// decEarlyCombine holds: each consumer warp's partial result stored in its
// own stage as its loop ends, then one pass over the output.
//
//===----------------------------------------------------------------------===//
#include "AttentionCodegenImpl.h"

using namespace mtsched;

/// Whether an unsplit tile ends with the early combine (DecEarlyPartials,
/// DecEarlyCombine): each consumer warp owns stage `warp` (its tiles are
/// it = warp, warp + NC, ... in stage it % STAGES, so STAGES is a multiple
/// of the consumer warps), whose k holds the warp's 16 rows of D floats
/// (BKV >= 32) in 8-float groups XORed by row (D a multiple of 32); the
/// default lane layout (not _sw), no split, no cluster.
bool codegen::decEarlyCombine(const AttentionTile &T, int64_t D) {
  return T.BQ == 16 && T.Splits == 1 && !T.Cluster && !T.SwapAB &&
         !T.Persistent && T.Stages % T.Warps == 0 && T.BKV >= 32 && D % 32 == 0;
}

/// The early combine of an unsplit tile (decEarlyCombine), first part: each
/// consumer warp, as soon as its loop ends, stores its partial result in
/// stage `warp`'s memory, which only it reads (its tiles are those of
/// stages warp, warp + NC, ...) and which no copy fills any more: k's 8 KB
/// (BKV >= 32) holds its 16 rows of D floats, v's its running max and sum.
/// The other warps' stores wait on no one; the last warp's are
/// conflict-free (row r's 8-float groups XOR (r & 3), D a multiple of 32).
const char *const codegen::DecEarlyPartials = R"(    {
      const int VR = ROWS - r0 < 16 ? (int)(ROWS - r0) : 16;
      float *pO = (float *)(region + warp * KV_TILE);
      float *pML = (float *)(region + (STAGES + warp) * KV_TILE);
#pragma unroll
      for (int n = 0; n < NO; ++n) {
        const int d = n * 8 + 2 * t4;
        if (g < VR)
          *(float2 *)(pO + g * D_ + (d ^ ((g & 3) << 3))) =
              make_float2(o[n][0], o[n][1]);
        if (g + 8 < VR)
          *(float2 *)(pO + (g + 8) * D_ + (d ^ ((g & 3) << 3))) =
              make_float2(o[n][2], o[n][3]);
      }
      if (t4 == 0) {
        pML[g] = mA;
        pML[g + 8] = mB;
        pML[16 + g] = lA;
        pML[16 + g + 8] = lB;
      }
    }
)";

/// The early combine's second part, after the one __syncthreads: each
/// thread takes 4 consecutive outputs of a row, the row's weights computed
/// where they are used (the combine of the old end in one pass, with three
/// barriers fewer: 1.3 us of batch 16's 65.6 at Llama-3-8B's decode on an
/// H200, bench/device/attn-dec-timeline.py's `nocomb`).
const char *const codegen::DecEarlyCombine = R"(  {
    const int VR = ROWS - r0 < 16 ? (int)(ROWS - r0) : 16;
    for (int e = tid * 4; e < VR * D_; e += THREADS * 4) {
      const int i = e / D_, d = e % D_;
      float M = MT_NEG_INF;
#pragma unroll
      for (int w = 0; w < NC; ++w)
        M = fmaxf(M, ((const float *)(region + (STAGES + w) * KV_TILE))[i]);
      float L = 0.f, x[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int w = 0; w < NC; ++w) {
        const float *pML = (const float *)(region + (STAGES + w) * KV_TILE);
        // A warp that saw no key of this row adds nothing.
        const float wt = pML[i] == MT_NEG_INF ? 0.f : exp2f(pML[i] - M);
        L += pML[16 + i] * wt;
        const float4 p = *(const float4 *)((const float *)(region +
                                                           w * KV_TILE) +
                                           i * D_ + (d ^ ((i & 3) << 3)));
        x[0] += p.x * wt;
        x[1] += p.y * wt;
        x[2] += p.z * wt;
        x[3] += p.w * wt;
      }
      const long long r = r0 + i, h = hk * GROUP + r / SQ;
#pragma unroll
      for (int c = 0; c < 4; ++c)
        out[((b * HQ + h) * SQ + r % SQ) * D_ + d + c] =
            STORE(L > 0.f ? x[c] / L : MT_EMPTY_ROW);
    }
  }
  MT_TL_STAMP(4)
  MT_TL_END
}
)";
