#include "mtsched/Schedule/FusionHeuristic.h"
#include "gtest/gtest.h"
#include <limits>

using namespace mtsched;

static constexpr double Inf = std::numeric_limits<double>::infinity();

static FusionDecision decide(llvm::StringRef Name, const FusionQuery &Q) {
  auto H = createFusionHeuristic(Name);
  EXPECT_TRUE(bool(H));
  return (*H)->decide(Q);
}

// Unfused best: b (10 + epilogue 4 = 14). Fused best: a at 12.
static FusionQuery query(double Threshold = 1.0) {
  FusionQuery Q;
  Q.Variants = {{"a", 11, 12}, {"b", 10, 13}, {"ext", 10.5, Inf}};
  Q.EpilogueUs = 4;
  Q.SpeedupThreshold = Threshold;
  return Q;
}

TEST(FusionHeuristicTest, BenchmarkFusesOnlyWhenFaster) {
  FusionDecision D = decide("benchmark", query());
  EXPECT_TRUE(D.Fused);
  EXPECT_EQ(D.Choice, "a");
  // 14 / 12 < 1.2: not enough speedup.
  D = decide("benchmark", query(1.2));
  EXPECT_FALSE(D.Fused);
  EXPECT_EQ(D.Choice, "b");
}

TEST(FusionHeuristicTest, AlwaysAndNever) {
  FusionQuery Q = query(100);
  EXPECT_TRUE(decide("always", Q).Fused);
  FusionDecision D = decide("never", query());
  EXPECT_FALSE(D.Fused);
  EXPECT_EQ(D.Choice, "b");
}

TEST(FusionHeuristicTest, TiesWithinTheToleranceGoToTheFirstListed) {
  // "ext" at 10.05 is within 1% of "late" at 10.0 and listed first, so it
  // wins either way the noise falls; "far" at 10.2 is not tied.
  FusionQuery Q;
  Q.Variants = {{"far", 10.2, Inf}, {"ext", 10.05, Inf}, {"late", 10.0, Inf}};
  Q.TieTolerance = 0.01;
  for (const char *Name : {"benchmark", "cost-model", "always", "never"})
    EXPECT_EQ(decide(Name, Q).Choice, "ext") << Name;
  Q.Variants[1].UnfusedUs = 9.95;
  EXPECT_EQ(decide("benchmark", Q).Choice, "ext");
  // Without a tolerance the fastest wins, however close.
  Q.TieTolerance = 0;
  Q.Variants[1].UnfusedUs = 10.05;
  EXPECT_EQ(decide("benchmark", Q).Choice, "late");
  // Fused variants tie among themselves the same way.
  Q.Variants = {{"a", 20, 10.04}, {"b", 20, 10.0}};
  Q.EpilogueUs = 5;
  Q.TieTolerance = 0.01;
  FusionDecision D = decide("benchmark", Q);
  EXPECT_TRUE(D.Fused);
  EXPECT_EQ(D.Choice, "a");
}

TEST(FusionHeuristicTest, FirstWithinToleranceSkipsUnusableTimes) {
  EXPECT_EQ(firstWithinTolerance({Inf, 10.05, 10.0}, 0.01), 1);
  EXPECT_EQ(firstWithinTolerance({Inf, 10.05, 10.0}, 0), 2);
  EXPECT_EQ(firstWithinTolerance({10.2, 10.0}, 0.01), 1);
  EXPECT_EQ(firstWithinTolerance({Inf, Inf}, 0.01), -1);
  EXPECT_EQ(firstWithinTolerance({}, 0.01), -1);
}

TEST(FusionHeuristicTest, NoUsableVariantPicksTheFirstUnfused) {
  FusionQuery Q;
  Q.Variants = {{"a", Inf, Inf}, {"b", Inf, Inf}};
  for (const char *Name : {"benchmark", "cost-model", "always", "never"}) {
    FusionDecision D = decide(Name, Q);
    EXPECT_FALSE(D.Fused) << Name;
    EXPECT_EQ(D.Choice, "a") << Name;
  }
}

TEST(FusionHeuristicTest, WhatEachMeasures) {
  auto Bench = createFusionHeuristic("benchmark");
  auto Cost = createFusionHeuristic("cost-model");
  auto Never = createFusionHeuristic("never");
  ASSERT_TRUE(Bench && Cost && Never);
  EXPECT_TRUE((*Bench)->needsMeasuredFusedTimes());
  EXPECT_FALSE((*Cost)->needsMeasuredFusedTimes());
  EXPECT_TRUE((*Cost)->considersFusion());
  EXPECT_FALSE((*Never)->considersFusion());
}

TEST(FusionHeuristicTest, UnknownNameListsTheKnownOnes) {
  auto H = createFusionHeuristic("greedy");
  ASSERT_FALSE(bool(H));
  EXPECT_EQ(toString(H.takeError()),
            "unknown fusion heuristic 'greedy' (known: benchmark, "
            "cost-model, always, never)");
  EXPECT_EQ(listFusionHeuristics().size(), 4u);
}

