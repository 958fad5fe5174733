//===- AutotuneResult.h - What one rank's autotuning found ------*- C++ -*-===//
//
// The plain record of a run: every node's choices, times and decision, the
// syncs, counters and per-rank views. The autotuner fills it; the report,
// the summary and the lab read it.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_AUTOTUNERESULT_H
#define MTSCHED_AUTOTUNE_AUTOTUNERESULT_H

#include "mtsched/Autotune/AutotuneOptions.h"
#include "mtsched/Autotune/Measurement.h"
#include "mtsched/Autotune/Workload.h"
#include "mtsched/IR/Graph.h"
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mtsched {

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
  /// A fused variant that was run and failed (a `hier` whose shard is not
  /// whole rows, ...): its status and why; Skipped and empty otherwise.
  ChoiceStatus FusedStatus = ChoiceStatus::Skipped;
  std::string FusedMessage;
  /// Skipped because --prune-top-k dropped it: not measured, not failed.
  bool Pruned = false;
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
  /// Decided from a dispatch table of --decisions-from without measuring:
  /// the hint whose entry was taken; 0 otherwise.
  int64_t FromDispatchHint = 0;
  /// With --decisions-from, why the node was tuned as usual instead (not
  /// in the file, beyond its largest hint, ...); empty otherwise.
  std::string DispatchMiss;
  double EpilogueUs = 0;
  std::vector<DispatchEntry> Dispatch;
  /// The ranks whose measurements the times come from: a collective's
  /// group, every rank for other nodes; empty when nothing was measured.
  std::vector<int> TimedBy;
  /// What the node computes and its choices with their parameters, in
  /// choice order: the report carries them so that calibration needs no
  /// IR. The node's own list, shared (lowering gives every node of one
  /// shape the same list), not a copy per node.
  Workload W;
  ChoiceList ChoiceDefs;
};

struct SyncResult {
  unsigned Count = 0;
  bool Ok = true;
  /// Wall time this rank spent in syncs (waiting for peers included).
  double Ms = 0;
  std::string Reason;
  /// The arrival deadline the (first) pre-sync ran with.
  double DeadlineMs = 0;
  /// Its agreement's shape: "flat", or "hier" and the number of hosts
  /// (`hier 2 hosts`); empty when no pre-sync ran.
  std::string Shape;
  /// Of the first pre-sync: the last rank's arrival minus the first one's,
  /// and the sync's own cost (from the last arrival to the release, plus the
  /// agreement exchange); negative when they could not be measured (the
  /// ranks never all met).
  double SkewMs = -1;
  double CostMs = -1;
  /// CostMs's parts: the last arrival's barrier wait, and this rank's own
  /// agreement exchange (its place among the ranks leaving decides it).
  double LastWaitMs = -1;
  double ExchangeMs = -1;
  /// On the reporting rank: every rank's own CostMs, by rank, gathered when
  /// the run finishes (empty with one rank, or when the gather failed); a
  /// rank's entry is negative where it measured none.
  std::vector<double> RankCostsMs;
  /// Ranks that arrived after the deadline, and ranks never heard from.
  std::vector<int> LateRanks;
  std::vector<int> MissingRanks;
  /// Nodes decided by the fallback rules because nothing could be measured
  /// (not counting nodes replayed from the cache).
  unsigned FallbackNodes = 0;
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
  /// --decisions-from's file (empty without one).
  std::string DecisionsFrom;
  /// Per rank (index = rank): each node's choices' local times, in the order
  /// of Nodes, and the rank's decisions; empty for a rank that was not heard
  /// from at the end.
  std::vector<std::vector<std::vector<double>>> RankLocalUs;
  std::vector<std::vector<std::pair<std::string, std::string>>> RankDecisions;
  /// This rank's backend counters (Benchmarker::getCounters), set by
  /// finish().
  std::vector<std::pair<std::string, int64_t>> BackendCounters;
  /// One line per failed sync that made nodes fall back, for the reporting
  /// rank to print once per run (every rank composes the same line).
  std::vector<std::string> Warnings;
};

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_AUTOTUNERESULT_H
