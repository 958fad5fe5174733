//===- AttentionWgBody.cpp - The Hopper attention tiles' kernel body ------===//
//
// The CUDA C++ of an `attn_wg_BQxBKV_sS` kernel after its signature
// (AttentionWgKernels.cpp emits the #defines, the signature and this): the
// producer warpgroup's TMA loads, the consumers' wgmma, online softmax and
// output. Kept apart from the emitter so that each file reads as one thing.
//
//===----------------------------------------------------------------------===//
#include "AttentionCodegenImpl.h"

using namespace mtsched;

/// The kernel body after the signature; the shape, tile (BQ, BKV, STAGES,
/// NBH = B * Hkv, UNITS = the CTAs of a non-persistent grid), PERSISTENT,
/// PINGPONG and CONSUMER_REGS are #defines.
const char *const codegen::AttentionWgBody = R"(
#define DB (D_ / 64)           // 64-column (128-byte) boxes of a row
#define Q_BOX (BQ * 128)       // bytes of one box of the q tile
#define KV_BOX (BKV * 128)     // bytes of one box of a k or v tile
#define KV_TILE (DB * KV_BOX)  // bytes of one k (or v) tile
#define NS (BKV / 8)           // n8 score tiles of a key tile
#define NO (D_ / 8)            // n8 output tiles
#define MT_NEG_INF (-__int_as_float(0x7f800000))
// FUSED_SCALE (no additive mask, a positive scale): the row maxima are
// taken over the raw scores and the scale folds into exp2's argument (one
// FFMA a score instead of a multiply and a subtraction).
#if FUSED_SCALE
#define MT_SCALED(x) (x)
#define MT_EXP_ARG(x, u) fmaf((x), SCALE_LOG2, -(u))
#else
#define MT_SCALED(x) ((x) * SCALE_LOG2)
#define MT_EXP_ARG(x, u) ((x) - (u))
#endif
// The stage and phase of the CTA's key tile i, counted over its units.
#define MT_ST(i) ((gt + (i)) % STAGES)
#define MT_PH(i) ((unsigned)((gt + (i)) / STAGES) & 1u)
  extern __shared__ __align__(1024) unsigned char mt_smem[];
  // 128-byte swizzled tiles start at 1024-byte boundaries.
  const unsigned sQ = (mt_smem_addr(mt_smem) + 1023) & ~1023u;
  const unsigned sK = sQ + DB * Q_BOX;
  const unsigned sV = sK + STAGES * KV_TILE;
#if MASK_STAGED
  // The additive mask's tile per stage, [BQ][MS] floats in log2 units.
  const unsigned sM = sV + STAGES * KV_TILE;
  const unsigned fullK = sM + STAGES * M_STAGE; // 8-byte mbarriers
#else
  const unsigned fullK = sV + STAGES * KV_TILE; // 8-byte mbarriers
