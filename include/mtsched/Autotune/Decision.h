//===- Decision.h - The autotuner's decision step ---------------*- C++ -*-===//
//
// Given a node's agreed times, the fusion heuristic decides: which choice,
// and whether its epilogue runs fused. Nothing overrides it, except that a
// node none of whose choices can run falls back to its default choice. The
// decision is then written into the IR (decision, timings, fused timings)
// and into the node's result record.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_DECISION_H
#define MTSCHED_AUTOTUNE_DECISION_H

#include "mtsched/Autotune/AutotuneResult.h"
#include "mtsched/Autotune/MeasurementStore.h"
#include "mtsched/Schedule/Fusion.h"
#include "mtsched/Schedule/FusionHeuristic.h"
#include <string>
#include <vector>

namespace mtsched {

/// What the decision step reads for one node, agreed by its ranks.
struct NodeTimes {
  std::vector<AgreedMeasurement> Unfused;
  /// Per choice when the epilogue is considered; else empty.
  std::vector<AgreedMeasurement> Fused;
  AgreedMeasurement Epilogue;
  bool HasEpilogue = false;
  /// The epilogue is one cuBLASLt runs (Workload::BlasEpilogue): its
  /// choices have fused times too.
  bool BlasEpilogue = false;
  /// Fused and epilogue times come from the cost model, not measurements.
  bool Predicted = false;
  /// Per choice, the cost model's unfused time when Predicted.
  std::vector<double> PredictedUnfusedUs;
};

/// The choice a node falls back to when nothing can be measured: the
/// configured collective fallback where it is a choice, else the first.
std::string fallbackChoice(const MultiTemplateBufferNode &N,
                           const AutotuneOptions &Opts);

/// Why a node fell back, as its warning says it: the first measured choice
/// of Times (one per choice of N) and its message, and how many others
/// failed with the same message ("'c': out of memory, as did 2 others").
std::string whyEveryChoiceFailed(const MultiTemplateBufferNode &N,
                                 const std::vector<AgreedMeasurement> &Times);

/// Asks H about N, with Fusion's threshold and tie tolerance. Fallback is
/// set when no choice can run (every time is infinite): then the choice is
/// fallbackChoice's.
FusionDecision decideNode(const FusionHeuristic &H,
                          const MultiTemplateBufferNode &N, const NodeTimes &T,
                          const FusionOptions &Fusion,
                          const AutotuneOptions &Opts, bool &Fallback);

/// Writes D and T into N (decision, timings, fused timings) and R's
/// choices.
void applyDecision(MultiTemplateBufferNode &N, const NodeTimes &T,
                   const FusionDecision &D, NodeResult &R);

/// The fastest of Times, ties within TieTolerance going to the first listed
/// (firstWithinTolerance); Default when none is finite.
std::string fastestChoice(const MultiTemplateBufferNode &N,
                          const std::vector<AgreedMeasurement> &Times,
                          double TieTolerance, std::string Default);

/// N's measured unfused time with choice Name as applyDecision wrote it
/// into the IR; +inf where there is none (not measured, skipped, failed).
/// The passes after the autotuner that price a form nothing timed
/// (select-horizontal, select-prologue) scale the cost model by it.
double measuredUs(const MultiTemplateBufferNode &N, llvm::StringRef Name);

/// The start of N's result record: its names, kind, group, epilogue,
/// workload and choice parameters.
NodeResult startRecord(const Module &M, const Graph &G,
                       const MultiTemplateBufferNode &N);

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_DECISION_H
