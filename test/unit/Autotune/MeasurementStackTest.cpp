// The measurement stack on its own, with a counting fake backend (a builder
// and a runner) and one rank: the memo answers a workload measured before,
// a degraded run measures nothing, --prune-top-k ranks by the cost model it
// is given, the builder gets each node once with the choices pruning keeps
// before the runner times one, a choice that failed to build is not run,
// every artifact is waited for when the builds finish, and a lazy backend
// is created only when something is built or timed.
#include "mtsched/Autotune/ChoiceMeasurer.h"
#include "mtsched/Autotune/FaultInjectingBenchmarker.h"
#include "mtsched/Autotune/LazyBenchmarker.h"
#include "mtsched/IR/Parser.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"

using namespace mtsched;

namespace {

/// What the fake backend saw.
struct Counts {
  /// Runner calls, build() calls, artifacts waited for.
  unsigned Calls = 0, Builds = 0, Waits = 0;
  /// The last input built: its node and kept choices.
  std::string BuiltNode;
  std::vector<bool> Kept;
  /// The choices the runner timed, and whether each came built.
  std::vector<std::string> Timed;
  std::vector<bool> CameBuilt;
  /// Choices the builder fails, with this message.
  std::string FailChoice;
};

class CountedArtifact : public Artifact {
public:
  explicit CountedArtifact(Counts &C) : C(C) {}
  std::string wait() const override {
    ++C.Waits;
    return "";
  }

private:
  Counts &C;
};

class CountingBuilder : public Builder {
public:
  explicit CountingBuilder(Counts &C) : C(C) {}
  std::vector<BuiltChoices> build(llvm::ArrayRef<BuildInput> Batch) override {
    ++C.Builds;
    std::vector<BuiltChoices> Out;
    for (const BuildInput &In : Batch) {
      C.BuiltNode = In.N->getName();
      C.Kept = In.Kept;
      BuiltChoices &B = Out.emplace_back(In.N->getChoices().size());
      for (size_t I = 0; I < B.size(); ++I) {
        if (I < In.Kept.size() && !In.Kept[I])
          continue;
        if (In.N->getChoices()[I].Name == C.FailChoice)
          B[I].Error = "no kernel for it";
        else
          B[I].Built = std::make_shared<CountedArtifact>(C);
      }
    }
    return Out;
  }

private:
  Counts &C;
};

class CountingRunner : public Runner {
public:
  explicit CountingRunner(Counts &C) : C(C) {}
  Measurement measure(const MultiTemplateBufferNode &, const Workload &,
                      const Choice &Ch, bool,
                      const BuildResult &Built) override {
    ++C.Calls;
    C.Timed.push_back(Ch.Name);
    C.CameBuilt.push_back(Built.Built != nullptr);
    return Measurement{ChoiceStatus::Ok, Ch.Name == "a" ? 2.0004 : 3.0, ""};
  }
  Measurement measureEpilogue(const MultiTemplateBufferNode &,
                              const Workload &) override {
    ++C.Calls;
    return Measurement{ChoiceStatus::Ok, 1, ""};
  }

private:
  Counts &C;
};

std::unique_ptr<Benchmarker>
countingBackend(Counts &C, std::string Version = "unversioned") {
  return std::make_unique<Benchmarker>("sim", std::move(Version),
                                       std::make_unique<CountingBuilder>(C),
                                       std::make_unique<CountingRunner>(C));
}

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
        Measurer(Opts, Bench->getBuilder(), Bench->getRunner(), *Model, Ranks,
                 Store, Counters) {
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
  Counts Seen;
  std::unique_ptr<Benchmarker> Bench = countingBackend(Seen);
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
  EXPECT_EQ(S.Seen.Calls, 2u);
  // Same workload on another node: nothing is measured again.
  MultiTemplateBufferNode &Q = S.node("q");
  T = S.Measurer.measureChoices(Q, describeNode(*S.M, G, Q), 0, false, {}, NS);
  EXPECT_EQ(S.Seen.Calls, 2u);
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
  EXPECT_EQ(S.Seen.Calls, 0u);
  EXPECT_TRUE(NS.Unmeasured);
  EXPECT_EQ(T[0].Status, ChoiceStatus::Skipped);
}

// The backend is created on the first build or measurement only; a
// backend that cannot be created fails every measurement and says why.
TEST(MeasurementStackTest, TheBackendIsCreatedOnFirstUse) {
  Stack S;
  ASSERT_TRUE(S.M);
  const Graph &G = *S.M->getGraphs().front();
  MultiTemplateBufferNode &P = S.node("p");
  Workload W = describeNode(*S.M, G, P);
  unsigned Before = LazyBackend::getCreatedCount();
  Counts C;
  auto Wrong = std::make_shared<LazyBackend>("sim", "v", [&] {
    return llvm::Expected<std::unique_ptr<Benchmarker>>(countingBackend(C));
  });
  std::unique_ptr<Benchmarker> Lazy = createLazyBenchmarker(Wrong);
  EXPECT_FALSE(Wrong->isCreated());
  EXPECT_EQ(Lazy->getBackendName(), "sim");
  EXPECT_EQ(Lazy->getVersion(), "v");
  EXPECT_EQ(LazyBackend::getCreatedCount(), Before);
  // The counting backend is unversioned, not "v": the identity the cache
  // keys used would be wrong, so it is refused.
  Measurement M =
      Lazy->getRunner().measure(P, W, P.getChoices()[0], false, BuildResult());
  EXPECT_EQ(M.Status, ChoiceStatus::Failed);
  EXPECT_NE(Lazy->getSetupError().find("announced version 'v'"),
            std::string::npos);
  auto GoodBackend = std::make_shared<LazyBackend>("sim", "unversioned", [&] {
    return llvm::Expected<std::unique_ptr<Benchmarker>>(countingBackend(C));
  });
  std::unique_ptr<Benchmarker> Good = createLazyBenchmarker(GoodBackend);
  M = Good->getRunner().measure(P, W, P.getChoices()[0], false, BuildResult());
  EXPECT_EQ(M.Status, ChoiceStatus::Ok);
  EXPECT_TRUE(GoodBackend->isCreated());
  EXPECT_TRUE(Good->getSetupError().empty());
  EXPECT_EQ(LazyBackend::getCreatedCount(), Before + 1);
  std::unique_ptr<Benchmarker> Bad = createLazyBenchmarker(
      std::make_shared<LazyBackend>("cuda", "unversioned", [] {
        return llvm::Expected<std::unique_ptr<Benchmarker>>(
            llvm::createStringError(llvm::inconvertibleErrorCode(), "no GPU"));
      }));
  // A backend that cannot be created builds nothing.
  std::vector<BuiltChoices> Built =
      Bad->getBuilder().build({BuildInput{&P, W, {true, true}}});
  ASSERT_EQ(Built.size(), 1u);
  ASSERT_EQ(Built[0].size(), 2u);
  EXPECT_FALSE(Built[0][0].Built || Built[0][0].failed());
  M = Bad->getRunner().measureEpilogue(P, W);
  EXPECT_EQ(M.Status, ChoiceStatus::Failed);
  EXPECT_EQ(M.Message, "no GPU");
  EXPECT_EQ(Bad->getSetupError(), "no GPU");
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

// A node is built once, with the choices pruning keeps, before its first
// choice is timed; the runner gets each choice's artifact.
TEST(MeasurementStackTest, TheBuilderBuildsWhatPruningKeepsBeforeTheRun) {
  Stack S(std::make_unique<FakePredictor>(), /*PruneTopK=*/1);
  ASSERT_TRUE(S.M);
  const Graph &G = *S.M->getGraphs().front();
  MultiTemplateBufferNode &P = S.node("p");
  Workload W = describeNode(*S.M, G, P);
  ChoiceMeasurer::NodeState NS;
  S.Measurer.measureChoices(P, W, 0, false, {}, NS);
  EXPECT_EQ(S.Seen.Builds, 1u);
  EXPECT_EQ(S.Seen.BuiltNode, "p");
  EXPECT_EQ(S.Seen.Kept, (std::vector<bool>{false, true}));
  EXPECT_EQ(S.Seen.Timed, (std::vector<std::string>{"b"}))
      << "only b is measured";
  EXPECT_EQ(S.Seen.CameBuilt, (std::vector<bool>{true}));
  // Fused, the same build serves: nothing is built again.
  S.Measurer.measureChoices(P, W, 0, true, {}, NS);
  EXPECT_EQ(S.Seen.Builds, 1u);
  EXPECT_EQ(S.Seen.Calls, 2u);

  // A batch built ahead is not built again when the walk times it.
  Stack T(std::make_unique<FakePredictor>(), /*PruneTopK=*/1);
  ASSERT_TRUE(T.M);
  MultiTemplateBufferNode &Q = T.node("q");
  Workload WQ = describeNode(*T.M, *T.M->getGraphs().front(), Q);
  std::vector<BuildInput> Batch;
  T.Measurer.planBuild(Q, WQ, Batch);
  ASSERT_EQ(Batch.size(), 1u);
  EXPECT_EQ(Batch[0].Kept, (std::vector<bool>{false, true}));
  T.Measurer.build(Batch);
  EXPECT_EQ(T.Seen.Builds, 1u);
  T.Measurer.measureChoices(Q, WQ, 0, false, {}, NS);
  EXPECT_EQ(T.Seen.Builds, 1u);
  EXPECT_EQ(T.Seen.Calls, 1u);
  // Planned once per workload: a second node of it replays the first's.
  MultiTemplateBufferNode &P2 = T.node("p");
  T.Measurer.planBuild(P2, describeNode(*T.M, *T.M->getGraphs().front(), P2),
                       Batch);
  EXPECT_EQ(Batch.size(), 1u);
}

// A choice that failed to build is not run: its measurement is the build's
// failure. Finishing the builds waits for every artifact.
TEST(MeasurementStackTest, AChoiceThatFailedToBuildIsNotRun) {
  Stack S;
  ASSERT_TRUE(S.M);
  S.Seen.FailChoice = "a";
  MultiTemplateBufferNode &P = S.node("p");
  Workload W = describeNode(*S.M, *S.M->getGraphs().front(), P);
  ChoiceMeasurer::NodeState NS;
  std::vector<AgreedMeasurement> T =
      S.Measurer.measureChoices(P, W, 0, false, {}, NS);
  ASSERT_EQ(T.size(), 2u);
  EXPECT_EQ(T[0].Status, ChoiceStatus::Failed);
  EXPECT_EQ(T[0].Message, "no kernel for it");
  EXPECT_EQ(T[1].Status, ChoiceStatus::Ok);
  EXPECT_EQ(S.Seen.Timed, (std::vector<std::string>{"b"}));
  EXPECT_EQ(S.Seen.Waits, 0u);
  S.Measurer.finishBuilds();
  EXPECT_EQ(S.Seen.Waits, 1u) << "b's artifact";
  // Forgotten: a node timed later is built anew.
  S.Measurer.finishBuilds();
  EXPECT_EQ(S.Seen.Waits, 1u);
}

// A build-fail fault is a build failure as data; a run-time fault is what
// the runner returns; the backend below sees neither choice.
TEST(MeasurementStackTest, FaultsAreInjectedAtBuildAndAtRun) {
  Stack S;
  ASSERT_TRUE(S.M);
  ASSERT_FALSE(bool(S.Opts.Faults.add("build-fail:choice=a")));
  ASSERT_FALSE(bool(S.Opts.Faults.add("wrong-result:choice=b")));
  Counts C;
  std::unique_ptr<Benchmarker> B =
      createFaultInjectingBenchmarker(countingBackend(C), S.Opts, 0);
  MultiTemplateBufferNode &P = S.node("p");
  Workload W = describeNode(*S.M, *S.M->getGraphs().front(), P);
  std::vector<BuiltChoices> Built =
      B->getBuilder().build({BuildInput{&P, W, {true, true}}});
  ASSERT_EQ(Built.size(), 1u);
  EXPECT_EQ(Built[0][0].Error, "failed to compile (injected fault)");
  EXPECT_FALSE(Built[0][1].failed());
  Measurement M =
      B->getRunner().measure(P, W, P.getChoices()[1], false, Built[0][1]);
  EXPECT_EQ(M.Status, ChoiceStatus::WrongResult);
  EXPECT_EQ(C.Calls, 0u);
}
