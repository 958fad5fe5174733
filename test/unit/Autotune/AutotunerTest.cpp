// The autotuner's cross-rank protocol with a fake backend: decisions
// come from timings max-reduced over ranks, so ranks that measure
// differently still decide identically.
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/IR/Printer.h"
#include "mtsched/Passes/PassManager.h"
#include "mtsched/Schedule/Fusion.h"
#include "mtsched/Support/Diagnostics.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <type_traits>

using namespace mtsched;

namespace {

/// Times from a table: (rank, choice) -> microseconds.
class TableRunner : public Runner {
public:
  TableRunner(int Rank, std::map<std::pair<int, std::string>, double> T)
      : Rank(Rank), Table(std::move(T)) {}
  Measurement measure(const MultiTemplateBufferNode &, const Workload &,
                      const Choice &C, bool Fused,
                      const BuildResult &) override {
    Measurement M;
    auto It = Table.find({Rank, C.Name});
    M.Us = It == Table.end() ? 100 : It->second;
    if (Fused)
      M.Us += 1000; // never worth fusing here
    return M;
  }
  Measurement measureEpilogue(const MultiTemplateBufferNode &,
                              const Workload &) override {
    return Measurement{ChoiceStatus::Ok, 1, ""};
  }

private:
  int Rank;
  std::map<std::pair<int, std::string>, double> Table;
};

const char *IR = R"(graph @g(%x: bf16[64,64]) attributes {world_size = 2} {
  %r = all_reduce(%x) : bf16[64,64]
  %s = custom "my.kernel"(%r) configs [a, b] : bf16[64,64]
  return %s
}
)";

struct RankRun {
  std::string IR;
  RunResult Result;
  /// The pipeline returned an error.
  bool Failed = false;
};

/// Per rank: options to change, and how long to wait before starting.
using RankTweak =
    std::function<void(int Rank, AutotuneOptions &, FusionOptions &,
                       std::chrono::milliseconds &Delay)>;

/// Each rank's benchmarker.
using MakeBenchmarker = std::function<std::unique_ptr<Benchmarker>(int Rank)>;

/// Runs lower + fuse + autotune on two thread ranks: Source's graph, timed
/// by Make's benchmarkers (a TableRunner's by default).
std::vector<RankRun> runTwoRanks(CollectiveMode Mode, RankTweak Tweak = {},
                                 const char *Source = IR,
                                 MakeBenchmarker Make = {}) {
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(Source, "t.mir"),
                        llvm::SMLoc());
  std::unique_ptr<Module> M = parseModule(SM);
  EXPECT_TRUE(M);
  Diagnostics Diags(SM);
  ThreadGroup Group(2);
  // Rank 0 finds one_shot and `a` fastest; rank 1 finds them slowest. The
  // max over ranks favours two_shot and `b`.
  std::map<std::pair<int, std::string>, double> T = {
      {{0, "nccl"}, 20},     {{1, "nccl"}, 20},     {{0, "one_shot"}, 5},
      {{1, "one_shot"}, 30}, {{0, "two_shot"}, 15}, {{1, "two_shot"}, 16},
      {{0, "a"}, 1},         {{1, "a"}, 50},        {{0, "b"}, 10},
      {{1, "b"}, 11}};
  std::vector<RankRun> Runs(2);
  std::vector<std::thread> Threads;
  for (int R = 0; R < 2; ++R)
    Threads.emplace_back([&, R] {
      std::unique_ptr<Module> Copy = M->clone();
      std::unique_ptr<Communicator> Comm = Group.get(R);
      AutotuneOptions Opts;
      Opts.PreSyncTimeout = std::chrono::milliseconds(10000);
      Opts.ChoiceTimeout = std::chrono::milliseconds(10000);
      FusionOptions Fusion;
      std::chrono::milliseconds Delay(0);
      if (Tweak)
        Tweak(R, Opts, Fusion, Delay);
      std::this_thread::sleep_for(Delay);
      // Built once by the caller, as the driver does; a test names a
      // heuristic that exists.
      std::unique_ptr<FusionHeuristic> Heuristic =
          llvm::cantFail(createFusionHeuristic(Fusion.Heuristic));
      Autotuner Session(Opts, Fusion, *Heuristic, Mode, *Comm,
                        Make ? Make(R)
                             : std::make_unique<Benchmarker>(
                                   "sim", "unversioned", createTrivialBuilder(),
                                   std::make_unique<TableRunner>(R, T)),
                        createRooflinePredictor(Opts.Device), Diags, *Copy);
      LoweringOptions Lower;
      Lower.Mode = Mode;
      PassContext Ctx{Copy.get(), &Diags, &llvm::nulls()};
      PassManager PM(PassManagerOptions(), Ctx, llvm::nulls());
      PM.addPass(Mode == CollectiveMode::Immediate
                     ? createImmediateLowerPass(Lower, &Session)
                     : createLowerPass(Lower));
      PM.addPass(createFusePass(FusionOptions()));
      PM.addPass(createAutotunePass(&Session));
      if (llvm::Error E = PM.run(*Copy)) {
        llvm::consumeError(std::move(E));
        Runs[R].Failed = true;
        return;
      }
      Session.finish();
      Runs[R].IR = moduleToString(*Copy);
      Runs[R].Result = Session.getResult();
    });
  for (std::thread &Th : Threads)
    Th.join();
  return Runs;
}

