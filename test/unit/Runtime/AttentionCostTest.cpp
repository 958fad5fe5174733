//===- AttentionCostTest.cpp - Predicted times of the attention kernels ---===//
#include "mtsched/Runtime/AttentionCost.h"
#include "gtest/gtest.h"
#include <cmath>

using namespace mtsched;

namespace {

AttentionShape llama(int64_t B, int64_t Sq, int64_t Skv, bool Causal) {
  AttentionShape S;
  S.B = B;
  S.Hq = 32;
  S.Hkv = 8;
  S.Sq = Sq;
  S.Skv = Skv;
  S.D = 128;
  S.Causal = Causal;
  S.Scale = 1 / std::sqrt(128.0);
  S.Dtype = DType::BF16;
  return S;
}

} // namespace

TEST(AttentionCost, CausalPrefillIsAboutHalfTheWork) {
  AttentionShape Full = llama(1, 4096, 4096, false);
  AttentionShape Causal = llama(1, 4096, 4096, true);
  EXPECT_DOUBLE_EQ(attentionFlops(Full), 4.0 * 32 * 4096 * 4096 * 128);
  double Ratio = attentionFlops(Causal) / attentionFlops(Full);
  EXPECT_GT(Ratio, 0.5);
  EXPECT_LT(Ratio, 0.501);
  DeviceDesc D;
  EXPECT_LT(flashAttentionTimeUs(D, Causal, 64, 64, 4),
            flashAttentionTimeUs(D, Full, 64, 64, 4));
  EXPECT_LT(mathAttentionTimeUs(D, Causal), mathAttentionTimeUs(D, Full));
}

TEST(AttentionCost, PrefillPrefersFlashDecodeOfFewSequencesMath) {
  DeviceDesc D;
  AttentionShape Prefill = llama(1, 4096, 4096, true);
  EXPECT_LT(flashAttentionTimeUs(D, Prefill, 16, 32, 4),
            mathAttentionTimeUs(D, Prefill));
  // One query per sequence: the flash tile's 16 rows hold 4 real ones on
  // B * Hkv = 8 CTAs; attn_math runs a CTA per query row.
  AttentionShape Decode = llama(1, 1, 4096, true);
  EXPECT_LT(mathAttentionTimeUs(D, Decode),
            flashAttentionTimeUs(D, Decode, 16, 64, 4));
  // Longer contexts cost more.
  EXPECT_LT(mathAttentionTimeUs(D, llama(1, 1, 1024, true)),
            mathAttentionTimeUs(D, Decode));
}

TEST(AttentionCost, WhatCannotRunIsInfinite) {
  DeviceDesc D;
  AttentionShape S = llama(1, 16, 4096, true);
  // 64 x 64 fp32 tiles at head dimension 512 need more than 227 KB.
  S.D = 512;
  EXPECT_TRUE(std::isinf(flashAttentionTimeUs(D, S, 64, 64, 4)));
  EXPECT_TRUE(std::isfinite(flashAttentionTimeUs(D, S, 16, 32, 4)));
  EXPECT_TRUE(std::isinf(flashAttentionTimeUs(D, S, 0, 64, 4)));
  S.Hkv = 5; // 32 query heads are not a multiple of 5 kv heads
  EXPECT_TRUE(std::isinf(mathAttentionTimeUs(D, S)));
  // An empty batch is a launch.
  AttentionShape E = llama(0, 1, 4096, true);
  EXPECT_DOUBLE_EQ(mathAttentionTimeUs(D, E), D.LaunchUs);
}

