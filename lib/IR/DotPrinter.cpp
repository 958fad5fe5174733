//===- DotPrinter.cpp - The graph as Graphviz DOT -------------------------===//
#include "mtsched/IR/DotPrinter.h"
#include "mtsched/IR/Graph.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <map>
#include <string>

using namespace mtsched;

namespace {

/// Colours: buffers grey, multi-template buffers blue, collectives orange
/// (a fallback red), so a glance finds the communication.
constexpr const char *BufferFill = "#eeeeee";
constexpr const char *TemplateFill = "#cfe2ff";
constexpr const char *CollectiveFill = "#ffd8a8";
constexpr const char *CollectiveEdge = "#d9480f";
constexpr const char *FallbackFill = "#ffc9c9";

/// A DOT string literal's body: quotes and backslashes escaped.
std::string escape(llvm::StringRef S) {
  std::string Out;
  for (char C : S) {
    if (C == '"' || C == '\\')
      Out += '\\';
    Out += C;
  }
  return Out;
}

class DotWriter {
public:
  DotWriter(const Graph &G, llvm::raw_ostream &OS) : G(G), OS(OS) {}
  void write();

private:
  /// The DOT node of V: its defining node's (a node of several results is
  /// drawn once, under its first result), or the graph input's.
  std::string id(const Value *V) const {
    if (V->getDef())
      V = V->getDef()->getResult();
    return "\"" + escape(G.getName() + "/" + V->getName()) + "\"";
  }
  static std::string timeOf(const MultiTemplateBufferNode &M);
  std::string labelOf(const Node &N) const;
  void writeNode(const Node &N, llvm::StringRef Indent);

  const Graph &G;
  llvm::raw_ostream &OS;
};

std::string DotWriter::timeOf(const MultiTemplateBufferNode &M) {
  const std::vector<ChoiceTiming> &Ts =
      M.isEpilogueFused() ? M.getFusedTimings() : M.getTimings();
  for (const ChoiceTiming &T : Ts)
    if (T.Choice == M.getDecision() && std::isfinite(T.Us)) {
      std::string S;
      llvm::raw_string_ostream SS(S);
      SS << llvm::format("%.2f", T.Us) << " us";
      return SS.str();
    }
  return "";
}

std::string DotWriter::labelOf(const Node &N) const {
  // Labels are plain text with \n line breaks, escaped once at the end.
  std::string L = "%" + N.getName() + " = " + N.getOpName().str();
  L += "\\n" + N.getType().str();
  const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(&N);
  if (!M)
    return L;
  if (const auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(M))
    L += "\\ngroup @" + C->getGroup();
  if (!M->isDecided()) {
    L += "\\n" + std::to_string(M->getChoices().size()) + " choices";
    return L;
  }
  L += "\\n" + M->getDecision();
  std::string T = timeOf(*M);
  if (!T.empty())
    L += " " + T;
  if (M->isEpilogueFused())
    L += " (fused)";
  if (const auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(M))
    if (C->isFallback())
      L += "\\nfallback";
  L += "\\nof " + std::to_string(M->getChoices().size()) + " choices";
  for (const DispatchEntry &D : M->getDispatch())
    L += "\\n<= " + std::to_string(D.Hint) + ": " + D.Choice;
  return L;
}

void DotWriter::writeNode(const Node &N, llvm::StringRef Indent) {
  const char *Fill = BufferFill;
  llvm::StringRef Extra;
  if (const auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N)) {
    Fill = C->isFallback() ? FallbackFill : CollectiveFill;
    Extra = ", penwidth=2, color=\"#d9480f\"";
  } else if (llvm::isa<MultiTemplateBufferNode>(&N)) {
    Fill = TemplateFill;
  } else if (collectiveKindOf(N.getOp()) != CollectiveKind::None) {
    Fill = CollectiveFill;
  }
  // Labels already hold DOT's \n escapes; only quotes need escaping.
  std::string Label;
  for (char C : labelOf(N)) {
    if (C == '"')
      Label += '\\';
    Label += C;
  }
  OS << Indent << id(N.getResult()) << " [label=\"" << Label
     << "\", fillcolor=\"" << Fill << "\"" << Extra
     << (G.isOutput(N.getResult()) ? ", peripheries=2" : "") << "];\n";
}

