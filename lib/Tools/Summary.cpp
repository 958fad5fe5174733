//===- Summary.cpp - The autotune summary for people ----------------------===//
#include "mtsched/Tools/Summary.h"
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/Autotune/FusionSearch.h"
#include "mtsched/Autotune/HorizontalSelect.h"
#include "mtsched/Autotune/PrologueSelect.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/Lowering/ChoiceConfig.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>

using namespace mtsched;

namespace {

/// A summary is for reading: a 100,000-node graph gets its first nodes and
/// each node its fastest variants; the report has everything.
constexpr size_t MaxNodes = 20;
constexpr size_t MaxRows = 10;
/// Pruned choices are one line per node, naming at most this many.
constexpr size_t MaxPrunedNames = 8;

/// One line under a node: a choice, fused or not, at its time.
struct Row {
  const ChoiceResult *C;
  bool Fused;
  /// What the variant costs in total: an unfused choice pays for the
  /// epilogue kernel too, so rows compare like with like.
  double Us;
  size_t Order;
};

/// `1024x4096`, as Inductor writes shapes.
std::string shapeOf(const TensorType &T) {
  std::string S;
  for (size_t I = 0; I < T.Shape.size(); ++I)
    S += (I ? "x" : "") + std::to_string(T.Shape[I]);
  return S.empty() ? "scalar" : S;
}

/// The node's operands' shapes and dtype: `matmul(1024x4096, 4096x4096) bf16`.
std::string signatureOf(const NodeResult &NR, const Node *N) {
  std::string S = NR.Op + "(";
  if (N)
    for (unsigned I = 0; I < N->getNumOperands(); ++I)
      S += (I ? ", " : "") + shapeOf(N->getOperand(I)->getType());
  else if (NR.W.K == Workload::Kind::Gemm)
    // A node the pipeline removed after tuning (select-horizontal's timed
    // alternative): its problem, as it was measured.
    S += std::to_string(NR.W.Gemm.M) + "x" + std::to_string(NR.W.Gemm.K) +
         ", " + std::to_string(NR.W.Gemm.K) + "x" + std::to_string(NR.W.Gemm.N);
  S += ")";
  if (N)
    S += " " + std::string(dtypeName(N->getType().Dtype));
  else if (NR.W.K == Workload::Kind::Gemm)
    S += " " + std::string(dtypeName(NR.W.Gemm.Dtype));
  return S;
}

/// Which rank's time was the maximum for choice C of node NodeIdx (the
/// time every rank decided on), or -1 when all ranks measured the same.
int slowestRank(const RunResult &R, size_t NodeIdx, size_t C) {
  int Slowest = -1;
  double Max = -1, Min = INFINITY;
  for (size_t Rank = 0; Rank < R.RankLocalUs.size(); ++Rank) {
    const auto &Nodes = R.RankLocalUs[Rank];
    if (NodeIdx >= Nodes.size() || C >= Nodes[NodeIdx].size())
      return -1;
    double T = Nodes[NodeIdx][C];
    if (!std::isfinite(T))
      return -1;
    if (T > Max) {
      Max = T;
      Slowest = int(Rank);
    }
    Min = std::min(Min, T);
  }
  return Max > Min ? Slowest : -1;
}

/// select-horizontal's decisions: each group's two forms, priced by the
/// cost model or measured, and which one runs.
void printHorizontalDecisions(const Module &M, llvm::raw_ostream &OS) {
  for (const auto &G : M.getGraphs())
    for (const auto &N : G->getNodes()) {
      const Attribute *Merged = N->getAttrs().get(HorizontalMergedUsAttr);
      const Attribute *Split = N->getAttrs().get(HorizontalSplitUsAttr);
      if (!Merged || !Split)
        continue;
      const Attribute *List = N->getAttrs().get(HorizontalAttr);
      OS << "HORIZONTAL @" << G->getName() << " ";
      if (List && List->isList()) {
        OS << "[";
        llvm::interleaveComma(List->getList(), OS, [&](const Attribute &E) {
          OS << "%" << E.getString();
        });
        OS << "]";
      } else {
        OS << "%" << N->getName() << " and the GEMMs beside it";
      }
      OS << " over %" << N->getOperand(0)->getName()
         << llvm::format(": merged %.4f ms, split %.4f ms",
                         Merged->getNumber() / 1000.0,
                         Split->getNumber() / 1000.0)
         << (N->getAttrs().contains(HorizontalMeasuredAttr) ? " (measured)"
             : N->getAttrs().contains(HorizontalCalibratedAttr)
                 ? " (predicted, scaled by the leader's measured time)"
                 : " (predicted)");
      if (std::optional<llvm::StringRef> Tile =
              N->getAttrs().getString(HorizontalTileAttr))
        OS << "  <- merged, " << *Tile << '\n';
      else
        OS << "  <- split\n";
    }
}

/// select-prologue's decisions: each norm's two forms, priced by the cost
/// model, and which one runs.
void printPrologueDecisions(const Module &M, llvm::raw_ostream &OS) {
  for (const auto &G : M.getGraphs())
    for (const auto &N : G->getNodes()) {
      const Attribute *Fused = N->getAttrs().get(PrologueFusedUsAttr);
      const Attribute *Split = N->getAttrs().get(PrologueSplitUsAttr);
      if (!Fused || !Split)
        continue;
      OS << "PROLOGUE @" << G->getName() << " %" << N->getName() << " "
         << N->getOpName()
         << llvm::format(": fused %.4f ms, split %.4f ms",
                         Fused->getNumber() / 1000.0,
                         Split->getNumber() / 1000.0)
         << (N->getAttrs().contains(PrologueCalibratedAttr)
                 ? " (measured GEMMs, predicted norm and prologue)"
                 : " (predicted)");
      const Attribute *Into = N->getAttrs().get(PrologueIntoAttr);
      if (Into && Into->isList()) {
        OS << "  <- fused into ";
        llvm::interleaveComma(Into->getList(), OS, [&](const Attribute &E) {
          OS << "%" << E.getString();
        });
        OS << '\n';
      } else {
        OS << "  <- split\n";
      }
    }
}

/// search-fusion's decisions: each GEMM whose fused epilogue it reopened,
/// and its cluster's time in pass order and as searched.
void printFusionSearchDecisions(const Module &M, llvm::raw_ostream &OS) {
  for (const auto &G : M.getGraphs())
    for (const auto &N : G->getNodes()) {
      const Attribute *Greedy = N->getAttrs().get(FusionGreedyUsAttr);
      const Attribute *Searched = N->getAttrs().get(FusionSearchedUsAttr);
      if (!N->getAttrs().contains(FusionReopenedAttr) || !Greedy || !Searched)
        continue;
      OS << "FUSION-SEARCH @" << G->getName() << " %" << N->getName()
         << " over %" << N->getOperand(0)->getName()
         << llvm::format(": epilogue reopened, its input's GEMMs and norm "
                         "%.4f ms in pass order, %.4f ms searched\n",
                         Greedy->getNumber() / 1000.0,
                         Searched->getNumber() / 1000.0);
    }
}

} // namespace

