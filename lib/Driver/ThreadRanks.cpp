//===- ThreadRanks.cpp - The thread launcher of the rank runner -*- C++ -*-===//
//
// Every rank a thread of this process, talking through a ThreadGroup: the
// gates that start and hold them, the module they share where every rank
// would decide alike (DecisionTable.h) or one copy each, and the reporting
// rank's pick. runRank and emitOutputs are RankRunner.cpp's.
//
//===----------------------------------------------------------------------===//
#include "RankRunnerImpl.h"
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/Autotune/DecisionTable.h"
#include "mtsched/Autotune/LazyBenchmarker.h"
#include "mtsched/Autotune/PreSync.h"
#include "mtsched/Backend/Backends.h"
#include "mtsched/Driver/RankRunner.h"
#include "mtsched/Driver/RegisterPasses.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/Printer.h"
#include "mtsched/IR/Verifier.h"
#include "mtsched/Lowering/SwiGlu.h"
#include "mtsched/Passes/PassRegistry.h"
#include "mtsched/Reference/RandomInputs.h"
#include "mtsched/Runtime/Communicator.h"
#include "mtsched/Runtime/MpiPlugin.h"
#include "mtsched/Runtime/Topology.h"
#include "mtsched/Schedule/Schedule.h"
#include "mtsched/Support/Diagnostics.h"
#include "mtsched/Support/ToolError.h"
#include "mtsched/Tools/RankPipeline.h"
#include "mtsched/Tools/Report.h"
#include "mtsched/Tools/Summary.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/BuryPointer.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/TimeProfiler.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_sha1_ostream.h"
#include "llvm/Support/xxhash.h"
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <pthread.h>
#include <thread>
#include <unistd.h>

using namespace mtsched;
using namespace mtsched::ranks;

