//===- RankRunner.cpp - Runs the pipeline on every rank -------------------===//
#include "mtsched/Driver/RankRunner.h"
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/Autotune/Report.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/Printer.h"
#include "mtsched/Passes/Diagnostics.h"
#include "mtsched/Passes/PassRegistry.h"
#include "mtsched/Runtime/Communicator.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/TimeProfiler.h"
#include "llvm/Support/WithColor.h"
#include <condition_variable>
#include <mutex>
#include <thread>

using namespace mtsched;

namespace {

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

struct RankState {
  std::unique_ptr<Module> M;
  std::unique_ptr<Communicator> Comm;
  std::unique_ptr<Autotuner> Session;
  std::string Dumps;
  std::string FinalIR;
  bool OK = false;
  /// Stopped by an injected fault (exit or hang).
  bool Stopped = false;
  std::string StopReason;
  std::vector<std::pair<std::string, double>> PassTimesMs;
};

bool hasCollectives(const Graph &G) {
  for (const auto &N : G.getNodes()) {
    if (llvm::isa<CollectiveMultiTemplateBufferNode>(N.get()) ||
        collectiveKindOf(N->getOp()) != CollectiveKind::None)
      return true;
    if (const auto *O = llvm::dyn_cast<OpNode>(N.get()))
      if (O->getOp() == OpCode::Custom &&
          classifyCustomOp(O->getCustomName(), O->getConfigs()).IsCollective)
        return true;
  }
  return false;
}

/// The number of ranks: --ranks, else the largest world size. A graph with
/// collectives must run on exactly its world size; others run on any.
int rankCount(const OptMainConfig &Config, const Module &M,
              Diagnostics &Diags) {
  int64_t N = Config.NumRanks;
  if (N == 0)
    for (const auto &G : M.getGraphs())
      N = std::max(N, G->getWorldSize());
  N = std::max<int64_t>(N, 1);
  for (const auto &G : M.getGraphs())
    if (G->getWorldSize() != N && hasCollectives(*G)) {
      Diags.print(G->getLoc(), llvm::SourceMgr::DK_Error,
                  "graph '@" + G->getName() + "' has world_size " +
                      llvm::Twine(G->getWorldSize()) + ", but " +
                      llvm::Twine(N) + " rank" + (N == 1 ? " is" : "s are") +
                      " running (--ranks)");
      return 0;
    }
  return N;
}

void runRank(int Rank, const OptMainConfig &Config,
             const PassRegistry &Registry, const Module &Source,
             Diagnostics &Diags, ThreadGroup &Group, RankGate &Gate,
             RankState &State) {
  llvm::set_thread_name("rank " + llvm::Twine(Rank));
  if (!Config.TraceFile.empty())
    llvm::timeTraceProfilerInitialize(/*TimeTraceGranularity=*/0,
                                      "mtsched-opt");
  bool Hung = false;
  State.M = Source.clone();
  State.Comm = Group.get(Rank);
  PipelineOptions Pipe = Config.Pipe;
  RankHooks Hooks;
  Hooks.Hang = [&] {
    Hung = true;
    Gate.hang();
  };
  Hooks.Exit = [&] { Group.markDead(Rank); };
  llvm::Expected<std::unique_ptr<Benchmarker>> Bench =
      createBenchmarker(Pipe.Autotune, Rank);
  if (!Bench) {
    // Every rank fails the same way; rank 0 says so.
    std::string Msg = toString(Bench.takeError());
    if (Rank == 0)
      llvm::WithColor::error() << Msg << '\n';
    Gate.settle();
    return;
  }
  State.Session = std::make_unique<Autotuner>(
      Pipe.Autotune, Pipe.Fusion, Pipe.Lowering.Mode, *State.Comm,
      std::move(*Bench), Diags, *State.M, std::move(Hooks));
  Pipe.Lowering.Selector = State.Session.get();
  Pipe.Session = State.Session.get();

  PassContext Ctx;
  Ctx.M = State.M.get();
  Ctx.Diags = &Diags;
  Ctx.AnalysisOS = Rank == 0 ? &llvm::outs() : &llvm::nulls();
  PassManagerOptions PMOpts = Config.PMOptions;
  PMOpts.TimePasses &= Rank == 0;
  llvm::raw_string_ostream DumpOS(State.Dumps);
  {
    PassManager PM(PMOpts, Ctx, DumpOS);
    for (const std::string &Name : Config.Pipeline)
      PM.addPass(Registry.lookup(Name)->Factory(Pipe));
    llvm::Error E = PM.run(*State.M);
    State.PassTimesMs = PM.getPassTimesMs();
    bool Failed = false;
    llvm::handleAllErrors(
        std::move(E),
        [&](const RankStoppedError &S) {
          State.Stopped = true;
          State.StopReason = S.message();
        },
        [&](const ReportedError &) { Failed = true; },
        [&](const llvm::ErrorInfoBase &EI) {
          Failed = true;
          llvm::WithColor::error() << EI.message() << '\n';
        });
    State.OK = !Failed && !State.Stopped;
  }
  if (State.OK) {
    State.Session->finish();
    llvm::raw_string_ostream IROS(State.FinalIR);
    printModule(*State.M, IROS);
  }
  if (!Config.TraceFile.empty())
    llvm::timeTraceProfilerFinishThread();
  if (!Hung)
    Gate.settle();
}

bool writeFile(llvm::StringRef Path, llvm::StringRef What,
               llvm::function_ref<void(llvm::raw_fd_ostream &)> Write) {
  std::error_code EC;
  llvm::raw_fd_ostream OS(Path, EC, llvm::sys::fs::OF_Text);
  if (EC) {
    llvm::WithColor::error() << "cannot write " << What << " '" << Path
                             << "': " << EC.message() << '\n';
    return false;
  }
  Write(OS);
  return true;
}

} // namespace