TEST(AutotunerTest, RanksDecideIdenticallyFromMaxReducedTimes) {
  // Every rank times every choice: the slowest rank's time counts.
  std::vector<RankRun> Runs =
      runTwoRanks(CollectiveMode::Deferred,
                  [](int, AutotuneOptions &O, FusionOptions &,
                     std::chrono::milliseconds &) { O.SplitTuning = false; });
  EXPECT_EQ(Runs[0].IR, Runs[1].IR);
  EXPECT_NE(Runs[0].IR.find("decided two_shot"), std::string::npos)
      << Runs[0].IR;
  EXPECT_NE(Runs[0].IR.find("decided b"), std::string::npos) << Runs[0].IR;
  // The IR keeps the max over ranks.
  EXPECT_NE(Runs[0].IR.find("one_shot = 30.0us"), std::string::npos);
  // Each rank still remembers what it measured itself.
  const RunResult &R0 = Runs[0].Result;
  ASSERT_EQ(R0.RankLocalUs.size(), 2u);
  EXPECT_EQ(R0.RankLocalUs[0][0][1], 5);
  EXPECT_EQ(R0.RankLocalUs[1][0][1], 30);
  EXPECT_EQ(R0.RankDecisions[0], R0.RankDecisions[1]);
  EXPECT_EQ(R0.Sync.Count, 1u);
  EXPECT_TRUE(R0.Sync.Ok);
}

// The first pre-sync's cost in two parts, the last arrival's wait the same
// on every rank, and every rank's own cost gathered on rank 0 by finish().
TEST(AutotunerTest, PreSyncCostSplitAndEveryRanksCostReachRankZero) {
  std::vector<RankRun> Runs = runTwoRanks(CollectiveMode::Deferred);
  ASSERT_FALSE(Runs[0].Failed || Runs[1].Failed);
  for (const RankRun &Run : Runs) {
    const SyncResult &S = Run.Result.Sync;
    ASSERT_TRUE(S.Ok);
    EXPECT_GE(S.LastWaitMs, 0);
    EXPECT_GE(S.ExchangeMs, 0);
    EXPECT_DOUBLE_EQ(S.CostMs, S.LastWaitMs + S.ExchangeMs);
  }
  EXPECT_EQ(Runs[0].Result.Sync.LastWaitMs, Runs[1].Result.Sync.LastWaitMs);
  EXPECT_EQ(Runs[0].Result.Sync.RankCostsMs,
            (std::vector<double>{Runs[0].Result.Sync.CostMs,
                                 Runs[1].Result.Sync.CostMs}));
  // Only the reporting rank holds everyone's.
  EXPECT_TRUE(Runs[1].Result.Sync.RankCostsMs.empty());
}

// With the work split, rank 0 times `a` and rank 1 times `b` of the custom
// kernel (each time reaches both ranks), while the collective's choices
// are still timed, and max-reduced, by both.
TEST(AutotunerTest, SplitTuningTimesEachChoiceOnOneRank) {
  std::vector<RankRun> Runs =
      runTwoRanks(CollectiveMode::Deferred,
                  [](int, AutotuneOptions &O, FusionOptions &,
                     std::chrono::milliseconds &) { O.SplitByNode = false; });
  ASSERT_FALSE(Runs[0].Failed || Runs[1].Failed);
  EXPECT_EQ(Runs[0].IR, Runs[1].IR);
  EXPECT_NE(Runs[0].IR.find("decided two_shot"), std::string::npos);
  // a = 1 (rank 0's), b = 11 (rank 1's): a wins.
  EXPECT_NE(Runs[0].IR.find("decided a"), std::string::npos) << Runs[0].IR;
  EXPECT_NE(Runs[0].IR.find("a = 1.0us"), std::string::npos) << Runs[0].IR;
  const RunResult &R0 = Runs[0].Result;
  ASSERT_EQ(R0.RankLocalUs.size(), 2u);
  // Node 1 is the custom kernel: each rank has a local time for its share.
  EXPECT_EQ(R0.RankLocalUs[0][1][0], 1);
  EXPECT_FALSE(std::isfinite(R0.RankLocalUs[0][1][1]));
  EXPECT_FALSE(std::isfinite(R0.RankLocalUs[1][1][0]));
  EXPECT_EQ(R0.RankLocalUs[1][1][1], 11);
}

