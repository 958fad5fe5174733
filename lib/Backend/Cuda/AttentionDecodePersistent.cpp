//===- AttentionDecodePersistent.cpp - attn_dec's persistent form ---------===//
//
// `attn_dec_..._p`: the decode template with one CTA per SM. A decode
// step's (batch, kv head) pairs seldom match the SMs (Llama-3-8B at batch
// 16: 128 on an H200's 132, each CTA alone on its SM), and splitting every
// pair 2 or 4 ways leaves the same imbalance plus a combine and a second
// wave. Here the key tiles of all pairs form one flat sequence, and CTA c
// of G takes tiles [c U / G, (c + 1) U / G) of its U: equal shares, each
// spanning one to a few kv heads. The producer streams the share without a
// break; at the end of each kv head's tiles the consumers combine their
// partial results in a region of their own (the producer fills the next
// head's stages meanwhile), then write the output where the CTA holds the
// whole kv head, else a partial result to the workspace, and the last CTA
// of the kv head to arrive (a counter per kv head) combines those.
//
//===----------------------------------------------------------------------===//
#include "AttentionCodegenImpl.h"

using namespace mtsched;

static const char *const Start = R"(
#define NC (THREADS / 32 - 1) // consumer warps; warp NC is the producer
#define CH (D_ / 8)           // 16-byte chunks of a row
#define DP (D_ + 8)           // padded q row
#define NKD (D_ / 16)         // k16 steps of q kᵀ
#define NS (BKV / 8)          // n8 score tiles of a stage
#define NO (D_ / 8)           // n8 output tiles
#define QV ((16 * CH + NC * 32 - 1) / (NC * 32)) // q chunks per consumer
#define KT ((SKV + BKV - 1) / BKV) // key tiles of a kv head
#define UNITS ((long long)NBH * KT) // the flat sequence of key tiles
#define PSTRIDE (16 * D_ + 32) // floats of a partial result
#define MT_NEG_INF (-__int_as_float(0x7f800000))
// The consumer warps only: the producer runs ahead (or has returned).
#define MT_CONSUMERS_SYNC()                                                    \
  asm volatile("bar.sync 1, %0;" ::"n"(NC * 32) : "memory")
  // No static shared memory: a launch whose static and dynamic shared
  // memory exceed 48 KB fails (CUDA_ERROR_INVALID_VALUE) unless its dynamic
  // size was opted into, which the launchers do above 48 KB of dynamic
  // memory only (16x32_w2_s4_p at D = 64, 47.8 KB dynamic and a 4-byte
  // flag padded to 1 KB, failed so on an H200).
  extern __shared__ __align__(1024) unsigned char mt_smem[];
  const unsigned raw = mt_smem_addr(mt_smem);
  const unsigned sK = (raw + 1023) & ~1023u;
  const unsigned sV = sK + STAGES * KV_TILE;
  // The partial results' region after the stages, then q and the barriers.
  unsigned char *region = mt_smem + (sK - raw) + 2 * STAGES * KV_TILE;
  unsigned short *sQ = (unsigned short *)(region + COMBINE); // [16][DP]
  const unsigned full = sK + 2 * STAGES * KV_TILE + COMBINE + 16 * DP * 2;
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
#if PREFETCH
    // And local tile it + PREFETCH into L2: more bytes in flight than the
    // stages hold.
    if (it + PREFETCH < nTiles) {
      const long long up = u + PREFETCH;
      const int yp = (int)(up % KT) * BKV, zp = (int)(up / KT);
#pragma unroll
      for (int h = 0; h < D_ / 64; ++h) {
        mt_tma_prefetch(tm_k, h * 64, yp, zp);
        mt_tma_prefetch(tm_v, h * 64, yp, zp);
      }
    }
