//===- OptMain.cpp - The mtsched-opt driver's main loop -------------------===//
#include "mtsched/Driver/OptMain.h"
#include "mtsched/Autotune/DecisionsSource.h"
#include "mtsched/Driver/DiagnosticVerifier.h"
#include "mtsched/Driver/RankRunner.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/IR/Printer.h"
#include "mtsched/IR/Verifier.h"
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/OpUnits/OpUnits.h"
#include "mtsched/Passes/PassRegistry.h"
#include "mtsched/Reference/Interpreter.h"
#include "mtsched/Support/Diagnostics.h"
#include "mtsched/Support/FileIO.h"
#include "mtsched/Support/ToolError.h"
#include "mtsched/Tools/RankPipeline.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"
#include <chrono>
#include <set>

using namespace mtsched;

static constexpr llvm::StringLiteral SplitMarker = "// -----";

bool mtsched::expandPipeline(const PassRegistry &Registry,
                             const std::vector<std::string> &In,
                             std::vector<std::string> &Out) {
  bool OK = true;
  for (const std::string &Name : In) {
    if (Name == "default") {
      Out.insert(Out.end(), std::begin(DefaultPipeline),
                 std::end(DefaultPipeline));
      continue;
    }
    if (Registry.lookup(Name)) {
      Out.push_back(Name);
      continue;
    }
    std::string Near = Registry.nearest(Name);
    toolError() << "unknown pass '" << escapeControlBytes(Name)
                << "' in --pipeline"
                << (Near.empty() ? std::string(" (see --list-passes)")
                                 : "; did you mean '" + Near + "'?")
                << '\n';
    OK = false;
  }
  return OK;
}

/// Warns about each --disable-choices name that no op of M could be offered:
/// neither a choice of the tile, extern and collective lists nor a config
/// of M's custom ops. A misspelt or renamed choice would otherwise be kept
/// without a word.
static void warnUnknownDisabled(const ChoiceConfig &Choices, const Module &M) {
  llvm::StringSet<> Custom;
  for (const auto &G : M.getGraphs())
    for (const auto &N : G->getNodes())
      if (const auto *Op = llvm::dyn_cast<OpNode>(N.get()))
        for (const Choice &C : Op->getConfigs())
          Custom.insert(C.Name);
  std::vector<llvm::StringRef> Unknown;
  for (const auto &D : Choices.Disabled)
    if (!Choices.offers(D.getKey()) && !Custom.contains(D.getKey()))
      Unknown.push_back(D.getKey());
  llvm::sort(Unknown);
  for (llvm::StringRef Name : Unknown)
    llvm::WithColor::warning(llvm::errs(), "mtsched-opt")
        << "--disable-choices: '" << Name
        << "' names no choice this input can be offered\n";
}

/// Checks --collective-fallback against the collective choices M's
/// collectives can be offered: the built-in (or --choices-file) lists, the
/// configs of M's collective custom ops and the choices of M's lowered
/// collectives. A name none of them has would be ignored without a word,
/// so it is an error listing the valid names.
static bool checkCollectiveFallback(const PipelineOptions &Pipe,
                                    const Module &M) {
  const std::string &Name = Pipe.Autotune.CollectiveFallback;
  if (Name.empty())
    return true;
  const ChoiceConfig &Choices = Pipe.Lowering.Choices;
  std::set<std::string> Valid;
  for (const auto *List : {&Choices.AllReduce, &Choices.AllGather,
                           &Choices.ReduceScatter, &Choices.AllToAll})
    Valid.insert(List->begin(), List->end());
  for (const auto &G : M.getGraphs())
    for (const auto &N : G->getNodes()) {
      if (const auto *C =
              llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(N.get()))
        for (const Choice &Ch : C->getChoices())
          Valid.insert(Ch.Name);
      const auto *Op = llvm::dyn_cast<OpNode>(N.get());
      if (Op && Op->getOp() == OpCode::Custom &&
          classifyCustomOp(Op->getCustomName(), Op->getConfigs()).IsCollective)
        for (const Choice &Ch : Op->getConfigs())
          Valid.insert(Ch.Name);
    }
  if (Valid.count(Name))
    return true;
  std::string List;
  llvm::raw_string_ostream LS(List);
  llvm::interleave(Valid, LS, ", ");
  toolError() << "--collective-fallback: '" << escapeControlBytes(Name)
              << "' is not a collective choice; valid: "
              << escapeControlBytes(List) << '\n';
  return false;
}

