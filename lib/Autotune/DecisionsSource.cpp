//===- DecisionsSource.cpp - Decisions read from a decided module ---------===//
#include "mtsched/Autotune/DecisionsSource.h"
#include "mtsched/Autotune/Workload.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/IR/Verifier.h"
#include "mtsched/Support/Diagnostics.h"
#include "mtsched/Support/FileIO.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/xxhash.h"

using namespace mtsched;

llvm::Expected<std::shared_ptr<const DecisionsSource>>
DecisionsSource::load(llvm::StringRef Path) {
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> Buf =
      readBoundedFile(Path, MaxIRFileBytes, "a --decisions-from module");
  if (!Buf)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--decisions-from: cannot read '" + Path +
                                       "': " + llvm::toString(Buf.takeError()));
  // Not make_shared: the constructor is private.
  std::shared_ptr<DecisionsSource> S(new DecisionsSource());
  S->Path = Path.str();
  S->Fingerprint = llvm::xxh3_64bits((*Buf)->getBuffer());
  S->SM.AddNewSourceBuffer(std::move(*Buf), llvm::SMLoc());
  // The file is input like any other: what it quotes reaches the terminal
  // escaped.
  installEscapingDiagHandler(S->SM);
  S->Mod = parseModule(S->SM);
  if (!S->Mod)
    return llvm::make_error<ReportedError>();
  if (llvm::Error E = verifyModule(*S->Mod, S->SM)) {
    llvm::consumeError(std::move(E));
    return llvm::make_error<ReportedError>();
  }
  auto Fail = [&](llvm::SMLoc Loc, const llvm::Twine &Msg) {
    S->SM.PrintMessage(Loc, llvm::SourceMgr::DK_Error, Msg);
    return llvm::make_error<ReportedError>();
  };
  bool AnyTable = false, AnyDecided = false;
  for (const auto &G : S->Mod->getGraphs())
    for (const auto &N : G->getNodes()) {
      const auto *MTB = llvm::dyn_cast<MultiTemplateBufferNode>(N.get());
      if (!MTB)
        continue;
      // An undecided node means FILE is an input, not a decided module:
      // taking its tables would trust a half-finished run.
      if (!MTB->isDecided())
        return Fail(MTB->getLoc(),
                    "--decisions-from: '%" + MTB->getName() +
                        "' is not decided; the file must be mtsched-opt's "
                        "decided output (--pipeline=default "
                        "--size-hints-m=...)");
      AnyDecided = true;
      if (!llvm::isa<CollectiveMultiTemplateBufferNode>(MTB) &&
          MTB->getDispatchUnit() == DispatchUnit::M &&
          !MTB->getDispatch().empty())
        AnyTable = true;
      S->Nodes[G->getName()][MTB->getName()] = MTB;
    }
  llvm::SMLoc Start = llvm::SMLoc::getFromPointer(
      S->SM.getMemoryBuffer(S->SM.getMainFileID())->getBufferStart());
  llvm::SMLoc Loc = S->Mod->getGraphs().empty()
                        ? Start
                        : S->Mod->getGraphs().front()->getLoc();
  // An input that was never lowered has ops, not decided buffers.
  if (!AnyDecided)
    return Fail(Loc, "--decisions-from: '" + Path +
                         "' is not a decided module (no decided "
                         "multi-template buffer); the file must be "
                         "mtsched-opt's decided output (--pipeline=default "
                         "--size-hints-m=...)");
  if (!AnyTable)
    return Fail(Loc, "--decisions-from: no matmul in '" + Path +
                         "' has a dispatch table in rows (decide it with "
                         "--size-hints-m=...)");
  return std::shared_ptr<const DecisionsSource>(std::move(S));
}

static std::string shapeText(const GemmProblem &P) {
  return (llvm::Twine(P.M) + "x" + llvm::Twine(P.N) + "x" + llvm::Twine(P.K))
      .str();
}

DecisionsSource::Match
DecisionsSource::lookup(const Module &M, const Graph &G,
                        const MultiTemplateBufferNode &N) const {
  Match R;
  Workload W = describeNode(M, G, N);
  if (W.K != Workload::Kind::Gemm) {
    R.Miss = "only matmuls dispatch on rows";
    return R;
  }
  // Graphs are matched by name; a file of one graph decides a module of
  // one graph whatever their names (the torch backend names each Dynamo
  // graph anew).
  const Graph *SrcG = nullptr;
  for (const auto &X : Mod->getGraphs())
    if (X->getName() == G.getName())
      SrcG = X.get();
  if (!SrcG && Mod->getGraphs().size() == 1 && M.getGraphs().size() == 1)
    SrcG = Mod->getGraphs().front().get();
  if (!SrcG) {
    R.Miss = "no graph '@" + G.getName() + "' in it";
    return R;
  }
  const MultiTemplateBufferNode *Src =
      Nodes.lookup(SrcG->getName()).lookup(N.getName());
  if (!Src) {
    R.Miss = "no multi-template buffer '%" + N.getName() + "' in '@" +
             SrcG->getName() + "'";
    return R;
  }
  if (Src->getOp() != N.getOp()) {
    R.Miss = "'%" + N.getName() + "' is a " + Src->getOpName().str() + " there";
    return R;
  }
  Workload SW = describeNode(*Mod, *SrcG, *Src);
  const GemmProblem &A = SW.Gemm, &B = W.Gemm;
  if (SW.K != W.K || A.Batch != B.Batch || A.N != B.N || A.K != B.K ||
      A.Dtype != B.Dtype || A.OperandDtype != B.OperandDtype ||
      A.RowwiseScales != B.RowwiseScales ||
      Src->getNumOperands() != N.getNumOperands()) {
    R.Miss = "it differs in more than its rows there (" + shapeText(A) +
             " there, " + shapeText(B) + " here)";
    return R;
  }
  if (Src->getDispatchUnit() != DispatchUnit::M || Src->getDispatch().empty()) {
    R.Miss = "'%" + N.getName() + "' has no dispatch table in rows there";
    return R;
  }
  // The entries are sorted by hint (the parser and the autotuner keep
  // them so); the first that covers M is the smallest.
  const DispatchEntry *E = nullptr;
  for (const DispatchEntry &D : Src->getDispatch())
    if (D.Hint >= B.M && (!E || D.Hint < E->Hint))
      E = &D;
  if (!E) {
    int64_t Largest = 0;
    for (const DispatchEntry &D : Src->getDispatch())
      Largest = std::max(Largest, D.Hint);
    R.Miss = "M = " + std::to_string(B.M) + " is beyond its largest hint " +
             std::to_string(Largest);
    return R;
  }
  // The same choice, parameters and all: lowering offers a node only the
  // tiles that suit its shape, and a choice it did not offer is never
  // taken.
  const Choice *Mine = N.findChoice(E->Choice);
  const Choice *Theirs = Src->findChoice(E->Choice);
  if (!Mine || !Theirs || !(*Mine == *Theirs)) {
    R.Miss = "its choice at hint " + std::to_string(E->Hint) + ", '" +
             E->Choice + "', is not a choice of this node";
    return R;
  }
  R.Hint = E->Hint;
  R.Choice = E->Choice;
  bool SameEpilogue = Src->getEpilogue().size() == N.getEpilogue().size();
  for (size_t I = 0; SameEpilogue && I < N.getEpilogue().size(); ++I)
    SameEpilogue =
        Src->getEpilogue()[I].V->getName() == N.getEpilogue()[I].V->getName();
  R.SameEpilogueFused = SameEpilogue && Src->isEpilogueFused();
  return R;
}
