//===- Attention.cpp - The shape and attributes of an attention op --------===//
#include "mtsched/IR/Attention.h"
#include "mtsched/IR/Graph.h"
#include <algorithm>
#include <cmath>

using namespace mtsched;

int64_t AttentionShape::visiblePairs() const {
  if (!Causal)
    return Sq * Skv;
  // Query I sees Skv - Sq + I + 1 keys: Sq terms of an arithmetic series.
  return Sq * (Skv - Sq) + Sq * (Sq + 1) / 2;
}

int64_t mtsched::flashAttentionSharedBytes(int BQ, int BKV, int64_t D) {
  return 4 * (int64_t(BQ) * D + int64_t(BKV) * (D + 1) + int64_t(BKV) * D +
              int64_t(BQ) * (BKV + 1) + 3 * int64_t(BQ));
}

int mtsched::mmaAttentionKeyWarps(int BQ, int Warps) {
  bool SharedRows = BQ == 16 && (Warps == 2 || Warps == 4 || Warps == 8);
  return SharedRows ? Warps : 1;
}

int64_t mtsched::mmaAttentionSharedBytes(int BQ, int BKV, int Warps, int64_t D,
                                         int Stages) {
  // The key warps' partial results are combined in the freed k/v stages:
  // 64 ((KW + 1) D + 3 KW + 2) bytes, never more than the 128 KW (D + 8)
  // of two stages of at least 16 keys a warp.
  int64_t KeysPerStage = int64_t(mmaAttentionKeyWarps(BQ, Warps)) * BKV;
  return 2 * (int64_t(BQ) + 2 * int64_t(Stages) * KeysPerStage) * (D + 8);
}

bool mtsched::mmaAttentionTileValid(int BQ, int BKV, int Warps, int Stages) {
  return Stages >= 2 && Stages <= 8 && Warps > 0 && Warps <= 16 &&
         (BQ == 16 * Warps || BQ == 32 * Warps ||
          mmaAttentionKeyWarps(BQ, Warps) > 1) &&
         BKV > 0 && BKV % 16 == 0 && BKV <= 128;
}

bool mtsched::mmaAttentionSupports(const AttentionShape &S, int BQ, int BKV,
                                   int Warps, int Stages) {
  return (S.Dtype == DType::BF16 || S.Dtype == DType::F16) && S.D > 0 &&
         S.D % 16 == 0 && S.D <= 128 &&
         mmaAttentionTileValid(BQ, BKV, Warps, Stages);
}

int64_t mtsched::wgAttentionSharedBytes(int BQ, int BKV, int64_t D, int Stages,
                                        bool MaskStages) {
  // 1024 bytes of alignment slack, q, the k and v stages, then four
  // mbarriers per stage (k and v loaded, k and v freed) and q's two
  // (loaded, freed); the mask's stages and barriers.
  return 1024 + 2 * (int64_t(BQ) + 2 * int64_t(Stages) * BKV) * D +
         8 * (4 * int64_t(Stages) + 2) +
         (MaskStages ? int64_t(Stages) * (BQ * (BKV + 8) * 4 + 8) : 0);
}

int64_t mtsched::wgAttentionTmaMaskSharedBytes(int BQ, int BKV, int64_t D,
                                               int Stages) {
  return wgAttentionSharedBytes(BQ, BKV, D, Stages) +
         int64_t(Stages) * (int64_t(BQ) * BKV * 4 + 8);
}

bool mtsched::wgAttentionMaskByTma(const AttentionShape &S, int BQ, int BKV,
                                   int Stages) {
  return S.HasMask && S.MaskDtype == DType::F32 && S.MaskSq == S.Sq && BQ > 0 &&
         S.Sq % BQ == 0 && S.Skv % 4 == 0 && BKV % 32 == 0 &&
         S.MaskB * S.MaskH * S.MaskSq <= 0x7fffffff &&
         wgAttentionTmaMaskSharedBytes(BQ, BKV, S.D, Stages) <=
             FlashAttentionMaxSharedBytes;
}

bool mtsched::wgAttentionStagesMask(const AttentionShape &S, int BQ, int BKV,
                                    int Stages) {
  return S.HasMask && wgAttentionSharedBytes(BQ, BKV, S.D, Stages, true) <=
                          FlashAttentionMaxSharedBytes;
}

bool mtsched::wgAttentionTileValid(int BQ, int BKV, int Stages) {
  return BQ == 128 && BKV >= 16 && BKV <= 192 && BKV % 16 == 0 && Stages >= 2 &&
         Stages <= 4;
}