TEST(AutotunerTest, ImmediateModeSyncsPerCollective) {
  std::vector<RankRun> Runs = runTwoRanks(CollectiveMode::Immediate);
  EXPECT_EQ(Runs[0].IR, Runs[1].IR);
  EXPECT_NE(Runs[0].IR.find("decided two_shot"), std::string::npos);
  EXPECT_EQ(Runs[0].Result.Sync.Count, 1u); // one collective node
  EXPECT_EQ(Runs[0].IR.find("fused_timings"), std::string::npos);
}

TEST(AutotunerTest, FingerprintSeesOrderAndChoices) {
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          R"(graph @g(%x: bf16[8]) attributes {world_size = 2} {
  %a = collective_multi_template_buffer all_reduce(%x) group @world kind all_reduce choices [nccl, one_shot] : bf16[8]
  %b = collective_multi_template_buffer all_reduce(%a) group @world kind all_reduce choices [nccl, two_shot] : bf16[8]
  return %b
}
)",
          "f.mir"),
      llvm::SMLoc());
  std::unique_ptr<Module> M = parseModule(SM);
  ASSERT_TRUE(M);
  const Graph &G = *M->getGraphs()[0];
  auto *A =
      llvm::cast<CollectiveMultiTemplateBufferNode>(G.getNodes()[0].get());
  auto *B =
      llvm::cast<CollectiveMultiTemplateBufferNode>(G.getNodes()[1].get());
  const CollectiveMultiTemplateBufferNode *AB[] = {A, B}, *BA[] = {B, A},
                                          *OnlyA[] = {A};
  EXPECT_EQ(fingerprintCollectives(G, AB), fingerprintCollectives(G, AB));
  EXPECT_NE(fingerprintCollectives(G, AB), fingerprintCollectives(G, BA));
  EXPECT_NE(fingerprintCollectives(G, AB), fingerprintCollectives(G, OnlyA));
}

} // namespace

TEST(AutotunerTest, SkewWithinTheDeadlineIsMeasuredNotAFailure) {
  std::vector<RankRun> Runs = runTwoRanks(
      CollectiveMode::Deferred, [](int R, AutotuneOptions &, FusionOptions &,
                                   std::chrono::milliseconds &Delay) {
        if (R == 1)
          Delay = std::chrono::milliseconds(200);
      });
  ASSERT_FALSE(Runs[0].Failed || Runs[1].Failed);
  EXPECT_EQ(Runs[0].IR, Runs[1].IR);
  const SyncResult &S = Runs[0].Result.Sync;
  EXPECT_TRUE(S.Ok) << S.Reason;
  EXPECT_GE(S.SkewMs, 50); // 200 ms apart, less what rank 0 took to get there
  EXPECT_GE(S.CostMs, 0);
  EXPECT_EQ(S.FallbackNodes, 0u);
  EXPECT_EQ(Runs[0].Result.Warnings.size(), 0u);
}

TEST(AutotunerTest, LateRankIsNamedAndEveryRankFallsBackAlike) {
  std::vector<RankRun> Runs = runTwoRanks(
      CollectiveMode::Deferred, [](int R, AutotuneOptions &O, FusionOptions &,
                                   std::chrono::milliseconds &Delay) {
        O.PreSyncTimeout = std::chrono::milliseconds(50);
        if (R == 1)
          Delay = std::chrono::milliseconds(400);
      });
  ASSERT_FALSE(Runs[0].Failed || Runs[1].Failed);
  EXPECT_EQ(Runs[0].IR, Runs[1].IR);
  for (const RankRun &Run : Runs) {
    const SyncResult &S = Run.Result.Sync;
    EXPECT_FALSE(S.Ok);
    EXPECT_EQ(S.LateRanks, std::vector<int>{1});
    EXPECT_EQ(S.FallbackNodes, 2u);
    ASSERT_EQ(Run.Result.Warnings.size(), 1u);
    EXPECT_NE(Run.Result.Warnings[0].find("rank 1 arrived"), std::string::npos)
        << Run.Result.Warnings[0];
  }
}

