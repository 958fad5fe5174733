//===- Lab.cpp - Compare fusion heuristics and pruning over a corpus ------===//
#include "mtsched/Tools/Lab.h"
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/Autotune/Decision.h"
#include "mtsched/Autotune/HorizontalSelect.h"
#include "mtsched/Autotune/PrologueSelect.h"
#include "mtsched/Autotune/TimePredictor.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/IR/Verifier.h"
#include "mtsched/OpUnits/OpUnits.h"
#include "mtsched/Passes/PassManager.h"
#include "mtsched/Passes/PassRegistry.h"
#include "mtsched/Support/Diagnostics.h"
#include "mtsched/Support/FileIO.h"
#include "mtsched/Tools/RankPipeline.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <thread>

using namespace mtsched;

static llvm::Error bad(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

namespace {

/// What one run of one file under one setting left on rank 0.
struct LabRun {
  std::unique_ptr<Module> M;
  RunResult Result;
  double AutotuneMs = 0;
};

/// Runs mtsched-opt's default pipeline (DefaultPipeline) on every rank
/// (threads) of Source, each rank set up as the driver sets one up
/// (RankPipeline.h), so that SwiGLU MLPs are decided as the driver decides
/// them: merged or split.
llvm::Expected<LabRun> runOnce(const Module &Source, llvm::SourceMgr &SM,
                               const AutotuneOptions &Tune,
                               const FusionOptions &Fusion,
                               const FusionHeuristic &Heuristic) {
  int N = 1;
  for (const auto &G : Source.getGraphs())
    N = std::max<int>(N, G->getWorldSize());
  Diagnostics Diags(SM);
  ThreadGroup Group(N);
  std::vector<LabRun> Runs(N);
  std::vector<std::string> Errors(N);
  std::vector<std::thread> Threads;
  for (int R = 0; R < N; ++R)
    Threads.emplace_back([&, R] {
      LabRun &Run = Runs[R];
      Run.M = Source.clone();
      std::unique_ptr<Communicator> Comm = Group.get(R);
      LoweringOptions Lowering;
      llvm::Expected<std::unique_ptr<Autotuner>> Session = createRankAutotuner(
          Tune, Fusion, Heuristic, Lowering.Mode, R, *Comm, Diags, *Run.M);
      if (!Session) {
        Errors[R] = llvm::toString(Session.takeError());
        Group.markDead(R);
        return;
      }
      PassRegistry Passes;
      registerPipelinePasses(Passes, Lowering, Fusion, Session->get());
      PassContext Ctx;
      Ctx.M = Run.M.get();
      Ctx.Diags = &Diags;
      Ctx.AnalysisOS = &llvm::nulls();
      PassManagerOptions PMO;
      PassManager PM(PMO, Ctx, llvm::nulls());
      for (const char *Name : DefaultPipeline)
        PM.addPass(Passes.lookup(Name)->Factory());
      if (llvm::Error E = PM.run(*Run.M)) {
        Errors[R] = llvm::toString(std::move(E));
        Group.markDead(R);
        return;
      }
      for (const auto &P : PM.getPassTimesMs())
        if (P.first == "autotune")
          Run.AutotuneMs += P.second;
      (*Session)->finish();
      Run.Result = (*Session)->getResult();
    });
  for (std::thread &T : Threads)
    T.join();
  for (const std::string &E : Errors)
    if (!E.empty())
      return bad(E);
  if (!Runs[0].Result.Sync.Ok)
    return bad("the pre-sync failed: " + Runs[0].Result.Sync.Reason);
  return std::move(Runs[0]);
}

/// The agreed timings of the exhaustive run, by graph/%node.
using TimingTable = std::map<std::string, const NodeResult *>;

/// Predicted and measured time of the decided graph.
/// Whether N is an rmsnorm in a kernel of its own (in no template's
/// epilogue, which is charged with it, nor with other buffers) that GEMMs
/// read and
/// select-prologue did not price (a reader could not take the prologue:
/// its epilogue fused): its kernel runs, and the lab charges it, so that a
/// setting whose norm runs in a prologue is not compared with one whose
/// norm kernel is left out.
bool isUnpricedNormKernel(const Graph &G, const Node &N,
                          const llvm::DenseMap<int, unsigned> &KernelSize,
                          const llvm::DenseSet<const Value *> &InEpilogue) {
  const auto *B = llvm::dyn_cast<BufferNode>(&N);
  if (!B || B->getOp() != OpCode::RmsNorm || B->getNumOperands() != 2 ||
      B->getAttrs().contains(PrologueSplitUsAttr) ||
      InEpilogue.count(B->getResult()) ||
      (B->getKernel() != BufferNode::NoKernel &&
       KernelSize.lookup(B->getKernel()) > 1))
    return false;
  return llvm::any_of(G.getUsers(B->getResult()), [](const Node *U) {
    return llvm::isa<MultiTemplateBufferNode>(U);
  });
}

/// The measured decided times of the GEMMs a fused norm names (Into),
/// each with the prologue tile it was given; Gemms when they are a merged
/// horizontal group (counted once, at the merged time the fused price
/// holds) or a name does not resolve.
double retiledReadersUs(const Graph &G, const Attribute &Into, double Gemms) {
  if (!Into.isList())
    return Gemms;
  double Us = 0;
  for (const Attribute &E : Into.getList()) {
    const MultiTemplateBufferNode *M = nullptr;
    for (const auto &N : G.getNodes())
      if (E.isString() && N->getName() == E.getString())
        M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get());
    if (!M || M->getAttrs().contains(HorizontalAttr) ||
        M->getAttrs().contains(HorizontalOfAttr))
      return Gemms;
    Us += measuredUs(*M, M->getDecision());
  }
  return std::isfinite(Us) ? Us : Gemms;
}

void evaluate(const LabRun &Run, const DeviceDesc &D, const TimingTable &Ref,
              double &PredictedUs, double &MeasuredUs) {
  PredictedUs = MeasuredUs = 0;
  std::unique_ptr<TimePredictor> Model = createRooflinePredictor(D);
  for (const auto &G : Run.M->getGraphs()) {
    llvm::DenseMap<int, unsigned> KernelSize;
    // Epilogue members: in their template's kernel when fused, else
    // charged below as its epilogue kernel.
    llvm::DenseSet<const Value *> InEpilogue;
    for (const auto &N : G->getNodes()) {
      if (const auto *B = llvm::dyn_cast<BufferNode>(N.get()))
        if (B->getKernel() != BufferNode::NoKernel)
          ++KernelSize[B->getKernel()];
      if (const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get()))
        for (const Operand &E : M->getEpilogue())
          InEpilogue.insert(E.V);
    }
    for (const auto &NP : G->getNodes()) {
      if (isUnpricedNormKernel(*G, *NP, KernelSize, InEpilogue)) {
        double Us = predictNormKernelUs(*Model, llvm::cast<BufferNode>(*NP));
        PredictedUs += Us;
        MeasuredUs += Us;
        continue;
      }
      // A norm select-prologue decided: its readers' GEMMs are counted
      // below as they were measured; the norm adds what its decided form
      // costs beyond them (select-prologue's predictions): its own kernel
      // when split, the GEMMs' prologues when fused. Fused GEMMs outside a
      // merged group run the prologue tile select-prologue set as their
      // decision, counted below at its measured time, which the fused price
      // holds: that is what is taken off, not the GEMMs as decided before.
      if (const Attribute *Split = NP->getAttrs().get(PrologueSplitUsAttr)) {
        const Attribute *Fused = NP->getAttrs().get(PrologueFusedUsAttr);
        const Attribute *GemmsUs = NP->getAttrs().get(PrologueGemmsUsAttr);
        const Attribute *Into = NP->getAttrs().get(PrologueIntoAttr);
        double Gemms = GemmsUs ? GemmsUs->getNumber() : 0;
        double Chosen = Into && Fused ? Fused->getNumber() : Split->getNumber();
        if (Into && Fused && NP->getAttrs().contains(PrologueCalibratedAttr))
          Gemms = retiledReadersUs(*G, *Into, Gemms);
        // Both are rounded to the nanosecond; never below nothing.
        double Extra = std::max(0.0, Chosen - Gemms);
        PredictedUs += Extra;
        MeasuredUs += Extra;
        continue;
      }
      const auto *N = llvm::dyn_cast<MultiTemplateBufferNode>(NP.get());
      if (!N || !N->isDecided())
        continue;
      // A merged horizontal group runs as one GEMM, at the time
      // select-horizontal decided with (measured when fuse-horizontal's
      // alternative was timed, else predicted), counted once, on its first
      // member; the other members run in it. An unfused epilogue of a
      // member still runs as its own kernel.
      if (N->getAttrs().contains(HorizontalAttr) ||
          N->getAttrs().contains(HorizontalOfAttr)) {
        if (const Attribute *Us = N->getAttrs().get(HorizontalMergedUsAttr);
            Us && N->getAttrs().contains(HorizontalAttr)) {
          PredictedUs += Us->getNumber();
          MeasuredUs += Us->getNumber();
        }
        if (!N->getEpilogue().empty()) {
          PredictedUs += predictEpilogueUs(D, describeNode(*Run.M, *G, *N));
          auto It = Ref.find(G->getName() + "/%" + N->getName());
          MeasuredUs += It == Ref.end()
                            ? std::numeric_limits<double>::infinity()
                            : It->second->EpilogueUs;
        }
        continue;
      }
      const Choice *C = N->findChoice(N->getDecision());
      if (!C)
        continue;
      Workload W = describeNode(*Run.M, *G, *N);
      bool Fused = N->isEpilogueFused();
      bool Epi = !N->getEpilogue().empty();
      PredictedUs += predictChoiceUs(D, W, *C, Fused) +
                     (Epi && !Fused ? predictEpilogueUs(D, W) : 0);
      auto It = Ref.find(G->getName() + "/%" + N->getName());
      // A merged SwiGLU GEMM that select-swiglu kept took the mul's name;
      // it was timed as the alternative fuse-swiglu named after the mul.
      if (It == Ref.end() && N->getOp() == OpCode::SwiGlu)
        It = Ref.find(G->getName() + "/%" + N->getName() + ".swiglu");
      if (It == Ref.end()) {
        MeasuredUs = std::numeric_limits<double>::infinity();
        continue;
      }
      for (const ChoiceResult &CR : It->second->Choices)
        if (CR.Name == C->Name)
          MeasuredUs +=
              Fused ? CR.FusedUs : CR.Us + (Epi ? It->second->EpilogueUs : 0);
    }
  }
}

} // namespace