void DotWriter::write() {
  std::string Name = escape(G.getName());
  OS << "  subgraph \"cluster_" << Name << "\" {\n";
  OS << "    label=\"@" << Name;
  if (G.getWorldSize() > 1)
    OS << " (world_size " << G.getWorldSize() << ")";
  OS << "\";\n    style=dashed;\n";
  for (const auto &In : G.getInputs())
    OS << "    " << id(In.get()) << " [label=\"%" << escape(In->getName())
       << "\\n"
       << escape(In->getType().str())
       << "\", shape=ellipse, fillcolor=white];\n";

  // Fused kernels: a decided template with its absorbed epilogue, and
  // buffers sharing a kernel id (two or more; one is no fusion).
  llvm::DenseMap<const Node *, const MultiTemplateBufferNode *> AbsorbedBy;
  for (const auto &N : G.getNodes())
    if (const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get()))
      if (M->isDecided() && M->isEpilogueFused())
        for (const Operand &E : M->getEpilogue())
          if (const Node *D = E.V->getDef())
            AbsorbedBy[D] = M;
  std::map<int, llvm::SmallVector<const Node *, 4>> Kernels;
  for (const auto &N : G.getNodes())
    if (const auto *B = llvm::dyn_cast<BufferNode>(N.get()))
      if (B->getKernel() != BufferNode::NoKernel && !AbsorbedBy.count(B))
        Kernels[B->getKernel()].push_back(B);

  llvm::DenseMap<const Node *, bool> Written;
  for (const auto &N : G.getNodes()) {
    const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get());
    if (!M || !M->isDecided() || !M->isEpilogueFused())
      continue;
    OS << "    subgraph \"cluster_" << Name << "_fused_" << escape(M->getName())
       << "\" {\n      label=\"fused: %" << escape(M->getName())
       << " + epilogue\";\n      style=\"rounded,filled\"; fillcolor=\""
       << (llvm::isa<CollectiveMultiTemplateBufferNode>(M) ? "#fff4e6"
                                                           : "#e7f5ff")
       << "\";\n";
    writeNode(*M, "      ");
    Written[M] = true;
    for (const Operand &E : M->getEpilogue())
      if (const Node *D = E.V->getDef()) {
        writeNode(*D, "      ");
        Written[D] = true;
      }
    OS << "    }\n";
  }
  for (auto &KV : Kernels) {
    if (KV.second.size() < 2)
      continue;
    OS << "    subgraph \"cluster_" << Name << "_kernel" << KV.first
       << "\" {\n      label=\"kernel " << KV.first
       << "\";\n      style=\"rounded,filled\"; fillcolor=\"#f8f9fa\";\n";
    for (const Node *N : KV.second) {
      writeNode(*N, "      ");
      Written[N] = true;
    }
    OS << "    }\n";
  }
  for (const auto &N : G.getNodes())
    if (!Written.count(N.get()))
      writeNode(*N, "    ");

  for (const auto &N : G.getNodes()) {
    bool Coll = llvm::isa<CollectiveMultiTemplateBufferNode>(N.get());
    for (const Operand &O : N->getOperands()) {
      OS << "    " << id(O.V) << " -> " << id(N->getResult());
      if (Coll)
        OS << " [color=\"" << CollectiveEdge << "\", penwidth=2]";
      OS << ";\n";
    }
  }
  OS << "  }\n";
}

} // namespace

void mtsched::printModuleAsDot(const Module &M, llvm::raw_ostream &OS) {
  OS << "digraph mtsched {\n"
     << "  compound=true;\n"
     << "  graph [fontname=\"Helvetica\", fontsize=11];\n"
     << "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", "
        "fontsize=10];\n"
     << "  edge [color=\"#495057\"];\n";
  for (const auto &G : M.getGraphs())
    DotWriter(*G, OS).write();
  OS << "}\n";
}
