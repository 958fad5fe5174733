//===- AttentionReferenceTest.cpp - fp64 reference of attention -----------===//
#include "mtsched/Reference/Interpreter.h"
#include "gtest/gtest.h"
#include <cmath>
#include <limits>
#include <vector>

using namespace mtsched;

namespace {

/// An f32 attention of B batches, Hq query heads over Hkv kv heads, Sq
/// queries, Skv keys and head dimension D.
AttentionShape shape(int64_t B, int64_t Hq, int64_t Hkv, int64_t Sq,
                     int64_t Skv, int64_t D, bool Causal, double Scale) {
  AttentionShape S;
  S.B = B;
  S.Hq = Hq;
  S.Hkv = Hkv;
  S.Sq = Sq;
  S.Skv = Skv;
  S.D = D;
  S.Causal = Causal;
  S.Scale = Scale;
  S.Dtype = DType::F32;
  return S;
}

/// B = 1, Hq = 4, Hkv = 2, Sq = 2, Skv = 3, D = 2: query heads 0 and 1 read
/// kv head 0, heads 2 and 3 kv head 1.
AttentionShape small(bool Causal) { return shape(1, 4, 2, 2, 3, 2, Causal, 1); }

} // namespace

TEST(AttentionReference, EqualScoresAverageTheVisibleValues) {
  AttentionShape S = small(/*Causal=*/true);
  std::vector<double> Q(4 * 2 * 2, 0.0), K(2 * 3 * 2, 0.5), V(2 * 3 * 2);
  for (size_t I = 0; I < V.size(); ++I)
    V[I] = double(I);
  double Out[2];
  // Head 0, query 0: end-aligned, it sees keys 0 and 1 of kv head 0.
  attentionReferenceRow(S, Q.data(), K.data(), V.data(), 0, Out);
  EXPECT_DOUBLE_EQ(Out[0], (0 + 2) / 2.0);
  EXPECT_DOUBLE_EQ(Out[1], (1 + 3) / 2.0);
  // Head 0, query 1 sees all three keys.
  attentionReferenceRow(S, Q.data(), K.data(), V.data(), 1, Out);
  EXPECT_DOUBLE_EQ(Out[0], (0 + 2 + 4) / 3.0);
  // Head 3 (row 7, its query 1) reads kv head 1: values 6..11.
  attentionReferenceRow(S, Q.data(), K.data(), V.data(), 7, Out);
  EXPECT_DOUBLE_EQ(Out[0], (6 + 8 + 10) / 3.0);
  EXPECT_DOUBLE_EQ(Out[1], (7 + 9 + 11) / 3.0);
  // Without the mask query 0 sees every key too.
  attentionReferenceRow(small(false), Q.data(), K.data(), V.data(), 0, Out);
  EXPECT_DOUBLE_EQ(Out[0], (0 + 2 + 4) / 3.0);
}

TEST(AttentionReference, ScaledSoftmaxWeights) {
  AttentionShape S = small(/*Causal=*/false);
  S.Scale = 0.5;
  std::vector<double> Q(4 * 2 * 2, 0.0), K(2 * 3 * 2, 0.0), V(2 * 3 * 2, 0.0);
  Q[0] = 2; // head 0, query 0: q = (2, 0)
  K[2] = 1; // kv head 0, key 1: k = (1, 0), score 2 * 0.5 = 1
  V[2] = 1; // its value (1, 0)
  double Out[2];
  attentionReferenceRow(S, Q.data(), K.data(), V.data(), 0, Out);
  double E = std::exp(1.0);
  EXPECT_NEAR(Out[0], E / (E + 2), 1e-15);
  EXPECT_DOUBLE_EQ(Out[1], 0);
}

