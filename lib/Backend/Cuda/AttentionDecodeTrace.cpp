//===- AttentionDecodeTrace.cpp - attn_dec's _ts diagnostic ---------------===//
//
// `attn_dec_..._ts` (unsplit, not persistent): a diagnostic, the kernel of
// the tile it names plus each CTA's start and end on the GPU's global
// timer. Nsight Compute showed the B = 16 kernel (16x32_w4_s4, H200)
// 67.0 us long with its longest-active SM active 62.9 us of it, cuDNN's
// 65.7 with 63.7: the CTAs stream K and V faster than cuDNN's, and the time
// lost is outside them (a late start of some CTAs, a late end, or the
// launch). Here the kernel's launches in a process count up; at launches 20
// and 40 (the benchmarker's back-to-back timing runs by then) the last CTA
// to finish prints, with device printf, every CTA's start and end relative
// to the launch's first start, and the time from the previous launch's last
// end to this launch's first start. The rest of the kernel is the tile's.
//
//===----------------------------------------------------------------------===//
#include "AttentionCodegenImpl.h"

using namespace mtsched;

const char *const codegen::DecTraceHelper = R"(
#define MT_TS_MAX_CTAS 1024
__device__ unsigned long long mt_ts_first_inv[64], mt_ts_last[64];
__device__ unsigned long long mt_ts_cta[MT_TS_MAX_CTAS][2];
__device__ unsigned mt_ts_launches, mt_ts_done;
__device__ __forceinline__ unsigned long long mt_globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
)";

const char *const codegen::DecTraceEnd = R"(#if TIMESTAMPS
  // Every thread's stores are issued; thread 0 records the CTA.
  __syncthreads();
  if (tid == 0) {
    const unsigned long long mtT1 = mt_globaltimer();
    const unsigned G = gridDim.x * gridDim.y * gridDim.z;
    const unsigned id = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const bool shown = mtLaunch == 20u || mtLaunch == 40u;
    atomicMax(&mt_ts_first_inv[mtLaunch % 64], ~mtT0);
    atomicMax(&mt_ts_last[mtLaunch % 64], mtT1);
    if (shown && id < MT_TS_MAX_CTAS) {
      mt_ts_cta[id][0] = mtT0;
      mt_ts_cta[id][1] = mtT1;
    }
    __threadfence();
    if (atomicAdd(&mt_ts_done, 1u) == G - 1) {
      __threadfence();
      if (shown) {
        // Volatile: the other CTAs' values, not a line this SM cached.
        const volatile unsigned long long(*cta)[2] = mt_ts_cta;
        const unsigned long long first =
            ~*(volatile unsigned long long *)&mt_ts_first_inv[mtLaunch % 64];
        const unsigned long long prev =
            *(volatile unsigned long long *)&mt_ts_last[(mtLaunch + 63) % 64];
        unsigned long long s1 = 0, e0 = ~0ull, e1 = 0;
        for (unsigned c = 0; c < G && c < MT_TS_MAX_CTAS; ++c) {
          s1 = max(s1, cta[c][0] - first);
          e0 = min(e0, cta[c][1] - first);
          e1 = max(e1, cta[c][1] - first);
        }
        printf("mt_ts launch %u: %u CTAs, starts 0-%llu ns, ends %llu-%llu "
               "ns, %lld ns from the previous launch's last end\n",
               mtLaunch, G, s1, e0, e1, (long long)(first - prev));
        for (unsigned c = 0; c < G && c < MT_TS_MAX_CTAS; ++c)
          printf("mt_ts cta %u %u start %llu end %llu\n", mtLaunch, c,
                 cta[c][0] - first, cta[c][1] - first);
      }
      mt_ts_done = 0u;
      __threadfence();
      *(volatile unsigned *)&mt_ts_launches = mtLaunch + 1u;
    }
  }
#endif
)";