namespace {

/// Runs the parse, verify, pipeline and print steps on one input buffer.
class BufferProcessor {
public:
  BufferProcessor(const OptMainConfig &Config, const FusionHeuristic &Heuristic)
      : Config(Config), Heuristic(Heuristic) {}

  /// Returns true on success; the printed IR goes to OS.
  bool process(std::unique_ptr<llvm::MemoryBuffer> Buffer,
               llvm::raw_ostream &OS);

private:
  const OptMainConfig &Config;
  const FusionHeuristic &Heuristic;
};

} // namespace

bool BufferProcessor::process(std::unique_ptr<llvm::MemoryBuffer> Buffer,
                              llvm::raw_ostream &OS) {
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(std::move(Buffer), llvm::SMLoc());
  std::unique_ptr<DiagnosticVerifier> Verifier;
  if (Config.VerifyDiagnostics)
    Verifier = std::make_unique<DiagnosticVerifier>(SM, llvm::errs());
  else
    // Messages quote names and strings from the input, and the quoted
    // source line is the input: neither may reach the terminal raw.
    installEscapingDiagHandler(SM);

  bool OK = false;
  auto T0 = std::chrono::steady_clock::now();
  auto MsSince = [](std::chrono::steady_clock::time_point T) {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now() - T)
        .count();
  };
  std::unique_ptr<Module> M = parseModule(SM);
  double ParseMs = MsSince(T0);
  auto T1 = std::chrono::steady_clock::now();
  if (M) {
    if (llvm::Error E = verifyModule(*M, SM)) {
      llvm::consumeError(std::move(E));
      M.reset();
    }
  }
  double VerifyMs = MsSince(T1);
  // A flag that names nothing in this input fails like the input: every
  // rank checks the same flags against the same module.
  if (M && !checkCollectiveFallback(Config.Pipe, *M))
    M.reset();
  // --interpret refuses what it cannot evaluate (several ranks, custom
  // ops, beyond its memory budget) before the pipeline spends minutes on
  // a graph the interpreter then rejects.
  if (M && Config.Output.Interpret)
    for (const auto &G : M->getGraphs())
      if (std::optional<InterpretRefusal> R =
              checkInterpretable(*G, Config.Output.InterpretMaxBytes)) {
        SM.PrintMessage(R->Loc, llvm::SourceMgr::DK_Error, R->Message);
        M.reset();
        break;
      }
  // Under mpirun every rank reads its own input: one that fails must stop
  // the others too, or they would wait for it in vain.
  if (agreeOnInput(Config, M.get()) && M) {
    warnUnknownDisabled(Config.Pipe.Lowering.Choices, *M);
    Diagnostics Diags(SM);
    OK = runOnRanks(Config, Heuristic, std::move(M), Diags, OS,
                    {{"parse", ParseMs}, {"verify", VerifyMs}});
  }
  if (Verifier) {
    // With --verify-diagnostics success means every expectation was met.
    OK = Verifier->finish();
  }
  return OK;
}