TEST(AutotunerTest, RanksWithDifferentFlagsStop) {
  std::vector<RankRun> Runs = runTwoRanks(
      CollectiveMode::Deferred, [](int R, AutotuneOptions &, FusionOptions &F,
                                   std::chrono::milliseconds &) {
        if (R == 1)
          F.Heuristic = "never";
      });
  EXPECT_TRUE(Runs[0].Failed);
  EXPECT_TRUE(Runs[1].Failed);
}

// The heuristic is handed over built, as a reference: an autotuner without
// one, or with a null one, does not compile, so a bad name can only fail
// where the heuristic is built (createFusionHeuristic), never later inside.
template <typename Heuristic, typename = void>
struct ConstructibleWith : std::false_type {};
template <typename Heuristic>
struct ConstructibleWith<
    Heuristic,
    std::void_t<decltype(Autotuner(
        std::declval<const AutotuneOptions &>(),
        std::declval<const FusionOptions &>(), std::declval<Heuristic>(),
        std::declval<CollectiveMode>(), std::declval<Communicator &>(),
        std::declval<std::unique_ptr<Benchmarker>>(),
        std::declval<std::unique_ptr<TimePredictor>>(),
        std::declval<Diagnostics &>(), std::declval<const Module &>()))>>
    : std::true_type {};
template <typename... Args>
constexpr bool AutotunerFrom = std::is_constructible_v<Autotuner, Args...>;

TEST(AutotunerTest, CannotBeBuiltWithoutAHeuristic) {
  static_assert(ConstructibleWith<const FusionHeuristic &>::value);
  static_assert(!ConstructibleWith<std::nullptr_t>::value);
  static_assert(!ConstructibleWith<std::unique_ptr<FusionHeuristic>>::value);
  static_assert(!ConstructibleWith<const FusionHeuristic *>::value);
  static_assert(!ConstructibleWith<std::string>::value);
  // The old signature, a name in FusionOptions and no heuristic.
  static_assert(!AutotunerFrom<
                const AutotuneOptions &, const FusionOptions &, CollectiveMode,
                Communicator &, std::unique_ptr<Benchmarker>,
                std::unique_ptr<TimePredictor>, Diagnostics &, const Module &>);
  // Where a heuristic is made, a bad name is an error listing the known.
  auto H = createFusionHeuristic("sometimes");
  ASSERT_FALSE(static_cast<bool>(H));
  EXPECT_EQ(llvm::toString(H.takeError()),
            "unknown fusion heuristic 'sometimes' (known: benchmark, "
            "cost-model, always, never)");
}

TEST(AutotunerTest, ProtocolFlagsNameWhatRanksMustShare) {
  AutotuneOptions O;
  O.SizeHintsBytes = {16, 1024};
  O.PruneTopK = 3;
  O.SimNoisePct = 2.5;
  O.Seed = 7;
  O.BenchRuns = 4;
  O.WarmupRuns = 1;
  std::string F = protocolFlags(O, FusionOptions(), CollectiveMode::Immediate);
  for (const char *W :
       {"collective-mode=immediate", "fusion-heuristic=benchmark",
        "size-hints-bytes=16,1024", "prune-top-k=3", "sim-noise=2.5", "seed=7",
        "bench-runs=4", "warmup-runs=1", "device=h200(", "max-extra-writes=1",
        "pre-sync-timeout-ms=5000", "agreement-timeout-ms=2000",
        "tie-tolerance=0.01"})
    EXPECT_NE(F.find(W), std::string::npos) << W << " in " << F;
  // No --topology file, no word: flags read as they did before; the same
  // for horizontal fusion, on by default.
  EXPECT_EQ(F.find("topology="), std::string::npos) << F;
  EXPECT_EQ(F.find("horizontal-fusion"), std::string::npos) << F;
  FusionOptions NoHorizontal;
  NoHorizontal.Horizontal = false;
  EXPECT_NE(protocolFlags(O, NoHorizontal, CollectiveMode::Immediate)
                .find(" horizontal-fusion=false "),
            std::string::npos);
  O.TopologyFingerprint = "a:[0,1]{[0,1]}";
  F = protocolFlags(O, FusionOptions(), CollectiveMode::Immediate);
  EXPECT_NE(F.find(" topology=a:[0,1]{[0,1]}"), std::string::npos) << F;
}

