//===- Printer.cpp - Canonical IR text ------------------------------------===//
#include "mtsched/IR/Printer.h"
#include "mtsched/IR/Graph.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>

using namespace mtsched;

void mtsched::printMicros(double Us, llvm::raw_ostream &OS) {
  if (std::isinf(Us)) {
    OS << "inf";
    return;
  }
  printFloat(OS, Us);
  OS << "us";
}

static void printChoices(llvm::ArrayRef<Choice> Choices,
                         llvm::raw_ostream &OS) {
  OS << '[';
  llvm::interleaveComma(Choices, OS, [&](const Choice &C) {
    OS << C.Name;
    C.Params.print(OS);
  });
  OS << ']';
}

static void printTimings(llvm::ArrayRef<ChoiceTiming> Timings,
                         llvm::raw_ostream &OS) {
  OS << '{';
  llvm::interleaveComma(Timings, OS, [&](const ChoiceTiming &T) {
    OS << T.Choice << " = ";
    if (T.Skipped)
      OS << "skipped";
    else
      printMicros(T.Us, OS);
  });
  OS << '}';
}

static void printOperands(llvm::ArrayRef<Operand> Ops, llvm::raw_ostream &OS) {
  llvm::interleaveComma(Ops, OS,
                        [&](const Operand &O) { OS << '%' << O.V->getName(); });
}

static void printMTBClauses(const MultiTemplateBufferNode &N,
                            llvm::raw_ostream &OS) {
  const auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N);
  if (C)
    OS << " group @" << C->getGroup() << " kind "
       << collectiveKindName(C->getCollectiveKind());
  OS << " choices ";
  printChoices(N.getChoices(), OS);
  if (!N.getEpilogue().empty()) {
    OS << " epilogue [";
    printOperands(N.getEpilogue(), OS);
    OS << ']';
  }
  if (!N.getEpilogueWrites().empty()) {
    OS << " writes [";
    printOperands(N.getEpilogueWrites(), OS);
    OS << ']';
  }
  if (N.isDecided()) {
    OS << " decided " << N.getDecision();
    if (N.isEpilogueFused())
      OS << " fused";
    if (C && C->isFallback())
      OS << " fallback";
  }
  if (C && C->getSync() != SyncState::Pending)
    OS << " sync " << syncStateName(C->getSync());
  if (!N.getTimings().empty()) {
    OS << " timings ";
    printTimings(N.getTimings(), OS);
  }
  if (!N.getFusedTimings().empty()) {
    OS << " fused_timings ";
    printTimings(N.getFusedTimings(), OS);
  }
  if (!N.getDispatch().empty()) {
    OS << " dispatch " << dispatchUnitName(N.getDispatchUnit()) << " {";
    llvm::interleaveComma(N.getDispatch(), OS, [&](const DispatchEntry &E) {
      OS << E.Hint << " = " << E.Choice;
    });
    OS << '}';
  }
}

void mtsched::printNode(const Node &N, llvm::raw_ostream &OS) {
  for (unsigned R = 0; R < N.getNumResults(); ++R)
    OS << (R ? ", %" : "%") << N.getResult(R)->getName();
  OS << " = ";
  if (!N.getKindKeyword().empty())
    OS << N.getKindKeyword() << ' ';
  if (N.getOp() == OpCode::Custom) {
    OS << "custom \"";
    OS.write_escaped(N.getCustomName());
    OS << '"';
  } else {
    OS << getOpInfo(N.getOp()).Name;
  }
  OS << '(';
  printOperands(N.getOperands(), OS);
  OS << ')';
  N.getAttrs().print(OS);
  if (const auto *O = llvm::dyn_cast<OpNode>(&N)) {
    if (!O->getConfigs().empty()) {
      OS << " configs ";
      printChoices(O->getConfigs(), OS);
    }
  } else if (const auto *B = llvm::dyn_cast<BufferNode>(&N)) {
    if (B->getKernel() != BufferNode::NoKernel)
      OS << " kernel " << B->getKernel();
  } else {
    printMTBClauses(*llvm::cast<MultiTemplateBufferNode>(&N), OS);
  }
  OS << " : ";
  for (unsigned R = 0; R < N.getNumResults(); ++R) {
    if (R)
      OS << ", ";
    N.getResult(R)->getType().print(OS);
  }
}

void mtsched::printGraph(const Graph &G, llvm::raw_ostream &OS) {
  OS << "graph @" << G.getName() << '(';
  llvm::interleaveComma(G.getInputs(), OS, [&](const auto &In) {
    OS << '%' << In->getName() << ": ";
    In->getType().print(OS);
  });
  OS << ')';
  if (!G.getAttrs().empty()) {
    OS << " attributes";
    G.getAttrs().print(OS);
  }
  OS << " {\n";
  for (const auto &N : G.getNodes()) {
    OS << "  ";
    printNode(*N, OS);
    OS << '\n';
  }
  OS << "  return";
  if (!G.getOutputs().empty()) {
    OS << ' ';
    printOperands(G.getOutputs(), OS);
  }
  OS << "\n}\n";
}

void mtsched::printModule(const Module &M, llvm::raw_ostream &OS) {
  for (const ProcessGroup &G : M.getGroups()) {
    OS << "group @" << G.Name << " = [";
    llvm::interleaveComma(G.Ranks, OS);
    OS << "]\n";
  }
  bool First = M.getGroups().empty();
  for (const auto &G : M.getGraphs()) {
    if (!First)
      OS << '\n';
    First = false;
    printGraph(*G, OS);
  }
}

std::string mtsched::moduleToString(const Module &M) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  printModule(M, OS);
  return OS.str();
}