int mtsched::optMain(const OptMainConfig &Config) {
  // Before any IR is read: the rules of the ops with their own kernel.
  registerAllOpUnits();
  // Built once, here, for every buffer and rank: a name no heuristic has
  // stops the run before anything is read.
  llvm::Expected<std::unique_ptr<FusionHeuristic>> Heuristic =
      createFusionHeuristic(Config.Pipe.Fusion.Heuristic);
  if (!Heuristic) {
    reportToolError(escapeControlBytes(llvm::toString(Heuristic.takeError())));
    return 1;
  }
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> FileOrErr =
      readBoundedFile(Config.InputFile, MaxIRFileBytes, "an IR input");
  if (!FileOrErr) {
    toolError() << "cannot open input file '" << Config.InputFile
                << "': " << llvm::toString(FileOrErr.takeError()) << '\n';
    return 1;
  }
  std::error_code EC;
  llvm::ToolOutputFile Out(Config.OutputFile, EC, llvm::sys::fs::OF_Text);
  if (EC) {
    toolError() << "cannot open output file '" << Config.OutputFile
                << "': " << EC.message() << '\n';
    return 1;
  }

  if (Config.DumpPassPipeline) {
    llvm::errs() << "pipeline: ";
    llvm::interleave(Config.Pipeline, llvm::errs(), ",");
    llvm::errs() << '\n';
  }

  llvm::StringRef Name = (*FileOrErr)->getBufferIdentifier();
  llvm::StringRef Text = (*FileOrErr)->getBuffer();
  // --run-outputs writes DIR/<graph>/ when the file has several graphs, and
  // the cases of a split file are graphs of one file.
  OptMainConfig Run = Config;
  if (!Config.DecisionsFromFile.empty()) {
    // Read once, after the op units are registered (the file is IR like
    // the input), and shared by every buffer and rank.
    llvm::Expected<std::shared_ptr<const DecisionsSource>> Src =
        DecisionsSource::load(Config.DecisionsFromFile);
    if (!Src) {
      llvm::handleAllErrors(
          Src.takeError(), [](const ReportedError &) {},
          [](const llvm::ErrorInfoBase &E) {
            reportToolError(escapeControlBytes(E.message()));
          });
      return 1;
    }
    Run.Pipe.Autotune.DecisionsFrom = std::move(*Src);
  }
  Run.Output.GraphFolders =
      Config.SplitInputFile && Text.contains(("\n" + SplitMarker).str());
  BufferProcessor Processor(Run, **Heuristic);
  bool OK = true;
  if (!Config.SplitInputFile) {
    OK = Processor.process(std::move(*FileOrErr), Out.os());
  } else {
    // Each case becomes its own buffer, padded with newlines so that line
    // numbers in diagnostics match the original file.
    unsigned LinesBefore = 0;
    bool First = true;
    while (true) {
      size_t Pos = 0;
      while ((Pos = Text.find(SplitMarker, Pos)) != llvm::StringRef::npos &&
             Pos != 0 && Text[Pos - 1] != '\n')
        Pos += SplitMarker.size();
      llvm::StringRef Case = Text.substr(0, Pos);
      std::string Padded(LinesBefore, '\n');
      Padded += Case.str();
      if (!First)
        Out.os() << SplitMarker << '\n';
      First = false;
      OK &= Processor.process(
          llvm::MemoryBuffer::getMemBufferCopy(Padded, Name), Out.os());
      if (Pos == llvm::StringRef::npos)
        break;
      LinesBefore += Case.count('\n');
      Text = Text.substr(Pos);
      size_t EndOfLine = Text.find('\n');
      if (EndOfLine == llvm::StringRef::npos)
        break;
      Text = Text.substr(EndOfLine + 1);
      ++LinesBefore;
    }
  }
  // A write that failed (a full disk, /dev/full) is an error like any
  // other: the IR is lost, so the run did not succeed. With -o - (the
  // default) Out.os() is llvm::outs(), which checkStdoutWritten checks.
  Out.os().flush();
  if (&Out.os() != &llvm::outs() && Out.os().has_error()) {
    std::error_code EC = Out.os().error();
    Out.os().clear_error();
    toolError() << "cannot write output file '" << Config.OutputFile
                << "': " << EC.message() << '\n';
    // ToolOutputFile removes the file it was not told to keep.
    return 1;
  }
  Out.keep();
  // Passes print to stdout as well (--test-print-*, with -o FILE too).
  if (!checkStdoutWritten("mtsched-opt"))
    return 1;
  return OK ? 0 : 1;
}
