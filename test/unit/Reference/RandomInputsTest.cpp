//===- RandomInputsTest.cpp - Seeded benchmark inputs ---------------------===//
#include "mtsched/Reference/RandomInputs.h"
#include "mtsched/Reference/Interpreter.h"
#include "gtest/gtest.h"
#include <atomic>
#include <cmath>
#include <set>

using namespace mtsched;

namespace {

// Large enough to be filled by several threads (parallelChunks uses a
// thread per million elements).
constexpr int64_t Big = (int64_t(1) << 22) + 12345;

TEST(RandomInputs, SameSeedAndStreamGiveTheSameValues) {
  std::vector<double> A = randomValues(Big, 7, 3, DType::F32);
  std::vector<double> B = randomValues(Big, 7, 3, DType::F32);
  EXPECT_EQ(A, B);
}

TEST(RandomInputs, AValueDoesNotDependOnHowManyAreDrawn) {
  // A prefix drawn alone (one thread) equals the same prefix of a large
  // draw (many threads): values are a function of the index.
  std::vector<double> Small = randomValues(1000, 7, 3, DType::F32);
  std::vector<double> Large = randomValues(Big, 7, 3, DType::F32);
  ASSERT_EQ(Small.size(), 1000u);
  EXPECT_TRUE(std::equal(Small.begin(), Small.end(), Large.begin()));
}

TEST(RandomInputs, OneValueEqualsItsPlaceInADraw) {
  // The collectives' check draws every rank's values one at a time; the
  // GPU fill writes randomValues(): both must be the same numbers.
  for (DType T : {DType::BF16, DType::F16, DType::F32}) {
    std::vector<double> V = randomValues(Big, 9, 4, T);
    uint64_t Key = randomKey(9, 4);
    for (int64_t I : {int64_t(0), int64_t(1), int64_t(4097), Big - 1})
      EXPECT_EQ(randomValueAt(Key, I, T), V[size_t(I)]) << I;
  }
  EXPECT_NE(randomBits(randomKey(9, 4), 0), randomBits(randomKey(9, 4), 1));
  EXPECT_NE(randomBits(randomKey(9, 4), 0), randomBits(randomKey(9, 5), 0));
}

TEST(RandomInputs, OneUsableCoreOfManyIsSaid) {
  std::string W = coreBindingWarning(1, 32);
  EXPECT_NE(W.find("1 of the machine's 32 cores"), std::string::npos) << W;
  EXPECT_NE(W.find("--bind-to none"), std::string::npos) << W;
  EXPECT_EQ(coreBindingWarning(1, 1), "");  // a one-core machine
  EXPECT_EQ(coreBindingWarning(8, 32), ""); // several cores: enough
  EXPECT_EQ(coreBindingWarning(32, 32), "");
}

TEST(RandomInputs, StreamsAndSeedsDiffer) {
  std::vector<double> A = randomValues(64, 7, 0, DType::F32);
  EXPECT_NE(A, randomValues(64, 7, 1, DType::F32));
  EXPECT_NE(A, randomValues(64, 8, 0, DType::F32));
}

TEST(RandomInputs, ValuesAreUniformInRangeAndRounded) {
  std::vector<double> V = randomValues(Big, 1, 0, DType::BF16);
  double Sum = 0, Min = 1, Max = -1;
  for (double X : V) {
    ASSERT_GE(X, -1.0);
    ASSERT_LE(X, 1.0);
    ASSERT_EQ(X, roundTo(X, DType::BF16));
    Sum += X;
    Min = std::min(Min, X);
    Max = std::max(Max, X);
  }
  // The mean of 4M uniform draws on [-1, 1) is within 0.01 of zero.
  EXPECT_LT(std::fabs(Sum / double(V.size())), 0.01);
  EXPECT_LT(Min, -0.99);
  EXPECT_GT(Max, 0.99);
  // bf16 holds a few hundred distinct values in [-1, 1); all appear.
  EXPECT_GT(std::set<double>(V.begin(), V.end()).size(), 500u);
}

TEST(RandomInputs, ChunksCoverEveryIndexOnce) {
  for (int64_t N : {int64_t(0), int64_t(1), int64_t(17), Big}) {
    std::vector<std::atomic<int>> Seen(N);
    parallelChunks(N, [&](int64_t B, int64_t E) {
      for (int64_t I = B; I < E; ++I)
        ++Seen[I];
    });
    for (int64_t I = 0; I < N; ++I)
      ASSERT_EQ(Seen[I].load(), 1) << "N=" << N << " I=" << I;
  }
  // Heavy items: one per chunk.
  std::vector<std::atomic<int>> Seen(5);
  parallelChunks(
      5,
      [&](int64_t B, int64_t E) {
        for (int64_t I = B; I < E; ++I)
          ++Seen[I];
      },
      /*MinChunk=*/1);
  for (auto &S : Seen)
    EXPECT_EQ(S.load(), 1);
}

} // namespace
