//===- Lab.h - Compare fusion heuristics and pruning over a corpus -*- C++
//-*-===//
//
// The heuristics lab runs the whole pipeline (lower, fuse, autotune on
// every rank) over a corpus of graphs once per fusion heuristic and pruning
// setting, and tabulates, per graph and setting, the predicted and measured
// time of the decided graph, the benchmarks run, the regret against the
// fastest decided graph of the same measurements and, on request, the
// autotuning wall time. docs/HEURISTICS.md explains the columns.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_TOOLS_LAB_H
#define MTSCHED_TOOLS_LAB_H

#include "mtsched/Autotune/AutotuneOptions.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
}

namespace mtsched {

struct LabOptions {
  /// IR files, each run on its graphs' world size.
  std::vector<std::string> Files;
  /// Backend, device, noise, seed; the cache is never used.
  AutotuneOptions Tune;
  std::vector<std::string> Heuristics = {"benchmark", "cost-model", "always",
                                         "never"};
  /// 0 means no pruning.
  std::vector<unsigned> PruneTopK = {0, 1, 3};
  /// How fusion decisions are taken: "greedy" (pass order), "recursive"
  /// (search-fusion to MaxFusionDepth) or "exhaustive" (search-fusion with
  /// no depth bound: every set of reopened epilogues, to the search's cap).
  /// A row of a search other than greedy names it after the heuristic
  /// ("benchmark+recursive").
  std::vector<std::string> Searches = {"greedy"};
  /// --max-fusion-depth of the "recursive" rows.
  unsigned MaxFusionDepth = 2;
};

struct LabTableOptions {
  /// Adds the `autotune ms` column: wall time, which no two runs share, so
  /// that a table without it is byte-identical for the same seed.
  bool WallTimes = false;
};

struct LabRow {
  std::string File;
  /// The heuristic's name, and "+recursive" or "+exhaustive" when the
  /// fusion search was not greedy.
  std::string Heuristic;
  unsigned PruneTopK = 0;
  /// Sum over decided nodes of the cost model's time of the decision (fused
  /// where fused, else the choice plus the epilogue kernel).
  double PredictedUs = 0;
  /// The same sum over the exhaustive run's agreed timings.
  double MeasuredUs = 0;
  double AutotuneMs = 0;
  unsigned Benchmarks = 0;
  /// MeasuredUs / Best - 1, where Best is the fastest MeasuredUs of the
  /// graph over the exhaustive run and every setting: all are priced by the
  /// same timings, so the regret is never negative (0 for the best).
  double Regret = 0;
};

/// Runs every file under every setting; an error names the file and why.
llvm::Expected<std::vector<LabRow>> runLab(const LabOptions &Opts);

/// One Markdown table of the rows.
void printLabTable(const std::vector<LabRow> &Rows, llvm::raw_ostream &OS,
                   const LabTableOptions &Table = {});

} // namespace mtsched

#endif // MTSCHED_TOOLS_LAB_H