namespace mtsched::ranks {

/// Holds ranks that hang on purpose until every other rank has finished,
/// so the process ends in bounded time and joins every thread.
class RankGate {
public:
  /// A rank finished (successfully or not).
  void settle() {
    std::lock_guard<std::mutex> L(M);
    ++Settled;
    CV.notify_all();
  }
  /// A rank hangs: it counts as settled and blocks until released.
  void hang() {
    std::unique_lock<std::mutex> L(M);
    ++Settled;
    CV.notify_all();
    CV.wait(L, [&] { return Released; });
  }
  /// A rank that is late on purpose sleeps up to D. It counts as settled
  /// meanwhile, so once every other rank has finished (no peer waits for
  /// it any more) the driver releases it early and the run stays bounded.
  void sleepLate(std::chrono::milliseconds D) {
    std::unique_lock<std::mutex> L(M);
    ++Settled;
    CV.notify_all();
    if (!CV.wait_for(L, D, [&] { return Released; }))
      --Settled;
  }
  void waitAllSettled(int N) {
    std::unique_lock<std::mutex> L(M);
    CV.wait(L, [&] { return Settled == N; });
  }
  void release() {
    std::lock_guard<std::mutex> L(M);
    Released = true;
    CV.notify_all();
  }

private:
  std::mutex M;
  std::condition_variable CV;
  int Settled = 0;
  bool Released = false;
};

/// A rank's thread, started with pthread_create so that a failure to
/// create it (the address-space limit, the process's thread limit) is an
/// error code: std::thread reports it by an exception, which mtsched does
/// not use, and llvm::thread by a fatal error.
class RankThread {
public:
  explicit RankThread(std::function<void()> Fn) : Fn(std::move(Fn)) {}
  /// 0, or the errno value pthread_create returned.
  int start() {
    return pthread_create(&Thread, nullptr, &RankThread::run, this);
  }
  void join() { pthread_join(Thread, nullptr); }

private:
  static void *run(void *Self) {
    static_cast<RankThread *>(Self)->Fn();
    return nullptr;
  }
  std::function<void()> Fn;
  pthread_t Thread;
};

/// Holds the rank threads until every one of them exists: if one cannot
/// be created, none has started its rank (whose peers would wait for the
/// missing one), and all of them leave at once.
class StartGate {
public:
  /// Whether to run the rank (false: the run was called off).
  bool waitToStart() {
    std::unique_lock<std::mutex> L(M);
    CV.wait(L, [&] { return Decided; });
    return Go;
  }
  void open(bool Run) {
    std::lock_guard<std::mutex> L(M);
    Decided = true;
    Go = Run;
    CV.notify_all();
  }

private:
  std::mutex M;
  std::condition_variable CV;
  bool Decided = false;
  bool Go = false;
};

/// Hands thread ranks their module: every rank clones the parsed module
/// (none waits for another: a rank held back would arrive late at the
/// pre-sync), and the last one to finish cloning frees it, so the parsed
/// module is not kept beside the N copies for the rest of the run.
class ModuleHandout {
public:
  ModuleHandout(std::unique_ptr<Module> M, int N)
      : Original(std::move(M)), N(N) {}
  std::unique_ptr<Module> take() {
    if (N == 1)
      return std::move(Original);
    std::unique_ptr<Module> Copy = Original->clone();
    std::lock_guard<std::mutex> L(Mu);
    if (++Cloned == N)
      Original.reset();
    return Copy;
  }
  /// Copies of the module made so far (0 when one rank takes the original).
  int copies() {
    std::lock_guard<std::mutex> L(Mu);
    return Cloned;
  }

private:
  std::unique_ptr<Module> Original;
  int N;
  std::mutex Mu;
  int Cloned = 0;
};

/// Runs Passes once on M, for every thread rank (which would each have run
/// them alike on a copy): rank 0's view (its analysis output), bound to
/// Session. Appends the passes' times to Times; false after reporting an
/// error.
bool runPassesOnce(const OptMainConfig &Config, Module &M, Diagnostics &Diags,
                   llvm::ArrayRef<std::string> Passes, Autotuner *Session,
                   std::vector<std::pair<std::string, double>> &Times) {
  if (Passes.empty())
    return true;
  PassRegistry Registry;
  registerAllPasses(Registry, Config.Pipe, Session);
  PassContext Ctx;
  Ctx.M = &M;
  Ctx.Diags = &Diags;
  Ctx.AnalysisOS = &llvm::outs();
  // No IR is printed in this mode (canShareModule), so nothing is dumped.
  PassManager PM(Config.PMOptions, Ctx, llvm::nulls());
  for (const std::string &Name : Passes)
    PM.addPass(Registry.lookup(Name)->Factory());
  llvm::Error E = PM.run(M);
  llvm::append_range(Times, PM.getPassTimesMs());
  bool Failed = false;
  llvm::handleAllErrors(
      std::move(E), [&](const ReportedError &) { Failed = true; },
      [&](const llvm::ErrorInfoBase &EI) {
        Failed = true;
        toolError() << EI.message() << '\n';
      });
  return !Failed;
}

/// Passes a thread rank runs exactly as every other rank does, reading
/// nothing of its own (no autotuner, no communicator): lowering and fusion.
bool isRankIndependentPass(llvm::StringRef Name) {
  return Name == "fuse-grouped-mm" || Name == "fuse-moe-combine" ||
         Name == "fuse-moe-combine-sum" || Name == "lower" ||
         Name == "fuse-swiglu" || Name == "fuse-horizontal" || Name == "fuse" ||
         Name == "verify-schedule";
}

/// Where Config's pipeline splits for thread ranks that share one module:
/// the index of its `autotune` pass, when every pass before it is
/// rank-independent (run once, on the one module) and every pass after it
/// can run once on the decided module. None when the ranks must each own a
/// copy: one rank, immediate mode (lowering decides), IR printed or passes
/// timed per rank, or any other pass.
std::optional<size_t> sharedModuleSplit(const OptMainConfig &Config, int N) {
  const PassManagerOptions &PM = Config.PMOptions;
  if (N < 2 || Config.Pipe.Lowering.Mode == CollectiveMode::Immediate ||
      PM.PrintBeforeAll || !PM.PrintBefore.empty() || PM.PrintAfterAll ||
      !PM.PrintAfter.empty() || PM.PrintAfterChange || PM.PrintAfterFailure ||
      PM.TimePasses)
    return std::nullopt;
  llvm::ArrayRef<std::string> P = Config.Pipeline;
  const std::string *It = llvm::find(P, "autotune");
  if (It == P.end() || llvm::count(P, "autotune") != 1)
    return std::nullopt;
  size_t Split = It - P.begin();
  if (!llvm::all_of(P.take_front(Split), isRankIndependentPass))
    return std::nullopt;
  // search-fusion does nothing in pass order; searching, it measures
  // epilogue kernels across ranks, so each rank needs its decided copy.
  bool Greedy = Config.Pipe.Fusion.Search == FusionSearch::Greedy;
  for (const std::string &Name : P.drop_front(Split + 1))
    if (Name != "select-swiglu" && Name != "select-horizontal" &&
        Name != "select-prologue" && Name != "verify-schedule" &&
        !(Name == "search-fusion" && Greedy))
      return std::nullopt;
  return Split;
}

/// Whether select-swiglu has anything to select in M: it measures across
/// ranks, so each rank needs its decided copy.
bool hasSwiGluAlternatives(const Module &M) {
  for (const auto &G : M.getGraphs())
    for (const auto &N : G->getNodes())
      if (N->getOp() == OpCode::SwiGlu &&
          N->getAttrs().contains(AlternativeOfAttr))
        return true;
  return false;
}

/// One thread rank on the module every rank shares, read-only: its own
/// communicator, autotuner and measurements; its decisions go to
/// State.Table (the module's nodes are not written), its per-node records
/// only where a report or summary may show them.
void runSharedRank(int Rank, std::unique_ptr<Communicator> Comm,
                   RankHooks Hooks, const OptMainConfig &Config,
                   const FusionHeuristic &Heuristic, const Module &M,
                   DecisionTable &Table, Diagnostics &Diags, RankState &State) {
  State.Comm = std::move(Comm);
  const PipelineOptions &Pipe = Config.Pipe;
  llvm::Expected<std::unique_ptr<Autotuner>> Session = createRankAutotuner(
      rankAutotuneOptions(Pipe, Rank), Pipe.Fusion, Heuristic,
      Pipe.Lowering.Mode, Rank, *State.Comm, Diags, M, std::move(Hooks));
  if (!Session) {
    std::string Msg = toString(Session.takeError());
    if (Rank == 0)
      toolError() << Msg << '\n';
    return;
  }
  State.Session = std::move(*Session);
  bool Details = !Config.ReportFile.empty() || Config.AutotuneSummary;
  State.Session->setDecisionTable(&Table, &State.Digest);
  State.Session->setKeepNodeRecords(Details);
  // What the pass manager does for `autotune`, on each graph in turn.
  auto Start = std::chrono::steady_clock::now();
  llvm::Error E = llvm::Error::success();
  for (const auto &G : M.getGraphs())
    if ((E = State.Session->tuneGraph(*G)))
      break;
  State.PassTimesMs.emplace_back("autotune",
                                 std::chrono::duration<double, std::milli>(
                                     std::chrono::steady_clock::now() - Start)
                                     .count());
  noteRankEnd(std::move(E), State);
  if (State.OK) {
    State.Session->finish(Details);
    State.FinalIRHash = State.Digest.result();
  }
}

/// The shared module decided as the ranks decided (every finished rank's
/// digest matched the reporter's), checked as the autotune pass and the
/// pass manager check a rank's own copy, then the passes after `autotune`.
/// False after reporting an error.
bool decideSharedModule(const OptMainConfig &Config, Module &M,
                        const DecisionTable &Table, Diagnostics &Diags,
                        RankState &Reporter,
                        llvm::ArrayRef<std::string> After) {
  if (llvm::Error E = Table.apply(M)) {
    toolError() << toString(std::move(E)) << '\n';
    return false;
  }
  for (const auto &G : M.getGraphs())
    if (llvm::Error E = verifySchedule(*G)) {
      llvm::consumeError(Diags.error(
          G->getLoc(), "the autotuner decided an illegal schedule for '@" +
                           G->getName() + "': " + toString(std::move(E))));
      return false;
    }
  if (Config.PMOptions.VerifyEach)
    if (llvm::Error E = verifyModule(M, Diags.getSourceMgr())) {
      llvm::consumeError(std::move(E));
      llvm::consumeError(
          Diags.error({}, "IR is invalid after pass 'autotune'"));
      return false;
    }
  return runPassesOnce(Config, M, Diags, After, Reporter.Session.get(),
                       Reporter.PassTimesMs);
}

/// Thread ranks are one process on one host: every placement is known
/// here, without an exchange; none where a --topology file says.
std::optional<DiscoveredTopology>
threadRankTopology(const OptMainConfig &Config, int N) {
  if (!Config.Pipe.Lowering.Choices.TopologyPath.empty())
    return std::nullopt;
  SingleCommunicator Here;
  std::vector<RankPlacement> Placements(static_cast<size_t>(N));
  std::map<int, std::vector<int>> Peers;
  int Count = 0;
  std::string NoGpu;
  for (int R = 0; R < N; ++R) {
    Placements[size_t(R)].Host = Here.hostIdentity();
    probeGpu(Config.Pipe.Autotune, R, Placements[size_t(R)], Peers, Count,
             NoGpu);
  }
  return topologyFromPlacements(Placements);
}

/// After the thread ranks joined: the first rank that finished reports
/// (null if none did); OK when no rank failed and every finished rank
/// decided alike. Says why on stderr otherwise.
RankState *pickReporter(std::vector<RankState> &States, bool &OK) {
  int N = int(States.size());
  RankState *Reporter = nullptr;
  bool AnyError = false;
  for (RankState &S : States) {
    if (S.Stopped)
      llvm::WithColor::warning() << S.StopReason << "\n";
    else if (!S.OK)
      AnyError = true;
    else if (!Reporter)
      Reporter = &S;
  }
  OK = !AnyError && Reporter;
  // Every rank stopped on purpose: nobody reported an error, yet there is
  // nothing to print, so say why the run fails.
  if (!Reporter && !AnyError)
    toolError() << "no rank finished: all " << N
                << (N == 1 ? " rank" : " ranks")
                << " stopped (injected faults); nothing to "
                   "report\n";
  // No rank finished: the first that failed shows its dumps (e.g.
  // --print-ir-after-failure); every rank ran the same passes.
  if (!Reporter)
    for (const RankState &S : States)
      if (!S.Stopped) {
        llvm::errs() << S.Dumps;
        break;
      }
  if (OK)
    for (const RankState &S : States)
      if (S.OK && S.FinalIRHash != Reporter->FinalIRHash) {
        toolError() << "ranks " << (Reporter - States.data()) << " and "
                    << (&S - States.data()) << " decided differently\n";
        OK = false;
      }
  return Reporter;
}

bool runThreadRanks(
    const OptMainConfig &GivenConfig, const FusionHeuristic &Heuristic,
    std::unique_ptr<Module> M, Diagnostics &Diags, llvm::raw_ostream &OS,
    std::vector<std::pair<std::string, double>> FrontendPhasesMs) {
  int N = rankCount(GivenConfig, *M, Diags, 0, "--ranks", /*Loud=*/true);
  if (N == 0)
    return false;
  std::optional<DiscoveredTopology> Found = threadRankTopology(GivenConfig, N);
  const OptMainConfig Config =
      withTopology(GivenConfig, Found ? &*Found : nullptr);
  if (!checkFaultTargets(Config, *M, N, /*Loud=*/true))
    return false;
  bool Trace = !Config.TraceFile.empty();
  if (Trace)
    llvm::timeTraceProfilerInitialize(/*TimeTraceGranularity=*/0,
                                      "mtsched-opt");

  // Thread ranks share one module where the pipeline allows: what every
  // rank would do alike before the autotuner runs once, here; each rank then
  // decides on its own without writing the module (docs/RANKS.md,
  // "Resources of thread ranks"). Otherwise each rank owns a copy.
  llvm::ArrayRef<std::string> RankPasses = Config.Pipeline;
  std::vector<std::pair<std::string, double>> OncePassTimesMs;
  bool Shared = false;
  if (std::optional<size_t> Split = sharedModuleSplit(Config, N)) {
    if (!runPassesOnce(Config, *M, Diags, RankPasses.take_front(*Split),
                       /*Session=*/nullptr, OncePassTimesMs)) {
      // As if every rank had failed alike.
      emitOutputs(Config, N, nullptr, false, /*WriteTrace=*/true, OS,
                  std::move(FrontendPhasesMs), /*ModuleCopies=*/0);
      return false;
    }
    RankPasses = RankPasses.drop_front(*Split);
    Shared = !hasSwiGluAlternatives(*M);
  }
  std::unique_ptr<Module> SharedModule;
  std::optional<DecisionTable> Decisions;
  std::optional<ModuleHandout> Modules;
  if (Shared) {
    SharedModule = std::move(M);
    Decisions.emplace(*SharedModule);
  } else {
    Modules.emplace(std::move(M), N);
  }

  ThreadGroup Group(N);
  RankGate Gate;
  StartGate Start;
  std::vector<RankState> States(N);
  std::vector<std::unique_ptr<RankThread>> Threads;
  for (int R = 0; R < N; ++R) {
    Threads.push_back(std::make_unique<RankThread>([&, R] {
      if (!Start.waitToStart())
        return;
      llvm::set_thread_name("rank " + llvm::Twine(R));
      if (Trace)
        llvm::timeTraceProfilerInitialize(/*TimeTraceGranularity=*/0,
                                          "mtsched-opt");
      // A hung rank is released once every other rank has finished, so the
      // process ends in bounded time and joins every thread.
      bool Hung = false;
      RankHooks Hooks;
      Hooks.Hang = [&Hung, &Gate] {
        Hung = true;
        Gate.hang();
      };
      Hooks.Exit = [&Group, R] { Group.markDead(R); };
      Hooks.Late = [&Gate](std::chrono::milliseconds D) { Gate.sleepLate(D); };
      if (Shared)
        runSharedRank(R, Group.get(R), std::move(Hooks), Config, Heuristic,
                      *SharedModule, *Decisions, Diags, States[R]);
      else
        // Each rank owns a copy it mutates.
        runRank(R, Group.get(R), std::move(Hooks), Config, Heuristic,
                Modules->take(), Diags, States[R], /*HashFinalIR=*/N > 1,
                RankPasses);
      if (Trace)
        llvm::timeTraceProfilerFinishThread();
      if (!Hung)
        Gate.settle();
    }));
    if (int EC = Threads.back()->start()) {
      // Those already created leave without running their rank.
      Threads.pop_back();
      Start.open(/*Run=*/false);
      for (std::unique_ptr<RankThread> &T : Threads)
        T->join();
      toolError()
          << "cannot start the thread of rank " << R << " (of " << N
          << " thread ranks): " << std::strerror(EC)
          << "; run fewer ranks (--ranks), raise the address-space or thread "
             "limit (ulimit -v, ulimit -u), or use MPI ranks\n";
      if (Trace)
        llvm::timeTraceProfilerCleanup();
      return false;
    }
  }
  Start.open(/*Run=*/true);
  Gate.waitAllSettled(N);
  Gate.release();
  for (std::unique_ptr<RankThread> &T : Threads)
    T->join();

  bool OK = false;
  RankState *Reporter = pickReporter(States, OK);
  if (Reporter) {
    // What ran once counts as the reporter's.
    Reporter->PassTimesMs.insert(Reporter->PassTimesMs.begin(),
                                 OncePassTimesMs.begin(),
                                 OncePassTimesMs.end());
    if (Shared) {
      if (OK)
        OK = decideSharedModule(Config, *SharedModule, *Decisions, Diags,
                                *Reporter, RankPasses.drop_front());
      Reporter->M = std::move(SharedModule);
    }
  }
  OK = emitOutputs(Config, N, Reporter, OK, /*WriteTrace=*/true, OS,
                   std::move(FrontendPhasesMs), Shared ? 0 : Modules->copies());
  for (RankState &S : States)
    leaveToTheOS(Config, S);
  return OK;
}

} // namespace mtsched::ranks