#endif
  const unsigned fullV = fullK + 8 * STAGES;
  // k (and a staged mask tile) freed by each consumer warp, v by each
  // consumer.
  const unsigned emptyK = fullV + 8 * STAGES;
  const unsigned emptyV = emptyK + 8 * STAGES;
  const unsigned qbar = emptyV + 8 * STAGES;
  const unsigned qfree = qbar + 8; // both consumers are done with q
  const unsigned fullM = qfree + 8; // MASK_STAGED: a tile's mask landed
  (void)fullM;
  (void)qfree;
  const int tid = threadIdx.x;
  if (ROWS == 0 || NBH == 0)
    return;
  // The CTA's k-th unit (a query tile of a (batch, kv head)): -1 for none
  // this round, -2 past the last. Units are numbered heaviest first: the
  // last query tiles of every (batch, kv head) and query head, then the
  // ones before. A persistent CTA takes one unit of each round of
  // gridDim.x, in snake order (round 0 left to right, round 1 right to
  // left, ...), so the CTAs' sums of key tiles stay level.
  auto unitOf = [&](int k) -> long long {
#if PERSISTENT
    const long long base = (long long)k * gridDim.x;
    if (base >= UNITS)
      return -2;
    const long long u =
        base + ((k & 1) ? gridDim.x - 1 - blockIdx.x : blockIdx.x);
    return u < UNITS ? u : -1;
#else
    return k == 0 ? (long long)blockIdx.x : -2;
#endif
  };
  // Unit L's (batch x kv head) bh, first packed row r0 and key tiles.
  auto decode = [&](long long L, long long &bh, long long &r0, int &nTiles) {
#if SQ % BQ == 0
    const long long lvl = L / (NBH * GROUP), rem = L % (NBH * GROUP);
    bh = rem / GROUP;
    r0 = (rem % GROUP) * SQ + (SQ / BQ - 1 - lvl) * BQ;
#else
    bh = L % NBH;
    r0 = ((ROWS + BQ - 1) / BQ - 1 - L / NBH) * BQ;
#endif
    long long kvBegin, kvEnd;
    mt_key_range(r0, BQ, BKV, 1, 0, kvBegin, kvEnd);
    (void)kvBegin;
    nTiles = kvEnd > 0 ? (int)((kvEnd + BKV - 1) / BKV) : 0;
  };
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mt_mbar_init(fullK + 8 * s, 1);
      mt_mbar_init(fullV + 8 * s, 1);
      mt_mbar_init(emptyK + 8 * s, 8);
      mt_mbar_init(emptyV + 8 * s, 2);
#if MASK_TMA
      mt_mbar_init(fullM + 8 * s, 1);
#elif MASK_STAGED
      mt_mbar_init(fullM + 8 * s, MASK_LOADERS);
#endif
    }
    mt_mbar_init(qbar, 1);
    mt_mbar_init(qfree, 2);
    // Make the initialised barriers visible to the TMA unit.
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (tid < 128) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 " PRODUCER_REGS ";");
    if (tid == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(&tm_q) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(&tm_k) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(&tm_v) : "memory");
#if MASK_TMA
      asm volatile("prefetch.tensormap [%0];" ::"l"(&tm_m) : "memory");
#endif
      int gt = 0, uc = 0; // key tiles and units loaded so far
      for (int k = 0;; ++k) {
        const long long L = unitOf(k);
        if (L == -2)
          break;
        if (L < 0)
          continue;
        long long bh, r0;
        int nTiles;
        decode(L, bh, r0, nTiles);
#if MASK_TMA
        // The tile's 128 rows are consecutive queries of one head: rows
        // [mrow0, mrow0 + BQ) of the mask viewed as [rows][SKV].
        const long long b = bh / HKV, hk = bh % HKV;
        const int mrow0 =
            (int)((b * MASK_SB + (hk * GROUP + r0 / SQ) * MASK_SH) / SKV +
                  r0 % SQ);
#endif
        // The consumers are done with the previous unit's q (the first
        // unit passes). Rows past the packed rows are zero-filled (and
        // never stored).
        mt_mbar_wait(qfree, (uc & 1) ^ 1);
        mt_mbar_expect(qbar, DB * Q_BOX);
#pragma unroll
        for (int c = 0; c < DB; ++c)
          mt_tma_load(sQ + c * Q_BOX, tm_q, qbar, c * 64, (int)r0, (int)bh);
        for (int it = 0; it < nTiles; ++it) {
          const int s = MT_ST(it);
          // Both consumers have freed the stage's k (the first lap
          // passes), then its v.
          mt_mbar_wait(emptyK + 8 * s, MT_PH(it) ^ 1);
          mt_mbar_expect(fullK + 8 * s, KV_TILE);
#pragma unroll
          for (int c = 0; c < DB; ++c)
            mt_tma_load(sK + s * KV_TILE + c * KV_BOX, tm_k, fullK + 8 * s,
                        c * 64, it * BKV, (int)bh);
#if MASK_TMA
          // The mask tile (freed with k) as BKV / 32 boxes of 32 floats (128 bytes,
          // swizzled).
          mt_mbar_expect(fullM + 8 * s, M_STAGE);
#pragma unroll
          for (int c = 0; c < BKV / 32; ++c)
            mt_tma_load(sM + s * M_STAGE + c * (BQ * 128), tm_m,
                        fullM + 8 * s, it * BKV + c * 32, mrow0, 0);
#endif
          mt_mbar_wait(emptyV + 8 * s, MT_PH(it) ^ 1);
          mt_mbar_expect(fullV + 8 * s, KV_TILE);
#pragma unroll
          for (int c = 0; c < DB; ++c)
            mt_tma_load(sV + s * KV_TILE + c * KV_BOX, tm_v, fullV + 8 * s,
                        c * 64, it * BKV, (int)bh);
        }
        gt += nTiles;
        ++uc;
      }
    }
