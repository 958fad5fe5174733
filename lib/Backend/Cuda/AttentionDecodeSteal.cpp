//===- AttentionDecodeSteal.cpp - attn_dec's work-stealing form -----------===//
//
// `attn_dec_..._ps`: the decode template with one CTA per SM whose key
// tiles are claimed, a few at a time, from a counter per kv head. At batch 16
// of Llama-3-8B each of the 128 unsplit CTAs streams its kv head's 2 MB
// alone on an SM; the SMs get unequal shares of memory bandwidth, so the
// CTAs end spread over 3-3.6 us (bench/device/attn-dec-timeline.py) and
// the last ones set the time. Here CTA c owns kv heads c, c + G, ... and
// claims their tiles itself; once they are all claimed it takes tiles of
// the kv head with the most left (up to SMAX heads), so the fast SMs (and
// the 4 without an owned head) take the slow ones' last tiles, and every
// SM streams until the keys run out.
//
// The producer warp claims CLAIM tiles at a time (an atomic add on the kv
// head's counter) and makes the next claim before it issues them, so the
// claim's round trip hides under their waits for free stages, and a CTA
// holds at most 2 CLAIM claimed tiles beyond its stages. Each stage carries its
// tile (segment, kv head, key tile, slot, list entry) in shared memory; the
// consumer warps take stages in turn as in the other forms and end a segment
// (the run of one kv head's tiles) where a stage of the next begins. A segment
// that saw every tile of its kv head writes the output; else it writes a
// partial result to its slot, enters the slot in the kv head's list and adds
// its tiles to the kv head's count, and the one that completes the count
// combines the list. The last CTA of the grid zeroes the counters for the next
// launch.
//
//===----------------------------------------------------------------------===//
#include "AttentionCodegenImpl.h"

using namespace mtsched;

