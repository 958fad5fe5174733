//===- AttentionDecodeWarpPartials.cpp - attn_dec's _pw form --------------===//
//
// `attn_dec_..._pw`: the persistent decode form's shares (a CTA per SM,
// CTA c of G taking key tiles [c U / G, (c + 1) U / G) of the flat
// (batch, kv head, key tile) sequence, AttentionDecodePersistent.cpp)
// without a CTA-wide step at a kv head's end. There the consumers met at
// named barriers, combined in shared memory and the last CTA of the head
// combined the CTAs' results while the stage ring filled and the copies
// stopped (71.7-80 us at batch 16 on an H200 against 65.5 unsplit). Here
// each consumer warp, at the end of a kv head's tiles, writes its own
// partial result to the workspace, counts it (a counter per kv head) and
// goes on to the next head's tiles; the warp that writes the head's last
// partial combines them all. A consumer warp idles most of a stage's time
// waiting for the copies (decode is memory-bound), so one warp's write and
// count hides in that wait instead of stopping the CTA. Each warp loads
// its q fragments for a kv head from global memory in ldmatrix's layout
// (no q tile in shared memory, no barrier between the consumers).
//
//===----------------------------------------------------------------------===//
#include "AttentionCodegenImpl.h"

using namespace mtsched;

/// Up to the first key of a stage in a consumer's loop (DecTileMath
/// follows). The shape's, the tile's and NBH and GMAX are #defines.
static const char *const Start = R"(
#define NC (THREADS / 32 - 1) // consumer warps; warp NC is the producer
#define NKD (D_ / 16)         // k16 steps of q kᵀ
#define NS (BKV / 8)          // n8 score tiles of a stage
#define NO (D_ / 8)           // n8 output tiles
#define KT ((SKV + BKV - 1) / BKV) // key tiles of a kv head
#define UNITS ((long long)NBH * KT) // the flat sequence of key tiles
#define PSTRIDE (16 * D_ + 32) // floats of a warp's partial result
#define MT_NEG_INF (-__int_as_float(0x7f800000))
  extern __shared__ __align__(1024) unsigned char mt_smem[];
  const unsigned raw = mt_smem_addr(mt_smem);
  const unsigned sK = (raw + 1023) & ~1023u;
  const unsigned sV = sK + STAGES * KV_TILE;
  const unsigned full = sK + 2 * STAGES * KV_TILE; // 8-byte mbarriers
  const unsigned empty = full + 8 * STAGES;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  // This CTA's share [u0, u1) of the flat sequence (gridDim.x <= UNITS:
  // every share holds a tile).
  const long long nCta = gridDim.x, cta = blockIdx.x;
  const long long u0 = cta * UNITS / nCta, u1 = (cta + 1) * UNITS / nCta;
  const int nTiles = (int)(u1 - u0);
  // Local tile it into stage it % STAGES: k and v of its kv head.
  auto issue = [&](int it) {
    const int s = it % STAGES;
    mt_mbar_expect(full + 8 * s, 2 * KV_TILE);
    const long long u = u0 + it;
    const int y = (int)(u % KT) * BKV, z = (int)(u / KT);
#pragma unroll
    for (int h = 0; h < D_ / 64; ++h) {
      mt_tma_load(sK + s * KV_TILE + h * KV_BOX, tm_k, full + 8 * s, h * 64,
                  y, z);
      mt_tma_load(sV + s * KV_TILE + h * KV_BOX, tm_v, full + 8 * s, h * 64,
                  y, z);
    }
  };
  if (warp == NC && lane == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mt_mbar_init(full + 8 * s, 1);
      mt_mbar_init(empty + 8 * s, 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    for (int it = 0; it < STAGES && it < nTiles; ++it)
      issue(it);
  }
  // The barriers are initialised; after this no barrier spans the CTA.
  __syncthreads();
  if (warp == NC) {
    if (lane == 0)
      for (int it = STAGES; it < nTiles; ++it) {
        mt_mbar_wait(empty + 8 * (it % STAGES), ((it / STAGES) & 1) ^ 1);
        issue(it);
      }
    return;
  }
)";
static const char *const StartAfterQ1 =
    R"(  const long long hFirst = u0 / KT, hLast = (u1 - 1) / KT;
  loadQ(hFirst);
  // Warp w takes local tiles w, w + NC, ... (whole stages, as the other
  // forms' warps), across kv heads.
  int it = warp;
  for (long long bh = hFirst; bh <= hLast; ++bh) {
    const long long segEnd = min(u1, (bh + 1) * KT) - u0;
)";
static const char *const StartAfterQ2 = R"(    for (; it < segEnd; it += NC) {
      const int s = it % STAGES;
      const long long j0 = (u0 + it - bh * KT) * BKV;
      mt_mbar_wait(full + 8 * s, (it / STAGES) & 1);
      const unsigned kt = sK + s * KV_TILE, vt = sV + s * KV_TILE;
)";

/// After a stage's math: each warp's partial result at the end of a kv
/// head's tiles, and the combine by the warp that writes the last one.
static const char *const End =
    R"(      // Every lane's reads of the stage are done: the producer may refill.
      __syncwarp();
      if (lane == 0)
        mt_mbar_arrive(empty + 8 * s);
    }