#if MASK_STAGED && !MASK_TMA
    // Warps 1-3 of the producer stage the mask: per tile, its BQ rows of
    // BKV keys read row-wise from global memory (coalesced, 4 keys a
    // thread), converted to log2 units once and stored to the stage; the
    // consumers read it from shared memory.
    if (tid >= 32) {
      const int lt = tid - 32;
      int gt = 0;
      for (int k = 0;; ++k) {
        const long long L = unitOf(k);
        if (L == -2)
          break;
        if (L < 0)
          continue;
        long long bh, r0;
        int nTiles;
        decode(L, bh, r0, nTiles);
        const long long b = bh / HKV, hk = bh % HKV;
        for (int it = 0; it < nTiles; ++it) {
          const int s = MT_ST(it);
          mt_mbar_wait(emptyK + 8 * s, MT_PH(it) ^ 1);
          const long long j0 = (long long)it * BKV;
          float *dst = (float *)(mt_smem + (sM - mt_smem_addr(mt_smem))) +
                       s * (M_STAGE / 4);
#pragma unroll 4
          for (int e = lt; e < BQ * (BKV / 4); e += MASK_LOADERS) {
            const int row = e / (BKV / 4), c4 = (e % (BKV / 4)) * 4;
            const long long r = r0 + row, j = j0 + c4;
            float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
            if (r < ROWS) {
              const long long off = b * MASK_SB +
                                    (hk * GROUP + r / SQ) * MASK_SH +
                                    (r % SQ) * MASK_SQ + j;
#if MASK_VEC
              if (j + 3 < SKV) {
                x = __ldg((const float4 *)(mask + off));
              } else
#endif
              {
                if (j < SKV) x.x = MLOAD(mask[off]);
                if (j + 1 < SKV) x.y = MLOAD(mask[off + 1]);
                if (j + 2 < SKV) x.z = MLOAD(mask[off + 2]);
                if (j + 3 < SKV) x.w = MLOAD(mask[off + 3]);
              }
              x = make_float4(mt_mask_log2(x.x), mt_mask_log2(x.y),
                              mt_mask_log2(x.z), mt_mask_log2(x.w));
            }
            *(float4 *)(dst + row * MS + c4) = x;
          }
          // Release: the stores above are seen by whoever waits on it.
          mt_mbar_arrive(fullM + 8 * s);
        }
        gt += nTiles;
      }
    }
#endif
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 " CONSUMER_REGS ";");
    const int cw = tid / 128 - 1, warp = (tid / 32) % 4, lane = tid % 32;
    const int g = lane >> 2, t4 = lane & 3;
    const unsigned qa = sQ + cw * 64 * 128;
    float o[D_ / 2];
    float s[BKV / 2];       // scores, then probabilities
    unsigned pf[NS / 2][4]; // the probabilities as p v's A fragments
    float aA, aB;           // this tile's rescale of rows ra and rb
#if PINGPONG
    // FlashAttention-3's pingpong: the two consumers take turns to issue
    // their products (named barriers 1 and 2, each the 256 consumer
    // threads), so one's softmax runs while the other's products do.
    // Consumer 1 lets consumer 0 go first; every turn of a unit is taken
    // by both (a consumer without products still takes its turns), so the
    // turns stay paired across units.