// Every flag that changes a measurement stops thread ranks that differ in
// it, as MPI ranks (scripts/test-extra.d/mpi.sh checks the messages).
TEST(AutotunerTest, RanksWithDifferentMeasurementFlagsStop) {
  using Tweak = std::function<void(AutotuneOptions &)>;
  std::vector<std::pair<const char *, Tweak>> Cases = {
      {"seed", [](AutotuneOptions &O) { O.Seed = 1; }},
      {"sim-noise", [](AutotuneOptions &O) { O.SimNoisePct = 1; }},
      {"bench-runs", [](AutotuneOptions &O) { O.BenchRuns = 3; }},
      {"warmup-runs", [](AutotuneOptions &O) { O.WarmupRuns = 0; }},
      {"device", [](AutotuneOptions &O) { O.Device.Name = "other"; }},
      {"device fields", [](AutotuneOptions &O) { O.Device.NumSMs += 1; }},
      {"network fields", [](AutotuneOptions &O) { O.Device.NetGBps = 25; }},
      // One rank read another --topology file than its peer (or none).
      {"topology",
       [](AutotuneOptions &O) {
         O.TopologyFingerprint = "a:[0]{[0]};b:[1]{[1]}";
       }},
  };
  for (auto &[What, Change] : Cases) {
    std::vector<RankRun> Runs = runTwoRanks(
        CollectiveMode::Deferred,
        [&, Change = Change](int R, AutotuneOptions &O, FusionOptions &,
                             std::chrono::milliseconds &) {
          if (R == 1)
            Change(O);
        });
    EXPECT_TRUE(Runs[0].Failed) << What;
    EXPECT_TRUE(Runs[1].Failed) << What;
  }
}

namespace {

/// Records, per node, the choices the builder was asked to build and the
/// unfused choices the runner was asked to time.
struct BuildLog {
  /// The kept choices of each node's last build.
  std::map<std::string, std::vector<bool>> Expected;
  /// (node, choice) timed unfused without being built for that node.
  std::vector<std::string> Unexpected;
  std::set<std::string> Timed;
  /// Each build() call's nodes, in order.
  std::vector<std::vector<std::string>> Batches;
  /// Nodes built after the first measurement.
  std::vector<std::string> Late;
  /// build() calls with a collective in them, and those after the first
  /// measurement.
  unsigned CollectiveCalls = 0, LateCollectiveCalls = 0;
};

class LoggingBuilder : public Builder {
public:
  explicit LoggingBuilder(BuildLog &L) : L(L) {}
  std::vector<BuiltChoices> build(llvm::ArrayRef<BuildInput> Batch) override {
    std::vector<BuiltChoices> Out;
    bool Collective = false;
    L.Batches.emplace_back();
    for (const BuildInput &In : Batch) {
      L.Batches.back().push_back(In.N->getName());
      L.Expected[In.N->getName()] = In.Kept;
      if (!L.Timed.empty())
        L.Late.push_back(In.N->getName());
      Collective |= llvm::isa<CollectiveMultiTemplateBufferNode>(In.N);
      Out.emplace_back(In.N->getChoices().size());
    }
    L.CollectiveCalls += Collective;
    L.LateCollectiveCalls += Collective && !L.Timed.empty();
    return Out;
  }

private:
  BuildLog &L;
};

class LoggingRunner : public Runner {
public:
  explicit LoggingRunner(BuildLog &L) : L(L) {}
  Measurement measure(const MultiTemplateBufferNode &N, const Workload &,
                      const Choice &C, bool Fused,
                      const BuildResult &) override {
    if (!Fused) {
      auto It = L.Expected.find(N.getName());
      size_t I = &C - N.getChoices().data();
      if (It == L.Expected.end() || I >= It->second.size() || !It->second[I])
        L.Unexpected.push_back(N.getName() + " " + C.Name);
      L.Timed.insert(N.getName() + " " + C.Name);
    }
    return Measurement{ChoiceStatus::Ok, 10, ""};
  }
  Measurement measureEpilogue(const MultiTemplateBufferNode &,
                              const Workload &) override {
    return Measurement{ChoiceStatus::Ok, 1, ""};
  }

private:
  BuildLog &L;
};

/// Four GEMMs of four shapes: two whole nodes per rank.
const char *FourGemms =
    R"(graph @g(%x: bf16[64,256], %w1: bf16[256,512], %w2: bf16[512,384], %w3: bf16[384,128], %w4: bf16[128,640]) attributes {world_size = 2} {
  %a = matmul(%x, %w1) : bf16[64,512]
  %b = matmul(%a, %w2) : bf16[64,384]
  %c = matmul(%b, %w3) : bf16[64,128]
  %d = matmul(%c, %w4) : bf16[64,640]
  return %d
}
)";