/// Up to the first key of a stage in a consumer's loop (DecLoadQ after the
/// consumers' set-up, DecTileMath after this). The shape's, the tile's and
/// COMBINE, NBH, GMAX, SMAX, LCAP and CLAIM are #defines.
static const char *const Start = R"(
#define NC (THREADS / 32 - 1) // consumer warps; warp NC is the producer
#define DP (D_ + 8)           // _p's padded q row: its region holds the cells
#define NKD (D_ / 16)         // k16 steps of q kᵀ
#define NS (BKV / 8)          // n8 score tiles of a stage
#define NO (D_ / 8)           // n8 output tiles
#define KT ((int)((SKV + BKV - 1) / BKV)) // key tiles of a kv head
#define PSTRIDE (16 * D_ + 32) // floats of a partial result
#define SLOTS (NBH + GMAX * SMAX) // owners' slots, then the stealers'
#define MT_NEG_INF (-__int_as_float(0x7f800000))
#define MT_CONSUMERS_SYNC()                                                    \
  asm volatile("bar.sync 1, %0;" ::"n"(NC * 32) : "memory")
  extern __shared__ __align__(1024) unsigned char mt_smem[];
  const unsigned raw = mt_smem_addr(mt_smem);
  const unsigned sK = (raw + 1023) & ~1023u;
  const unsigned sV = sK + STAGES * KV_TILE;
  unsigned char *region = mt_smem + (sK - raw) + 2 * STAGES * KV_TILE;
  // Where the other persistent form keeps q: each stage's tile, then the
  // ending segment's kv head, slot and entry, each warp's tile count and the
  // slots a combine reads.
  volatile int *meta = (volatile int *)(region + COMBINE); // [STAGES][8]
  volatile int *cSeg = meta + 8 * STAGES;
  volatile int *cCnt = cSeg + 4;   // [NC]
  volatile int *cList = cCnt + NC; // [LCAP]
  const unsigned full = sK + 2 * STAGES * KV_TILE + COMBINE + 16 * DP * 2;
  const unsigned empty = full + 8 * STAGES;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int nCta = gridDim.x, cta = blockIdx.x;
  // The workspace: the partial results, then per kv head its claimed tiles,
  // reserved list entries, finished tiles and list, then the CTAs done.
  unsigned *ctr = (unsigned *)(ws + (long long)SLOTS * PSTRIDE);
  unsigned *claimed = ctr, *reserved = ctr + NBH, *doneTiles = ctr + 2 * NBH;
  unsigned *list = ctr + 3 * NBH, *ctasDone = list + NBH * LCAP;
  if (warp == NC && lane == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mt_mbar_init(full + 8 * s, 1);
      mt_mbar_init(empty + 8 * s, 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == NC) {
    int idx = 0, nSeg = 0;
    // Claims kv head h's tiles, CLAIM at a time, into the stages as segment
    // nSeg until none is left. The next claim's round trip (about 0.9 us on
    // an H200 under load: one tile a claim, claimed after the last was
    // issued, took 117 us at batch 16) runs while the claimed tiles wait
    // for their stages.
    auto take = [&](int h, int slot, int entry) {
      int got = 0;
      unsigned next = 0;
      if (lane == 0)
        next = atomicAdd(claimed + h, (unsigned)CLAIM);
      for (;;) {
        const unsigned t0 = __shfl_sync(0xffffffffu, next, 0);
        if (t0 >= (unsigned)KT)
          break;
        const unsigned t1 = min(t0 + CLAIM, (unsigned)KT);
        next = (unsigned)KT;
        if (lane == 0 && t1 < (unsigned)KT)
          next = atomicAdd(claimed + h, (unsigned)CLAIM);
        for (unsigned t = t0; t < t1; ++t, ++idx, ++got)
          if (lane == 0) {
            const int s = idx % STAGES;
            mt_mbar_wait(empty + 8 * s, ((idx / STAGES) & 1) ^ 1);
            volatile int *m = meta + 8 * s;
            m[0] = nSeg;
            m[1] = h;
            m[2] = (int)t;
            m[3] = slot;
            m[4] = entry;
            mt_mbar_expect(full + 8 * s, 2 * KV_TILE);
#pragma unroll
            for (int c = 0; c < D_ / 64; ++c) {
              mt_tma_load(sK + s * KV_TILE + c * KV_BOX, tm_k, full + 8 * s,
                          c * 64, (int)t * BKV, h);
              mt_tma_load(sV + s * KV_TILE + c * KV_BOX, tm_v, full + 8 * s,
                          c * 64, (int)t * BKV, h);
            }
          }
      }
      if (got)
        ++nSeg;
    };
    for (int h = cta; h < NBH; h += nCta)
      take(h, h, 0);
    for (int k = 0; k < SMAX; ++k) {
      // The kv head with the most unclaimed tiles and room in its list
      // (ties: the lowest), read by the warp's lanes together.
      int best = 0, bh = 0x7fffffff;
      for (int h = lane; h < NBH; h += 32) {
        const int left = KT - (int)min(__ldcg(claimed + h), (unsigned)KT);
        if (left > best && __ldcg(reserved + h) < LCAP - 1u) {
          best = left;
          bh = h;
        }
      }
#pragma unroll
      for (int w = 16; w > 0; w >>= 1) {
        const int ob = __shfl_xor_sync(0xffffffffu, best, w);
        const int oh = __shfl_xor_sync(0xffffffffu, bh, w);
        if (ob > best || (ob == best && oh < bh)) {
          best = ob;
          bh = oh;
        }
      }
      if (best == 0)
        break;
      unsigned e = 0;
      if (lane == 0)
        e = atomicAdd(reserved + bh, 1u) + 1u;
      e = __shfl_sync(0xffffffffu, e, 0);
      if (e < LCAP)
        take(bh, (int)(NBH + cta * SMAX + k), (int)e);
    }
    // The end: a stage per consumer warp (STAGES >= NC), no tile in it.
    for (int w = 0; w < NC; ++w, ++idx)
      if (lane == 0) {
        const int s = idx % STAGES;
        mt_mbar_wait(empty + 8 * s, ((idx / STAGES) & 1) ^ 1);
        meta[8 * s] = nSeg;
        meta[8 * s + 1] = -1;
        mt_mbar_arrive(full + 8 * s);
      }
    return;
  }
)";
static const char *const Start1 =
    R"(  float *cO = (float *)region;   // [NC][16][D_] unnormalised accumulators
  float *cM = cO + NC * 16 * D_; // [NC][16] running max (log2 units)
  float *cL = cM + NC * 16;      // [NC][16] running sum
  float *cW = cL + NC * 16;      // [NC][16] each warp's weight
  float *fO = cW + NC * 16;      // [16][D_] the segment's combined tile
  float *fM = fO + 16 * D_, *fL = fM + 16;
)";
static const char *const StartAfterQ =
    R"(  // Warp w takes local tiles w, w + NC, ...; mSeg and mHead are the
  // segment and kv head of the one it waits for.
  int it = warp, s = it % STAGES;
  mt_mbar_wait(full + 8 * s, (it / STAGES) & 1);
  int mSeg = meta[8 * s], mHead = meta[8 * s + 1];
  bool haveQ = false;
  for (int seg = 0; !(mHead < 0 && mSeg == seg); ++seg) {
    if (mSeg == seg && !haveQ)
      loadQ(mHead);
)";
static const char *const StartAfterQ1 =
    R"(    int cnt = 0, myHead = 0, mySlot = 0, myEntry = 0;
    while (mSeg == seg && mHead >= 0) {
      myHead = mHead;
      mySlot = meta[8 * s + 3];
      myEntry = meta[8 * s + 4];
      const long long j0 = (long long)meta[8 * s + 2] * BKV;
      const unsigned kt = sK + s * KV_TILE, vt = sV + s * KV_TILE;
)";