#pragma unroll
    for (int w = 1; w < 4; w <<= 1) {
      lA += __shfl_xor_sync(0xffffffffu, lA, w);
      lB += __shfl_xor_sync(0xffffffffu, lB, w);
    }
    // The CTAs whose shares hold tiles of this kv head: cf to cl (the
    // last share starting at or before its first and its last tile); each
    // of their consumer warps writes one partial result of it.
    const long long cf = ((bh * KT + 1) * nCta - 1) / UNITS;
    const long long cl = ((bh + 1) * KT * nCta - 1) / UNITS;
    // Slot (cta + bh) NC + warp: unique, as cta and bh grow together along
    // the sequence. A warp without tiles of the head writes max -inf and
    // zeros (the combine reads every partial's rows: the workspace may
    // hold anything, -inf or NaN from other kernels, where none wrote).
    float *part = ws + ((cta + bh) * NC + warp) * PSTRIDE;
#pragma unroll
    for (int n = 0; n < NO; ++n) {
      const int d = n * 8 + 2 * t4;
      if (g < VR)
        *(float2 *)(part + g * D_ + d) = make_float2(o[n][0], o[n][1]);
      if (g + 8 < VR)
        *(float2 *)(part + (g + 8) * D_ + d) = make_float2(o[n][2], o[n][3]);
    }
    if (t4 == 0) {
      part[16 * D_ + g] = mA;
      part[16 * D_ + g + 8] = mB;
      part[16 * D_ + 16 + g] = lA;
      part[16 * D_ + 16 + g + 8] = lB;
    }
    __threadfence();
    __syncwarp();
    unsigned *count =
        (unsigned *)(ws + (long long)(GMAX + NBH) * NC * PSTRIDE) + bh;
    unsigned prev = 0u;
    if (lane == 0)
      prev = atomicAdd(count, 1u);
    prev = __shfl_sync(0xffffffffu, prev, 0);
    // The next kv head's q, in flight under the combine or the next wait.
    if (bh < hLast)
      loadQ(bh + 1);
    if (prev == (unsigned)(NC * (cl - cf + 1) - 1)) {
      // The last partial of the head: this warp combines the NP partials
      // (slots (cf + bh) NC + p, consecutive) as SplitCombine does,
      //   out = sum_p o_p 2^(m_p - M) / sum_p l_p 2^(m_p - M),
      // first each row's M and L (lanes over the partials, then across
      // the lanes), then 4 columns a lane of every row, the loads of a
      // partial's rows independent of each other: L2 latency, not
      // bandwidth, bounds one warp's combine, and the CTAs' last heads'
      // combines end the kernel.
      __threadfence();
      const int NP = (int)(NC * (cl - cf + 1));
      const float *p0 = ws + (cf + bh) * NC * PSTRIDE;
      float M[ROWS], L[ROWS];
#pragma unroll
      for (int i = 0; i < ROWS; ++i) {
        M[i] = MT_NEG_INF;
        L[i] = 0.f;
      }
      // (M, L) merged with (m, l): a side that saw no key adds nothing.
      auto merge = [](float &rm, float &rl, float m, float l) {
        const float nM = fmaxf(rm, m);
        if (nM != MT_NEG_INF) {
          rl = rl * exp2f(rm - nM) + l * exp2f(m - nM);
          rm = nM;
        }
      };
      for (int p = lane; p < NP; p += 32) {
        const float *pp = p0 + (long long)p * PSTRIDE + 16 * D_;
#pragma unroll
        for (int i = 0; i < ROWS; ++i)
          merge(M[i], L[i], __ldcg(pp + i), __ldcg(pp + 16 + i));
      }
#pragma unroll
      for (int w = 16; w > 0; w >>= 1)
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
          const float m = __shfl_xor_sync(0xffffffffu, M[i], w);
          const float l = __shfl_xor_sync(0xffffffffu, L[i], w);
          merge(M[i], L[i], m, l);
        }
      const long long b = bh / HKV, hk = bh % HKV;
      for (int c0 = lane * 4; c0 < D_; c0 += 128) {
        float x[ROWS][4];
#pragma unroll
        for (int i = 0; i < ROWS; ++i)
          x[i][0] = x[i][1] = x[i][2] = x[i][3] = 0.f;
#pragma unroll 2
        for (int p = 0; p < NP; ++p) {
          const float *pp = p0 + (long long)p * PSTRIDE;
#pragma unroll
          for (int i = 0; i < ROWS; ++i) {
            const float m = __ldcg(pp + 16 * D_ + i);
            const float4 oz = __ldcg((const float4 *)(pp + i * D_ + c0));
            const float c = m == MT_NEG_INF ? 0.f : exp2f(m - M[i]);
            x[i][0] += oz.x * c;
            x[i][1] += oz.y * c;
            x[i][2] += oz.z * c;
            x[i][3] += oz.w * c;
          }
        }
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
          const long long at =
              ((b * HQ + hk * GROUP + i / SQ) * SQ + i % SQ) * D_ + c0;
#pragma unroll
          for (int c = 0; c < 4; ++c)
            out[at + c] = STORE(L[i] > 0.f ? x[i][c] / L[i] : MT_EMPTY_ROW);
        }
      }
      if (lane == 0)
        *count = 0u;
    }
  }
}
)";

std::string codegen::decWarpPartialsBody() {
  return std::string(Start) + DecLoadQ + DecConsumerRows + StartAfterQ1 +
         DecSegmentStart + StartAfterQ2 + decTileMath(false) + End;
}