bool mtsched::runOnRanks(
    const OptMainConfig &Config, const PassRegistry &Registry, const Module &M,
    Diagnostics &Diags, llvm::raw_ostream &OS,
    std::vector<std::pair<std::string, double>> FrontendPhasesMs) {
  // Without passes there is nothing for ranks to do: print the module,
  // whatever world sizes its graphs have.
  if (Config.Pipeline.empty()) {
    printModule(M, OS);
    return true;
  }
  int N = rankCount(Config, M, Diags);
  if (N == 0)
    return false;
  bool Trace = !Config.TraceFile.empty();
  if (Trace)
    llvm::timeTraceProfilerInitialize(/*TimeTraceGranularity=*/0,
                                      "mtsched-opt");

  ThreadGroup Group(N);
  RankGate Gate;
  std::vector<RankState> States(N);
  std::vector<std::thread> Threads;
  for (int R = 0; R < N; ++R)
    Threads.emplace_back(runRank, R, std::cref(Config), std::cref(Registry),
                         std::cref(M), std::ref(Diags), std::ref(Group),
                         std::ref(Gate), std::ref(States[R]));
  Gate.waitAllSettled(N);
  Gate.release();
  for (std::thread &T : Threads)
    T.join();

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
  bool OK = !AnyError && Reporter;
  if (OK)
    for (const RankState &S : States)
      if (S.OK && S.FinalIR != Reporter->FinalIR) {
        llvm::WithColor::error()
            << "ranks " << (Reporter - States.data()) << " and "
            << (&S - States.data()) << " decided differently\n";
        OK = false;
      }
  if (Reporter) {
    OS << Reporter->Dumps;
    if (OK)
      OS << Reporter->FinalIR;
  }

  if (OK && !Config.ReportFile.empty()) {
    ReportInput In;
    In.Backend = Reporter->Session->getBackendName();
    In.WorldSize = N;
    In.Mode = Reporter->Session->getMode();
    In.Result = &Reporter->Session->getResult();
    In.ExtraPhasesMs = std::move(FrontendPhasesMs);
    llvm::append_range(In.ExtraPhasesMs, Reporter->PassTimesMs);
    OK &= writeFile(Config.ReportFile, "report", [&](llvm::raw_fd_ostream &F) {
      F << llvm::formatv("{0:2}", buildReport(In)) << '\n';
    });
  }
  if (Trace) {
    OK &= writeFile(Config.TraceFile, "trace", [&](llvm::raw_fd_ostream &F) {
      llvm::timeTraceProfilerWrite(F);
    });
    llvm::timeTraceProfilerCleanup();
  }
  return OK;
}
