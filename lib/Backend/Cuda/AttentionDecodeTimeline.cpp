//===- AttentionDecodeTimeline.cpp - attn_dec's diagnostic timeline -------===//
//
// A diagnostic build of the decode kernels (not a choice, never compiled by
// mtsched): bench/device/attn-dec-timeline.py compiles a dumped attn_dec
// kernel with -DMT_TIMELINE, and then each CTA records its SM and
// %globaltimer at its start, when its first stage has landed, after its
// last stage, after its consumers' combine and at its end (a split CTA
// that does not combine the splits records no end), into the global
// `mt_tl`, which the script reads back: where the kernel's time goes
// outside the CTAs' streaming (batch 16 of Llama-3-8B lost about 2 us
// there to cuDNN's kernel in Nsight Compute). Without MT_TIMELINE the
// stamps are empty.
//
//===----------------------------------------------------------------------===//
#include "AttentionCodegenImpl.h"

using namespace mtsched;

const char *const codegen::DecTimelineHelper = R"(
#ifdef MT_TIMELINE
// Per CTA: [0] SM | linear block index << 32, [1] start, [2] first stage
// landed (consumer warp 0), [3] every stage consumed, [8] the consumers'
// partial results in shared memory, [9] their weights, [4] the partial
// results combined, [5] end (%globaltimer, ns), [6] and [7] clock64 at
// the start and the end (a split CTA that does not combine the splits
// leaves [5] and [7] zero). mt_tl_n counts the CTAs recorded.
#define MT_TL_MAX 65536
__device__ unsigned long long mt_tl[MT_TL_MAX][16];
__device__ unsigned mt_tl_n;
__device__ __forceinline__ unsigned long long mt_gtime() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#define MT_TL_START                                                            \
  unsigned mt_slot = 0;                                                        \
  if (threadIdx.x == 0) {                                                      \
    const unsigned long long t = mt_gtime(), c = clock64();                   \
    unsigned sm;                                                               \
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));                            \
    mt_slot = atomicAdd(&mt_tl_n, 1u) % MT_TL_MAX;                             \
    for (int i = 2; i < 16; ++i) /* no stale stamps from a slot's reuse */    \
      mt_tl[mt_slot][i] = 0;                                                   \
    mt_tl[mt_slot][1] = t;                                                     \
    mt_tl[mt_slot][6] = c;                                                     \
    mt_tl[mt_slot][0] =                                                        \
        sm | (unsigned long long)(blockIdx.x +                                 \
                                  gridDim.x * (blockIdx.y +                    \
                                               gridDim.y * blockIdx.z))        \
                 << 32;                                                        \
  }
#define MT_TL_STAMP(i)                                                         \
  if (threadIdx.x == 0)                                                        \
    mt_tl[mt_slot][i] = mt_gtime();
#define MT_TL_END                                                              \
  __syncthreads();                                                             \
  if (threadIdx.x == 0) {                                                      \
    mt_tl[mt_slot][5] = mt_gtime();                                            \
    mt_tl[mt_slot][7] = clock64();                                             \
  }
#else
#define MT_TL_START
#define MT_TL_STAMP(i)
#define MT_TL_END
#endif
)";
