//===- PrologueSelect.h - A norm applied while a GEMM loads A ---*- C++ -*-===//
//
// Prologue fusion: an RMSNorm whose result is read only by GEMMs (the norm
// before Llama's Q/K/V or its MLP's gate/up projections) need not be a
// kernel of its own. rmsnorm(x, w) * B = diag(inv_rms(x)) * ((x . w) * B):
// a GEMM template can scale each A tile by the norm's weight w[k] in shared
// memory before the MMA reads it, and each accumulator row by its
// 1 / rms(x[r]) (each CTA sums the squares of its rows of x first). At decode
// (M = 1..64) the GEMM is bound by reading B, so the extra work is nearly
// free and the norm's launch, its write and its reread of A are saved
// (lib/Backend/Cuda/PrologueGemm.cpp).
//
// `select-prologue` (after `select-horizontal`) finds such norms in the
// decided graph, prices both forms and asks the fusion heuristic
// (FusionHeuristic::fusePrologue) which to keep. A fused norm is marked
// `prologue_into = ["q", ...]` (it launches no kernel), each GEMM reading
// it `prologue = "n"`. Every value keeps its node, so consumers, the
// schedule and the fp64 interpreter see the graph as before; only the
// executor launches each GEMM with the norm in its prologue. The norm
// carries `prologue_fused_us` / `prologue_split_us` either way.
// docs/PASSES.md describes it.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_PROLOGUESELECT_H
#define MTSCHED_AUTOTUNE_PROLOGUESELECT_H

#include "mtsched/IR/Graph.h"
#include "mtsched/Passes/Pass.h"
#include "mtsched/Schedule/Fusion.h"
#include <memory>
#include <vector>

namespace mtsched {

class Autotuner;
class TimePredictor;

/// On a fused norm: the GEMMs it runs in; on each of them: the norm.
inline constexpr llvm::StringLiteral PrologueIntoAttr = "prologue_into";
inline constexpr llvm::StringLiteral PrologueAttr = "prologue";
/// On the norm: both forms' predicted times (the norm's readers and, when
/// split, the norm's own kernel), microseconds.
inline constexpr llvm::StringLiteral PrologueFusedUsAttr = "prologue_fused_us";
inline constexpr llvm::StringLiteral PrologueSplitUsAttr = "prologue_split_us";
/// On the norm: the part of both that is the GEMMs' own (for the lab).
inline constexpr llvm::StringLiteral PrologueGemmsUsAttr = "prologue_gemms_us";
/// Set where the GEMMs' times are the measured ones and each prologue
/// tile's is its measured time plus the model's prologue scaled by it;
/// absent where the cost model priced both forms.
inline constexpr llvm::StringLiteral PrologueCalibratedAttr =
    "prologue_calibrated";

/// A norm whose every reader could run it as a prologue.
struct PrologueGroup {
  BufferNode *Norm = nullptr;
  std::vector<MultiTemplateBufferNode *> Readers;
  /// When the readers are exactly the members of one merged horizontal
  /// group (Q/K/V): its first member. The merged GEMM runs the prologue,
  /// with the group's tile.
  MultiTemplateBufferNode *Leader = nullptr;
};

/// Whether GEMM M can run norm Norm as its prologue: a decided plain
/// (two-operand, bf16 or f16) matmul, or SwiGLU's merged gate+up GEMM
/// (`swiglu(%h, %wg, %wu)`), reading Norm's result as A, whose weights are
/// rank 2, with an mma.sync tile (split-K or not) among its
/// choices, no fused epilogue and in no horizontal group. A fused GEMM runs
/// its fastest such tile with the prologue (select-prologue sets its
/// decision to it), whatever it decided alone.
bool canTakePrologue(const BufferNode &Norm, const MultiTemplateBufferNode &M);

/// The prologue groups of decided graph G, in graph order: an `rmsnorm`
/// buffer (x, w; x rank >= 2, w rank 1, one dtype) in a kernel of its own,
/// not priced yet (no `prologue_split_us`), whose result the graph does not
/// return and every reader of which
/// canTakePrologue, or whose readers are exactly the members of one merged
/// horizontal group (select-horizontal ran first). A norm read by anything
/// else stays a kernel (its result must exist) and is not listed.
std::vector<PrologueGroup> findPrologueGroups(Graph &G);

/// The cost model's time of rmsnorm Norm (x, w) as a kernel of its own:
/// the split form's norm, and what the fusion search charges for a norm
/// that stays a kernel.
double predictNormKernelUs(const TimePredictor &Model, const BufferNode &Norm);

/// `select-prologue`: fuses each group the heuristic prefers fused
/// (nothing when Fusion.Prologue is off).
std::unique_ptr<Pass> createSelectProloguePass(Autotuner *Session,
                                               const FusionOptions &Fusion);

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_PROLOGUESELECT_H
