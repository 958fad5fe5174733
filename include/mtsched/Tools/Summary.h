//===- Summary.h - The autotune summary for people --------------*- C++ -*-===//
//
// After tuning, mtsched-opt prints on stderr what Inductor users know from
// its `AUTOTUNE mm(...)` lines: per decided node its shapes, every choice
// sorted by time with its share of the best, whether it ran fused, and
// what decided (measurement over N ranks, the cache, or a fallback). It is
// read from the RunResult only, so it never changes what is decided, and
// its content is deterministic (times as the report has them).
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_TOOLS_SUMMARY_H
#define MTSCHED_TOOLS_SUMMARY_H

namespace llvm {
class raw_ostream;
}

namespace mtsched {

class Module;
struct RunResult;
struct ChoiceConfig;

/// Writes the summary of R (from a run of Ranks ranks on M, the decided
/// module, which gives the shapes) to OS.
/// With Choices, a collective whose group's topology removed choices gets
/// a line saying which and why (ChoiceConfig::removedByTopology).
void printAutotuneSummary(const RunResult &R, const Module &M, int Ranks,
                          llvm::raw_ostream &OS,
                          const ChoiceConfig *Choices = nullptr);

} // namespace mtsched

#endif // MTSCHED_TOOLS_SUMMARY_H
