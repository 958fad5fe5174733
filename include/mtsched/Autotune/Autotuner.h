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
// The autotuner is a stack of layers (docs/ARCHITECTURE.md): the backend's
// Builder builds the batch of choices a graph's walk will time, once, and
// its Runner times them, RankAgreement agrees across ranks, MeasurementStore
// remembers and replays (ChoiceMeasurer runs that stack), the decision step
// (Decision.h) asks the fusion heuristic, and observers watch. This class
// only walks a graph's nodes through them.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_AUTOTUNER_H
#define MTSCHED_AUTOTUNE_AUTOTUNER_H

#include "mtsched/Autotune/AutotuneObserver.h"
#include "mtsched/Autotune/AutotuneOptions.h"
#include "mtsched/Autotune/AutotuneResult.h"
#include "mtsched/Autotune/Benchmarker.h"
#include "mtsched/Autotune/PreSync.h"
#include "mtsched/Autotune/RankAgreement.h"
#include "mtsched/Autotune/TimePredictor.h"
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

class DecisionDigest;
class DecisionTable;
class Diagnostics;

class Autotuner {
public:
  /// Heuristic decides epilogue fusion; it is built (and its name checked)
  /// once by whoever creates the autotuner (createFusionHeuristic), must
  /// outlive it, and may be shared by every rank: it is a reference so that
  /// an autotuner without one cannot be written. Fusion's other fields are
  /// read; its Heuristic name is not (the pre-sync compares
  /// Heuristic.getName()).
  Autotuner(const AutotuneOptions &Opts, const FusionOptions &Fusion,
            const FusionHeuristic &Heuristic, CollectiveMode Mode,
            Communicator &Comm, std::unique_ptr<Benchmarker> Bench,
            std::unique_ptr<TimePredictor> Model, Diagnostics &Diags,
            const Module &M, RankHooks Hooks = {});
  ~Autotuner();

  /// Decides every undecided node of G (deferred mode) and records the
  /// outcome in the IR. Once it (or decideNow) returns, nothing the
  /// backend's builder started for it still runs: the session may be left
  /// to the OS at exit instead of destroyed.
  llvm::Error tuneGraph(Graph &G);
  /// V1: decides N now, alone (one sync if it is a collective, no fusion
  /// benchmark).
  llvm::Error decideNow(Graph &G, MultiTemplateBufferNode &N);
  /// Gathers every rank's local timings and decisions for the report; call
  /// once on every rank after the pipeline. Only rank 0 (the reporter of a
  /// run whose gather succeeds) keeps its peers' data. Without RankDetails
  /// (no report or summary wants them) each rank sends only a hash of its
  /// decisions, so the exchange is bytes per rank, not the whole graph's
  /// timings; a peer whose hash differs gets one placeholder decision in
  /// RankDecisions, so "decided differently" is still found.
  void finish(bool RankDetails = true);

  /// N's epilogue run as its own kernel: measured like every choice (agreed
  /// across ranks, memoized), predicted by the noise-free cost model once
  /// ranks cannot agree; 0 without an epilogue, +inf if it failed.
  double measureEpilogueUs(const Graph &G, const MultiTemplateBufferNode &N);
  /// One kernel of a form measureFormsUs times: node N as decided (fused
  /// with its epilogue if Fused), or N's epilogue as its own kernel
  /// (Epilogue).
  struct FormPart {
    const MultiTemplateBufferNode *N = nullptr;
    bool Fused = false;
    bool Epilogue = false;
  };
  /// Each form's time at sustained load, timed interleaved as Protocol says
  /// (Runner::measureForms) and agreed across ranks, memoized; a failed
  /// form's Status and Message say why. Empty where nothing may be measured
  /// (the ranks degraded, --cache-only).
  std::vector<Measurement>
  measureFormsUs(const Graph &G, llvm::ArrayRef<std::vector<FormPart>> Forms,
                 const SustainedProtocol &Protocol = {});
  /// --swiglu-sustained-us: from what time select-swiglu re-times its forms
  /// with measureFormsUs (0: never).
  unsigned getSwiGluSustainedUs() const;
  /// What predicts times where nothing is measured.
  const TimePredictor &getTimePredictor() const;
  /// --tie-tolerance: times within this fraction of the fastest are tied.
  double getTieTolerance() const;
  /// --swiglu-form: what select-swiglu keeps.
  SwiGluForm getSwiGluForm() const;
  /// The heuristic the session decides fusion with (select-horizontal asks
  /// it too).
  const FusionHeuristic &getHeuristic() const;

  /// Thread ranks sharing one immutable module (docs/RANKS.md): tuneGraph
  /// decides a stand-in copy of each node (Node::cloneStandIn), one at a
  /// time, adds it to Digest, offers it to Table (shared by the ranks) and
  /// leaves the module untouched; the caller applies Table and checks the
  /// decided schedule (verifySchedule). The backend is only ever shown the
  /// module's own nodes.
  void setDecisionTable(DecisionTable *Table, DecisionDigest *Digest);
  /// Keep a record per node (getResult().Nodes, default): false when no
  /// report or summary will show them; then each node's record is dropped
  /// once decided, and finish() hashes what it decided from a digest.
  void setKeepNodeRecords(bool Keep);

  /// Observers are told of progress; they never change a decision.
  void addObserver(std::unique_ptr<AutotuneObserver> O);

  const RunResult &getResult() const { return Result; }
  llvm::StringRef getBackendName() const { return Bench->getBackendName(); }
  CollectiveMode getMode() const { return Mode; }

private:
  struct Impl;
  std::unique_ptr<Impl> P;
  CollectiveMode Mode;
  std::unique_ptr<Benchmarker> Bench;
  std::unique_ptr<TimePredictor> Model;
  RunResult Result;
};

/// `autotune`: decides every multi-template buffer through Session.
std::unique_ptr<Pass> createAutotunePass(Autotuner *Session);
/// `lower` in immediate mode (V1): lowers the graph as createLowerPass does,
/// then decides each multi-template buffer at once, in graph order, through
/// Session->decideNow, before any fusion.
std::unique_ptr<Pass> createImmediateLowerPass(const LoweringOptions &Opts,
                                               Autotuner *Session);

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_AUTOTUNER_H
