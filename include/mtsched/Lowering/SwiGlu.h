//===- SwiGlu.h - The merged gate+up GEMM as an alternative -----*- C++ -*-===//
//
// SwiGLU, `%gu = mul(silu(matmul(%h, %wg)), matmul(%h, %wu))`, can run as
// the two GEMMs it is written as (each with its epilogue) or as one merged
// GEMM over the logically concatenated weights [wg | wu] whose epilogue
// writes silu(g) * u. `fuse-swiglu` (after `lower`) adds the merged form as
// an alternative node next to %gu; the autotuner times both; `select-swiglu`
// (after `autotune`) keeps the faster one (lib/Autotune/SwiGluSelect.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LOWERING_SWIGLU_H
#define MTSCHED_LOWERING_SWIGLU_H

#include "mtsched/Lowering/Lowering.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include <optional>

namespace mtsched {

/// The nodes of one SwiGLU pattern in a lowered graph.
struct SwiGluMatch {
  MultiTemplateBufferNode *Gate, *Up;
  Node *Silu, *Mul;
  Value *H, *Wg, *Wu;
};

/// How many nodes read each value (a node reading it twice counts once),
/// plus one per `return` of it.
using UseCounts = llvm::DenseMap<const Value *, unsigned>;
UseCounts countUses(const Graph &G);

/// Offers each node of G in order to Rewrite, with G's use counts, until
/// none is rewritten: after a rewrite (Rewrite returns true) the walk
/// starts again from the first node with the counts taken anew. The counts
/// change only with a rewrite, so they are counted once per rewrite, not
/// once per node (per node, fuse-grouped-mm spent a second on a 10000-node
/// graph, and several under load, before the ranks' pre-sync).
void rewriteUntilNoMatch(
    Graph &G, llvm::function_ref<bool(Node &, const UseCounts &)> Rewrite);

/// Matches Mul against `mul(silu(%g), %u)` (either operand order) with
/// `%g = matmul(%h, %wg)`, `%u = matmul(%h, %wu)` undecided multi-template
/// buffers over one %h and equally shaped rank-2 weights, and %g, %u and
/// the silu read by nothing else and not returned. The GEMMs must be
/// undecided, or decided if Decided is set (after autotuning).
std::optional<SwiGluMatch> matchSwiGlu(Node &Mul, const UseCounts &Uses,
                                       bool Decided = false);

/// The attribute naming the value an alternative node may replace.
inline constexpr llvm::StringLiteral AlternativeOfAttr = "alternative_of";

/// `fuse-swiglu`: inserts `%<gu>.swiglu = multi_template_buffer swiglu(%h,
/// %wg, %wu) {alternative_of = "<gu>"}` after each match, with the merged
/// GEMM's choices.
std::unique_ptr<Pass> createFuseSwiGluPass(const LoweringOptions &Opts);

} // namespace mtsched

#endif // MTSCHED_LOWERING_SWIGLU_H