/// Source on two thread ranks (Set changes their options), built and timed
/// by backends logging into Logs.
std::vector<RankRun> runExpecting(BuildLog (&Logs)[2], const char *Source,
                                  std::function<void(AutotuneOptions &)> Set) {
  return runTwoRanks(
      CollectiveMode::Deferred,
      [Set](int, AutotuneOptions &O, FusionOptions &,
            std::chrono::milliseconds &) { Set(O); },
      Source,
      [&Logs](int R) {
        return std::make_unique<Benchmarker>(
            "sim", "unversioned", std::make_unique<LoggingBuilder>(Logs[R]),
            std::make_unique<LoggingRunner>(Logs[R]));
      });
}

} // namespace

// --split-tuning=nodes measures a node before the walk reaches it; like
// the walk, it first has the builder build the choices pruning keeps, or
// the cuda backend compiles every pruned one too.
TEST(AutotunerTest, NodeSplitBuildsWhatPruningKept) {
  BuildLog Logs[2];
  std::vector<RankRun> Runs =
      runExpecting(Logs, FourGemms, [](AutotuneOptions &O) {
        O.SplitByNode = true;
        O.PruneTopK = 1;
      });
  ASSERT_FALSE(Runs[0].Failed || Runs[1].Failed);
  EXPECT_EQ(Runs[0].IR, Runs[1].IR);
  size_t Pruned = 0;
  for (int R = 0; R < 2; ++R) {
    EXPECT_TRUE(Logs[R].Unexpected.empty())
        << "rank " << R << " timed " << Logs[R].Unexpected.front()
        << " unbuilt";
    // Each rank times the choices of two whole nodes of its own.
    std::set<std::string> Nodes;
    for (const std::string &T : Logs[R].Timed)
      Nodes.insert(T.substr(0, T.find(' ')));
    EXPECT_EQ(Nodes.size(), 2u) << "rank " << R;
    for (const auto &[Node, Kept] : Logs[R].Expected)
      Pruned += size_t(llvm::count(Kept, false));
  }
  // The test means something only if pruning dropped choices.
  EXPECT_GT(Pruned, 0u);
}

/// Three GEMM workloads, %e a second node of %a's.
const char *RepeatedGemm =
    R"(graph @g(%x: bf16[64,256], %y: bf16[64,256], %w1: bf16[256,512], %w2: bf16[512,384], %w3: bf16[384,128]) attributes {world_size = 2} {
  %a = matmul(%x, %w1) : bf16[64,512]
  %b = matmul(%a, %w2) : bf16[64,384]
  %c = matmul(%b, %w3) : bf16[64,128]
  %e = matmul(%y, %w1) : bf16[64,512]
  return %c, %e
}
)";

// The builder gets every node the walk will measure in one batch before the
// first is timed (the cuda backend compiles the next node's kernels
// meanwhile), once per workload, with the choices pruning keeps.
TEST(AutotunerTest, TheWalkBuildsOneBatchBeforeTheFirstTime) {
  BuildLog Logs[2];
  std::vector<RankRun> Runs =
      runExpecting(Logs, RepeatedGemm, [](AutotuneOptions &O) {
        O.SplitTuning = false;
        O.PruneTopK = 1;
      });
  ASSERT_FALSE(Runs[0].Failed || Runs[1].Failed);
  for (int R = 0; R < 2; ++R) {
    const BuildLog &L = Logs[R];
    EXPECT_EQ(L.Batches,
              (std::vector<std::vector<std::string>>{{"a", "b", "c"}}))
        << "rank " << R;
    EXPECT_TRUE(L.Late.empty()) << "rank " << R;
    EXPECT_TRUE(L.Unexpected.empty()) << "rank " << R;
    for (const auto &[Node, Kept] : L.Expected)
      EXPECT_GT(llvm::count(Kept, false), 0) << Node << " was not pruned";
    for (const std::string &T : L.Timed)
      EXPECT_NE(T.substr(0, 2), "e ") << "%e replays %a's times";
  }
}