#endif
  };
  // q of kv head bh (a flat index over B x HKV), packed as in the other
  // form: row r is query r % SQ of query head hk * GROUP + r / SQ.
  auto fetchQ = [&](long long bh, uint4 *x) {
    const long long b = bh / HKV, hk = bh % HKV;
#pragma unroll
    for (int k = 0; k < QV; ++k) {
      const int ch = tid + k * NC * 32, i = ch / CH, col = (ch % CH) * 8;
      x[k] = make_uint4(0u, 0u, 0u, 0u);
      if (ch < 16 * CH && i < ROWS)
        x[k] = *(const uint4 *)(q + ((b * HQ + hk * GROUP + i / SQ) * SQ +
                                     i % SQ) *
                                        D_ +
                                    col);
    }
  };
  auto storeQ = [&](const uint4 *x) {
#pragma unroll
    for (int k = 0; k < QV; ++k) {
      const int ch = tid + k * NC * 32;
      if (ch < 16 * CH)
        *(uint4 *)(sQ + (ch / CH) * DP + (ch % CH) * 8) = x[k];
    }
  };
  if (warp == NC) {
    if (lane == 0) {
      for (int s = 0; s < STAGES; ++s) {
        mt_mbar_init(full + 8 * s, 1);
        mt_mbar_init(empty + 8 * s, 1);
      }
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      for (int it = 0; it < STAGES && it < nTiles; ++it)
        issue(it);
    }
  } else {
    uint4 x[QV];
    fetchQ(u0 / KT, x);
    storeQ(x);
  }
  // The barriers are initialised and the first kv head's q is in shared
  // memory; after this only the consumers synchronise (MT_CONSUMERS_SYNC).
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
static const char *const Start1 =
    R"(  float *cO = (float *)region;   // [NC][16][D_] unnormalised accumulators
  float *cM = cO + NC * 16 * D_; // [NC][16] running max (log2 units)
  float *cL = cM + NC * 16;      // [NC][16] running sum
  float *cW = cL + NC * 16;      // [NC][16] each warp's weight
  float *fO = cW + NC * 16;      // [16][D_] the kv head's combined tile
  float *fM = fO + 16 * D_, *fL = fM + 16;
  // Warp w takes local tiles w, w + NC, ... (whole stages, as the other
  // form's warps), across kv heads.
  int it = warp;
  for (long long bh = u0 / KT; bh * KT < u1; ++bh) {
    const long long segEnd = min(u1, (bh + 1) * KT) - u0;
    unsigned qf[NKD][4];
#pragma unroll
    for (int kd = 0; kd < NKD; ++kd)
      mt_ldsm_x4(qf[kd], mt_smem_addr(sQ + (lane & 15) * DP + kd * 16 +
                                       (lane >> 4) * 8));
)";
static const char *const Start2 = R"(    for (; it < segEnd; it += NC) {
      const int s = it % STAGES;
      const long long j0 = (u0 + it - bh * KT) * BKV;
      mt_mbar_wait(full + 8 * s, (it / STAGES) & 1);
      const unsigned kt = sK + s * KV_TILE, vt = sV + s * KV_TILE;
)";

/// After a stage's math: the end of each kv head's tiles up to the
/// consumers' partial results (DecPartialsToShared and DecCtaWeights
/// follow), then the output or partial result and the last CTA's combine
/// around each share's step (DecSlotCombineStep).
static const char *const EndHead =
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
    // The next kv head's q, loaded under the combine; stored once every
    // warp holds this one's fragments (past the first sync below).
    const bool more = (bh + 1) * KT < u1;
    uint4 xq[QV];
    if (more)
      fetchQ(bh + 1, xq);
)";
static const char *const EndOut =
    R"(    const long long b = bh / HKV, hk = bh % HKV;
    // The CTAs whose shares hold tiles of this kv head: cf to cl (the
    // last share starting at or before its first and its last tile).
    const long long cf = ((bh * KT + 1) * nCta - 1) / UNITS;
    const long long cl = ((bh + 1) * KT * nCta - 1) / UNITS;
    if (cf == cl) {
      for (int e = tid; e < VR * D_; e += NC * 32) {
        const int i = e / D_;
        out[((b * HQ + hk * GROUP + i / SQ) * SQ + i % SQ) * D_ + e % D_] =
            STORE(fL[i] > 0.f ? fO[e] / fL[i] : MT_EMPTY_ROW);
      }
    } else {
      // Slot cta + bh: unique, as cta and bh grow together along the sequence.
      float *part = ws + (cta + bh) * PSTRIDE;
      for (int e = tid; e < VR * D_; e += NC * 32)
        part[e] = fO[e];
      for (int i = tid; i < 16; i += NC * 32) {
        part[16 * D_ + i] = fM[i];
        part[16 * D_ + 16 + i] = fL[i];
      }
      __threadfence();
      MT_CONSUMERS_SYNC();
      unsigned *count =
          (unsigned *)(ws + (long long)(GMAX + NBH) * PSTRIDE) + bh;
      // The flag is cW's first word: the weights were read before the sync
      // above, and the next kv head writes them after the sync that ends
      // this one.
      volatile int *last = (volatile int *)cW;
      if (tid == 0)
        *last = atomicAdd(count, 1u) == (unsigned)(cl - cf);
      MT_CONSUMERS_SYNC();
      if (*last) {
        // The last CTA of the kv head combines (as SplitCombine):
        //   out = sum_z o_z 2^(m_z - M) / sum_z l_z 2^(m_z - M),
        // in one pass with a running max (as the online softmax), so the
        // shares' loads are independent: a kv head over 17 CTAs (batch 1)
        // took 9 us more in two dependent passes (H200, round 1).
        __threadfence();
        for (int e = tid; e < VR * D_; e += NC * 32) {
          const int i = e / D_;
          float M = MT_NEG_INF, L = 0.f, x = 0.f;
#pragma unroll 8
          for (long long z = cf; z <= cl; ++z) {
            const float *pz = ws + (z + bh) * PSTRIDE;
)";
static const char *const EndTail = R"(          }
          out[((b * HQ + hk * GROUP + i / SQ) * SQ + i % SQ) * D_ + e % D_] =
              STORE(L > 0.f ? x / L : MT_EMPTY_ROW);
        }
        if (tid == 0)
          *count = 0u;
      }
    }
    if (more)
      storeQ(xq);
    // The region and q are free again (and the flag read).
    MT_CONSUMERS_SYNC();
  }
}
)";