TEST(AttentionCost, TensorCoreTiles) {
  DeviceDesc D;
  // Prefill is compute-bound: the tensor-core tile beats the CUDA-core one
  // of the same shape, and a tile of several warps beats one warp's, whose
  // CTAs copy every key tile four times as often.
  AttentionShape Prefill = llama(1, 4096, 4096, true);
  double Mma = flashAttentionTimeUs(D, Prefill, 64, 64, 4, 1, true);
  EXPECT_LT(Mma, flashAttentionTimeUs(D, Prefill, 64, 64, 4) / 4);
  EXPECT_LT(Mma, flashAttentionTimeUs(D, Prefill, 16, 64, 1, 1, true));
  // Decode splits the keys as the CUDA-core tiles do.
  AttentionShape Decode = llama(1, 1, 4096, true);
  EXPECT_LT(flashAttentionTimeUs(D, Decode, 16, 64, 1, 16, true),
            flashAttentionTimeUs(D, Decode, 16, 64, 1, 1, true));
  // What the template does not take: f32, D = 40, 48 rows on one warp.
  AttentionShape F32 = Prefill;
  F32.Dtype = DType::F32;
  EXPECT_TRUE(std::isinf(flashAttentionTimeUs(D, F32, 64, 64, 4, 1, true)));
  AttentionShape Odd = Prefill;
  Odd.D = 40;
  EXPECT_TRUE(std::isinf(flashAttentionTimeUs(D, Odd, 64, 64, 4, 1, true)));
  EXPECT_TRUE(std::isinf(flashAttentionTimeUs(D, Prefill, 48, 64, 1, 1, true)));
}

TEST(AttentionCost, KeyWarpsStreamWholeStages) {
  DeviceDesc D;
  AttentionShape Decode = llama(1, 1, 4096, true);
  // 16 rows on 4 warps splitting the keys: a valid tile with stages of 128
  // keys; 3 warps cannot share 16 rows.
  EXPECT_TRUE(
      std::isfinite(flashAttentionTimeUs(D, Decode, 16, 32, 4, 8, true)));
  EXPECT_TRUE(std::isinf(flashAttentionTimeUs(D, Decode, 16, 32, 3, 8, true)));
}

TEST(AttentionCost, AnAdditiveMaskIsReadToo) {
  // A decode step reads its mask beside the caches: a padding mask
  // [B, 1, 1, Skv] costs a little, a per-head f32 one more; the flops are
  // those of the unmasked attention.
  DeviceDesc D;
  AttentionShape Plain = llama(16, 1, 4096, true);
  AttentionShape Pad = Plain;
  Pad.HasMask = true;
  Pad.MaskDtype = DType::F32;
  Pad.MaskB = 16;
  EXPECT_EQ(Pad.maskElements(), 16 * 4096);
  AttentionShape Heads = Pad;
  Heads.MaskH = 32;
  EXPECT_DOUBLE_EQ(attentionFlops(Pad), attentionFlops(Plain));
  // The tensor-core tiles stream the caches (the SIMT one is bound by its
  // arithmetic: the mask changes nothing there).
  for (int Splits : {1, 8}) {
    double P = flashAttentionTimeUs(D, Plain, 16, 32, 4, Splits, true);
    double M = flashAttentionTimeUs(D, Pad, 16, 32, 4, Splits, true);
    double H = flashAttentionTimeUs(D, Heads, 16, 32, 4, Splits, true);
    EXPECT_GT(M, P) << Splits;
    EXPECT_GT(H, M) << Splits;
    EXPECT_GE(flashAttentionTimeUs(D, Heads, 16, 64, 4, Splits),
              flashAttentionTimeUs(D, Plain, 16, 64, 4, Splits));
  }
  EXPECT_GT(mathAttentionTimeUs(D, Heads), mathAttentionTimeUs(D, Plain));
}

