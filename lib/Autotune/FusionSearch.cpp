//===- FusionSearch.cpp - The `search-fusion` pass ------------------------===//
#include "mtsched/Autotune/FusionSearch.h"
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/Autotune/Decision.h"
#include "mtsched/Autotune/HorizontalSelect.h"
#include "mtsched/Autotune/PrologueSelect.h"
#include "mtsched/Schedule/FusionHeuristic.h"
#include "mtsched/Support/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include <cmath>
#include <limits>

using namespace mtsched;

static constexpr double Inf = std::numeric_limits<double>::infinity();

/// Times kept to the nanosecond, as the autotuner keeps them.
static double roundUs(double Us) {
  return std::isfinite(Us) ? std::round(Us * 1000.0) / 1000.0 : Us;
}

namespace {

/// An input read by decided GEMMs: the nodes whose fusion decisions
/// interact through it. Indices are positions in the graph, which a copy
/// (Graph::clone) keeps until select-horizontal erases its alternatives;
/// after that the nodes are found by name (lookupNode).
struct Cluster {
  /// The RMSNorm making the input, or -1.
  int Norm = -1;
  /// Every decided multi-template buffer reading the input as A.
  std::vector<unsigned> Readers;
  /// The readers whose epilogue `autotune` fused: what may be reopened.
  std::vector<unsigned> Fused;
};

class SearchFusionPass : public Pass {
public:
  SearchFusionPass(Autotuner *Session, const FusionOptions &Fusion)
      : Session(Session), Fusion(Fusion) {}
  llvm::StringRef getArgument() const override { return "search-fusion"; }
  llvm::StringRef getDescription() const override {
    return "With --fusion-search=recursive, reopen fused epilogues where "
           "the horizontal merge and prologue fusion then win more";
  }
  llvm::Error run(Graph &G) override;

private:
  /// The cluster's time in G as the selects decide it after reopening Set.
  llvm::Expected<double> priceWith(const Graph &G, const Cluster &C,
                                   llvm::ArrayRef<unsigned> Set);
  /// The cluster's time in Copy, a decided copy of G.
  double priceCluster(const Graph &G, const Graph &Copy,
                      const Cluster &C) const;

  Autotuner *Session;
  FusionOptions Fusion;
  /// Each reader's epilogue as its own kernel, by position in the graph
  /// being searched.
  llvm::DenseMap<unsigned, double> EpilogueUs;
};

} // namespace

/// Whether N is a decided GEMM whose fusion decisions the search weighs:
/// a plain matmul or SwiGLU's merged GEMM, no collective.
static bool isSearchedGemm(const Node &N) {
  const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(&N);
  return M && M->isDecided() &&
         !llvm::isa<CollectiveMultiTemplateBufferNode>(M) &&
         (M->getOp() == OpCode::MatMul || M->getOp() == OpCode::SwiGlu) &&
         M->getNumOperands() >= 2 &&
         !M->getAttrs().contains(HorizontalAlternativeOfAttr);
}

/// The clusters of G in graph order of their input's first reader: inputs
/// read as A by two or more searched GEMMs, or made by an rmsnorm, where
/// at least one reader fused its epilogue (else there is nothing to open).
static std::vector<Cluster> findClusters(const Graph &G) {
  llvm::DenseMap<const Node *, unsigned> Position;
  for (unsigned I = 0; I < G.size(); ++I)
    Position[G.getNodes()[I].get()] = I;
  llvm::MapVector<const Value *, Cluster> ByInput;
  // Values a fused epilogue computes inside its template's kernel: a norm
  // there is no kernel of its own (the all_reduce's add -> rmsnorm).
  llvm::DenseSet<const Value *> InFused;
  for (unsigned I = 0; I < G.size(); ++I) {
    const Node &N = *G.getNodes()[I];
    if (const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(&N))
      if (M->isEpilogueFused())
        for (const Operand &E : M->getEpilogue())
          InFused.insert(E.V);
    if (!isSearchedGemm(N))
      continue;
    const auto &M = llvm::cast<MultiTemplateBufferNode>(N);
    Cluster &C = ByInput[M.getOperand(0)];
    C.Readers.push_back(I);
    if (M.isEpilogueFused())
      C.Fused.push_back(I);
  }
  std::vector<Cluster> Out;
  for (auto &KV : ByInput) {
    const Node *Def = KV.first->getDef();
    if (Def && Def->getOp() == OpCode::RmsNorm && llvm::isa<BufferNode>(Def) &&
        !InFused.count(KV.first))
      KV.second.Norm = int(Position.lookup(Def));
    if (KV.second.Fused.empty() ||
        (KV.second.Readers.size() < 2 && KV.second.Norm < 0))
      continue;
    Out.push_back(std::move(KV.second));
  }
  return Out;
}

