//===- AttentionCodegen.h - CUDA kernels of the attention op ----*- C++ -*-===//
//
// The templates of an `attention` multi-template buffer (docs/CUDA.md,
// "Attention"), self-contained CUDA C++ specialised to the node's shape:
//   * attn_flash_BQxBKV_wW: one CTA of W warps per BQ packed query rows of
//     one (batch, kv head): the rows are the query heads that share the kv
//     head, then their queries, so a decode step's GQA group fills a tile.
//     Keys and values stream through shared memory BKV rows at a time; the
//     scores, an online softmax (running max and sum, exp2 on pre-scaled q)
//     and the accumulators are fp32 on the CUDA cores (SIMT, no tensor
//     cores). A causal tile stops at the last key its last row sees.
//   * attn_mma_BQxBKV_wW: the same tiling with a warp per 16 or 32 rows
//     (BQ = 16 W or 32 W) on the tensor cores: q kᵀ and p v as mma.sync
//     m16n8k16 (32 rows: each k or v fragment feeds two MMAs) with
//     fp32 accumulators, the online softmax on the score fragments in
//     registers, k and v streamed through 2 to 8 shared-memory stages by
//     cp.async (`_sN` in the name when not 2).
//     bf16 and f16, head dimensions that are multiples of 16 up to 128.
//   * attn_wg_BQxBKV_sS (sm_90a): the Hopper template, FlashAttention-3's
//     structure: a producer warpgroup streams q once and k and v tiles of
//     BKV keys through S stages with TMA (tensor maps the launcher fills,
//     KernelSource::TensorMaps), two consumer warpgroups of 64 packed rows
//     each compute q kᵀ with wgmma from shared memory, the online softmax
//     on the score fragments in registers, and p v with wgmma taking p
//     from registers and v from shared memory. bf16 and f16, head
//     dimension 64 or 128, BQ = 128, no split-KV; causal CTAs stop at
//     their last key and the heaviest start first. `_o` tiles overlap a
//     tile's softmax with the previous tile's p v, `_pp` tiles also take
//     turns between the two consumers at the tensor cores (pingpong), `_p`
//     tiles are persistent (a CTA per SM walks the query tiles, loading
//     the next one's while it finishes the current); where the stages leave
//     room the additive mask's tiles are staged too (by TMA for an f32
//     mask per query, else by the producer's other warps).
//   * attn_math: the decomposition, one CTA per query row: the scaled
//     scores q kᵀ are written to a global fp32 workspace, normalised there
//     (max, exp, sum), then multiplied by v.
// Both take q, k, v and write the result; attn_math also takes its
// workspace (KernelSource::WorkspaceBytes).
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_BACKEND_CUDA_ATTENTIONCODEGEN_H
#define MTSCHED_BACKEND_CUDA_ATTENTIONCODEGEN_H

#include "mtsched/Backend/Cuda/CudaCodegen.h"

namespace mtsched {

/// The flash kernel of attention node N with tile T.
llvm::Expected<KernelSource>
generateFlashAttentionKernel(const MultiTemplateBufferNode &N,
                             const AttentionTile &T);
/// The tensor-core kernel of attention node N with mma tile T (also reached
/// through generateFlashAttentionKernel).
llvm::Expected<KernelSource>
generateMmaAttentionKernel(const MultiTemplateBufferNode &N,
                           const AttentionTile &T);
/// The Hopper (sm_90a) kernel of attention node N with wgmma tile T (also
/// reached through generateFlashAttentionKernel).
llvm::Expected<KernelSource>
generateWgAttentionKernel(const MultiTemplateBufferNode &N,
                          const AttentionTile &T);
/// The Hopper (sm_90) decode kernel of attention node N with tile T
/// (`attn_dec_...`; also reached through generateFlashAttentionKernel).
llvm::Expected<KernelSource>
generateDecAttentionKernel(const MultiTemplateBufferNode &N,
                           const AttentionTile &T);
/// The attn_math kernel of attention node N.
llvm::Expected<KernelSource>
generateMathAttentionKernel(const MultiTemplateBufferNode &N);
/// The kernel of choice C of attention node N; fails for a choice that is
/// neither a flash tile nor attn_math.
llvm::Expected<KernelSource>
generateAttentionKernel(const MultiTemplateBufferNode &N, const Choice &C);

} // namespace mtsched

#endif // MTSCHED_BACKEND_CUDA_ATTENTIONCODEGEN_H
