//===- Autotuner.h - One rank's autotuning session --------------*- C++ -*-===//
//
// The autotuner decides every multi-template buffer of a graph on one rank.
// Deferred (V2): collect the collective nodes, run ONE timed pre-sync that
// also checks every rank collected the same nodes, then benchmark every
// choice with and without its epilogue. Immediate (V1): decide each node as
// lowering creates it, one sync per collective node, no fusion benchmark.
//
// Every decision is made from timings max-reduced across ranks (or, when the
// ranks cannot talk, from the deterministic fallback rules), so all ranks
// decide identically by construction.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_AUTOTUNER_H
#define MTSCHED_AUTOTUNE_AUTOTUNER_H

#include "mtsched/Autotune/AutotuneOptions.h"
#include "mtsched/Autotune/Benchmarker.h"
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/Runtime/Communicator.h"
#include "mtsched/Schedule/Fusion.h"
#include "mtsched/Schedule/FusionHeuristic.h"
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mtsched {

class Diagnostics;

/// What happened to one choice of one node, at the node's own size.
struct ChoiceResult {
  std::string Name;
  ChoiceStatus Status = ChoiceStatus::Skipped;
  /// Max over ranks; +inf if it failed anywhere.
  double Us;
  /// This rank's own measurement.
  double LocalUs;
  /// Fused with the epilogue: measured (max over ranks) or predicted.
  double FusedUs;
  bool FusedPredicted = false;
  std::string Message;
};

struct NodeResult {
  std::string Graph;
  std::string Name;
  std::string Kind;
  std::string Op;
  /// Empty for a non-collective node.
  std::string Group;
  std::vector<ChoiceResult> Choices;
  std::string Chosen;
  std::vector<std::string> Epilogue;
  bool EpilogueFused = false;
  bool Fallback = false;
  /// Replayed from the persistent cache: nothing was measured this run.
  bool FromCache = false;
  double EpilogueUs = 0;
  std::vector<DispatchEntry> Dispatch;
  /// The ranks whose measurements the times come from: a collective's
  /// group, every rank for other nodes; empty when nothing was measured.
  std::vector<int> TimedBy;
};

struct SyncResult {
  unsigned Count = 0;
  bool Ok = true;
  double Ms = 0;
  std::string Reason;
};

/// Everything the report needs from a rank.
struct RunResult {
  SyncResult Sync;
  std::vector<NodeResult> Nodes;
  /// Wall time per autotuning phase.
  std::map<std::string, double> PhasesMs;
  unsigned BenchmarksRun = 0;
  unsigned MemoHits = 0;
  /// Nodes replayed from the persistent cache without measuring anything,
  /// and nodes it did not (fully) hold; CacheDir is empty without a cache.
  unsigned CacheHits = 0;
  unsigned CacheMisses = 0;
  std::string CacheDir;
  /// Per rank (index = rank): each node's choices' local times, in the order
  /// of Nodes, and the rank's decisions; empty for a rank that was not heard
  /// from at the end.
  std::vector<std::vector<std::vector<double>>> RankLocalUs;
  std::vector<std::vector<std::pair<std::string, std::string>>> RankDecisions;
};

/// Hooks through which the driver makes a rank late, hung or dead on
/// purpose (fault injection).
struct RankHooks {
  /// Blocks until the driver releases hung ranks.
  std::function<void()> Hang;
  /// Marks this rank dead for its peers.
  std::function<void()> Exit;
};

/// Returned when an injected fault stopped this rank; not a user error.
class RankStoppedError : public llvm::ErrorInfo<RankStoppedError> {
public:
  static char ID;
  explicit RankStoppedError(std::string Why) : Why(std::move(Why)) {}
  void log(llvm::raw_ostream &OS) const override { OS << Why; }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }

private:
  std::string Why;
};

class Autotuner : public ImmediateSelector {
public:
  Autotuner(const AutotuneOptions &Opts, const FusionOptions &Fusion,
            CollectiveMode Mode, Communicator &Comm,
            std::unique_ptr<Benchmarker> Bench, Diagnostics &Diags,
            const Module &M, RankHooks Hooks = {});
  ~Autotuner() override;

  /// Decides every undecided node of G (deferred mode) and records the
  /// outcome in the IR.
  llvm::Error tuneGraph(Graph &G);
  /// V1: decides N now; called by lowering.
  llvm::Error decideNow(Graph &G, MultiTemplateBufferNode &N) override;
  /// Gathers every rank's local timings and decisions for the report; call
  /// once on every rank after the pipeline.
  void finish();

  /// N's epilogue run as its own kernel: measured like every choice (agreed
  /// across ranks, memoized), predicted by the noise-free cost model once
  /// ranks cannot agree; 0 without an epilogue, +inf if it failed.
  double measureEpilogueUs(const Graph &G, const MultiTemplateBufferNode &N);
  /// The device the cost model describes.
  const DeviceDesc &getDevice() const;

  const RunResult &getResult() const { return Result; }
  llvm::StringRef getBackendName() const { return Bench->getBackendName(); }
  CollectiveMode getMode() const { return Mode; }

private:
  struct Impl;
  std::unique_ptr<Impl> P;
  CollectiveMode Mode;
  std::unique_ptr<Benchmarker> Bench;
  RunResult Result;
};

/// `autotune`: decides every multi-template buffer through Session.
std::unique_ptr<Pass> createAutotunePass(Autotuner *Session);

/// Hash of the ordered collective nodes (name, op, shapes, dtypes, group,
/// choice names) and of the message-byte size hints they are tuned at;
/// equal on every rank that is about to benchmark the same collectives in
/// the same order.
uint64_t fingerprintCollectives(
    const Graph &G,
    llvm::ArrayRef<const CollectiveMultiTemplateBufferNode *> Nodes,
    llvm::ArrayRef<int64_t> ByteHints = {});

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_AUTOTUNER_H
