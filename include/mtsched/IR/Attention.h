//===- Attention.h - The shape and attributes of attention --*- C++ -*-===//
//
// `attention(%q, %k, %v) {causal = true|false, scale = <f64>}` computes
// softmax(q kᵀ · scale + mask) v per batch and query head, with
//   q: [B, Hq, Sq, D], k and v: [B, Hkv, Skv, D], result [B, Hq, Sq, D],
// Hq a multiple of Hkv (grouped-query attention: query head h reads kv head
// h / (Hq / Hkv)). A causal mask aligns the queries to the end of the keys,
// as a decode step appends its Sq queries after Skv - Sq cached ones: query
// i sees keys j <= Skv - Sq + i, so Sq <= Skv is required.
//
// `attention(%q, %k, %v, %mask)` adds an additive mask to the scaled
// scores before the softmax: mask [B or 1, Hq or 1, Sq or 1, Skv] of q's
// type or f32, broadcast over the dimensions of size 1 (a padding mask is
// [B, 1, 1, Skv], a shared causal or window mask [1, 1, Sq, Skv]). It
// combines with `causal` (both apply). A query row whose keys are all
// masked (-inf) has NaN results, as PyTorch's softmax gives.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_IR_ATTENTION_H
#define MTSCHED_IR_ATTENTION_H

#include "mtsched/IR/Types.h"
#include <cstdint>
#include <optional>

namespace mtsched {

class Node;

struct AttentionShape {
  int64_t B = 0, Hq = 0, Hkv = 0, Sq = 0, Skv = 0, D = 0;
  bool Causal = false;
  /// The factor applied to q kᵀ: the `scale` attribute, else 1/sqrt(D).
  double Scale = 1;
  DType Dtype = DType::BF16;
  /// The additive mask operand, if any: [MaskB, MaskH, MaskSq, Skv] with
  /// MaskB 1 or B, MaskH 1 or Hq, MaskSq 1 or Sq; keys are contiguous.
  bool HasMask = false;
  DType MaskDtype = DType::F32;
  int64_t MaskB = 1, MaskH = 1, MaskSq = 1;

