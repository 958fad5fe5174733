//===- FusionHeuristic.h - When to fuse an epilogue -------------*- C++ -*-===//
//
// The autotuner asks a heuristic, for each multi-template buffer with an
// epilogue, whether to run its winner fused with the epilogue. Heuristics
// are chosen by name with --fusion-heuristic; docs/HEURISTICS.md explains
// how to add one.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_SCHEDULE_FUSIONHEURISTIC_H
#define MTSCHED_SCHEDULE_FUSIONHEURISTIC_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace mtsched {

/// Times of one node's variants, in microseconds (+inf when unusable).
struct FusionQuery {
  struct Variant {
    std::string Choice;
    double UnfusedUs;
    /// Choice and epilogue as one kernel; +inf if the choice cannot fuse.
    double FusedUs;
    /// The cost model's prediction of UnfusedUs, set (not NaN) when the
    /// fused times are predictions too: a heuristic that compares
    /// predictions with predictions reads it (+inf: failed when measured).
    double PredictedUnfusedUs = NAN;
  };
  std::vector<Variant> Variants;
  /// The epilogue as its own kernel.
  double EpilogueUs = 0;
  /// Fuse only if unfused / fused >= this.
  double SpeedupThreshold = 1.0;
  /// Variants within this fraction of the fastest (unfused among unfused,
  /// fused among fused) are tied, and the first of them in choice order
  /// wins: two choices within measurement noise of each other then do not
  /// swap from one run to the next.
  double TieTolerance = 0;
};

/// A horizontal group (select-horizontal, lib/Autotune/HorizontalSelect.cpp):
/// Members >= 2 GEMMs reading one A operand, run as they are (split) or as
/// one merged GEMM over their weights' columns that writes each member's
/// columns to its own output.
struct HorizontalQuery {
  unsigned Members = 0;
  /// The members' GEMMs, each its own launch.
  double SplitUs = 0;
  /// The merged GEMM, one launch.
  double MergedUs = 0;
  /// As FusionQuery::TieTolerance.
  double TieTolerance = 0;
};

/// A prologue group (select-prologue, lib/Autotune/PrologueSelect.cpp): an
/// RMSNorm read only by Readers >= 1 GEMMs, run as its own kernel before
/// them (split) or inside each GEMM while it loads A (fused).
struct PrologueQuery {
  unsigned Readers = 0;
  /// The norm's kernel and the GEMMs as decided.
  double SplitUs = 0;
  /// The GEMMs with the norm in their prologues; +inf if one cannot.
  double FusedUs = 0;
  /// As FusionQuery::TieTolerance.
  double TieTolerance = 0;
};

/// A combination `search-fusion` found (lib/Autotune/FusionSearch.cpp):
/// around one input read by several GEMMs (or made by an RMSNorm), Opened
/// of the GEMMs that `autotune` fused with their epilogues run unfused
/// instead, so that the horizontal merge and the norm's prologue can take
/// them. Both times are of the same nodes (the GEMMs over the input, their
/// epilogue kernels and the norm) with the later selects' decisions.
struct FusionSearchQuery {
  unsigned Opened = 0;
  /// As the pass order decides them.
  double GreedyUs = 0;
  /// With the Opened epilogues run as their own kernels.
  double SearchedUs = 0;
  /// As FusionQuery's: reopen only if GreedyUs / SearchedUs >= this.
  double SpeedupThreshold = 1.0;
  /// As FusionQuery::TieTolerance.
  double TieTolerance = 0;
};

struct FusionDecision {
  std::string Choice;
  bool Fused = false;
};

class FusionHeuristic {
public:
  virtual ~FusionHeuristic() = default;
  virtual llvm::StringRef getName() const = 0;
  virtual llvm::StringRef getDescription() const = 0;
  /// Whether fusion is considered at all; if not, fused variants are
  /// neither measured nor predicted.
  virtual bool considersFusion() const { return true; }
  /// Whether the query must hold measured times; if false the autotuner fills
  /// fused times from the cost model and measures nothing fused.
  virtual bool needsMeasuredFusedTimes() const = 0;
  /// Picks the choice and whether to fuse. Unfused variants with an infinite
  /// time are never picked; if every variant is infinite the first choice is
  /// returned unfused. The built-in heuristics pick the fastest variants as
  /// FusionQuery::TieTolerance says.
  virtual FusionDecision decide(const FusionQuery &Q) const = 0;
  /// Whether to run a horizontal group merged. The default, for every
  /// built-in heuristic that considers fusion, keeps the merged form unless
  /// the split form is faster by more than Q.TieTolerance (one launch
  /// instead of Members, as select-swiglu keeps its merged form); a
  /// heuristic that does not consider fusion never merges.
  virtual bool mergeHorizontal(const HorizontalQuery &Q) const;
  /// Whether to run a norm in the prologues of the GEMMs that read it. The
  /// default, as mergeHorizontal's: fused unless the split form is faster
  /// by more than Q.TieTolerance (one launch and one write of the
  /// normalised rows fewer); never for a heuristic that does not consider
  /// fusion.
  virtual bool fusePrologue(const PrologueQuery &Q) const;
  /// Whether to take the combination the recursive fusion search found
  /// over the pass order's. The default, for every built-in heuristic that
  /// considers fusion: only if it is faster by more than Q.TieTolerance
  /// and by at least Q.SpeedupThreshold (times within noise keep the pass
  /// order's decisions); never for a heuristic that does not consider
  /// fusion.
  virtual bool reopenFusion(const FusionSearchQuery &Q) const;
};

/// The index of the first of Us within Tolerance (a fraction) of the
/// smallest finite one, or -1 if none is finite: how the built-in
/// heuristics and per-size dispatch pick "the fastest", so that times within
/// measurement noise keep one winner from run to run.
int firstWithinTolerance(llvm::ArrayRef<double> Us, double Tolerance);

/// The heuristic called Name, or an error listing the known ones.
llvm::Expected<std::unique_ptr<FusionHeuristic>>
createFusionHeuristic(llvm::StringRef Name);
/// Names and descriptions of every heuristic, for --help and docs.
std::vector<std::pair<std::string, std::string>> listFusionHeuristics();

} // namespace mtsched

#endif // MTSCHED_SCHEDULE_FUSIONHEURISTIC_H
