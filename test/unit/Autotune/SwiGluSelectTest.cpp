//===- SwiGluSelectTest.cpp - Merged or split SwiGLU ----------------------===//
#include "mtsched/Autotune/SwiGluSelect.h"
#include "gtest/gtest.h"
#include <limits>

using namespace mtsched;

namespace {

constexpr double Inf = std::numeric_limits<double>::infinity();

TEST(SwiGluSelect, MergedStaysWithinTheTieTolerance) {
  // Two H100 runs of the same decode MLP: split ahead by 0.07%, then behind.
  EXPECT_TRUE(keepMergedSwiGlu(47.546, 47.513, 0.01));
  EXPECT_TRUE(keepMergedSwiGlu(47.491, 47.618, 0.01));
  EXPECT_TRUE(keepMergedSwiGlu(48.0, 48.0, 0.01));
  // Split faster by more than the tolerance, or the tolerance off.
  EXPECT_FALSE(keepMergedSwiGlu(49.0, 48.0, 0.01));
  EXPECT_FALSE(keepMergedSwiGlu(47.546, 47.513, 0));
  EXPECT_TRUE(keepMergedSwiGlu(47.513, 47.546, 0));
}

TEST(SwiGluSelect, AFailedFormNeverStays) {
  EXPECT_FALSE(keepMergedSwiGlu(Inf, 651.6, 0.01));
  EXPECT_TRUE(keepMergedSwiGlu(48.3, Inf, 0.01));
  EXPECT_FALSE(keepMergedSwiGlu(Inf, Inf, 0.01));
}

TEST(SwiGluSelect, TheFormFlagOverridesTheTimes) {
  // The Llama-3-70B prefill times of 2026-11-29: the split form faster.
  EXPECT_FALSE(keepMergedSwiGlu(2675.2, 2486.8, 0.01));
  EXPECT_TRUE(keepMergedSwiGlu(2675.2, 2486.8, 0.01, SwiGluForm::Merged));
  EXPECT_FALSE(keepMergedSwiGlu(606.6, 642.4, 0.01, SwiGluForm::Split));
  // A merged form none of whose choices ran cannot be forced.
  EXPECT_FALSE(keepMergedSwiGlu(Inf, 2486.8, 0.01, SwiGluForm::Merged));
  EXPECT_TRUE(keepMergedSwiGlu(606.6, Inf, 0.01, SwiGluForm::Merged));
}

} // namespace