TEST(AttentionReference, AHeadRowReadsOnlyItsHeadsVisibleKeys) {
  // Two batches, grouped queries, causal with more keys than queries: the
  // row from its query and its kv head's visible keys equals the row from
  // the whole tensors, and kvHeadOf names the head attentionReferenceRow
  // reads.
  AttentionShape S = shape(/*B=*/2, /*Hq=*/4, /*Hkv=*/2, /*Sq=*/3, /*Skv=*/5,
                           /*D=*/4, /*Causal=*/true, /*Scale=*/0.5);
  std::vector<double> Q(S.B * S.Hq * S.Sq * S.D), K(S.B * S.Hkv * S.Skv * S.D),
      V(K.size());
  for (size_t I = 0; I < Q.size(); ++I)
    Q[I] = std::sin(0.7 * double(I));
  for (size_t I = 0; I < K.size(); ++I) {
    K[I] = std::cos(0.3 * double(I));
    V[I] = std::sin(1.3 * double(I) + 0.2);
  }
  EXPECT_EQ(S.kvHeadOf(0), 0);
  EXPECT_EQ(S.kvHeadOf(2 * S.Sq), 1);            // head 2 of batch 0
  EXPECT_EQ(S.kvHeadOf(S.Hq * S.Sq + S.Sq), 2);  // head 1 of batch 1
  EXPECT_EQ(S.kvHeadOf(2 * S.Hq * S.Sq - 1), 3); // the last row
  for (int64_t R = 0; R < S.B * S.Hq * S.Sq; ++R) {
    double Whole[4], Head[4];
    attentionReferenceRow(S, Q.data(), K.data(), V.data(), R, Whole);
    int64_t Base = S.kvHeadOf(R) * S.Skv * S.D;
    int64_t Seen = (S.lastKey(R % S.Sq) + 1) * S.D;
    // Only the visible keys: the rest of the head would be poison.
    std::vector<double> Kh(K.begin() + Base, K.begin() + Base + Seen),
        Vh(V.begin() + Base, V.begin() + Base + Seen);
    attentionReferenceHeadRow(S, &Q[R * S.D], Kh.data(), Vh.data(), R, Head);
    for (int X = 0; X < 4; ++X)
      EXPECT_EQ(Head[X], Whole[X]) << R << " " << X;
  }
}

TEST(AttentionReference, AdditiveMaskBroadcastsOverHeadsAndQueries) {
  // A padding-style mask [1, 1, 1, Skv] hides key 1 from every row; a
  // finite mask shifts the scores it is added to.
  AttentionShape S = small(/*Causal=*/false);
  S.HasMask = true;
  S.MaskB = S.MaskH = S.MaskSq = 1;
  std::vector<double> Q(4 * 2 * 2, 0.0), K(2 * 3 * 2, 0.5), V(2 * 3 * 2);
  for (size_t I = 0; I < V.size(); ++I)
    V[I] = double(I);
  const double Inf = std::numeric_limits<double>::infinity();
  std::vector<double> M = {0, -Inf, std::log(3.0)};
  double Out[2];
  // Head 0, query 0: keys 0 and 2 with weights 1 : 3.
  attentionReferenceRow(S, Q.data(), K.data(), V.data(), 0, Out, M.data());
  EXPECT_NEAR(Out[0], (0 + 3 * 4) / 4.0, 1e-12);
  EXPECT_NEAR(Out[1], (1 + 3 * 5) / 4.0, 1e-12);
  // Head 3, query 1 (row 7) reads the same mask row over kv head 1.
  attentionReferenceRow(S, Q.data(), K.data(), V.data(), 7, Out, M.data());
  EXPECT_NEAR(Out[0], (6 + 3 * 10) / 4.0, 1e-12);
  // Together with the causal mask: query 0 sees keys 0 and 1 only, and
  // the additive mask hides key 1.
  S.Causal = true;
  attentionReferenceRow(S, Q.data(), K.data(), V.data(), 0, Out, M.data());
  EXPECT_DOUBLE_EQ(Out[0], 0);
  EXPECT_DOUBLE_EQ(Out[1], 1);
  // A row the mask hides entirely is NaN, as PyTorch's softmax gives.
  std::vector<double> All(3, -Inf);
  attentionReferenceRow(S, Q.data(), K.data(), V.data(), 1, Out, All.data());
  EXPECT_TRUE(std::isnan(Out[0]));
}

TEST(AttentionReference, MaskRowsFollowTheBroadcastDimensions) {
  // Mask [B, 1, Sq, Skv] of a 2-batch, 4-head, 2-query attention: row R of
  // [B, Hq, Sq] reads mask row (b, q), whatever its head.
  AttentionShape S = shape(2, 4, 2, 2, 3, 2, false, 1);
  S.HasMask = true;
  S.MaskB = 2;
  S.MaskH = 1;
  S.MaskSq = 2;
  EXPECT_EQ(S.maskElements(), 2 * 2 * 3);
  EXPECT_EQ(S.maskRowOf(0), 0);     // b 0, h 0, q 0
  EXPECT_EQ(S.maskRowOf(3), 3);     // b 0, h 1, q 1
  EXPECT_EQ(S.maskRowOf(8 + 5), 9); // b 1, h 2, q 1
  S.MaskH = 4;
  EXPECT_EQ(S.maskRowOf(8 + 5), ((1 * 4 + 2) * 2 + 1) * 3);
}