const char *const codegen::DecPartialsToShared = R"(#pragma unroll
    for (int n = 0; n < NO; ++n) {
      const int d = n * 8 + 2 * t4;
      if (g < VR) {
        cO[(warp * 16 + g) * D_ + d] = o[n][0];
        cO[(warp * 16 + g) * D_ + d + 1] = o[n][1];
      }
      if (g + 8 < VR) {
        cO[(warp * 16 + g + 8) * D_ + d] = o[n][2];
        cO[(warp * 16 + g + 8) * D_ + d + 1] = o[n][3];
      }
    }
    if (t4 == 0) {
      cM[warp * 16 + g] = mA;
      cM[warp * 16 + g + 8] = mB;
      cL[warp * 16 + g] = lA;
      cL[warp * 16 + g + 8] = lB;
    }
)";

const char *const codegen::DecCtaWeights = R"(    MT_CONSUMERS_SYNC();
    for (int i = tid; i < 16; i += NC * 32) {
      float M = MT_NEG_INF, L = 0.f;
      for (int w = 0; w < NC; ++w)
        M = fmaxf(M, cM[w * 16 + i]);
      for (int w = 0; w < NC; ++w) {
        // A warp that saw no key of this row (or no tile) adds nothing.
        const float x =
            cM[w * 16 + i] == MT_NEG_INF ? 0.f : exp2f(cM[w * 16 + i] - M);
        cW[w * 16 + i] = x;
        L += cL[w * 16 + i] * x;
      }
      fM[i] = M;
      fL[i] = L;
    }
    MT_CONSUMERS_SYNC();
    for (int e = tid; e < VR * D_; e += NC * 32) {
      const int i = e / D_;
      float x = 0.f;
      for (int w = 0; w < NC; ++w)
        x += cO[w * 16 * D_ + e] * cW[w * 16 + i];
      fO[e] = x;
    }
    MT_CONSUMERS_SYNC();
)";

const char *const codegen::DecSlotCombineStep =
    R"(            const float m = __ldcg(pz + 16 * D_ + i);
            const float l = __ldcg(pz + 16 * D_ + 16 + i), oz = __ldcg(pz + e);
            // A share that saw no key of this row adds nothing.
            if (m != MT_NEG_INF) {
              const float nM = fmaxf(M, m);
              const float a = exp2f(M - nM), w = exp2f(m - nM);
              L = L * a + l * w;
              x = x * a + oz * w;
              M = nM;
            }
)";

std::string codegen::decPersistentBody() {
  return std::string(Start) + DecConsumerRows + Start1 + DecSegmentStart +
         Start2 + decTileMath(false) + EndHead + DecPartialsToShared +
         DecCtaWeights + EndOut + DecSlotCombineStep + EndTail;
}

const char *const codegen::DecLoadQ =
    R"(  // q of kv head bh (a flat index over B x HKV) as the A fragments of its
  // 16 packed rows (row r is query r % SQ of query head hk * GROUP + r /
  // SQ; rows from ROWS on are zero): rows g and g + 8, columns 2 t4 and
  // 2 t4 + 8 of each k16 step, as ldmatrix.x4 gives them.
  unsigned qf[NKD][4];
  auto loadQ = [&](long long bh) {
    const long long b = bh / HKV, hk = bh % HKV;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = g + 8 * h;
      const auto *row = q + ((b * HQ + hk * GROUP + r / SQ) * SQ + r % SQ) * D_;
#pragma unroll
      for (int kd = 0; kd < NKD; ++kd) {
        qf[kd][h] = r < ROWS ? *(const unsigned *)(row + kd * 16 + 2 * t4) : 0u;
        qf[kd][2 + h] =
            r < ROWS ? *(const unsigned *)(row + kd * 16 + 8 + 2 * t4) : 0u;
      }
    }
  };
)";

const char *const codegen::DecConsumerRows =
    R"(  const long long ra = g, rb = g + 8;
#if CAUSAL
  const long long lastA = ra < ROWS ? SKV - SQ + ra % SQ : SKV - 1;
  const long long lastB = rb < ROWS ? SKV - SQ + rb % SQ : SKV - 1;
#else
  const long long lastA = SKV - 1, lastB = SKV - 1;
#endif
  const long long rowMin = min(lastA, lastB), kvEnd = SKV;
  long long warpMin = rowMin;
  for (int w = 16; w > 0; w >>= 1)
    warpMin = min(warpMin, __shfl_xor_sync(0xffffffffu, warpMin, w));
  const int VR = (int)ROWS; // one query tile: ROWS <= 16
)";

const char *const codegen::DecSegmentStart = R"(    float o[NO][4];
#pragma unroll
    for (int n = 0; n < NO; ++n)
      o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float mA = MT_NEG_INF, mB = MT_NEG_INF, lA = 0.f, lB = 0.f;
)";
