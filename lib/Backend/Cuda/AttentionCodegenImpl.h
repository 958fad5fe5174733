//===- AttentionCodegenImpl.h - Pieces both flash templates share -*- C++
//-*-===//
//
// Internal to lib/Backend/Cuda: the header, split-KV combine and kernel set-up
// of the CUDA-core (AttentionKernels.cpp) and tensor-core
// (AttentionMmaKernels.cpp) flash templates.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_BACKEND_CUDA_ATTENTIONCODEGENIMPL_H
#define MTSCHED_LIB_BACKEND_CUDA_ATTENTIONCODEGENIMPL_H

#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/IR/Attention.h"
#include "mtsched/Lowering/ChoiceConfig.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/raw_ostream.h"

namespace mtsched {
namespace codegen {

/// The end of a split-KV CTA: the last split of a tile combines the
/// partials every split wrote (AttentionKernels.cpp says how).
extern const char *const SplitCombine;

/// The body of an `attn_wg` kernel after its signature; the shape, tile
/// (BQ, BKV, STAGES, NBH = B * Hkv, UNITS), PERSISTENT, PINGPONG and the
/// register budgets are #defines (AttentionWgBody.cpp).
extern const char *const AttentionWgBody;

/// The early combine of an unsplit decode tile
/// (AttentionDecodeEarlyCombine.cpp): whether tile T at head dimension D
/// ends with it, DecEarlyPartials (each consumer warp's partial result into
/// its own stage, inside the consumer branch) and DecEarlyCombine (after
/// the barrier: the output, then the kernel's end).
bool decEarlyCombine(const AttentionTile &T, int64_t D);
extern const char *const DecEarlyPartials;
extern const char *const DecEarlyCombine;

/// The bodies of the persistent decode kernels after their #defines:
/// `attn_dec_..._p` (fixed shares, AttentionDecodePersistent.cpp),
/// `attn_dec_..._pw` (a partial result per consumer warp,
/// AttentionDecodeWarpPartials.cpp) and `attn_dec_..._ps` (work stealing,
/// AttentionDecodeSteal.cpp), each around the shared stage math.
std::string decPersistentBody();
std::string decWarpPartialsBody();
std::string decStealBody();

/// Pieces of those kernels (AttentionDecodePersistent.cpp): DecLoadQ, a
/// consumer warp's q fragments of kv head bh straight from global memory
/// (`qf`, `loadQ(bh)`); DecPartialsToShared, a consumer warp's o, running
/// max and sum into cO, cM, cL; DecCtaWeights, the consumers' combine of
/// those into fO, fM, fL between named-barrier syncs; DecSlotCombineStep,
/// one partial result `pz` into a combine's running M, L and x;
/// DecConsumerRows, a consumer's rows ra, rb, their last keys and VR;
/// DecSegmentStart, a kv head's (or segment's) zero accumulators.
extern const char *const DecLoadQ;
extern const char *const DecConsumerRows;
extern const char *const DecSegmentStart;
extern const char *const DecPartialsToShared;
extern const char *const DecCtaWeights;
extern const char *const DecSlotCombineStep;

/// A decode consumer warp's math on one stage (scores, online softmax,
/// p v), the query rows as the MMA's rows, or with SwapAB
/// (`attn_dec_..._sw`) the keys, at most 8 query rows as the columns; and
/// the `movmatrix` helper `_sw` needs (AttentionDecodeStageMath.cpp). The
/// kernel defines SWAP_AB (0 or 1) before it.
std::string decTileMath(bool SwapAB);
extern const char *const DecSwapHelper;

/// The decode template's copy options (AttentionDecodeCopyForms.cpp):
/// `_t`'s bulk load and barrier test, `_pfN`'s L2 prefetch helper and the
/// text a stage inserts after its copies, `_ef`'s evict-first load, and
/// the evict-last prefetch that PRE_WAIT issues before the programmatic
/// wait.
extern const char *const TailHelper;
extern const char *const PrefetchHelper;
extern const char *const PrefetchLastHelper;
extern const char *const EvictFirstHelper;
extern const char *const IssuePrefetch;

/// The key tiles a CTA of tile T prefetches into L2 before its programmatic
/// wait (PRE_WAIT; 0: none) in a grid of Ctas CTAs: unsplit tiles only
/// (the split ones were not faster with it), not persistent (no wait), and
/// not with one box a stage (other coordinates). KvTile: bytes of a
/// stage's k (or v). (AttentionDecodeCopyForms.cpp.)
int64_t decPreWaitTiles(const AttentionTile &T, int64_t KvTile, int64_t Ctas);

/// The decode kernels' diagnostic stamps (MT_TL_START, MT_TL_STAMP(i),
/// MT_TL_END: empty unless compiled with -DMT_TIMELINE, which only
/// bench/device/attn-dec-timeline.py does; AttentionDecodeTimeline.cpp).
extern const char *const DecTimelineHelper;

/// Emits Pieces with SplitCombine between consecutive ones (each piece but
/// the last ends where a `#if SPLITS > 1` branch has written its partials).
void emitWithCombine(llvm::raw_ostream &OS,
                     llvm::ArrayRef<const char *> Pieces);

/// mt_key_range(r0, bq, step, splits, z, kvBegin, kvEnd): the keys a flash
/// CTA of query rows [r0, r0 + bq) sees (a causal tile stops at its last
/// row's last key), split z's share of them (AttentionKernels.cpp).
extern const char *const KeyRange;

/// mt_pack2(lo, hi): two floats as the 16-bit (MMA_TYPE) pair of an MMA
/// operand register, lo in the low half (AttentionMmaKernels.cpp).
extern const char *const PackHelper;

/// The shape, type and signature every attention kernel starts with:
/// Threads threads, a float workspace `ws` if Workspace, Helpers (device
/// functions) before the signature, LeadingParams (each ending in ", ")
/// before q; a kernel with leading parameters is bounded to MinBlocks CTAs
/// per SM (its registers to what that many leave each thread).
llvm::Expected<AttentionShape>
emitAttentionHeader(llvm::raw_ostream &OS, const MultiTemplateBufferNode &N,
                    llvm::StringRef Name, llvm::StringRef Choice, int Threads,
                    bool Workspace, llvm::StringRef Helpers = "",
                    llvm::StringRef LeadingParams = "", int MinBlocks = 1);

/// The kernel of flash tile T of attention node N (shape S) in either
/// template: Threads threads, Smem bytes of shared memory (checked against
/// the CTA limit), Helpers before the signature, Defines after BQ, BKV and
/// SPLITS, then Body; grid (query tiles, B x Hkv, splits) and the split-KV
/// workspace.
llvm::Expected<KernelSource>
buildFlashKernel(const MultiTemplateBufferNode &N, const AttentionTile &T,
                 const AttentionShape &S, int Threads, int64_t Smem,
                 llvm::StringRef Helpers, llvm::StringRef Defines,
                 llvm::ArrayRef<const char *> Body);

} // namespace codegen
} // namespace mtsched

#endif // MTSCHED_LIB_BACKEND_CUDA_ATTENTIONCODEGENIMPL_H