#define MT_TURN_WAIT()                                                         \
  asm volatile("bar.sync %0, 256;" ::"r"(1 + cw) : "memory")
#define MT_TURN_PASS()                                                         \
  asm volatile("bar.arrive %0, 256;" ::"r"(2 - cw) : "memory")
    if (cw == 1)
      asm volatile("bar.arrive 1, 256;" ::: "memory");
#else
#define MT_TURN_WAIT()
#define MT_TURN_PASS()
#endif
// s = q kᵀ of stage ST issued (not waited for). k16 step kk: box kk / 4 of
// the row, 32 bytes per step inside it; 8-row groups 1024 bytes apart in
// both operands.
// With QK_ZERO_INIT the first step overwrites s (scale-d 0) instead of
// adding to zeroed registers.
#define MT_QK_STEP(F, ST, kk)                                                  \
  F(s, mt_desc(qa + ((kk) / 4) * Q_BOX + ((kk) % 4) * 32, 16, 1024),           \
    mt_desc(sK + (ST) * KV_TILE + ((kk) / 4) * KV_BOX + ((kk) % 4) * 32, 16,   \
            1024))
#if QK_ZERO_INIT
#define MT_QK(ST)                                                              \
  {                                                                            \
    mt_wgmma_fence();                                                          \
    MT_QK_STEP(mt_wgmma_qk0, ST, 0);                                           \
    _Pragma("unroll") for (int kk = 1; kk < D_ / 16; ++kk)                     \
        MT_QK_STEP(mt_wgmma_qk, ST, kk);                                       \
    mt_wgmma_commit();                                                         \
  }
#else
#define MT_QK(ST)                                                              \
  {                                                                            \
    _Pragma("unroll") for (int i = 0; i < BKV / 2; ++i) s[i] = 0.f;            \
    mt_wgmma_fence();                                                          \
    _Pragma("unroll") for (int kk = 0; kk < D_ / 16; ++kk)                     \
        MT_QK_STEP(mt_wgmma_qk, ST, kk);                                       \
    mt_wgmma_commit();                                                         \
  }
#endif
// o += p v of stage ST issued, once its v has landed (phase PH). v: k16
// step kk is 16 rows (2048 bytes) into each box; the boxes (64 output
// columns each) KV_BOX apart.
#define MT_PV(ST, PH)                                                          \
  {                                                                            \
    mt_mbar_wait(fullV + 8 * (ST), (PH));                                      \
    mt_wgmma_fence();                                                          \
    _Pragma("unroll") for (int kk = 0; kk < BKV / 16; ++kk) mt_wgmma_pv(       \
        o, pf[kk], mt_desc(sV + (ST) * KV_TILE + kk * 2048, KV_BOX, 1024));    \
    mt_wgmma_commit();                                                         \
  }
// p v read pf until here: keep its registers alive.
// A consumer warp frees a stage's k once its q kᵀ is done, or with a
// staged mask once its softmax (which reads the mask tile) is.
#if MASK_STAGED
#define MT_FREE_K_QK(ST)
#define MT_FREE_K_SOFTMAX(ST)                                                  \
  if (lane == 0)                                                               \
  mt_mbar_arrive(emptyK + 8 * (ST))
#else
#define MT_FREE_K_QK(ST)                                                       \
  if (lane == 0)                                                               \
  mt_mbar_arrive(emptyK + 8 * (ST))
#define MT_FREE_K_SOFTMAX(ST)
#endif
#define MT_KEEP_PF()                                                           \
  _Pragma("unroll") for (int kk = 0; kk < NS / 2; ++kk)                        \
      _Pragma("unroll") for (int r = 0; r < 4; ++r)                            \
          asm volatile("" : "+r"(pf[kk][r])::"memory")