/// The time IR attribute Name holds on N, or 0.
static double attrUs(const Node &N, llvm::StringRef Name) {
  const Attribute *A = N.getAttrs().get(Name);
  return A ? A->getNumber() : 0;
}

/// The time of choice Name in Timings, +inf if absent or not measured.
static double timingUs(llvm::ArrayRef<ChoiceTiming> Timings,
                       llvm::StringRef Name) {
  for (const ChoiceTiming &T : Timings)
    if (T.Choice == Name && !T.Skipped)
      return T.Us;
  return Inf;
}

/// The node of Copy named as Original's node at position I.
static const Node &lookupNode(const Graph &Original, const Graph &Copy,
                              unsigned I) {
  const std::string &Name = Original.getNodes()[I]->getName();
  for (const auto &N : Copy.getNodes())
    if (N->getName() == Name)
      return *N;
  llvm_unreachable("a searched node is never erased");
}

double SearchFusionPass::priceCluster(const Graph &G, const Graph &Copy,
                                      const Cluster &C) const {
  double Us = 0;
  bool PrologueFused = false;
  if (C.Norm >= 0) {
    // select-prologue's prices: the fused form includes the GEMMs; the
    // split one is the GEMMs (counted below) and the norm's kernel.
    const Node &Norm = lookupNode(G, Copy, unsigned(C.Norm));
    PrologueFused = Norm.getAttrs().contains(PrologueIntoAttr);
    if (PrologueFused)
      Us += attrUs(Norm, PrologueFusedUsAttr);
    else if (Norm.getAttrs().contains(PrologueSplitUsAttr))
      Us += std::max(0.0, attrUs(Norm, PrologueSplitUsAttr) -
                              attrUs(Norm, PrologueGemmsUsAttr));
    else
      // Not priced (a reader could not take the prologue): its own kernel,
      // as select-prologue would price it.
      Us += predictNormKernelUs(Session->getTimePredictor(),
                                llvm::cast<BufferNode>(Norm));
  }
  for (unsigned I : C.Readers) {
    const auto &M = llvm::cast<MultiTemplateBufferNode>(lookupNode(G, Copy, I));
    bool Epilogue = !M.getEpilogue().empty();
    if (M.isEpilogueFused()) {
      Us += timingUs(M.getFusedTimings(), M.getDecision());
      continue;
    }
    if (Epilogue)
      Us += EpilogueUs.lookup(I);
    // In the norm's fused price already, or run by the group's first.
    if ((PrologueFused && M.getAttrs().contains(PrologueAttr)) ||
        M.getAttrs().contains(HorizontalOfAttr))
      continue;
    Us += M.getAttrs().contains(HorizontalAttr)
              ? attrUs(M, HorizontalMergedUsAttr)
              : timingUs(M.getTimings(), M.getDecision());
  }
  return roundUs(Us);
}

/// Runs N unfused with its fastest unfused choice (ties to the first
/// listed, as every decision); false if none can run.
static bool reopen(MultiTemplateBufferNode &N, double TieTolerance) {
  std::vector<double> Us;
  for (const ChoiceTiming &T : N.getTimings())
    Us.push_back(T.Skipped ? Inf : T.Us);
  int Best = firstWithinTolerance(Us, TieTolerance);
  if (Best < 0)
    return false;
  N.setDecision(N.getTimings()[size_t(Best)].Choice);
  N.setEpilogueFused(false);
  return true;
}