/// After a stage's math: the segment's end up to the consumers' partial
/// results (DecPartialsToShared, then this CTA's count and kv head, then
/// DecCtaWeights), its output or partial result, the list's combine around
/// each entry's step (DecSlotCombineStep) and the grid's last CTA.
static const char *const EndHead =
    R"(      // Every lane's reads of the stage are done: the producer may refill.
      __syncwarp();
      if (lane == 0)
        mt_mbar_arrive(empty + 8 * s);
      ++cnt;
      it += NC;
      s = it % STAGES;
      mt_mbar_wait(full + 8 * s, (it / STAGES) & 1);
      mSeg = meta[8 * s];
      mHead = meta[8 * s + 1];
    }
    // The next segment's q, loaded under this one's combine.
    haveQ = mHead >= 0 && mSeg == seg + 1;
    if (haveQ)
      loadQ(mHead);
#pragma unroll
    for (int w = 1; w < 4; w <<= 1) {
      lA += __shfl_xor_sync(0xffffffffu, lA, w);
      lB += __shfl_xor_sync(0xffffffffu, lB, w);
    }
)";
static const char *const EndCount = R"(    if (lane == 0) {
      cCnt[warp] = cnt;
      // Every warp with a tile of the segment knows the same three.
      if (cnt) {
        cSeg[0] = myHead;
        cSeg[1] = mySlot;
        cSeg[2] = myEntry;
      }
    }
)";
static const char *const EndOut =
    R"(    const int h = cSeg[0], slot = cSeg[1], entry = cSeg[2];
    int tiles = 0;
    for (int w = 0; w < NC; ++w)
      tiles += cCnt[w];
    const long long b = h / HKV, hk = h % HKV;
    if (tiles == KT) {
      // The segment saw the whole kv head: nothing to combine.
      for (int e = tid; e < VR * D_; e += NC * 32) {
        const int i = e / D_;
        out[((b * HQ + hk * GROUP + i / SQ) * SQ + i % SQ) * D_ + e % D_] =
            STORE(fL[i] > 0.f ? fO[e] / fL[i] : MT_EMPTY_ROW);
      }
    } else {
      float *part = ws + (long long)slot * PSTRIDE;
      for (int e = tid; e < VR * D_; e += NC * 32)
        part[e] = fO[e];
      for (int i = tid; i < 16; i += NC * 32) {
        part[16 * D_ + i] = fM[i];
        part[16 * D_ + 16 + i] = fL[i];
      }
      __threadfence();
      MT_CONSUMERS_SYNC();
      // The flag is cW's first word: the weights were read before the sync
      // above.
      volatile int *last = (volatile int *)cW;
      if (tid == 0) {
        list[h * LCAP + entry] = (unsigned)slot + 1u;
        __threadfence();
        *last = atomicAdd(doneTiles + h, (unsigned)tiles) + tiles == KT;
      }
      MT_CONSUMERS_SYNC();
      if (*last) {
        // The kv head's last segment combines its list (0: an entry
        // reserved by a CTA that then found no tile), as the other
        // persistent form's last CTA does, in one pass with a running max.
        __threadfence();
        if (tid < LCAP)
          cList[tid] = (int)__ldcg(list + h * LCAP + tid) - 1;
        MT_CONSUMERS_SYNC();
        for (int e = tid; e < VR * D_; e += NC * 32) {
          const int i = e / D_;
          float M = MT_NEG_INF, L = 0.f, x = 0.f;
#pragma unroll
          for (int z = 0; z < LCAP; ++z) {
            const int sz = cList[z];
            if (sz < 0)
              continue;
            const float *pz = ws + (long long)sz * PSTRIDE;
)";
static const char *const EndTail = R"(          }
          out[((b * HQ + hk * GROUP + i / SQ) * SQ + i % SQ) * D_ + e % D_] =
              STORE(L > 0.f ? x / L : MT_EMPTY_ROW);
        }
      }
    }
    // The region, the flag and the segment's cells are free again.
    MT_CONSUMERS_SYNC();
  }
  // The last CTA of the grid to finish zeroes every counter: no CTA claims,
  // reserves or counts after it has finished.
  volatile int *lastCta = (volatile int *)cW;
  if (tid == 0) {
    __threadfence();
    *lastCta = atomicAdd(ctasDone, 1u) == (unsigned)nCta - 1u;
  }
  MT_CONSUMERS_SYNC();
  if (*lastCta) {
    __threadfence();
    for (int i = tid; i <= NBH * (3 + LCAP); i += NC * 32)
      ctr[i] = 0u;
  }
}
)";

std::string codegen::decStealBody() {
  return std::string(Start) + DecConsumerRows + Start1 + DecLoadQ +
         StartAfterQ + DecSegmentStart + StartAfterQ1 + decTileMath(false) +
         EndHead + DecPartialsToShared + EndCount + DecCtaWeights + EndOut +
         DecSlotCombineStep + EndTail;
}
