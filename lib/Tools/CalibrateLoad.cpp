//===- CalibrateLoad.cpp - Read a report and its IR as samples ------------===//
//
// Reads the report file (and the IR file that produced it, lowered as the
// driver lowers it) and hands both to collectCalibrationSamples; a bad
// value it reports is placed at FILE:LINE:COL by scanning the text again.
//
//===----------------------------------------------------------------------===//
#include "CalibrateImpl.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/OpUnits/OpUnits.h"
#include "mtsched/Passes/PassRegistry.h"
#include "mtsched/Support/Diagnostics.h"
#include "mtsched/Support/FileIO.h"
#include "mtsched/Tools/Calibrate.h"
#include "mtsched/Tools/RankPipeline.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

using namespace mtsched;
using namespace mtsched::detail;

char ReportValueError::ID;

namespace {

/// Finds the text of the value at a path in a JSON document that
/// llvm::json::parse accepted. llvm::json::Value keeps no positions, so
/// this scans the text again; the scan need not validate, only skip.
class JsonLocator {
public:
  explicit JsonLocator(llvm::StringRef Text) : Text(Text) {}

  /// The offset of the value at Path, if the scan finds it.
  std::optional<size_t> find(llvm::ArrayRef<JsonStep> Path) {
    Pos = 0;
    skipSpace();
    for (const JsonStep &S : Path) {
      if (!(S.IsKey ? enterKey(S.Key) : enterIndex(S.Index)))
        return std::nullopt;
      skipSpace();
    }
    return Pos;
  }

private:
  bool at(char C) const { return Pos < Text.size() && Text[Pos] == C; }
  void skipSpace() {
    while (Pos < Text.size() && llvm::StringRef(" \t\r\n").contains(Text[Pos]))
      ++Pos;
  }
  /// Skips a string at Pos; returns its raw text between the quotes.
  std::optional<llvm::StringRef> skipString() {
    if (!at('"'))
      return std::nullopt;
    size_t Begin = ++Pos;
    while (Pos < Text.size() && Text[Pos] != '"')
      Pos += Text[Pos] == '\\' ? 2 : 1;
    if (Pos >= Text.size())
      return std::nullopt;
    return Text.slice(Begin, Pos++);
  }
  bool skipValue() {
    skipSpace();
    if (at('"'))
      return skipString().has_value();
    if (at('{') || at('[')) {
      char Close = at('{') ? '}' : ']';
      ++Pos;
      skipSpace();
      if (at(Close))
        return ++Pos, true;
      while (true) {
        if (Close == '}') {
          skipSpace();
          if (!skipString())
            return false;
          skipSpace();
          if (!at(':'))
            return false;
          ++Pos;
        }
        if (!skipValue())
          return false;
        skipSpace();
        if (at(Close))
          return ++Pos, true;
        if (!at(','))
          return false;
        ++Pos;
      }
    }
    // A number or a literal.
    size_t Begin = Pos;
    while (Pos < Text.size() &&
           !llvm::StringRef(",]} \t\r\n").contains(Text[Pos]))
      ++Pos;
    return Pos > Begin;
  }
  /// Moves from an object at Pos to the value of its member Key (the last
  /// one, as llvm::json keeps it, if there are several).
  bool enterKey(llvm::StringRef Key) {
    if (!at('{'))
      return false;
    ++Pos;
    std::optional<size_t> Found;
    while (true) {
      skipSpace();
      if (at('}'))
        break;
      std::optional<llvm::StringRef> K = skipString();
      if (!K)
        return false;
      skipSpace();
      if (!at(':'))
        return false;
      ++Pos;
      skipSpace();
      if (*K == Key)
        Found = Pos;
      if (!skipValue())
        return false;
      skipSpace();
      if (at(','))
        ++Pos;
    }
    if (!Found)
      return false;
    Pos = *Found;
    return true;
  }
  bool enterIndex(size_t Index) {
    if (!at('['))
      return false;
    ++Pos;
    for (size_t I = 0; I < Index; ++I) {
      if (!skipValue())
        return false;
      skipSpace();
      if (!at(','))
        return false;
      ++Pos;
    }
    skipSpace();
    return !at(']');
  }