llvm::Expected<double>
SearchFusionPass::priceWith(const Graph &G, const Cluster &C,
                            llvm::ArrayRef<unsigned> Set) {
  std::unique_ptr<Graph> Copy = G.clone();
  for (unsigned I : Set)
    if (!reopen(llvm::cast<MultiTemplateBufferNode>(*Copy->getNodes()[I]),
                Session->getTieTolerance()))
      return Inf;
  std::unique_ptr<Pass> Selects[] = {
      createSelectHorizontalPass(Session, Fusion),
      createSelectProloguePass(Session, Fusion)};
  for (std::unique_ptr<Pass> &P : Selects) {
    P->setContext(Ctx);
    if (llvm::Error E = P->run(*Copy))
      return std::move(E);
  }
  return priceCluster(G, *Copy, C);
}

/// The next set of Size indices below N after Set in lexicographic order
/// (Set is updated); false after the last.
static bool nextSet(std::vector<unsigned> &Set, unsigned N) {
  unsigned K = unsigned(Set.size());
  for (unsigned I = K; I-- > 0;)
    if (Set[I] < N - K + I) {
      ++Set[I];
      for (unsigned J = I + 1; J < K; ++J)
        Set[J] = Set[J - 1] + 1;
      return true;
    }
  return false;
}

llvm::Error SearchFusionPass::run(Graph &G) {
  if (Fusion.Search != FusionSearch::Recursive)
    return llvm::Error::success();
  // Positions are this graph's: the pass object runs on every graph.
  EpilogueUs.clear();
  std::vector<Cluster> Clusters = findClusters(G);
  if (Clusters.empty())
    return llvm::Error::success();
  if (!Session || !Ctx.M)
    return Ctx.Diags->error(G.getLoc(), "the search-fusion pass needs an "
                                        "autotuner session");
  for (const Cluster &C : Clusters) {
    // Every reader's epilogue kernel, in graph order on every rank: the
    // measurement is agreed (and was mostly taken by `autotune` already).
    for (unsigned I : C.Readers) {
      const auto &M = llvm::cast<MultiTemplateBufferNode>(*G.getNodes()[I]);
      if (!M.getEpilogue().empty() && !EpilogueUs.count(I))
        EpilogueUs[I] = Session->measureEpilogueUs(G, M);
    }
    llvm::Expected<double> Greedy = priceWith(G, C, {});
    if (!Greedy)
      return Greedy.takeError();
    // Sets of 1, 2, ... reopened epilogues up to the depth, each size in
    // lexicographic order of graph position: the first of equal times
    // opens the fewest and earliest.
    unsigned N = unsigned(C.Fused.size());
    unsigned Depth =
        Fusion.MaxFusionDepth ? std::min(Fusion.MaxFusionDepth, N) : N;
    double Best = *Greedy;
    std::vector<unsigned> BestSet;
    unsigned Tried = 0;
    for (unsigned K = 1; K <= Depth && Tried < MaxFusionSearchSets; ++K) {
      std::vector<unsigned> Pick(K);
      for (unsigned J = 0; J < K; ++J)
        Pick[J] = J;
      do {
        std::vector<unsigned> Set;
        for (unsigned J : Pick)
          Set.push_back(C.Fused[J]);
        llvm::Expected<double> Us = priceWith(G, C, Set);
        if (!Us)
          return Us.takeError();
        if (*Us < Best) {
          Best = *Us;
          BestSet = std::move(Set);
        }
      } while (++Tried < MaxFusionSearchSets && nextSet(Pick, N));
    }
    FusionSearchQuery Q;
    Q.Opened = unsigned(BestSet.size());
    Q.GreedyUs = *Greedy;
    Q.SearchedUs = Best;
    Q.SpeedupThreshold = Fusion.SpeedupThreshold;
    Q.TieTolerance = Session->getTieTolerance();
    if (!Session->getHeuristic().reopenFusion(Q))
      continue;
    for (unsigned I : BestSet) {
      auto &M = llvm::cast<MultiTemplateBufferNode>(*G.getNodes()[I]);
      reopen(M, Session->getTieTolerance());
      M.getAttrs().set(FusionReopenedAttr, Attribute::getBool(true));
      M.getAttrs().set(FusionGreedyUsAttr, Attribute::getFloat(Q.GreedyUs));
      M.getAttrs().set(FusionSearchedUsAttr, Attribute::getFloat(Best));
    }
  }
  return llvm::Error::success();
}

std::unique_ptr<Pass>
mtsched::createSearchFusionPass(Autotuner *Session,
                                const FusionOptions &Fusion) {
  return std::make_unique<SearchFusionPass>(Session, Fusion);
}
