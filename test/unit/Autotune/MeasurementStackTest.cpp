// The measurement stack on its own, with a counting fake benchmarker and
// one rank: the memo answers a workload measured before, a degraded run
// measures nothing, --prune-top-k ranks by the cost model it is given, and
// the backend hears which choices will be measured (so it compiles only
// those) without a lazy backend being created for it, and a lazy backend
// is waited for (waitIdle) only once it exists.
#include "mtsched/Autotune/ChoiceMeasurer.h"
#include "mtsched/Autotune/LazyBenchmarker.h"
#include "mtsched/IR/Parser.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"

using namespace mtsched;

namespace {

class CountingBenchmarker : public Benchmarker {
public:
  llvm::StringRef getBackendName() const override { return "sim"; }
  Measurement measure(const MultiTemplateBufferNode &, const Workload &,
                      const Choice &C, bool) override {
    ++Calls;
    return Measurement{ChoiceStatus::Ok, C.Name == "a" ? 2.0004 : 3.0, ""};
  }
  Measurement measureEpilogue(const MultiTemplateBufferNode &,
                              const Workload &) override {
    ++Calls;
    return Measurement{ChoiceStatus::Ok, 1, ""};
  }
  void expectChoices(const MultiTemplateBufferNode &,
                     const std::vector<bool> &K) override {
    Kept = K;
    ++Hints;
  }
  void waitIdle() override { ++Waits; }
  unsigned Calls = 0, Hints = 0, Waits = 0;
  std::vector<bool> Kept;
};

/// Predicts `b` faster than `a`, the opposite of the roofline's tie (program
/// order), so a pruning decision shows which model was asked.
class FakePredictor : public TimePredictor {
public:
  double choiceUs(const Workload &, const Choice &C, bool) const override {
    ++Calls;
    return C.Name == "b" ? 1.0 : 5.0;
  }
  double epilogueUs(const Workload &) const override { return 0; }
  double chainUs(const EpilogueDesc &) const override { return 0; }
  mutable unsigned Calls = 0;
};

const char *IR = R"(graph @g(%x: bf16[64,64], %w: bf16[64,64]) {
  %p = multi_template_buffer matmul(%x, %w) choices [a, b] : bf16[64,64]
  %q = multi_template_buffer matmul(%x, %w) choices [a, b] : bf16[64,64]
  return %p, %q
}
)";

struct Stack {
  explicit Stack(std::unique_ptr<TimePredictor> Given = nullptr,
                 unsigned PruneTopK = 0)
      : Opts(options(PruneTopK)), Group(1), Comm(Group.get(0)),
        Ranks(Opts, *Comm, {}), Store(Opts),
        Model(Given ? std::move(Given) : createRooflinePredictor(Opts.Device)),
        Measurer(Opts, Bench, *Model, Ranks, Store, Counters) {
    SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(IR, "t.mir"),
                          llvm::SMLoc());
    M = parseModule(SM);
  }
  MultiTemplateBufferNode &node(llvm::StringRef Name) {
    for (const std::unique_ptr<Node> &N : M->getGraphs().front()->getNodes())
      if (N->getName() == Name)
        return *llvm::cast<MultiTemplateBufferNode>(N.get());
    llvm_unreachable("no such node");
  }
  static AutotuneOptions options(unsigned PruneTopK) {
    AutotuneOptions O;
    O.PruneTopK = PruneTopK;
    return O;
  }
  llvm::SourceMgr SM;
  std::unique_ptr<Module> M;
  AutotuneOptions Opts;
  ThreadGroup Group;
  std::unique_ptr<Communicator> Comm;
  RankAgreement Ranks;
  MeasurementStore Store;
  CountingBenchmarker Bench;
  std::unique_ptr<TimePredictor> Model;
  RunResult Counters;
  ChoiceMeasurer Measurer;
};