// Under --split-tuning=nodes each rank builds the nodes it measures, in
// one batch, and nothing the other rank measured.
TEST(AutotunerTest, NodeSplitBuildsOnlyTheRanksOwnNodes) {
  BuildLog Logs[2];
  std::vector<RankRun> Runs = runExpecting(
      Logs, FourGemms, [](AutotuneOptions &O) { O.SplitByNode = true; });
  ASSERT_FALSE(Runs[0].Failed || Runs[1].Failed);
  for (int R = 0; R < 2; ++R) {
    std::set<std::string> Timed;
    for (const std::string &T : Logs[R].Timed)
      Timed.insert(T.substr(0, T.find(' ')));
    ASSERT_EQ(Logs[R].Batches.size(), 1u) << "rank " << R;
    const std::vector<std::string> &Built = Logs[R].Batches.front();
    EXPECT_EQ(std::set<std::string>(Built.begin(), Built.end()), Timed)
        << "rank " << R;
    EXPECT_EQ(Built.size(), 2u) << "rank " << R;
    EXPECT_TRUE(Logs[R].Late.empty()) << "rank " << R;
  }
}

// The collectives over every rank the walk will measure are built once, on
// every rank and before anything is timed (the cuda backend then opens
// NCCL's communicator while it times the GEMMs); a graph without one builds
// none.
TEST(AutotunerTest, CollectivesAreBuiltBeforeAnythingIsTimed) {
  const char *GemmThenAllReduce =
      R"(group @tp = [0, 1]

graph @g(%x: bf16[64,256], %w1: bf16[256,512], %w2: bf16[512,512]) attributes {world_size = 2} {
  %a = matmul(%x, %w1) : bf16[64,512]
  %r = all_reduce(%a) {reduce = "sum", group = "tp"} : bf16[64,512]
  %y = matmul(%r, %w2) : bf16[64,512]
  %s = all_reduce(%y) {reduce = "sum", group = "tp"} : bf16[64,512]
  return %s
}
)";
  for (bool Split : {false, true}) {
    BuildLog Logs[2];
    std::vector<RankRun> Runs =
        runExpecting(Logs, GemmThenAllReduce, [Split](AutotuneOptions &O) {
          O.SplitTuning = Split;
          O.SplitByNode = Split;
        });
    ASSERT_FALSE(Runs[0].Failed || Runs[1].Failed);
    for (int R = 0; R < 2; ++R) {
      EXPECT_EQ(Logs[R].CollectiveCalls, 1u) << "rank " << R;
      EXPECT_EQ(Logs[R].LateCollectiveCalls, 0u) << "rank " << R;
      EXPECT_FALSE(Logs[R].Timed.empty()) << "rank " << R;
    }
  }
  BuildLog Logs[2];
  std::vector<RankRun> Runs =
      runExpecting(Logs, FourGemms, [](AutotuneOptions &) {});
  ASSERT_FALSE(Runs[0].Failed || Runs[1].Failed);
  EXPECT_EQ(Logs[0].CollectiveCalls + Logs[1].CollectiveCalls, 0u);
}

//===----------------------------------------------------------------------===//
// The hierarchical pre-sync decides what the flat one decides
//===----------------------------------------------------------------------===//

