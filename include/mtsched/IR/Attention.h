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

  /// Query heads per kv head.
  int64_t group() const { return Hkv > 0 ? Hq / Hkv : 0; }
  /// The last key query I may see (Skv - 1 without a causal mask).
  int64_t lastKey(int64_t I) const { return Causal ? Skv - Sq + I : Skv - 1; }
  /// The kv head (a flat index over [B, Hkv]) that output row R, a flat
  /// index over [B, Hq, Sq], reads.
  int64_t kvHeadOf(int64_t R) const {
    return (R / (Sq * Hq)) * Hkv + ((R / Sq) % Hq) / group();
  }
  /// Query-key pairs the mask keeps, over one (batch, query head).
  int64_t visiblePairs() const;
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
/// Shared memory one CTA may use on sm_90 (the opt-in limit).
inline constexpr int64_t FlashAttentionMaxSharedBytes = 227 * 1024;

/// The shape of attention node N, whose operands and attributes the
/// verifier accepted; None if N is not a well-formed attention.
std::optional<AttentionShape> attentionShapeOf(const Node &N);

} // namespace mtsched

#endif // MTSCHED_IR_ATTENTION_H