TEST(MeasurementStackTest, TheMemoAnswersAWorkloadMeasuredBefore) {
  Stack S;
  ASSERT_TRUE(S.M);
  const Graph &G = *S.M->getGraphs().front();
  ChoiceMeasurer::NodeState NS;
  MultiTemplateBufferNode &P = S.node("p");
  std::vector<AgreedMeasurement> T =
      S.Measurer.measureChoices(P, describeNode(*S.M, G, P), 0, false, {}, NS);
  ASSERT_EQ(T.size(), 2u);
  EXPECT_EQ(T[0].Status, ChoiceStatus::Ok);
  // Agreed times are kept to the nanosecond.
  EXPECT_EQ(T[0].Us, 2.0);
  EXPECT_EQ(T[1].Us, 3.0);
  EXPECT_EQ(S.Bench.Calls, 2u);
  // Same workload on another node: nothing is measured again.
  MultiTemplateBufferNode &Q = S.node("q");
  T = S.Measurer.measureChoices(Q, describeNode(*S.M, G, Q), 0, false, {}, NS);
  EXPECT_EQ(S.Bench.Calls, 2u);
  EXPECT_EQ(S.Counters.MemoHits, 2u);
  EXPECT_EQ(T[1].Us, 3.0);
  EXPECT_FALSE(NS.Missing || NS.Unmeasured);
}

TEST(MeasurementStackTest, ADegradedRunMeasuresNothing) {
  Stack S;
  ASSERT_TRUE(S.M);
  const Graph &G = *S.M->getGraphs().front();
  S.Ranks.degrade("the pre-sync failed");
  ChoiceMeasurer::NodeState NS;
  MultiTemplateBufferNode &P = S.node("p");
  std::vector<AgreedMeasurement> T =
      S.Measurer.measureChoices(P, describeNode(*S.M, G, P), 0, false, {}, NS);
  EXPECT_EQ(S.Bench.Calls, 0u);
  EXPECT_TRUE(NS.Unmeasured);
  EXPECT_EQ(T[0].Status, ChoiceStatus::Skipped);
}

// The backend is created on the first measurement only; a backend that
// cannot be created fails every measurement and says why.
TEST(MeasurementStackTest, TheBackendIsCreatedOnFirstUse) {
  Stack S;
  ASSERT_TRUE(S.M);
  const Graph &G = *S.M->getGraphs().front();
  MultiTemplateBufferNode &P = S.node("p");
  Workload W = describeNode(*S.M, G, P);
  unsigned Before = LazyBenchmarker::getCreatedCount();
  LazyBenchmarker Lazy("sim", "v", [] {
    return llvm::Expected<std::unique_ptr<Benchmarker>>(
        std::make_unique<CountingBenchmarker>());
  });
  EXPECT_FALSE(Lazy.isCreated());
  EXPECT_EQ(Lazy.getBackendName(), "sim");
  EXPECT_EQ(LazyBenchmarker::getCreatedCount(), Before);
  // CountingBenchmarker is unversioned, not "v": the identity the cache
  // keys used would be wrong, so it is refused.
  Measurement M = Lazy.measure(P, W, P.getChoices()[0], false);
  EXPECT_EQ(M.Status, ChoiceStatus::Failed);
  EXPECT_NE(Lazy.getSetupError().find("announced version 'v'"),
            std::string::npos);
  LazyBenchmarker Good("sim", "unversioned", [] {
    return llvm::Expected<std::unique_ptr<Benchmarker>>(
        std::make_unique<CountingBenchmarker>());
  });
  M = Good.measure(P, W, P.getChoices()[0], false);
  EXPECT_EQ(M.Status, ChoiceStatus::Ok);
  EXPECT_TRUE(Good.isCreated());
  EXPECT_TRUE(Good.getSetupError().empty());
  EXPECT_EQ(LazyBenchmarker::getCreatedCount(), Before + 1);
  LazyBenchmarker Bad("cuda", "unversioned", [] {
    return llvm::Expected<std::unique_ptr<Benchmarker>>(
        llvm::createStringError(llvm::inconvertibleErrorCode(), "no GPU"));
  });
  M = Bad.measureEpilogue(P, W);
  EXPECT_EQ(M.Status, ChoiceStatus::Failed);
  EXPECT_EQ(M.Message, "no GPU");
  EXPECT_EQ(Bad.getSetupError(), "no GPU");
}

} // namespace