  /// Query heads per kv head.
  int64_t group() const { return Hkv > 0 ? Hq / Hkv : 0; }
  /// The last key query I may see (Skv - 1 without a causal mask).
  int64_t lastKey(int64_t I) const { return Causal ? Skv - Sq + I : Skv - 1; }
  /// The kv head (a flat index over [B, Hkv]) that output row R, a flat
  /// index over [B, Hq, Sq], reads.
  int64_t kvHeadOf(int64_t R) const {
    return (R / (Sq * Hq)) * Hkv + ((R / Sq) % Hq) / group();
  }
  /// Query-key pairs the causal mask keeps, over one (batch, query head)
  /// (an additive mask is not looked at: it may keep every pair).
  int64_t visiblePairs() const;
  /// The element offset of the mask row of batch Bi, query head H, query
  /// I (broadcast dimensions read row 0).
  int64_t maskRowOffset(int64_t Bi, int64_t H, int64_t I) const {
    return (((MaskB == 1 ? 0 : Bi) * MaskH + (MaskH == 1 ? 0 : H)) * MaskSq +
            (MaskSq == 1 ? 0 : I)) *
           Skv;
  }
  /// The mask row offset of output row R, a flat index over [B, Hq, Sq].
  int64_t maskRowOf(int64_t R) const {
    return maskRowOffset(R / (Sq * Hq), (R / Sq) % Hq, R % Sq);
  }
  /// Elements of the mask operand (0 without one).
  int64_t maskElements() const {
    return HasMask ? MaskB * MaskH * MaskSq * Skv : 0;
  }
};

/// Bytes of shared memory the flash attention template needs for a BQ x
/// BKV tile of head dimension D: fp32 q, k (rows padded by one float), v
/// and score tiles, and three floats per row. Lowering, the cost model and
/// the codegen agree on it.
int64_t flashAttentionSharedBytes(int BQ, int BKV, int64_t D);
/// The warps of a tensor-core attention tile that split each stage's keys
/// among them (each BKV of them) for the same 16 rows: Warps for a 16-row
/// tile of 2, 4 or 8 warps (a decode step's few rows), else 1 (each warp
/// owns 16 or 32 rows of its own).
int mmaAttentionKeyWarps(int BQ, int Warps);
/// Bytes of shared memory the tensor-core (mma.sync) attention template
/// needs: a 16-bit q tile and Stages stages of k and v tiles of
/// mmaAttentionKeyWarps x BKV keys (a cp.async pipeline), rows padded by 8
/// elements so that ldmatrix rows fall in different banks.
int64_t mmaAttentionSharedBytes(int BQ, int BKV, int Warps, int64_t D,
                                int Stages);
/// Whether the tensor-core template handles shape S with a BQ x BKV tile of
/// Warps warps: bf16 or f16 (the MMA's operand types), a head dimension that
/// is a multiple of 16 up to 128 (q fragments and accumulators stay in
/// registers), 16 or 32 query rows per warp (or 16 rows shared by 2, 4 or 8
/// warps splitting the keys), whole k16 steps of keys and 2 to 8 pipeline
/// stages.
bool mmaAttentionSupports(const AttentionShape &S, int BQ, int BKV, int Warps,
                          int Stages = 2);
/// The part of mmaAttentionSupports that does not depend on the shape.
bool mmaAttentionTileValid(int BQ, int BKV, int Warps, int Stages);
/// Bytes of shared memory the wgmma (Hopper) attention template needs: a
/// 1024-byte-aligned q tile of BQ rows and Stages stages of BKV-key k and v
/// tiles, all 16-bit and 128-byte swizzled, and the stages' mbarriers; with
/// MaskStages also each stage's tile of the additive mask (BQ rows of BKV +
/// 8 floats, in log2 units) and its barrier.
int64_t wgAttentionSharedBytes(int BQ, int BKV, int64_t D, int Stages,
                               bool MaskStages = false);
/// Whether the wgmma template stages the additive mask of S through shared
/// memory (its producer warps load it, coalesced): where S has a mask and
/// the stages still fit; else each score's mask element is read from
/// global memory.
bool wgAttentionStagesMask(const AttentionShape &S, int BQ, int BKV,
                           int Stages);
/// Whether it copies them by TMA instead (the mask's rows of a query tile
/// are consecutive rows of an f32 mask: one per query, Sq a multiple of
/// BQ, Skv of 4 for 16-byte row strides, BKV of 32 for its 128-byte boxes),
/// and the shared memory that takes.
bool wgAttentionMaskByTma(const AttentionShape &S, int BQ, int BKV, int Stages);
int64_t wgAttentionTmaMaskSharedBytes(int BQ, int BKV, int64_t D, int Stages);
/// The shape-independent limits of a wgmma attention tile: BQ = 128 (two
/// consumer warpgroups of 64 rows), BKV a multiple of 16 from 16 to 192
/// (the scores' wgmma N, and registers for the scores, p and the output),
/// 2 to 4 stages.
bool wgAttentionTileValid(int BQ, int BKV, int Stages);
/// Whether the wgmma template handles shape S with the tile: bf16 or f16,
/// head dimension 64 or 128 (whole 128-byte swizzled boxes), and the
/// stages fit in shared memory. It runs on sm_90 GPUs only.
bool wgAttentionSupports(const AttentionShape &S, int BQ, int BKV, int Stages);
/// Bytes of shared memory the Hopper decode template (`attn_dec`) needs:
/// 1024 for aligning its 128-byte swizzled TMA boxes, Stages stages of BKV
/// keys of k and v (or, after the keys, the Warps consumer warps' partial
/// results, whichever is larger), the 16-row q tile (rows padded by 8
/// elements) and two mbarriers a stage. Persistent (`_p`): the partial
/// results get their own region after the stages.
int64_t decAttentionSharedBytes(int BKV, int Warps, int64_t D, int Stages,
                                bool Persistent = false);
/// The shape-independent limits of a decode tile: BQ = 16 (a decode step's
/// packed query heads), BKV a multiple of 16 up to 128, 1 to 8 consumer
/// warps, 2 to 8 stages, a multiple of the warps.
bool decAttentionTileValid(int BQ, int BKV, int Warps, int Stages);
/// Whether the decode template handles S with the tile: bf16 or f16, head
/// dimension 64 or 128 (whole 128-byte boxes), no additive mask, and the
/// stages fit. It runs on sm_90 GPUs only (TMA).
bool decAttentionSupports(const AttentionShape &S, int BQ, int BKV, int Warps,
                          int Stages, bool Persistent = false);
/// Shared memory one CTA may use on sm_90 (the opt-in limit).
inline constexpr int64_t FlashAttentionMaxSharedBytes = 227 * 1024;

/// The shape of attention node N, whose operands and attributes the
/// verifier accepted; None if N is not a well-formed attention.
std::optional<AttentionShape> attentionShapeOf(const Node &N);

} // namespace mtsched

#endif // MTSCHED_IR_ATTENTION_H
