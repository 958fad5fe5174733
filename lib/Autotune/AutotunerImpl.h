//===- AutotunerImpl.h - The autotuner's walk over a graph ------*- C++ -*-===//
//
// Private to lib/Autotune: the layers one Autotuner holds, and the walk
// that takes each node through them (Autotuner.cpp for the world,
// SubgroupTuning.cpp for collectives on smaller process groups,
// SplitByNode.cpp for what --split-tuning=nodes measures before the walk,
// and DecideFromTable.cpp for what --decisions-from decides before it).
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_AUTOTUNE_AUTOTUNERIMPL_H
#define MTSCHED_LIB_AUTOTUNE_AUTOTUNERIMPL_H

#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/Autotune/ChoiceMeasurer.h"
#include "mtsched/Autotune/Decision.h"
#include "mtsched/Autotune/DecisionTable.h"
#include "mtsched/Autotune/DecisionsSource.h"
#include "mtsched/Autotune/MeasurementStore.h"
#include "mtsched/Autotune/RankAgreement.h"
#include "mtsched/Support/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"

namespace mtsched {

struct Autotuner::Impl {
  Impl(Autotuner &Self, const AutotuneOptions &Opts,
       const FusionOptions &Fusion, const FusionHeuristic &Heuristic,
       Communicator &Comm, Diagnostics &Diags, const Module &M,
       RankHooks Hooks);

  Autotuner &Self;
  /// A copy: the layers below hold references to it, and the caller's
  /// options (a rank set-up's local, RankPipeline.h) may go before the
  /// autotuner does.
  const AutotuneOptions Opts;
  /// Predictions where nothing is measured (Autotuner's Model).
  const TimePredictor &Model;
  /// Fusion.Heuristic is Heuristic's name, whatever the caller's said.
  FusionOptions Fusion;
  Diagnostics &Diags;
  const Module &M;
  /// Handed over by the autotuner's creator, who checked its name.
  const FusionHeuristic &Heuristic;
  RankAgreement Ranks;
  MeasurementStore Store;
  ChoiceMeasurer Measurer;
  std::vector<std::unique_ptr<AutotuneObserver>> Observers;

  /// Set for thread ranks sharing one module: decisions go here, not into
  /// the module (Autotuner::setDecisionTable).
  DecisionTable *Table = nullptr;
  DecisionDigest *Digest = nullptr;
  /// The module's node each live stand-in copies: what the backend and the
  /// measurement layers see, so that what they were told ahead of the walk
  /// (announce, prepareAhead) is keyed by the nodes they measure.
  llvm::DenseMap<const MultiTemplateBufferNode *,
                 const MultiTemplateBufferNode *>
      StandInOf;
  /// Autotuner::setKeepNodeRecords.
  bool KeepRecords = true;
  /// Without records: a running hash of "graph/node<TAB>choice" of every
  /// dropped record, in decision order, for finish()'s hash.
  uint64_t DroppedDigest = 0;
  bool Dropped = false;

  /// The node to measure for N: the module's own when N is a stand-in.
  const MultiTemplateBufferNode &measured(const MultiTemplateBufferNode &N) {
    auto It = StandInOf.find(&N);
    return It == StandInOf.end() ? N : *It->second;
  }
  /// Without records: drops every record, keeping its decision as text.
  void dropRecords();

  /// What measuring the node being finalized found out.
  ChoiceMeasurer::NodeState Node;
  /// The nodes that fell back since the last sync failure: "%name -> choice".
  std::vector<std::string> FellBack;
  bool CacheOnlyFailed = false;
  bool StoreWarned = false;

  /// A collective on a process group smaller than the world, waiting for
  /// its group to time it and for the exchange that tells the other ranks.
  struct GroupNode {
    MultiTemplateBufferNode *N;
    /// Its entry in result().Nodes, kept in decision order on every rank.
    size_t ResultIndex;
    /// World ranks, in the group's order; Ranks[0] leads.
    std::vector<int> Ranks;
  };

  RunResult &result() { return Self.Result; }
  int rank() const { return Ranks.rank(); }
  void warn(llvm::SMLoc Loc, const llvm::Twine &Msg) {
    Diags.warning(Loc, "rank " + llvm::Twine(rank()) + ": " + Msg);
  }
  void addPhase(llvm::StringRef Name, double Ms) {
    result().PhasesMs[Name.str()] += Ms;
  }
  std::string cacheKey(const Graph &G, const MultiTemplateBufferNode &N);