llvm::Expected<std::vector<LabRow>> mtsched::runLab(const LabOptions &Opts) {
  registerAllOpUnits();
  // Every heuristic built once, before any run: a name none has fails at
  // once, listing the known ones.
  llvm::Expected<std::unique_ptr<FusionHeuristic>> Exhaustive =
      createFusionHeuristic("benchmark");
  if (!Exhaustive)
    return Exhaustive.takeError();
  std::vector<std::unique_ptr<FusionHeuristic>> Heuristics;
  for (const std::string &Name : Opts.Heuristics)
    if (auto H = createFusionHeuristic(Name))
      Heuristics.push_back(std::move(*H));
    else
      return H.takeError();
  for (const std::string &Search : Opts.Searches)
    if (Search != "greedy" && Search != "recursive" && Search != "exhaustive")
      return bad("unknown fusion search '" + Search +
                 "' (known: greedy, recursive, exhaustive)");
  std::vector<LabRow> Rows;
  for (const std::string &File : Opts.Files) {
    auto Buf = readBoundedFile(File, MaxIRFileBytes, "an IR input");
    if (!Buf)
      return bad("cannot read '" + File +
                 "': " + llvm::toString(Buf.takeError()));
    llvm::SourceMgr SM;
    SM.AddNewSourceBuffer(std::move(*Buf), llvm::SMLoc());
    std::unique_ptr<Module> M = parseModule(SM);
    if (!M)
      return bad("cannot parse '" + File + "'");
    if (llvm::Error E = verifyModule(*M, SM)) {
      llvm::consumeError(std::move(E));
      return bad("'" + File + "' does not verify");
    }
    AutotuneOptions Tune = Opts.Tune;
    Tune.CacheDir.clear();
    Tune.CacheOnly = false;
    Tune.Progress = false;
    // The exhaustive run first: its agreed timings measure every setting.
    // Prologue fusion is off by default in mtsched-opt (its kernels are not
    // timed yet); the lab scores its decisions all the same.
    FusionOptions Fusion;
    Fusion.Prologue = true;
    Tune.PruneTopK = 0;
    llvm::Expected<LabRun> Ref = runOnce(*M, SM, Tune, Fusion, **Exhaustive);
    if (!Ref)
      return bad(File + ": " + llvm::toString(Ref.takeError()));
    TimingTable Table;
    for (const NodeResult &N : Ref->Result.Nodes)
      Table[N.Graph + "/" + N.Name] = &N;
    double RefPredicted, RefMeasured;
    evaluate(*Ref, Tune.Device, Table, RefPredicted, RefMeasured);
    // Regret is against the fastest decided graph of these measurements:
    // the exhaustive run's decision is not always it, since choices within
    // --tie-tolerance of the fastest count as tied and the first listed
    // wins; against it, a setting that picked the strictly faster one had
    // a negative regret (-0.1%).
    double Best = RefMeasured;
    size_t FirstRow = Rows.size();
    for (const std::unique_ptr<FusionHeuristic> &H : Heuristics)
      for (const std::string &Search : Opts.Searches)
        for (unsigned K : Opts.PruneTopK) {
          Tune.PruneTopK = K;
          FusionOptions Searched = Fusion;
          Searched.Search = Search == "greedy" ? FusionSearch::Greedy
                                               : FusionSearch::Recursive;
          Searched.MaxFusionDepth =
              Search == "recursive" ? Opts.MaxFusionDepth : 0;
          llvm::Expected<LabRun> Run = runOnce(*M, SM, Tune, Searched, *H);
          if (!Run)
            return bad(File + ": " + llvm::toString(Run.takeError()));
          LabRow Row;
          Row.File = llvm::sys::path::stem(File).str();
          Row.Heuristic =
              H->getName().str() + (Search == "greedy" ? "" : "+" + Search);
          Row.PruneTopK = K;
          evaluate(*Run, Tune.Device, Table, Row.PredictedUs, Row.MeasuredUs);
          Row.AutotuneMs = Run->AutotuneMs;
          Row.Benchmarks = Run->Result.BenchmarksRun;
          Best = std::min(Best, Row.MeasuredUs);
          Rows.push_back(Row);
        }
    // A decided graph without a measured time (a variant the backend could
    // not run) has no regret to speak of: inf, as its time.
    for (size_t I = FirstRow; I < Rows.size(); ++I) {
      double Us = Rows[I].MeasuredUs;
      Rows[I].Regret = !std::isfinite(Us) ? Us : Us == Best ? 0 : Us / Best - 1;
    }
  }
  return Rows;
}

void mtsched::printLabTable(const std::vector<LabRow> &Rows,
                            llvm::raw_ostream &OS,
                            const LabTableOptions &Table) {
  OS << "| graph | heuristic | prune | predicted us | measured us | "
     << (Table.WallTimes ? "autotune ms | " : "") << "benchmarks | regret |\n"
     << "|---|---|---|---:|---:|" << (Table.WallTimes ? "---:|" : "")
     << "---:|---:|\n";
  for (const LabRow &R : Rows) {
    OS << "| " << R.File << " | " << R.Heuristic << " | "
       << (R.PruneTopK ? "top-" + std::to_string(R.PruneTopK)
                       : std::string("none"))
       << " | " << llvm::format("%.1f", R.PredictedUs) << " | "
       << llvm::format("%.1f", R.MeasuredUs) << " | ";
    if (Table.WallTimes)
      OS << llvm::format("%.1f", R.AutotuneMs) << " | ";
    OS << R.Benchmarks << " | " << llvm::format("%.1f%%", 100 * R.Regret)
       << " |\n";
  }
}
