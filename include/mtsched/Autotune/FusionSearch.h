//===- FusionSearch.h - Fusion decisions weighed together -------*- C++ -*-===//
//
// The recursive fusion search (--fusion-search=recursive). In pass order
// every fusion decision is taken alone: `autotune` fuses each GEMM with
// its epilogue when that is faster, and only then do `select-horizontal`
// (GEMMs over one input merged into one launch) and `select-prologue` (an
// RMSNorm run while its GEMMs load A) look at what is left, and both skip
// a GEMM whose epilogue fused (the merged or prologue kernel would lose
// it). So the norm before Q/K/V stays a kernel and Q/K/V three launches
// when Q and K fused a small epilogue, even where running those two
// epilogues as kernels of their own and merging everything is faster.
//
// `search-fusion` (after `select-swiglu`, before `select-horizontal`)
// opens those boundaries: around each input read by decided GEMMs (a
// cluster: its readers and, when it is an RMSNorm, the norm), it tries
// each set of up to --max-fusion-depth epilogue-fused readers run unfused,
// runs the later selects on a copy of the graph for each, and prices the
// cluster's nodes with the agreed times the IR holds (the selects' own
// prices for merged and prologue forms, the measured epilogue kernels).
// The fastest set (the first of equal ones, in a fixed order) is offered
// to the fusion heuristic (FusionHeuristic::reopenFusion) beside the pass
// order's; if it takes it, those GEMMs run unfused (their fastest unfused
// choice) and carry `fusion_reopened` with both times, and the selects
// then decide the graph as they decided the copy. Everything it reads is
// agreed across ranks, so every rank decides the same. docs/PASSES.md
// describes it.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_FUSIONSEARCH_H
#define MTSCHED_AUTOTUNE_FUSIONSEARCH_H

#include "mtsched/Passes/Pass.h"
#include "mtsched/Schedule/Fusion.h"
#include <memory>

namespace mtsched {

class Autotuner;

/// On a GEMM whose epilogue the search reopened: true; and, on the same
/// node, the cluster's time in pass order and with the reopened set.
inline constexpr llvm::StringLiteral FusionReopenedAttr = "fusion_reopened";
inline constexpr llvm::StringLiteral FusionGreedyUsAttr = "fusion_greedy_us";
inline constexpr llvm::StringLiteral FusionSearchedUsAttr =
    "fusion_searched_us";

/// The most sets one cluster tries, whatever the depth: a bound on work
/// (each set copies the graph and runs two selects on it).
inline constexpr unsigned MaxFusionSearchSets = 256;

/// `search-fusion`: nothing unless Fusion.Search is Recursive.
std::unique_ptr<Pass> createSearchFusionPass(Autotuner *Session,
                                             const FusionOptions &Fusion);

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_FUSIONSEARCH_H