TEST(MeasurementStackTest, PruningRanksByTheGivenPredictor) {
  auto Fake = std::make_unique<FakePredictor>();
  FakePredictor *Seen = Fake.get();
  Stack S(std::move(Fake), /*PruneTopK=*/1);
  ASSERT_TRUE(S.M);
  MultiTemplateBufferNode &P = S.node("p");
  Workload W = describeNode(*S.M, *S.M->getGraphs().front(), P);
  std::vector<std::string> Why = S.Measurer.pruneReasons(P, W);
  ASSERT_EQ(Why.size(), 2u);
  EXPECT_FALSE(Why[0].empty()) << "a, predicted slower, must be pruned";
  EXPECT_TRUE(Why[1].empty()) << "b, predicted faster, must be kept";
  EXPECT_EQ(Seen->Calls, 2u);
}

TEST(MeasurementStackTest, TheBackendHearsWhichChoicesWillBeMeasured) {
  Stack S(std::make_unique<FakePredictor>(), /*PruneTopK=*/1);
  ASSERT_TRUE(S.M);
  const Graph &G = *S.M->getGraphs().front();
  MultiTemplateBufferNode &P = S.node("p");
  Workload W = describeNode(*S.M, G, P);
  ChoiceMeasurer::NodeState NS;
  S.Measurer.measureChoices(P, W, 0, false, {}, NS);
  EXPECT_EQ(S.Bench.Hints, 1u);
  EXPECT_EQ(S.Bench.Kept, (std::vector<bool>{false, true}));
  EXPECT_EQ(S.Bench.Calls, 1u) << "only b is measured";

  // A lazy backend keeps the hint until it exists, and a hint alone never
  // creates it (a fully cached run opens no GPU).
  CountingBenchmarker *Made = nullptr;
  LazyBenchmarker Lazy("sim", "unversioned", [&] {
    auto B = std::make_unique<CountingBenchmarker>();
    Made = B.get();
    return llvm::Expected<std::unique_ptr<Benchmarker>>(std::move(B));
  });
  Lazy.expectChoices(P, {true, false});
  EXPECT_FALSE(Lazy.isCreated());
  Lazy.measure(P, W, P.getChoices()[0], false);
  ASSERT_TRUE(Made);
  EXPECT_EQ(Made->Hints, 1u);
  EXPECT_EQ(Made->Kept, (std::vector<bool>{true, false}));
  Lazy.expectChoices(P, {false, true});
  EXPECT_EQ(Made->Kept, (std::vector<bool>{false, true}));
}

TEST(MeasurementStackTest, ALazyBackendIsWaitedForOnlyOnceItExists) {
  Stack S;
  ASSERT_TRUE(S.M);
  MultiTemplateBufferNode &P = S.node("p");
  Workload W = describeNode(*S.M, *S.M->getGraphs().front(), P);
  CountingBenchmarker *Made = nullptr;
  LazyBenchmarker Lazy("sim", "unversioned", [&] {
    auto B = std::make_unique<CountingBenchmarker>();
    Made = B.get();
    return llvm::Expected<std::unique_ptr<Benchmarker>>(std::move(B));
  });
  // Waiting must not create the backend: a fully cached run that ends
  // opens no GPU.
  Lazy.waitIdle();
  EXPECT_FALSE(Lazy.isCreated());
  Lazy.measure(P, W, P.getChoices()[0], false);
  ASSERT_TRUE(Made);
  EXPECT_EQ(Made->Waits, 0u);
  Lazy.waitIdle();
  EXPECT_EQ(Made->Waits, 1u);
}
