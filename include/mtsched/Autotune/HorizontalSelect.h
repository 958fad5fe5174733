//===- HorizontalSelect.h - GEMMs over one input merged into one -*- C++
//-*-===//
//
// Horizontal fusion: N >= 2 matmuls that read the same A and whose B
// operands are graph inputs (weights) of A's K and dtype, e.g. Llama's
// q_proj / k_proj / v_proj (GQA: different N) or a MoE router beside a
// shared expert, can run as one GEMM over the weights' columns: one launch
// that reads A once and writes each member's column range straight to that
// member's own output. Nothing is sliced and no weight is concatenated: the
// merged kernel reads each member's B through its own pointer
// (lib/Backend/Cuda/HorizontalGemm.cpp).
//
// `select-horizontal` (after `autotune`) finds such groups in the decided
// graph, prices both forms and asks the fusion heuristic
// (FusionHeuristic::mergeHorizontal) which to keep. A merged group is
// marked on its members: the first (in graph order) carries
// `horizontal = ["q", "k", "v"]` and the merged tile `horizontal_tile`, the
// others `horizontal_of = "q"`. Every value keeps its node, so consumers,
// fusion groups and the fp64 interpreter see the graph as before; only the
// executor launches the group once. docs/PASSES.md describes it.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_HORIZONTALSELECT_H
#define MTSCHED_AUTOTUNE_HORIZONTALSELECT_H

#include "mtsched/IR/Graph.h"
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/Passes/Pass.h"
#include "mtsched/Schedule/Fusion.h"
#include <memory>
#include <vector>

namespace mtsched {

class Autotuner;

/// Attributes of a merged group (see above) and of both forms' times.
inline constexpr llvm::StringLiteral HorizontalAttr = "horizontal";
inline constexpr llvm::StringLiteral HorizontalOfAttr = "horizontal_of";
inline constexpr llvm::StringLiteral HorizontalTileAttr = "horizontal_tile";
inline constexpr llvm::StringLiteral HorizontalMergedUsAttr =
    "horizontal_merged_us";
inline constexpr llvm::StringLiteral HorizontalSplitUsAttr =
    "horizontal_split_us";
/// Set when both times were measured (fuse-horizontal's alternative was
/// timed), absent when the cost model priced them.
inline constexpr llvm::StringLiteral HorizontalMeasuredAttr =
    "horizontal_measured";
/// Set when the merged GEMM was not timed but its predicted time was scaled
/// by the leader's measured over predicted time with the same tile, and
/// the split side is the members' measured times.
inline constexpr llvm::StringLiteral HorizontalCalibratedAttr =
    "horizontal_calibrated";
/// On fuse-horizontal's alternative (and the weights' concatenation it
/// reads, which exists only to time it): the first member it stands for.
inline constexpr llvm::StringLiteral HorizontalAlternativeOfAttr =
    "horizontal_alternative_of";

/// The groups of G that could merge, each in graph order: decided plain
/// (two-operand, bf16 or f16) matmul multi-template buffers over one A
/// whose B is a rank-2 graph input, no fused epilogue (a merged kernel
/// would lose it), and in no group yet. Groups of one are left out.
std::vector<std::vector<MultiTemplateBufferNode *>>
findHorizontalGroups(Graph &G);

/// The members of the merged group whose first member is Leader (its
/// `horizontal` list, resolved in G), or an empty list if Leader leads
/// none or a name does not resolve to a matmul template.
std::vector<const MultiTemplateBufferNode *>
horizontalMembers(const Graph &G, const MultiTemplateBufferNode &Leader);

/// `fuse-horizontal` (after `lower`, before `fuse`): for each group of
/// undecided matmuls over one A, inserts before its first member
/// `%<q>.hweights = buffer concat(%wq, %wk, %wv) {dim = 1}` and
/// `%<q>.horizontal = multi_template_buffer matmul(%x, %<q>.hweights)`
/// with the mma.sync tiles of the merged problem, both marked
/// `horizontal_alternative_of = "<q>"`: the autotuner times the merged GEMM
/// beside the members, and select-horizontal removes both.
std::unique_ptr<Pass> createFuseHorizontalPass(const LoweringOptions &Opts);

/// `select-horizontal`: merges each group the heuristic prefers merged
/// (nothing when Fusion.Horizontal is off).
std::unique_ptr<Pass> createSelectHorizontalPass(Autotuner *Session,
                                                 const FusionOptions &Fusion);

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_HORIZONTALSELECT_H