// The cost-model heuristic weighs predictions against predictions, but a
// node left unfused runs its fastest choice as measured: the heuristic
// decides both, so the autotuner overrides nothing.
TEST(FusionHeuristicTest, CostModelComparesPredictionsPicksMeasured) {
  FusionQuery Q = query();
  // Predicted unfused best 20 + 4 > fused 12: fuse a.
  for (FusionQuery::Variant &V : Q.Variants)
    V.PredictedUnfusedUs = 20;
  FusionDecision D = decide("cost-model", Q);
  EXPECT_TRUE(D.Fused);
  EXPECT_EQ(D.Choice, "a");
  // Predicted unfused best 5 + 4 < 12: unfused, and then the measured
  // winner b, not the predicted one (ext).
  Q.Variants[2].PredictedUnfusedUs = 5;
  D = decide("cost-model", Q);
  EXPECT_FALSE(D.Fused);
  EXPECT_EQ(D.Choice, "b");
  // The benchmark heuristic ignores predictions.
  D = decide("benchmark", Q);
  EXPECT_TRUE(D.Fused);
}

// A horizontal group (select-horizontal) stays merged unless the split form
// is faster by more than the tolerance; `always` merges whatever it costs
// when the merged GEMM can run; `never` never merges.
TEST(FusionHeuristicTest, MergeHorizontal) {
  auto Merge = [](llvm::StringRef Name, double Merged, double Split,
                  unsigned Members = 3) {
    auto H = createFusionHeuristic(Name);
    EXPECT_TRUE(bool(H));
    HorizontalQuery Q;
    Q.Members = Members;
    Q.MergedUs = Merged;
    Q.SplitUs = Split;
    Q.TieTolerance = 0.01;
    return (*H)->mergeHorizontal(Q);
  };
  for (const char *Name : {"benchmark", "cost-model"}) {
    EXPECT_TRUE(Merge(Name, 10, 12)) << Name;
    EXPECT_TRUE(Merge(Name, 10.05, 10)) << Name; // within 1%
    EXPECT_FALSE(Merge(Name, 10.2, 10)) << Name;
    EXPECT_FALSE(Merge(Name, INFINITY, 10)) << Name;
    EXPECT_TRUE(Merge(Name, 10, INFINITY)) << Name;
    EXPECT_FALSE(Merge(Name, 1, 10, 1)) << Name; // a group of one
  }
  EXPECT_TRUE(Merge("always", 20, 10));
  EXPECT_FALSE(Merge("always", INFINITY, 10));
  EXPECT_FALSE(Merge("never", 1, 10));
}

// A norm (select-prologue) runs in its readers' prologues unless the split
// form is faster by more than the tolerance; `always` fuses whatever it
// costs when the GEMMs can run the prologue; `never` never fuses.
TEST(FusionHeuristicTest, FusePrologue) {
  auto Fuse = [](llvm::StringRef Name, double Fused, double Split,
                 unsigned Readers = 1) {
    auto H = createFusionHeuristic(Name);
    EXPECT_TRUE(bool(H));
    PrologueQuery Q;
    Q.Readers = Readers;
    Q.FusedUs = Fused;
    Q.SplitUs = Split;
    Q.TieTolerance = 0.01;
    return (*H)->fusePrologue(Q);
  };
  for (const char *Name : {"benchmark", "cost-model"}) {
    EXPECT_TRUE(Fuse(Name, 10, 12)) << Name;
    EXPECT_TRUE(Fuse(Name, 10.05, 10)) << Name; // within 1%
    EXPECT_FALSE(Fuse(Name, 10.2, 10)) << Name;
    EXPECT_FALSE(Fuse(Name, INFINITY, 10)) << Name;
    EXPECT_TRUE(Fuse(Name, 10, 12, 3)) << Name; // Q/K/V split
    EXPECT_FALSE(Fuse(Name, 1, 10, 0)) << Name; // no reader
  }
  EXPECT_TRUE(Fuse("always", 20, 10));
  EXPECT_FALSE(Fuse("always", INFINITY, 10));
  EXPECT_FALSE(Fuse("never", 1, 10));
}

// The recursive fusion search's combination is taken over pass order's only
// when faster by more than the tolerance and by at least the threshold;
// pass order keeps ties; nothing reopened, or an unusable combination, is
// never taken; a heuristic that does not consider fusion never reopens.
TEST(FusionHeuristicTest, ReopenFusion) {
  auto Reopen = [](llvm::StringRef Name, double Greedy, double Searched,
                   double Threshold = 1.0, unsigned Opened = 1) {
    auto H = createFusionHeuristic(Name);
    EXPECT_TRUE(bool(H));
    FusionSearchQuery Q;
    Q.Opened = Opened;
    Q.GreedyUs = Greedy;
    Q.SearchedUs = Searched;
    Q.SpeedupThreshold = Threshold;
    Q.TieTolerance = 0.01;
    return (*H)->reopenFusion(Q);
  };
  for (const char *Name : {"benchmark", "cost-model", "always"}) {
    EXPECT_TRUE(Reopen(Name, 24.3, 20.2)) << Name;
    EXPECT_FALSE(Reopen(Name, 10.05, 10)) << Name; // within 1%: pass order
    EXPECT_FALSE(Reopen(Name, 10, 12)) << Name;
    EXPECT_TRUE(Reopen(Name, 24.3, 20.2, 1.2)) << Name;
    EXPECT_FALSE(Reopen(Name, 24.3, 20.2, 1.21)) << Name;
    EXPECT_FALSE(Reopen(Name, 24.3, INFINITY)) << Name;
    EXPECT_TRUE(Reopen(Name, INFINITY, 20.2)) << Name;
    EXPECT_FALSE(Reopen(Name, 24.3, 20.2, 1.0, 0)) << Name;
  }
  EXPECT_FALSE(Reopen("never", 24.3, 20.2));
}
