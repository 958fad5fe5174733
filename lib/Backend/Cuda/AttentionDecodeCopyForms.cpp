//===- AttentionDecodeCopyForms.cpp - attn_dec's copy options -------------===//
//
// Device text of the decode template's optional copy forms, inserted by
// generateDecAttentionKernel (AttentionDecodeKernels.cpp): `_t`'s tail test,
// `_pfN`'s L2 prefetch, `_ef`'s evict-first copies and the evict-last L2
// prefetch of the first key tiles before the programmatic wait (with how
// many tiles a CTA prefetches, decPreWaitTiles).
//
//===----------------------------------------------------------------------===//
#include "AttentionCodegenImpl.h"
#include <algorithm>

using namespace mtsched;

/// `_t`'s copy of the count of finished CTAs and its non-blocking test.
const char *const codegen::TailHelper = R"(
// 16 bytes of global memory into shared memory by the bulk copy engine,
// completing on `bar`: the issuing thread does not wait for the load.
__device__ __forceinline__ void mt_bulk_load16(unsigned dst, const void *src,
                                               unsigned bar) {
  asm volatile("{\n.reg .u64 g;\ncvta.to.global.u64 g, %1;\n"
               "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
               "bytes [%0], [g], 16, [%2];\n}" ::"r"(dst),
               "l"(src), "r"(bar)
               : "memory");
}
// Whether the phase of `bar` with this parity has completed (no wait).
__device__ __forceinline__ bool mt_mbar_test(unsigned bar, unsigned parity) {
  unsigned ok;
  asm volatile("{\n.reg .pred p;\n"
               "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
               "selp.u32 %0, 1, 0, p;\n}"
               : "=r"(ok)
               : "r"(bar), "r"(parity)
               : "memory");
  return ok != 0u;
}
)";

/// The copies' options: an L2 prefetch of a 3-d tensor map's box (`_pfN`),
/// and evict-first copies (`_ef`, and with PRE_WAIT: where EVICT_FIRST is
/// 1 the body's mt_tma_load calls become mt_tma_load_ef).
const char *const codegen::PrefetchHelper = R"(
// One box of a 3-d tensor map into L2 only (no shared memory, no barrier).
__device__ __forceinline__ void mt_tma_prefetch(const mt_tensor_map &map,
                                                int x, int y, int z) {
  asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global.tile"
               " [%0, {%1, %2, %3}];" ::"l"(&map), "r"(x), "r"(y), "r"(z)
               : "memory");
}
)";
const char *const codegen::PrefetchLastHelper = R"(
// One box of a 3-d tensor map into L2 only, evict-last: the lines outlive
// the stream of a kernel that runs meanwhile (see PRE_WAIT).
__device__ __forceinline__ void mt_tma_prefetch_last(const mt_tensor_map &map,
                                                     int x, int y, int z) {
  unsigned long long pol;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;"
               : "=l"(pol));
  asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global.tile.L2::cache_hint"
               " [%0, {%1, %2, %3}], %4;" ::"l"(&map),
               "r"(x), "r"(y), "r"(z), "l"(pol)
               : "memory");
}
)";
const char *const codegen::EvictFirstHelper = R"(
// mt_tma_load with an L2 evict-first policy: each key and value is read
// once, so its lines go first.
__device__ __forceinline__ void mt_tma_load_ef(unsigned dst,
                                               const mt_tensor_map &map,
                                               unsigned bar, int x, int y,
                                               int z) {
  unsigned long long pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;"
               : "=l"(pol));
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::"
      "complete_tx::bytes.L2::cache_hint [%0], [%1, {%3, %4, %5}], [%2], %6;"
      ::"r"(dst), "l"(&map), "r"(bar), "r"(x), "r"(y), "r"(z), "l"(pol)
      : "memory");
}
#if EVICT_FIRST
#define mt_tma_load mt_tma_load_ef
#endif
)";

/// What the unsplit and split forms insert after a stage's copies with
/// `_pfN`: the tile PREFETCH tiles later into L2.
const char *const codegen::IssuePrefetch =
    R"(    // And tile it + PREFETCH into L2: more bytes in flight than the stages
    // hold.
    if (it + PREFETCH < nTiles) {
      const int yp =
          (int)(kvBegin + (long long)MT_TILE(it + PREFETCH) * BKV);
#pragma unroll
      for (int h = 0; h < D_ / 64; ++h) {
        mt_tma_prefetch(tm_k, h * 64, yp, (int)bh);
        mt_tma_prefetch(tm_v, h * 64, yp, (int)bh);
      }
    }
)";

/// PRE_WAIT: the L2 bytes a CTA of an unsplit tile prefetches before its
/// programmatic wait, and the grid's at most: a third of an H100's or
/// H200's 50 MB L2. At batch 16 (128 CTAs) 128 KB a CTA (256 keys of k and
/// v at D = 128) ran 0.6 us under the same kernel without them on an H200
/// (63.27 against 63.86 us; 32 MB a grid was slower than none, 16 MB
/// without the evict-first copies too; docs/CUDA.md).
static constexpr int64_t DecPreWaitCtaBytes = 128 << 10;
static constexpr int64_t DecPreWaitGridBytes = 16 << 20;

int64_t codegen::decPreWaitTiles(const AttentionTile &T, int64_t KvTile,
                                 int64_t Ctas) {
  if (T.Splits != 1 || T.Cluster || T.Persistent || T.OneBox || Ctas <= 0)
    return 0;
  int64_t Bytes = std::min(DecPreWaitCtaBytes, DecPreWaitGridBytes / Ctas);
  return Bytes / (2 * KvTile);
}