  llvm::StringRef Text;
  size_t Pos = 0;
};

} // namespace

llvm::Expected<std::vector<CalibrationSample>> mtsched::loadCalibrationSamples(
    llvm::StringRef IRPath, llvm::StringRef ReportPath,
    const LoweringOptions &Lowering, const FusionOptions &Fusion) {
  registerAllOpUnits();
  // A report grows with its graph, so it has the IR input's limit.
  auto Rep = readBoundedFile(ReportPath, MaxIRFileBytes, "a report");
  if (!Rep)
    return bad("cannot read report '" + ReportPath +
               "': " + llvm::toString(Rep.takeError()));
  llvm::Expected<llvm::json::Value> Report =
      llvm::json::parse((*Rep)->getBuffer());
  if (!Report)
    return bad(ReportPath +
               ": invalid JSON: " + llvm::toString(Report.takeError()));
  // FILE:LINE:COL for a bad value, FILE alone for what has no one place.
  llvm::StringRef Text = (*Rep)->getBuffer();
  auto InReport = [&](llvm::Error E) {
    std::string Where = ReportPath.str();
    std::string Msg;
    llvm::handleAllErrors(
        std::move(E),
        [&](const ReportValueError &V) {
          Msg = V.Msg;
          if (std::optional<size_t> Off = JsonLocator(Text).find(V.Path)) {
            llvm::StringRef Before = Text.take_front(*Off);
            size_t LineStart = Before.rfind('\n') + 1; // npos + 1 == 0
            Where += ":" + std::to_string(Before.count('\n') + 1) + ":" +
                     std::to_string(*Off - LineStart + 1);
          }
        },
        [&](const llvm::ErrorInfoBase &Other) { Msg = Other.message(); });
    return bad(Where + ": " + Msg);
  };
  if (IRPath.empty()) {
    llvm::Expected<std::vector<CalibrationSample>> S =
        collectCalibrationSamples(nullptr, *Report);
    if (!S)
      return InReport(S.takeError());
    return S;
  }
  auto IR = readBoundedFile(IRPath, MaxIRFileBytes, "an IR input");
  if (!IR)
    return bad("cannot read IR file '" + IRPath +
               "': " + llvm::toString(IR.takeError()));
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(std::move(*IR), llvm::SMLoc());
  std::unique_ptr<Module> M = parseModule(SM);
  if (!M)
    return bad("cannot parse IR file '" + IRPath + "'");
  Diagnostics Diags(SM);
  PassContext Ctx;
  Ctx.M = M.get();
  Ctx.Diags = &Diags;
  LoweringOptions L = Lowering;
  // Decisions are not needed, only the workloads.
  L.Mode = CollectiveMode::Deferred;
  // The default pipeline's passes before `autotune`, as the driver runs
  // them (the report may time SwiGLU's merged alternatives, which
  // fuse-swiglu adds).
  PassRegistry Registry;
  registerPipelinePasses(Registry, L, Fusion, /*Session=*/nullptr);
  std::vector<std::unique_ptr<Pass>> Passes;
  for (const char *Name : defaultPipelineBeforeAutotune())
    Passes.push_back(Registry.lookup(Name)->Factory());
  for (auto &G : M->getGraphs())
    for (auto &P : Passes) {
      P->setContext(Ctx);
      if (llvm::Error E = P->run(*G)) {
        llvm::consumeError(std::move(E));
        return bad("cannot lower IR file '" + IRPath + "'");
      }
    }
  llvm::Expected<std::vector<CalibrationSample>> S =
      collectCalibrationSamples(M.get(), *Report);
  if (!S)
    return InReport(S.takeError());
  return S;
}