namespace {

/// Runs one pre-sync on N thread ranks, flat or hierarchical (hosts of 4
/// from RankHosts); Flags(rank) is each rank's protocol flags. Returns each
/// rank's outcome as a line: the error, or state, reason and bundle.
std::vector<std::string>
preSyncOutcomes(int N, bool Hier, std::function<std::string(int)> Flags) {
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          "graph @g(%x: f32[4,4]) { %y = relu(%x) : f32[4,4] return %y }",
          "t.mir"),
      llvm::SMLoc());
  std::unique_ptr<Module> M = parseModule(SM);
  EXPECT_TRUE(M);
  if (!M)
    return {};
  AutotuneOptions Opts;
  Opts.PreSyncTimeout = std::chrono::milliseconds(5000);
  Opts.AgreementTimeout = std::chrono::milliseconds(5000);
  Opts.PreSyncShape = Hier ? "hier" : "flat";
  for (int R = 0; R < N; ++R)
    Opts.RankHosts.push_back(R / 4);
  ThreadGroup Group(N);
  std::vector<std::string> Lines(static_cast<size_t>(N));
  std::vector<std::thread> Threads;
  for (int R = 0; R < N; ++R)
    Threads.emplace_back([&, R] {
      std::unique_ptr<Communicator> C = Group.get(R);
      PreSyncLevels L;
      L.Hosts = preSyncHosts(Opts, N);
      std::vector<std::unique_ptr<Communicator>> Keep;
      if (!L.Hosts.empty()) {
        L.MyHost = R / 4;
        const std::vector<int> &Mine = L.Hosts[size_t(L.MyHost)];
        Keep.push_back(cantFail(C->createSubgroup(Mine)));
        L.Host = Keep.back().get();
        if (Mine.front() == R) {
          std::vector<int> Leaders;
          for (const std::vector<int> &H : L.Hosts)
            Leaders.push_back(H.front());
          Keep.push_back(cantFail(C->createSubgroup(Leaders)));
          L.Leaders = Keep.back().get();
        }
      }
      PreSyncInput In;
      In.G = M->getGraphs().front().get();
      In.Flags = Flags(R);
      In.Bundle = R == 0 ? "rank zero's entries" : "";
      llvm::Expected<PreSyncOutcome> O =
          runPreSync(*C, Opts, std::move(In), &L);
      Lines[size_t(R)] = O ? std::to_string(int(O->State)) + " '" + O->Reason +
                                 "' '" + O->Bundle + "'"
                           : "error: " + llvm::toString(O.takeError());
    });
  for (std::thread &T : Threads)
    T.join();
  return Lines;
}

} // namespace

TEST(PreSyncHierTest, HostsFromTopologyOrSqrtGroups) {
  AutotuneOptions Opts;
  EXPECT_TRUE(preSyncHosts(Opts, 64).empty()); // auto, below 256
  EXPECT_EQ(preSyncHosts(Opts, 256).size(), 16u);
  // The communicators it needs: each host, then the leaders.
  std::vector<std::vector<int>> Subs =
      preSyncSubgroups(preSyncHosts(Opts, 256));
  ASSERT_EQ(Subs.size(), 17u);
  EXPECT_EQ(Subs[1].front(), 16);
  EXPECT_EQ(Subs.back().size(), 16u);
  EXPECT_EQ(Subs.back()[1], 16);
  EXPECT_TRUE(preSyncSubgroups({}).empty());
  Opts.PreSyncShape = "hier";
  EXPECT_EQ(preSyncHosts(Opts, 64).size(), 8u);
  EXPECT_EQ(preSyncHosts(Opts, 10).size(), 4u); // 3+3+3+1
  Opts.RankHosts = {1, 0, 1, 0};
  std::vector<std::vector<int>> H = preSyncHosts(Opts, 4);
  // Hosts in order of their first rank.
  ASSERT_EQ(H.size(), 2u);
  EXPECT_EQ(H[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(H[1], (std::vector<int>{1, 3}));
  Opts.PreSyncShape = "flat";
  EXPECT_TRUE(preSyncHosts(Opts, 4).empty());
  Opts.PreSyncShape = "auto"; // two hosts: hier at any size
  EXPECT_EQ(preSyncHosts(Opts, 4).size(), 2u);
}

TEST(PreSyncHierTest, SameOutcomeAsFlat) {
  auto Same = [](int) { return std::string("a=1 b=2"); };
  std::vector<std::string> Flat = preSyncOutcomes(8, false, Same);
  std::vector<std::string> Hier = preSyncOutcomes(8, true, Same);
  EXPECT_EQ(Flat, Hier);
  EXPECT_EQ(Hier[5], "0 '' 'rank zero's entries'");
  // A rank on the second host with other flags: the flat agreement's
  // error, on every rank, names it the same way.
  auto Differ = [](int R) {
    return std::string(R == 6 ? "a=1 b=3" : "a=1 b=2");
  };
  Flat = preSyncOutcomes(8, false, Differ);
  Hier = preSyncOutcomes(8, true, Differ);
  EXPECT_EQ(Flat, Hier);
  EXPECT_EQ(Hier[0], "error: ranks 0 and 6 run with different autotuning "
                     "flags: rank 0 has '--b=2', rank 6 has '--b=3'");
  // Inside one host (rank 2, host 0).
  auto DifferHere = [](int R) {
    return std::string(R == 2 ? "a=0 b=2" : "a=1 b=2");
  };
  EXPECT_EQ(preSyncOutcomes(8, false, DifferHere),
            preSyncOutcomes(8, true, DifferHere));
}
