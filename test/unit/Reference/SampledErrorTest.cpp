//===- SampledErrorTest.cpp - Relative error of sampled outputs -----------===//
#include "mtsched/Reference/SampledError.h"
#include "gtest/gtest.h"
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

using namespace mtsched;

namespace {

// Enough samples for many chunks (a chunk is 32K samples).
constexpr int64_t N = (int64_t(1) << 21) + 77;

TEST(SampledError, StridedSamplesThenTheTail) {
  std::vector<std::atomic<int>> Seen(N);
  sampledErrors(N, 3, [&](int64_t I, ErrorSums &S) {
    ++Seen[size_t(I)];
    S.add(1, 1);
  });
  for (int64_t I = 0; I < N; ++I) {
    int Want = (I % 3 == 0) + (I >= N - 16);
    ASSERT_EQ(Seen[size_t(I)].load(), Want) << I;
  }
}

TEST(SampledError, SumsMatchASerialLoop) {
  auto Out = [](int64_t I) { return std::sin(double(I)) + 1e-3; };
  auto Ref = [](int64_t I) { return std::sin(double(I)); };
  ErrorSums Want;
  for (int64_t I = 0; I < N; I += 2)
    Want.add(Out(I), Ref(I));
  for (int64_t I = N - 16; I < N; ++I)
    Want.add(Out(I), Ref(I));
  ErrorSums Got = sampledErrors(
      N, 2, [&](int64_t I, ErrorSums &S) { S.add(Out(I), Ref(I)); });
  EXPECT_NEAR(Got.E2, Want.E2, 1e-9 * Want.E2);
  EXPECT_NEAR(Got.R2, Want.R2, 1e-9 * Want.R2);
  EXPECT_TRUE(Got.Finite);
  EXPECT_NEAR(Got.rel(), Want.rel(), 1e-9);
}

TEST(SampledError, OneNonFiniteOutputAnywhereIsSeen) {
  // A NaN (a poisoned element the kernel never wrote) in a late chunk, and
  // one in the tail only: either fails the whole output.
  for (int64_t Bad : {N - 2000 - (N - 2000) % 4, N - 1}) {
    ErrorSums S = sampledErrors(N, 4, [&](int64_t I, ErrorSums &Sums) {
      Sums.add(I == Bad ? std::numeric_limits<double>::quiet_NaN() : 1.0, 1.0);
    });
    EXPECT_FALSE(S.Finite) << Bad;
  }
}

TEST(SampledError, RelativeErrorAndZeroReferences) {
  ErrorSums S;
  S.add(1.1, 1.0);
  S.add(2.0, 2.0);
  EXPECT_NEAR(S.rel(), 0.1 / std::sqrt(5.0), 1e-12);
  ErrorSums Z; // every reference zero: the absolute error
  Z.add(0.5, 0);
  EXPECT_NEAR(Z.rel(), 0.5, 1e-12);
  EXPECT_EQ(sampledErrors(0, 1, [](int64_t, ErrorSums &) {}).E2, 0);
}

} // namespace