  /// The pre-sync with this rank's flags.
  llvm::Expected<std::string> sync(PreSyncInput In, std::string &Bundle);
  /// Rank 0: every node's cache entry, looked up before the pre-sync so a
  /// fully cached graph needs nothing measured (empty without a cache).
  /// Local: any rank reads its own cache (after a failed pre-sync, when
  /// rank 0's entries did not arrive).
  std::string lookupBundle(const Graph &G,
                           llvm::ArrayRef<MultiTemplateBufferNode *> Todo,
                           bool Local = false);
  /// With the ranks degraded: N replayed from Entry (or, without one, from
  /// this rank's cache) as its group would have, with no peer involved;
  /// what the cache lacks falls back.
  void replayAlone(const Graph &G, MultiTemplateBufferNode &N, bool WithFusion,
                   const std::string *Entry = nullptr);
  /// After a sync failure: the one stderr line the reporting rank prints,
  /// or the error under --on-sync-failure=error.
  llvm::Error noteFallbacks(const Graph &G, llvm::StringRef What);
  /// Fallback counts N as a node that fell back after a sync failure.
  void decideWithoutBenchmark(const Graph &G, MultiTemplateBufferNode &N,
                              llvm::StringRef Reason, bool Fallback = true);
  /// --decisions-from: N decided by the dispatch entry Mt names, nothing
  /// measured; its epilogue runs fused where FILE's did, the epilogue is
  /// the same and the choice can run it (WithFusion).
  void decideFromTable(const Graph &G, MultiTemplateBufferNode &N,
                       const DecisionsSource::Match &Mt, bool WithFusion);
  /// --decisions-from: decides the nodes of Todo its dispatch tables cover
  /// (decideFromTable; through a stand-in offered to Table where there is
  /// one, as graph GraphIndex) and leaves the rest in Todo, each with the
  /// reason it was not covered (the map returned).
  llvm::DenseMap<const MultiTemplateBufferNode *, std::string>
  decideFromFile(const Graph &G, std::vector<MultiTemplateBufferNode *> &Todo,
                 unsigned GraphIndex);
  /// The reason in Misses for N, written into N's record (the last one)
  /// once N is decided.
  void noteMiss(const llvm::DenseMap<const MultiTemplateBufferNode *,
                                     std::string> &Misses,
                const MultiTemplateBufferNode &N);
  /// Finalizes N: cache lookup (Entry, from rank 0's bundle; without one,
  /// a broadcast from rank 0), then finalizeNode, then storing what was
  /// measured.
  void finalize(const Graph &G, MultiTemplateBufferNode &N, bool WithFusion,
                const std::string *Entry = nullptr);
  /// Measure (or replay), decide, then the dispatch table.
  void finalizeNode(const Graph &G, MultiTemplateBufferNode &N,
                    bool WithFusion);
  /// --gemm-sustained-us: where N's decided form takes at least that long,
  /// its GemmSustainedTop best forms by T are re-timed interleaved at
  /// sustained load and the fastest replaces D (GemmSustained.cpp).
  void retimeGemmSustained(const Graph &G, MultiTemplateBufferNode &N,
                           const Workload &W, const NodeTimes &T,
                           FusionDecision &D);
  static constexpr size_t GemmSustainedTop = 3;
  /// --split-tuning=nodes: before the walk, every time the non-collective
  /// nodes of Todo need, each node measured by one rank, one exchange
  /// (ChoiceMeasurer::measureByNode), after one build of Collectives and
  /// this rank's nodes. Entries: rank 0's cache entries, one per node of
  /// Todo, if it sent them.
  void measureByNode(const Graph &G,
                     llvm::ArrayRef<MultiTemplateBufferNode *> Todo,
                     const std::vector<std::string> *Entries,
                     llvm::ArrayRef<BuildInput> Collectives);
  /// Whether the walk measures Todo[K] over every rank: it is in no
  /// subgroup and rank 0's cache Entries (if sent) do not replay it.
  bool measuredByWalk(const Graph &G,
                      llvm::ArrayRef<MultiTemplateBufferNode *> Todo,
                      const std::vector<std::string> *Entries, size_t K);
  /// The collectives over every rank the walk will measure: nodes of Todo
  /// in no subgroup, not replayed from rank 0's cache Entries, with a
  /// choice to measure. Every rank finds the same (the pre-sync agreed on
  /// Todo and Entries, and collectives' memos hold agreed times), so every
  /// rank builds them at the same point (the cuda backend then opens NCCL's
  /// communicator, for more than one rank, while it times the rest).
  std::vector<BuildInput>
  collectivesToBuild(const Graph &G,
                     llvm::ArrayRef<MultiTemplateBufferNode *> Todo,
                     const std::vector<std::string> *Entries);
  /// Adds to Batch, in order, the other nodes of Todo the walk will
  /// measure (ChoiceMeasurer::planBuild): not in a subgroup, not replayed
  /// from rank 0's cache Entries, not decided without measurements.
  void planWalk(const Graph &G, llvm::ArrayRef<MultiTemplateBufferNode *> Todo,
                const std::vector<std::string> *Entries,
                std::vector<BuildInput> &Batch);
  /// Whether finalizeNode must stop: N was decided without measurements.
  bool stopIfUnmeasured(const Graph &G, MultiTemplateBufferNode &N);
  void notifyProgress(size_t Done, size_t Total);
  /// An error if the backend was needed and could not be set up.
  llvm::Error checkBackend(llvm::SMLoc Loc);

  /// The ranks of N's process group if N is a collective on a group smaller
  /// than the world; empty otherwise.
  std::vector<int> subgroupOf(const Graph &G,
                              const MultiTemplateBufferNode &N) const;
  /// The ranks whose measurements N's times come from.
  std::vector<int> timedBy(const Graph &G,
                           const MultiTemplateBufferNode &N) const;
  /// Queues N (a subgroup collective) for tuneSubgroupNodes, holding its
  /// place among the results.
  GroupNode queueGroupNode(const Graph &G, MultiTemplateBufferNode &N,
                           std::vector<int> Group);
  /// Each queued node is timed by its group's members only, on the group's
  /// communicator (disjoint groups at the same time); then one world-wide
  /// all-gather carries each group leader's decisions to every rank. If the
  /// exchange cannot happen, every rank falls back on every queued node.
  void tuneSubgroupNodes(const Graph &G, llvm::ArrayRef<GroupNode> Nodes,
                         bool WithFusion);
};

} // namespace mtsched

#endif // MTSCHED_LIB_AUTOTUNE_AUTOTUNERIMPL_H