// The additive mask of scores x (row ra) and y (row rb) at key jj, n8
// tile n, column c, if there is one (keys past a row's last only looked at
// in an EDGE tile: the others have none).
#if MASK_TMA
// Key n * 8 + 2 t4 + c of the tile: box n / 4, 16-byte chunk (n % 4) * 2 +
// t4 / 2 swizzled with the row (its low 3 bits are g), word 2 (t4 & 1) + c.
#define MT_ADD_MASK(x, y, n, c, jj, EDGE)                                      \
  {                                                                            \
    const int off = ((n) / 4) * (BQ * 128) +                                   \
                    (((((n) % 4) * 2 + (t4 >> 1)) ^ g) << 4) +                 \
                    (2 * (t4 & 1) + (c)) * 4;                                  \
    if (ra < ROWS && (!(EDGE) || (jj) <= lastA))                               \
      x += mt_mask_log2(*(const float *)(mtile + off));                        \
    if (rb < ROWS && (!(EDGE) || (jj) <= lastB))                               \
      y += mt_mask_log2(*(const float *)(mtile + 8 * 128 + off));              \
  }
#elif MASK_STAGED
#define MT_ADD_MASK(x, y, n, c, jj, EDGE)                                      \
  {                                                                            \
    if (ra < ROWS && (!(EDGE) || (jj) <= lastA))                               \
      x += mrow[(n) * 8 + 2 * t4 + (c)];                                       \
    if (rb < ROWS && (!(EDGE) || (jj) <= lastB))                               \
      y += mrow[8 * MS + (n) * 8 + 2 * t4 + (c)];                              \
  }
#elif HAS_MASK
#define MT_ADD_MASK(x, y, n, c, jj, EDGE)                                      \
  {                                                                            \
    if (ra < ROWS && (!(EDGE) || (jj) <= lastA))                               \
      x += MASK_AT(b, hk * GROUP + ra / SQ, ra % SQ, (jj));                    \
    if (rb < ROWS && (!(EDGE) || (jj) <= lastB))                               \
      y += MASK_AT(b, hk * GROUP + rb / SQ, rb % SQ, (jj));                    \
  }
#else
#define MT_ADD_MASK(x, y, n, c, jj, EDGE)
#endif
#if TREE_MAX
#define MT_MAX_STEP(x, y)
// One level of the row maxima's tree: tA[n] takes tA[n + H] in.
#define MT_MAX_LEVEL(H)                                                        \
  _Pragma("unroll") for (int n = 0; n + (H) < NS; n += 2 * (H)) {              \
    tA[n] = fmaxf(tA[n], tA[n + (H)]);                                         \
    tB[n] = fmaxf(tB[n], tB[n + (H)]);                                         \
  }
#else
#define MT_MAX_STEP(x, y)                                                      \
  mxA = fmaxf(mxA, x);                                                         \
  mxB = fmaxf(mxB, y)
