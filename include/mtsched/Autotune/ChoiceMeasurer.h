//===- ChoiceMeasurer.h - The measurement stack -----------------*- C++ -*-===//
//
// How one time is obtained, from the top of the stack down: the memo and
// the persistent cache (MeasurementStore), then, when neither holds it and
// measuring is allowed, the backend on this rank, agreed with the other
// ranks by max-reduction (RankAgreement). The backend is two halves: its
// Builder builds a batch of nodes' kept choices once (build(), or the node
// alone just before its first time is taken), and its Runner times each
// built choice; a choice that failed to build is not run. Choice faults are
// injected inside the backends. Nothing here decides: it returns agreed
// times, failures as data, for the decision step.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_CHOICEMEASURER_H
#define MTSCHED_AUTOTUNE_CHOICEMEASURER_H

#include "mtsched/Autotune/AutotuneResult.h"
#include "mtsched/Autotune/Builder.h"
#include "mtsched/Autotune/MeasurementStore.h"
#include "mtsched/Autotune/RankAgreement.h"
#include "mtsched/Autotune/Runner.h"
#include "mtsched/Autotune/TimePredictor.h"
#include "mtsched/Autotune/Workload.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringSet.h"
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mtsched {

class ChoiceMeasurer {
public:
  /// What measuring one node found out besides its times.
  struct NodeState {
    /// A time is neither remembered nor cached, and --cache-only forbids
    /// measuring it.
    bool Missing = false;
    /// A time was needed but the ranks could not agree on one.
    bool Unmeasured = false;
  };

  /// Counters (benchmarks run, memo hits) go to Counters.
  ChoiceMeasurer(const AutotuneOptions &Opts, Builder &Build, Runner &Run,
                 const TimePredictor &Model, RankAgreement &Ranks,
                 MeasurementStore &Store, RunResult &Counters)
      : Opts(Opts), Build(Build), Run(Run), Model(Model), Ranks(Ranks),
        Store(Store), Counters(Counters) {}

  /// Every choice of N (fused or not) at workload W, agreed across the
  /// node's ranks. Choices whose entry in Skip is set are not measured (a
  /// choice that failed unfused is not tried fused); pruned ones neither.
  std::vector<AgreedMeasurement>
  measureChoices(const MultiTemplateBufferNode &N, const Workload &W,
                 int64_t Hint, bool Fused, const std::vector<bool> &Skip,
                 NodeState &S);
  /// N's epilogue run as its own kernel.
  AgreedMeasurement measureEpilogue(const MultiTemplateBufferNode &N,
                                    const Workload &W, NodeState &S);
  /// Forms timed interleaved at sustained load (Runner::measureForms), each
  /// form's time agreed across the node's ranks by max and remembered for
  /// the run. Empty where nothing may be measured (the ranks degraded,
  /// --cache-only): the caller keeps the times it had.
  std::vector<AgreedMeasurement>
  measureForms(llvm::ArrayRef<std::vector<FormKernel>> Forms,
               const SustainedProtocol &P);
  /// What one node needs measured before it is decided (measureByNode).
  struct NodeWork {
    const MultiTemplateBufferNode *N = nullptr;
    Workload W;
    /// Also each choice fused with the node's epilogue, and the epilogue
    /// alone (what a fusion heuristic that measures compares).
    bool WithFused = false;
    /// The size hints it is tuned at: (hint, the workload at that size).
    std::vector<std::pair<int64_t, Workload>> Hints;
    /// Nodes of one group (the index of its first node) go to one rank:
    /// a decision compares their times (a merged SwiGLU and the two GEMMs
    /// it replaces), and times taken on different GPUs differ by 1-2%
    /// (docs/RANKS.md). -1: a group of its own.
    int Group = -1;
  };
  /// --split-tuning=nodes: deals Nodes out to the ranks in whole groups
  /// (each to the rank with the fewest times to take so far, in order),
  /// measures this rank's as measureChoices and measureEpilogue would
  /// (pruned choices left out, a choice that failed unfused not tried fused
  /// nor at a hint), then agrees every time in one max-reduction and
  /// remembers them: the nodes' own measurements then come from the memo.
  /// Every time a decision compares is thus taken on one GPU, and a node's
  /// inputs are prepared on one rank. With fewer groups to measure than
  /// ranks it does nothing, and the nodes' walk has every rank time every
  /// choice. False if the ranks could not agree (the agreement is then
  /// broken and nothing is remembered).
  /// Before it measures anything it builds, in one batch, Also (the walk's
  /// collectives, which every rank builds at this point) and this rank's
  /// nodes; with nothing to deal out it builds nothing (the walk's batch
  /// then holds Also).
  bool measureByNode(llvm::ArrayRef<NodeWork> Nodes,
                     llvm::ArrayRef<BuildInput> Also = {});
  /// Adds to Batch N at W with the choices pruning keeps, unless the memo
  /// has every kept choice's time or a node of the same workload was
  /// planned before (its times will be replayed). Called for the nodes the
  /// walk will measure, in order, before the first is measured.
  void planBuild(const MultiTemplateBufferNode &N, const Workload &W,
                 std::vector<BuildInput> &Batch);
  /// Builds Batch, once (the builder compiles while the runner times): the
  /// inputs already built are left out.
  void build(llvm::ArrayRef<BuildInput> Batch);
  /// Waits for every artifact built so far and forgets them all: nothing
  /// the builder started is still running after this (the process may then
  /// end without destroying the backend), and a later node at a freed one's
  /// address is built anew.
  void finishBuilds();
  /// N at W with the choices pruning keeps.
  BuildInput buildInput(const MultiTemplateBufferNode &N, const Workload &W);
  /// Whether measuring N at W measures anything: a choice pruning keeps
  /// (Kept, per choice) has no time in the memo yet.
  bool willMeasure(const MultiTemplateBufferNode &N, const Workload &W,
                   std::vector<bool> &Kept);
  /// --prune-top-k: for each choice of N at W, empty if it is benchmarked,
  /// else why not.
  std::vector<std::string> pruneReasons(const MultiTemplateBufferNode &N,
                                        const Workload &W) const;

private:
  /// The memo's key of choice C of a node at W, fused or not, and of its
  /// epilogue alone: the node's group is part of both.
  std::string choiceMemoKey(const Workload &W, bool Fused,
                            const Choice &C) const;
  std::string epilogueMemoKey(const Workload &W) const;
  /// What building N at W gave, built now (alone) if it was not.
  const BuiltChoices &built(const MultiTemplateBufferNode &N,
                            const Workload &W);
  /// Times choice I of N at W through the runner, unless it failed to build.
  Measurement runChoice(const MultiTemplateBufferNode &N, const Workload &W,
                        size_t I, bool Fused);

  const AutotuneOptions &Opts;
  Builder &Build;
  Runner &Run;
  const TimePredictor &Model;
  RankAgreement &Ranks;
  MeasurementStore &Store;
  RunResult &Counters;
  /// The workloads planBuild() put in a batch.
  llvm::StringSet<> Planned;
  /// What the builder returned, by node and workload.
  std::map<std::pair<const MultiTemplateBufferNode *, std::string>,
           BuiltChoices>
      Built;
};

/// Times kept to the nanosecond: finer digits are noise and clutter the IR.
double roundUs(double Us);

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_CHOICEMEASURER_H