/// The end of a node's header line: what decided it.
static void printHowDecided(const RunResult &R, const NodeResult &NR, int Ranks,
                            llvm::raw_ostream &OS) {
  if (NR.Fallback) {
    std::string Why = NR.Choices.empty() ? "" : NR.Choices[0].Message;
    OS << "fallback";
    if (!Why.empty())
      OS << " (" << Why << ")";
  } else if (NR.FromDispatchHint > 0) {
    OS << "from the dispatch table of " << R.DecisionsFrom << " at hint "
       << NR.FromDispatchHint;
  } else if (NR.FromCache) {
    OS << "replayed from the cache";
  } else {
    OS << "measured" << (Ranks > 1 ? " (max over ranks)" : "");
  }
  if (!NR.DispatchMiss.empty())
    OS << " (not from the dispatch table of " << R.DecisionsFrom << ": "
       << NR.DispatchMiss << ")";
  OS << '\n';
}

void mtsched::printAutotuneSummary(const RunResult &R, const Module &M,
                                   int Ranks, llvm::raw_ostream &OS,
                                   const ChoiceConfig *Choices) {
  llvm::StringMap<llvm::StringMap<const Node *>> Nodes;
  llvm::StringMap<int64_t> WorldSizes;
  for (const auto &G : M.getGraphs()) {
    WorldSizes[G->getName()] = G->getWorldSize();
    for (const auto &N : G->getNodes())
      Nodes[G->getName()]["%" + N->getName()] = N.get();
  }

  unsigned Cached = 0, Fallbacks = 0, FromTable = 0;
  for (size_t NI = 0; NI < R.Nodes.size(); ++NI) {
    const NodeResult &NR = R.Nodes[NI];
    Cached += NR.FromCache;
    FromTable += NR.FromDispatchHint > 0;
    Fallbacks += NR.Fallback;
    if (NI >= MaxNodes)
      continue;
    const Node *N = Nodes.lookup(NR.Graph).lookup(NR.Name);
    OS << "AUTOTUNE @" << NR.Graph << " " << NR.Name << " "
       << signatureOf(NR, N);
    if (!NR.Group.empty())
      OS << " group @" << NR.Group;
    OS << " on " << Ranks << " rank" << (Ranks == 1 ? "" : "s") << ": ";
    printHowDecided(R, NR, Ranks, OS);
    // Choices the group's topology ruled out were never candidates: say so,
    // or a cross-host group's list reads as if they had been forgotten.
    if (const auto *C =
            llvm::dyn_cast_or_null<CollectiveMultiTemplateBufferNode>(N);
        C && Choices) {
      std::string Removed = Choices->removedByTopology(
          C->getCollectiveKind(), C->getGroup(),
          M.groupRanks(C->getGroup(), WorldSizes.lookup(NR.Graph)));
      if (!Removed.empty())
        OS << "  removed: " << Removed << '\n';
    }

    // A fallback measured nothing: the reason is in the header already.
    bool Measured = false;
    for (const ChoiceResult &C : NR.Choices)
      Measured |= C.Status != ChoiceStatus::Skipped;
    if ((NR.Fallback || NR.FromDispatchHint > 0) && !Measured) {
      OS << "  " << NR.Chosen << (NR.EpilogueFused ? " fused" : "")
         << "  <- chosen\n";
      continue;
    }

    bool HasFused = false;
    for (const ChoiceResult &C : NR.Choices)
      HasFused |= std::isfinite(C.FusedUs);
    double Epi = HasFused && std::isfinite(NR.EpilogueUs) ? NR.EpilogueUs : 0;
    std::vector<Row> Rows;
    // Pruned choices were never measured: they are not rows (they took
    // most of the ten), but one line after them.
    std::vector<llvm::StringRef> Pruned;
    for (const ChoiceResult &C : NR.Choices) {
      if (C.Pruned && C.Status == ChoiceStatus::Skipped) {
        Pruned.push_back(C.Name);
        continue;
      }
      Rows.push_back({&C, false, C.Us + Epi, Rows.size()});
      if (std::isfinite(C.FusedUs))
        Rows.push_back({&C, true, C.FusedUs, Rows.size()});
      // A collective's fused variant that ran and failed says why (a
      // `hier` whose shard is not whole rows): the unfused row cannot.
      else if (!NR.Group.empty() && !C.FusedMessage.empty() &&
               C.Status == ChoiceStatus::Ok)
        Rows.push_back({&C, true, C.FusedUs, Rows.size()});
    }
    // Fastest first; +inf (failed, skipped) last; ties keep choice order
    // (the final tie-break, as everywhere, so the order is deterministic).
    llvm::sort(Rows, [](const Row &A, const Row &B) {
      return std::make_pair(A.Us, A.Order) < std::make_pair(B.Us, B.Order);
    });
    double Best = Rows.empty() ? INFINITY : Rows.front().Us;
    for (size_t RI = 0; RI < Rows.size(); ++RI) {
      const Row &Rw = Rows[RI];
      bool Chosen = Rw.C->Name == NR.Chosen && Rw.Fused == NR.EpilogueFused;
      // The decision is always shown, even below the cut.
      if (RI >= MaxRows && !Chosen) {
        if (RI == MaxRows)
          OS << "  ... " << Rows.size() - MaxRows << " more\n";
        continue;
      }
      const ChoiceResult &C = *Rw.C;
      OS << "  " << C.Name;
      if (!std::isfinite(Rw.Us) && Rw.Fused) {
        OS << " fused " << choiceStatusName(C.FusedStatus) << ": "
           << C.FusedMessage << '\n';
        continue;
      }
      if (!std::isfinite(Rw.Us)) {
        OS << " " << choiceStatusName(C.Status);
        if (!C.Message.empty())
          OS << ": " << C.Message;
        OS << '\n';
        continue;
      }
      OS << llvm::format(" %.4f ms %.1f%%", Rw.Us / 1000.0,
                         100.0 * Best / Rw.Us);
      if (HasFused)
        OS << (Rw.Fused ? " fused" : " unfused");
      if (Chosen) {
        OS << "  <- chosen";
        if (!NR.FromCache && !Rw.Fused && Ranks > 1) {
          size_t CI = &C - NR.Choices.data();
          int Slow = slowestRank(R, NI, CI);
          if (Slow >= 0)
            OS << " (rank " << Slow << " slowest)";
        }
      }
      OS << '\n';
    }
    if (!Pruned.empty()) {
      OS << "  " << Pruned.size() << " choice"
         << (Pruned.size() == 1 ? "" : "s")
         << " skipped by pruning (--prune-top-k): ";
      llvm::interleaveComma(llvm::ArrayRef(Pruned).take_front(MaxPrunedNames),
                            OS);
      if (Pruned.size() > MaxPrunedNames)
        OS << ", ... " << Pruned.size() - MaxPrunedNames << " more";
      OS << '\n';
    }
    for (const DispatchEntry &D : NR.Dispatch)
      OS << "  dispatch <= " << D.Hint << ": " << D.Choice << '\n';
  }
  if (R.Nodes.size() > MaxNodes)
    OS << "AUTOTUNE: ... " << R.Nodes.size() - MaxNodes
       << " more nodes (--report=FILE has every one)\n";
  printFusionSearchDecisions(M, OS);
  printHorizontalDecisions(M, OS);
  printPrologueDecisions(M, OS);
  OS << "AUTOTUNE: " << R.Nodes.size() << " node"
     << (R.Nodes.size() == 1 ? "" : "s") << " decided, " << R.BenchmarksRun
     << " benchmarks run, " << Cached << " from the cache, " << Fallbacks
     << " fallback" << (Fallbacks == 1 ? "" : "s");
  if (!R.DecisionsFrom.empty())
    OS << ", " << FromTable << " from the dispatch table of "
       << R.DecisionsFrom;
  OS << '\n';
}