bool mtsched::wgAttentionSupports(const AttentionShape &S, int BQ, int BKV,
                                  int Stages) {
  return (S.Dtype == DType::BF16 || S.Dtype == DType::F16) &&
         (S.D == 64 || S.D == 128) && wgAttentionTileValid(BQ, BKV, Stages) &&
         wgAttentionSharedBytes(BQ, BKV, S.D, Stages) <=
             FlashAttentionMaxSharedBytes;
}

int64_t mtsched::decAttentionSharedBytes(int BKV, int Warps, int64_t D,
                                         int Stages, bool Persistent) {
  int64_t StageBytes = 2 * int64_t(Stages) * BKV * D * 2;
  // After the keys: each consumer warp's 16 x D accumulators, max, sum and
  // weight, then the combined tile's (AttentionDecodeKernels.cpp). A
  // persistent CTA combines while its producer streams the next kv head:
  // beside the stages.
  int64_t CombineBytes =
      4 * ((int64_t(Warps) + 1) * 16 * D + 3 * 16 * Warps + 2 * 16);
  int64_t Region = Persistent ? StageBytes + CombineBytes
                              : std::max(StageBytes, CombineBytes);
  return 1024 + Region + 16 * (D + 8) * 2 + 16 * int64_t(Stages);
}

bool mtsched::decAttentionTileValid(int BQ, int BKV, int Warps, int Stages) {
  // Stages a multiple of the warps: consumer warp c then always takes the
  // same stages (c, c + Warps, ...), so the tile before its tile t in a
  // stage is its own t - Stages, whose copy it has waited for; a wait
  // for a parity cannot then be met by the phase before. (With 6 stages
  // and 4 warps that tile was another warp's, its copy could still be in
  // flight, and the wait passed early: H200 calls 1 and 2 faulted at batch
  // 4 and 16, docs/BENCHMARKS.md.)
  return BQ == 16 && BKV >= 16 && BKV <= 128 && BKV % 16 == 0 && Warps >= 1 &&
         Warps <= 8 && Stages >= 2 && Stages <= 8 && Stages % Warps == 0;
}

bool mtsched::decAttentionSupports(const AttentionShape &S, int BQ, int BKV,
                                   int Warps, int Stages, bool Persistent) {
  return (S.Dtype == DType::BF16 || S.Dtype == DType::F16) &&
         (S.D == 64 || S.D == 128) && !S.HasMask &&
         decAttentionTileValid(BQ, BKV, Warps, Stages) &&
         decAttentionSharedBytes(BKV, Warps, S.D, Stages, Persistent) <=
             FlashAttentionMaxSharedBytes;
}

std::optional<AttentionShape> mtsched::attentionShapeOf(const Node &N) {
  if (N.getOp() != OpCode::Attention ||
      (N.getNumOperands() != 3 && N.getNumOperands() != 4))
    return std::nullopt;
  const TensorType &Q = N.getOperand(0)->getType();
  const TensorType &K = N.getOperand(1)->getType();
  if (Q.rank() != 4 || K.rank() != 4)
    return std::nullopt;
  AttentionShape S;
  S.B = Q.Shape[0];
  S.Hq = Q.Shape[1];
  S.Sq = Q.Shape[2];
  S.D = Q.Shape[3];
  S.Hkv = K.Shape[1];
  S.Skv = K.Shape[2];
  S.Dtype = Q.Dtype;
  if (S.Hkv <= 0 || S.Hq % S.Hkv || K.Shape[3] != S.D || K.Shape[0] != S.B)
    return std::nullopt;
  if (const Attribute *C = N.getAttrs().get("causal")) {
    if (!C->isBool())
      return std::nullopt;
    S.Causal = C->getBool();
  }
  S.Scale = S.D > 0 ? 1 / std::sqrt(double(S.D)) : 1;
  if (const Attribute *A = N.getAttrs().get("scale")) {
    if (!A->isInt() && !A->isFloat())
      return std::nullopt;
    S.Scale = A->getNumber();
  }
  if (S.Causal && S.Sq > S.Skv)
    return std::nullopt;
  if (N.getNumOperands() == 4) {
    const TensorType &M = N.getOperand(3)->getType();
    if (M.rank() != 4 || M.Shape[3] != S.Skv ||
        (M.Shape[0] != 1 && M.Shape[0] != S.B) ||
        (M.Shape[1] != 1 && M.Shape[1] != S.Hq) ||
        (M.Shape[2] != 1 && M.Shape[2] != S.Sq) ||
        (M.Dtype != S.Dtype && M.Dtype != DType::F32))
      return std::nullopt;
    S.HasMask = true;
    S.MaskDtype = M.Dtype;
    S.MaskB = M.Shape[0];
    S.MaskH = M.Shape[1];
    S.MaskSq = M.Shape[2];
  }
  return S;
}