#endif
// The scores of the tile scaled, masked (keys past a row's last when EDGE)
// and stored back, score j * 4 + i being row (i & 2 ? rb : ra), key j0 +
// 8 j + 2 t4 + (i & 1).
#define MT_SCORES(EDGE)                                                        \
  _Pragma("unroll") for (int n = 0; n < NS; ++n) {                             \
    _Pragma("unroll") for (int c = 0; c < 2; ++c) {                            \
      const long long jj = j0 + n * 8 + 2 * t4 + c;                            \
      float x = MT_SCALED(s[n * 4 + c]);                                       \
      float y = MT_SCALED(s[n * 4 + 2 + c]);                                   \
      MT_ADD_MASK(x, y, n, c, jj, EDGE);                                       \
      if (EDGE) {                                                              \
        x = jj > lastA ? MT_NEG_INF : x;                                       \
        y = jj > lastB ? MT_NEG_INF : y;                                       \
      }                                                                        \
      s[n * 4 + c] = x;                                                        \
      s[n * 4 + 2 + c] = y;                                                    \
      MT_MAX_STEP(x, y);                                                       \
    }                                                                          \
  }
    int gt = 0, uc = 0; // key tiles and units consumed so far
    for (int k = 0;; ++k) {
      const long long L = unitOf(k);
      if (L == -2)
        break;
      if (L < 0)
        continue;
      long long bh, r0;
      int nTiles;
      decode(L, bh, r0, nTiles);
      const long long b = bh / HKV, hk = bh % HKV;
      // This thread's rows ra and rb = ra + 8 and the last key each sees
      // (rows past ROWS see all: their zero queries are never stored);
      // over the warp, the fewest (a tile past it needs the mask).
      const long long ra = r0 + cw * 64 + warp * 16 + g, rb = ra + 8;
#if CAUSAL
      const long long lastA = ra < ROWS ? SKV - SQ + ra % SQ : SKV - 1;
      const long long lastB = rb < ROWS ? SKV - SQ + rb % SQ : SKV - 1;
#else
      const long long lastA = SKV - 1, lastB = SKV - 1;
#endif
      long long warpMin = min(lastA, lastB);
      for (int w = 16; w > 0; w >>= 1)
        warpMin = min(warpMin, __shfl_xor_sync(0xffffffffu, warpMin, w));
      // The keys this warpgroup's rows see: tiles past them are skipped.
      long long wgBegin, wgEnd;
      mt_key_range(r0 + cw * 64, 64, BKV, 1, 0, wgBegin, wgEnd);
      (void)wgBegin;
#pragma unroll
      for (int i = 0; i < D_ / 2; ++i)
        o[i] = 0.f;
      // Running max (log2 units) and this thread's share of the running
      // sum of rows ra and rb.
      float mA = MT_NEG_INF, mB = MT_NEG_INF, lA = 0.f, lB = 0.f;
      // The online softmax of the scores of keys [j0, j0 + BKV) in s
      // (done): score j * 4 + i is row (i & 2 ? rb : ra), key j0 + 8 j +
      // 2 t4 + (i & 1), the m16n8 accumulator layout repeated. Leaves the
      // probabilities in s and the rescale of what came before in aA, aB.
      // The tile's mask is in stage st, phase ph.
      auto softmax = [&](long long j0, int st, unsigned ph) {
#pragma unroll
        for (int i = 0; i < BKV / 2; ++i)
          mt_fence_acc(s[i]);
#if MASK_STAGED
        // This tile's mask, rows ra (and rb 8 rows on).
        mt_mbar_wait(fullM + 8 * st, ph);
#if MASK_TMA
        const unsigned char *mtile = mt_smem + (sM - mt_smem_addr(mt_smem)) +
                                     st * M_STAGE +
                                     (cw * 64 + warp * 16 + g) * 128;
#else
        const float *mrow =
            (const float *)(mt_smem + (sM - mt_smem_addr(mt_smem))) +
            st * (M_STAGE / 4) + (cw * 64 + warp * 16 + g) * MS;
#endif
#else
        (void)st;
        (void)ph;
#endif
        const bool edge = j0 + BKV - 1 > warpMin;
        float mxA = MT_NEG_INF, mxB = MT_NEG_INF;
#if EDGE_SPLIT
        // Only a tile past some row's last key (the causal diagonal, the
        // keys' end) compares keys: the others run a copy without.
        if (edge) {
          MT_SCORES(true);
        } else {
          MT_SCORES(false);
        }
#else
        MT_SCORES(edge);
#endif
#if TREE_MAX
        // The row maxima as a tree (depth log2(2 NS)) rather than a chain
        // of 2 NS dependent maxima between q kᵀ and the first exp2.
        float tA[NS], tB[NS];
#pragma unroll
        for (int n = 0; n < NS; ++n) {
          tA[n] = fmaxf(s[n * 4 + 0], s[n * 4 + 1]);
          tB[n] = fmaxf(s[n * 4 + 2], s[n * 4 + 3]);
        }
        MT_MAX_LEVEL(1);
        MT_MAX_LEVEL(2);
        MT_MAX_LEVEL(4);
        MT_MAX_LEVEL(8);
        MT_MAX_LEVEL(16);
        mxA = tA[0];
        mxB = tB[0];
#endif
#pragma unroll
        for (int w = 1; w < 4; w <<= 1) {
          mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, w));
          mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, w));
        }
