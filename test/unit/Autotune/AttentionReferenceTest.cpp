//===- AttentionReferenceTest.cpp - fp64 reference of attention -----------===//
#include "mtsched/Autotune/Interpreter.h"
#include "gtest/gtest.h"
#include <cmath>
#include <vector>

using namespace mtsched;

namespace {

/// B = 1, Hq = 4, Hkv = 2, Sq = 2, Skv = 3, D = 2: query heads 0 and 1 read
/// kv head 0, heads 2 and 3 kv head 1.
AttentionShape small(bool Causal) {
  AttentionShape S;
  S.B = 1;
  S.Hq = 4;
  S.Hkv = 2;
  S.Sq = 2;
  S.Skv = 3;
  S.D = 2;
  S.Causal = Causal;
  S.Scale = 1;
  S.Dtype = DType::F32;
  return S;
}

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
