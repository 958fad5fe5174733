//===- AttentionCost.h - Times of the attention kernels ----*- C++ -*-===//
//
// The simulator's predictions for the two attention templates the CUDA
// backend generates (docs/SIMULATOR.md, "Attention"): the flash kernel
// (one CTA per BQ packed query rows of a kv head, keys and values streamed
// through shared memory, fp32 on the CUDA cores or, for the mma tiles, the
// two products on the tensor cores) and the math
// decomposition (the fp32 scores written to global memory, normalised, then
// multiplied by v). Times in microseconds; +inf when a tile cannot run.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_RUNTIME_ATTENTIONCOST_H
#define MTSCHED_RUNTIME_ATTENTIONCOST_H

#include "mtsched/IR/Attention.h"
#include "mtsched/Runtime/DeviceDesc.h"

namespace mtsched {

/// Useful arithmetic of an attention: 4 flops per visible query-key pair
/// and head dimension (q kᵀ and p v), so about half for causal prefill.
double attentionFlops(const AttentionShape &S);

/// Splits > 1: split-KV, each tile's keys divided among Splits CTAs whose
/// partial results are written, read back and combined. Mma: the
/// tensor-core template (q kᵀ and p v on mma.sync, the softmax on the CUDA
/// cores, k and v double-buffered by cp.async).
double flashAttentionTimeUs(const DeviceDesc &Dev, const AttentionShape &S,
                            int BQ, int BKV, int Warps, int Splits = 1,
                            bool Mma = false, int Stages = 2);
/// The wgmma (Hopper) template's tile: BQ query rows over two consumer
/// warpgroups, BKV-key stages streamed by TMA, the softmax overlapping
/// the previous tile's p v with Overlap, the consumers taking turns at the
/// tensor cores with PingPong, CTAs walking several query tiles with
/// Persistent; Inf where it cannot run.
double wgAttentionTimeUs(const DeviceDesc &Dev, const AttentionShape &S, int BQ,
                         int BKV, int Stages, bool Overlap = false,
                         bool PingPong = false, bool Persistent = false);
double mathAttentionTimeUs(const DeviceDesc &Dev, const AttentionShape &S);

} // namespace mtsched

#endif // MTSCHED_RUNTIME_ATTENTIONCOST_H