#if FUSED_SCALE
        mxA *= SCALE_LOG2;
        mxB *= SCALE_LOG2;
#endif
        const float nA = fmaxf(mA, mxA), nB = fmaxf(mB, mxB);
        // A row that has seen no key yet subtracts 0: exp2(-inf) is 0, and
        // -inf - -inf would be NaN.
        const float uA = nA == MT_NEG_INF ? 0.f : nA;
        const float uB = nB == MT_NEG_INF ? 0.f : nB;
        aA = exp2f(mA - uA);
        aB = exp2f(mB - uB);
        mA = nA;
        mB = nB;
        lA *= aA;
        lB *= aB;
#pragma unroll
        for (int n = 0; n < NS; ++n) {
          s[n * 4 + 0] = exp2f(MT_EXP_ARG(s[n * 4 + 0], uA));
          s[n * 4 + 1] = exp2f(MT_EXP_ARG(s[n * 4 + 1], uA));
          s[n * 4 + 2] = exp2f(MT_EXP_ARG(s[n * 4 + 2], uB));
          s[n * 4 + 3] = exp2f(MT_EXP_ARG(s[n * 4 + 3], uB));
          lA += s[n * 4 + 0] + s[n * 4 + 1];
          lB += s[n * 4 + 2] + s[n * 4 + 3];
        }
      };
      // The output rescaled (its p v products done) and p packed as
      // wgmma's register A operand: k16 step kk is score tiles 2 kk and
      // 2 kk + 1 (rows ra, rb; then the next 8 keys).
      auto rescaleAndPack = [&]() {
#pragma unroll
        for (int i = 0; i < D_ / 2; ++i)
          mt_fence_acc(o[i]);
#if LAZY_RESCALE
        // Once the running maxima settle, most tiles change no row's max
        // in a warp: skip its D / 2 multiplications by 1.
        if (__any_sync(0xffffffffu, aA != 1.f || aB != 1.f))
#endif
        {
#pragma unroll
          for (int n = 0; n < NO; ++n) {
            o[n * 4 + 0] *= aA;
            o[n * 4 + 1] *= aA;
            o[n * 4 + 2] *= aB;
            o[n * 4 + 3] *= aB;
          }
        }
#pragma unroll
        for (int n = 0; n < NS; ++n) {
          pf[n / 2][(n & 1) * 2] = mt_pack2(s[n * 4 + 0], s[n * 4 + 1]);
          pf[n / 2][(n & 1) * 2 + 1] = mt_pack2(s[n * 4 + 2], s[n * 4 + 3]);
        }
      };
      // The tiles with keys these rows see come first: [0, nWg).
      const int nWg =
          min(nTiles, wgEnd > 0 ? (int)((wgEnd + BKV - 1) / BKV) : 0);
      mt_mbar_wait(qbar, uc & 1);
      // q is free for the next unit's once this consumer's last q kᵀ is
      // done (at once without one).
      if (nWg == 0 && tid % 128 == 0)
        mt_mbar_arrive(qfree);