TEST(AttentionCost, WgmmaTiles) {
  DeviceDesc D;
  // Causal 4096 prefill: wgmma from shared memory beats the mma.sync tiles,
  // and stays above the time its useful flops take at the bf16 peak.
  AttentionShape Prefill = llama(1, 4096, 4096, true);
  double Wg = wgAttentionTimeUs(D, Prefill, 128, 128, 2);
  EXPECT_TRUE(std::isfinite(Wg));
  EXPECT_LT(Wg, flashAttentionTimeUs(D, Prefill, 128, 64, 8, 1, true));
  EXPECT_GT(Wg, attentionFlops(Prefill) / (D.PeakBf16Tflops * 1e6));
  // Overlapping the softmax with the previous p v hides more of it.
  double Ov = wgAttentionTimeUs(D, Prefill, 128, 128, 2, true);
  EXPECT_LT(Ov, Wg);
  // Pingpong hides the softmax under the other consumer's products, and
  // persistent CTAs then hide each query tile's fill and drain; without
  // pingpong a persistent CTA is slower (what an H200 measured: 289, 276,
  // 273 and 319 us).
  double PP = wgAttentionTimeUs(D, Prefill, 128, 128, 2, true, true);
  double PPP = wgAttentionTimeUs(D, Prefill, 128, 128, 2, true, true, true);
  double P = wgAttentionTimeUs(D, Prefill, 128, 128, 2, true, false, true);
  EXPECT_LT(PP, Ov);
  EXPECT_LT(PPP, PP);
  EXPECT_GT(P, Ov);
  double PP3 = wgAttentionTimeUs(D, Prefill, 128, 128, 3, true, true, true);
  EXPECT_GT(PP3, attentionFlops(Prefill) / (D.PeakBf16Tflops * 1e6));
  // Twice the keys cost more.
  AttentionShape Longer = llama(1, 4096, 8192, true);
  EXPECT_GT(wgAttentionTimeUs(D, Longer, 128, 128, 2), Wg);
  // What the template does not take: f32, D = 96, BQ = 64, 5 stages, and
  // stages over 227 KB of shared memory.
  AttentionShape F32 = Prefill;
  F32.Dtype = DType::F32;
  EXPECT_TRUE(std::isinf(wgAttentionTimeUs(D, F32, 128, 128, 2)));
  AttentionShape Odd = Prefill;
  Odd.D = 96;
  EXPECT_TRUE(std::isinf(wgAttentionTimeUs(D, Odd, 128, 128, 2)));
  EXPECT_TRUE(std::isinf(wgAttentionTimeUs(D, Prefill, 64, 128, 2)));
  EXPECT_TRUE(std::isinf(wgAttentionTimeUs(D, Prefill, 128, 64, 5)));
  EXPECT_TRUE(std::isinf(wgAttentionTimeUs(D, Prefill, 128, 128, 4)));
  // An empty batch is a launch.
  AttentionShape E = llama(0, 4096, 4096, true);
  EXPECT_DOUBLE_EQ(wgAttentionTimeUs(D, E, 128, 128, 2), D.LaunchUs);
  // The gallery's masked prefill: an f32 mask per query. The 64-key tiles
  // copy it by TMA and beat the 128-key ones, which read each score's mask
  // element from global memory; a mask broadcast over the queries is
  // staged by the producer's warps instead, slower still.
  AttentionShape M = llama(1, 2048, 4096, false);
  M.Hq = 16;
  M.Hkv = 4;
  M.HasMask = true;
  M.MaskDtype = DType::F32;
  M.MaskB = M.MaskH = 1;
  M.MaskSq = 2048;
  EXPECT_TRUE(wgAttentionMaskByTma(M, 128, 64, 2));
  EXPECT_FALSE(wgAttentionMaskByTma(M, 128, 128, 2));
  double Tma = wgAttentionTimeUs(D, M, 128, 64, 2, true);
  EXPECT_LT(Tma, wgAttentionTimeUs(D, M, 128, 128, 2, true) / 2);
  AttentionShape Pad = M;
  Pad.MaskSq = 1;
  EXPECT_FALSE(wgAttentionMaskByTma(Pad, 128, 64, 2));
  EXPECT_TRUE(wgAttentionStagesMask(Pad, 128, 64, 2));
  EXPECT_GT(wgAttentionTimeUs(D, Pad, 128, 64, 2, true), 2 * Tma);
}
