//===- Report.h - The JSON report of an autotuning run ----------*- C++ -*-===//
//
// The contract is documented in docs/REPORT.md: keys may be added, never
// renamed.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_TOOLS_REPORT_H
#define MTSCHED_TOOLS_REPORT_H

#include "mtsched/Autotune/Autotuner.h"
#include "llvm/Support/JSON.h"

namespace mtsched {

struct Topology;

struct ReportInput {
  llvm::StringRef Backend;
  int WorldSize = 1;
  /// Where the topology came from (OptMainConfig::TopologySource; empty:
  /// not said) and the topology itself (null: not said).
  llvm::StringRef TopologySource;
  const Topology *Topo = nullptr;
  CollectiveMode Mode = CollectiveMode::Deferred;
  /// The reporting rank's result (its RankLocalUs covers every rank heard).
  const RunResult *Result = nullptr;
  /// Copies of the module the ranks of this process held besides the one
  /// parsed (0: thread ranks shared it, or one rank, or an MPI process);
  /// -1: not known, left out of the report.
  int ModuleCopies = -1;
  /// Phases timed outside the autotuner (parse, each pass), in ms.
  std::vector<std::pair<std::string, double>> ExtraPhasesMs;
};

/// Writes the report to OS as it goes (llvm::json::OStream), followed by a
/// newline; nothing of it is built in memory first.
void writeReport(llvm::raw_ostream &OS, const ReportInput &In);

} // namespace mtsched

#endif // MTSCHED_TOOLS_REPORT_H