#if OVERLAP
      // FlashAttention-3's intra-warpgroup overlap: tile it's q kᵀ and tile
      // it - 1's p v are in flight together, and the softmax of tile it
      // runs while p v still does.
      if (nWg > 0) {
        MT_TURN_WAIT();
        mt_mbar_wait(fullK + 8 * MT_ST(0), MT_PH(0));
        MT_QK(MT_ST(0));
        MT_TURN_PASS();
        MT_WGMMA_WAIT(0);
        if (nWg == 1 && tid % 128 == 0)
          mt_mbar_arrive(qfree);
        MT_FREE_K_QK(MT_ST(0));
        softmax(0, MT_ST(0), MT_PH(0));
        MT_FREE_K_SOFTMAX(MT_ST(0));
        rescaleAndPack();
      }
      for (int it = 1; it < nWg; ++it) {
        const int st = MT_ST(it), pst = MT_ST(it - 1);
        MT_TURN_WAIT();
        mt_mbar_wait(fullK + 8 * st, MT_PH(it));
        MT_QK(st);
        MT_PV(pst, MT_PH(it - 1));
        MT_TURN_PASS();
        // The groups complete in order: q kᵀ first.
        MT_WGMMA_WAIT(1);
        if (it == nWg - 1 && tid % 128 == 0)
          mt_mbar_arrive(qfree);
        MT_FREE_K_QK(st);
        softmax((long long)it * BKV, st, MT_PH(it));
        MT_FREE_K_SOFTMAX(st);
        MT_WGMMA_WAIT(0);
        MT_KEEP_PF();
        if (tid % 128 == 0)
          mt_mbar_arrive(emptyV + 8 * pst);
        rescaleAndPack();
      }
      // The last p v (one more turn; a consumer without products takes it
      // empty).
      MT_TURN_WAIT();
      if (nWg > 0) {
        const int lst = MT_ST(nWg - 1);
        MT_PV(lst, MT_PH(nWg - 1));
        MT_TURN_PASS();
        MT_WGMMA_WAIT(0);
        MT_KEEP_PF();
#pragma unroll
        for (int i = 0; i < D_ / 2; ++i)
          mt_fence_acc(o[i]);
        if (tid % 128 == 0)
          mt_mbar_arrive(emptyV + 8 * lst);
      } else {
        MT_TURN_PASS();
      }
#else
      for (int it = 0; it < nWg; ++it) {
        const int st = MT_ST(it);
        const unsigned ph = MT_PH(it);
        mt_mbar_wait(fullK + 8 * st, ph);
        MT_QK(st);
        MT_WGMMA_WAIT(0);
        if (it == nWg - 1 && tid % 128 == 0)
          mt_mbar_arrive(qfree);
        MT_FREE_K_QK(st);
        softmax((long long)it * BKV, st, ph);
        MT_FREE_K_SOFTMAX(st);
        rescaleAndPack();
        MT_PV(st, ph);
        MT_WGMMA_WAIT(0);
#pragma unroll
        for (int i = 0; i < D_ / 2; ++i)
          mt_fence_acc(o[i]);
        if (tid % 128 == 0)
          mt_mbar_arrive(emptyV + 8 * st);
      }
#endif
      // Tiles none of these rows see: their k and v must still have landed
      // before the stage is freed for the next refill.
      for (int it = nWg; it < nTiles; ++it) {
        const int st = MT_ST(it);
        const unsigned ph = MT_PH(it);
        MT_TURN_WAIT();
        MT_TURN_PASS();
        mt_mbar_wait(fullK + 8 * st, ph);
        mt_mbar_wait(fullV + 8 * st, ph);
#if MASK_STAGED
        // (A parity wait only tells the phases apart in order.)
        mt_mbar_wait(fullM + 8 * st, ph);
#endif
        if (lane == 0)
          mt_mbar_arrive(emptyK + 8 * st);
        if (tid % 128 == 0)
          mt_mbar_arrive(emptyV + 8 * st);
      }
      gt += nTiles;
      ++uc;
#pragma unroll
      for (int w = 1; w < 4; w <<= 1) {
        lA += __shfl_xor_sync(0xffffffffu, lA, w);
        lB += __shfl_xor_sync(0xffffffffu, lB, w);
      }
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const long long r = half ? rb : ra;
        if (r >= ROWS)
          continue;
        const float l = half ? lB : lA;
        const float inv = l > 0.f ? 1.f / l : MT_EMPTY_ROW;
        const long long h = hk * GROUP + r / SQ;
        unsigned short *dst =
            out + ((b * HQ + h) * SQ + r % SQ) * D_ + 2 * t4;
#pragma unroll
        for (int n = 0; n < NO; ++n)
          *(unsigned *)(dst + n * 8) = mt_pack2(o[n * 4 + 2 * half] * inv,
                                                o[n * 4 + 2 * half + 1] * inv);
      }
    }
  }
}
)";
