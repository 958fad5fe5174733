//===- Fusion.h - Vertical fusion and epilogue candidates -------*- C++ -*-===//
//
// The fusion analysis groups buffers into kernels and finds, for every
// multi-template buffer, the epilogue that could be fused into it. Every
// rejected fusion is kept with its reason, so tests and users can see why.
//
// Rules (docs/PASSES.md has examples):
//  - Pointwise ops, row reductions (rmsnorm, softmax), float layout ops
//    and float sum/max share kernels; only pointwise ops and row
//    reductions join a template's epilogue.
//  - A consumer joins its producer's kernel only if it fits the kernel's
//    form (KernelForm: same-shape, rows or read-through; a broadcast that
//    grows the iteration space would recompute the producer) and no other
//    operand depends on that kernel through a node outside it (that would
//    create a cycle).
//  - The epilogue of a multi-template buffer is a chain of same-shape
//    fusable buffers, each consuming the one before it (the first consumes
//    the template, which must have no other reader). It ends after a row
//    reduction or at MaxEpilogueLength. A matmul's epilogue continues
//    through layout ops that are bijections of the elements (reshape,
//    transpose; EpilogueThroughLayout): the kernel computes at the GEMM's
//    element, later members iterate over the layout op's shape and are read
//    and written at the mapped index (index substitution). Slice, expand,
//    concat and gathers end it, and so does a trailing layout op with no
//    member after it. A member that is read outside the
//    chain (or returned) may continue it once: the fused kernel then writes
//    two values, e.g. the residual sum and its RMSNorm (`writes [...]`).
//  - Legal by construction: a node joins at most one epilogue, and a member
//    reads only the template, earlier members, graph inputs and values
//    computed before the template runs (a value in an earlier template's
//    epilogue is computed where that template runs). So for SwiGLU,
//    `%gu = mul(silu(%g), %u)`, the gate GEMM takes `silu` and the up GEMM
//    takes the `mul`, which reads the gate's fused output.
//  - The chain becomes one kernel of its own, so that fusing it into the
//    template moves a whole kernel.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_SCHEDULE_FUSION_H
#define MTSCHED_SCHEDULE_FUSION_H

#include "mtsched/IR/Graph.h"
#include "mtsched/Passes/Pass.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include <memory>
#include <string>
#include <vector>

namespace mtsched {

/// How the fusion decisions after `autotune` are taken (--fusion-search).
enum class FusionSearch {
  /// One at a time in pass order: each epilogue by `autotune`, then SwiGLU,
  /// horizontal and prologue merges on what is left.
  Greedy,
  /// `search-fusion` (FusionSearch.h) also weighs reopening fused
  /// epilogues so that horizontal and prologue fusion can take their GEMMs.
  Recursive,
};

/// Which form of a SwiGLU `select-swiglu` keeps (--swiglu-form).
enum class SwiGluForm {
  /// The faster as measured (within --tie-tolerance, the merged one).
  Measured,
  /// The merged gate+up GEMM wherever one of its choices ran, so that a
  /// whole graph can be timed in that form against the measured choice.
  Merged,
  /// Always the two GEMMs.
  Split,
};

struct FusionOptions {
  /// Name of the heuristic deciding epilogue fusion (see FusionHeuristic.h).
  std::string Heuristic = "benchmark";
  /// Fuse only if unfused / fused >= this.
  double SpeedupThreshold = 1.0;
  /// Choices within this fraction of the fastest are tied; the first listed
  /// wins (FusionQuery::TieTolerance).
  double TieTolerance = 0.01;
  /// Longest epilogue chain considered.
  unsigned MaxEpilogueLength = 8;
  /// Values a fused kernel may write besides the last epilogue member.
  unsigned MaxExtraWrites = 1;
  /// Offer horizontal merges of GEMMs that read one input
  /// (select-horizontal; --horizontal-fusion).
  bool Horizontal = true;
  /// Offer running an RMSNorm in the prologues of the GEMMs that read it
  /// (select-prologue; --prologue-fusion). Off by default: the fused
  /// kernels are priced by the cost model, not timed, and on an H200 they
  /// ran 3-8x slower than the norm and GEMM apart (docs/BENCHMARKS.md).
  bool Prologue = false;
  /// Let float sum/max join the kernel of their producer chain
  /// (--reduction-fusion); false keeps each one a kernel of its own, as
  /// before they fused.
  bool Reductions = true;
  /// Let a matmul's epilogue continue through reshape and transpose by
  /// index substitution (--epilogue-through-layout); false ends it at any
  /// layout op. Off by default: every fused output matched fp64 on an
  /// H200, but the Llama-3-8B Q projection + RoPE at decode ran 14.2 us
  /// fused against 11.6 us as decided without it (docs/BENCHMARKS.md).
  bool EpilogueThroughLayout = false;
  /// --fusion-search; Greedy is today's pass order.
  FusionSearch Search = FusionSearch::Greedy;
  /// --max-fusion-depth: how many fused epilogues one candidate may reopen
  /// (0: no bound but the search's own cap, the lab's exhaustive search).
  unsigned MaxFusionDepth = 2;
  /// --swiglu-form: what `select-swiglu` keeps.
  SwiGluForm SwiGlu = SwiGluForm::Measured;
  /// --swiglu-sustained-us: `select-swiglu` re-times the two forms
  /// interleaved at sustained load when either one's autotuning time is at
  /// least this (0: never). On an H200 the Llama-3-8B prefill forms (~0.6
  /// ms) were ordered alike either way; the 70B ones (~2.6 ms) were not.
  unsigned SwiGluSustainedUs = 1000;
  /// --gemm-sustained-us: the autotuner re-times a matmul's best forms
  /// interleaved at sustained load when its decided form takes at least
  /// this long (0: never). At Megatron's 7 ms prefill GEMMs on an H200 the
  /// same choice's burst times moved by 3-5% from run to run, more than
  /// its best choices differ, and the burst order put the kernel that is
  /// slower at sustained load first. 3 ms: the matmuls that are offered
  /// cuBLASLt's algorithms (ChoiceConfig::LongGemmMinFlops) and no shorter.
  unsigned GemmSustainedUs = 3000;
};

struct FusionRejection {
  const Node *Producer;
  const Node *Consumer;
  std::string Reason;
};

struct FusionPlan {
  /// Buffer kernels, each a list of nodes in program order; kernels are
  /// numbered in program order of their first node.
  std::vector<std::vector<const Node *>> Kernels;
  /// Epilogue chain of each multi-template buffer that has one.
  llvm::MapVector<const MultiTemplateBufferNode *, std::vector<const Node *>>
      Epilogues;
  /// Members of each epilogue read outside it, which a fused kernel writes
  /// besides the last member; absent when there are none.
  llvm::MapVector<const MultiTemplateBufferNode *, std::vector<const Node *>>
      Writes;
  /// Why a multi-template buffer got no epilogue.
  llvm::MapVector<const MultiTemplateBufferNode *, std::string> NoEpilogue;
  std::vector<FusionRejection> Rejections;
};

/// Whether a buffer of this op can join a fused kernel.
bool isFusableOp(OpCode Op);

// The fusion rules, shared by the fusion pass (which groups by them) and
// verify-schedule (which checks any schedule, hand-written ones included,
// against them): one definition, so the two cannot drift apart.

/// Whether node N can share a kernel with other buffers, by its op's
/// category and epilogue role in the op table: pointwise ops and row
/// reductions join kernels, and so do float layout ops a kernel reads
/// through (isFusableLayoutNode) and float sum/max (isFusableReduction);
/// every other op (matmul, attention, collectives, integer sum/max,
/// sort/topk, scatter, cumsum, index_select, layout ops of integers,
/// custom) runs as a kernel of its own.
bool canShareKernel(const Node &N);
/// Why N cannot (canShareKernel); empty if it can.
std::string whyNotShareKernel(const Node &N);
/// Whether N is a sum or max of floating-point values (over one dimension,
/// as the IR has them): a fused kernel computes its operand's chain while
/// it reduces, so the operand is never written. Integer reductions keep
/// their exact kernel of their own.
bool isFusableReduction(const Node &N);

/// What the fusion rules know about a kernel while its members join it in
/// program order; the fusion pass keeps one per kernel it groups and
/// verify-schedule replays each kernel through one. A kernel has one of
/// three forms, which the CUDA backend generates (docs/CUDA.md):
///  - same-shape: pointwise members of one shape, a thread per element;
///  - rows: it holds a row reduction (rmsnorm, softmax, layernorm) or a
///    sum/max over the last dimension; one block per row of RowShape. Its
///    members are whole rows (RowShape) or one value per row (RowShape
///    without its last dimension, or with it as 1); a row member reads a
///    per-row value of the kernel only in the kept-dimension form (a
///    broadcast along the row), a per-row member reads values outside the
///    kernel only when they are one value per row or a single one. Its
///    layout members are read before the reduction: they read only values
///    from outside the kernel or other layout members, and the kernel
///    reads their values only as whole rows of RowShape, each element at
///    its own index (r, c) by index substitution; none is written;
///  - read-through: it holds a layout op or a sum/max over another
///    dimension; a thread per element of what it writes, each value
///    computed at the index its reader needs (index substitution), a
///    sum/max by a loop over its dimension. A value computed from such a
///    reduction is read only by pointwise members of its own shape or by
///    another sum/max (a broadcast or a layout op would compute the
///    reduction again for every element it reads).
/// A rows kernel takes no sum/max over another dimension, and no layout op
/// of a value it computes. A read-through kernel of layout ops and
/// pointwise ops of one shape S, whose layout values are read at S, becomes
/// a rows kernel when a row reduction of rows S joins it (a transpose or
/// reshape before an RMSNorm); a last-dim sum/max joins it read through.
class KernelForm {
public:
  explicit KernelForm(const Node &First);
  /// Why buffer C cannot join the kernel; empty if it can: both share
  /// kernels (whyNotShareKernel) and C fits the kernel's form. Cycles and
  /// the values a kernel writes are checked apart.
  std::string whyNotJoin(const Node &C) const;
  /// Adds C, for which whyNotJoin is empty.
  void join(const Node &C);
  const Node &first() const { return *First; }
  bool hasLayout() const { return HasLayout; }
  /// A rows kernel.
  bool reducesRows() const { return Rows; }
  /// A read-through kernel.
  bool readsThrough() const { return !Rows && (HasLayout || HasReduce); }

private:
  /// Why the layout values C reads are not whole rows of Row; empty if
  /// they are.
  std::string whyNotWholeRows(const Node &C, llvm::ArrayRef<int64_t> Row) const;

  const Node *First;
  bool HasLayout = false, HasReduce = false, Rows = false;
  llvm::SmallVector<int64_t, 4> RowShape;
  /// Read-through kernels: whether a row reduction may still make it a
  /// rows kernel (every non-layout member of shape PlainShape reading
  /// layout values at that shape, no layout member reading one of them).
  bool RowsReady = true;
  llvm::SmallVector<int64_t, 4> PlainShape;
  bool HasPlain = false;
  /// Values of the kernel, those of its layout members, and those computed
  /// from a read-through sum/max.
  llvm::DenseSet<const Value *> Values, LayoutValues, Reduced;
};

/// Why the nodes of one kernel (in program order) cannot form it by the
/// rules of KernelForm; empty if they can.
std::string whyNotKernel(llvm::ArrayRef<const Node *> Kernel);
/// The members of one kernel of several buffers (Kernel, in program
/// order) that cannot stay in it, in program order. A read-through kernel:
/// all its layout ops and sum/max members when the values the kernel
/// writes (Escapes: read outside it or returned) differ in shape (one
/// iteration space writes them all) or a member is not float (the kernel
/// computes in float), and a reshape that Escapes (it stays a view). A
/// rows kernel: its layout members that Escape (it never writes a value it
/// reads through). Empty for a kernel of another form.
std::vector<const Node *>
membersThatCannotStay(llvm::ArrayRef<const Node *> Kernel,
                      llvm::function_ref<bool(const Node *)> Escapes);
/// Why template M absorbs no epilogue; empty if it can absorb one: its
/// op's epilogue role must be Absorbs (attention's is not), and a custom op
/// must declare epilogue = "pointwise".
std::string whyNoEpilogue(const MultiTemplateBufferNode &M);
/// Why U cannot be a member of M's epilogue by its op; empty if it can: a
/// buffer of a pointwise op or a row reduction, pointwise only for a
/// custom template; or a float layout op that is a bijection of the
/// elements (elementMapOf) in a matmul's epilogue. (Shapes, order and reads
/// are the caller's.)
std::string whyNotEpilogueMember(const MultiTemplateBufferNode &M,
                                 const Node &U);
/// Whether layout node N (reshape, expand, transpose, slice or concat, of
/// floating-point values) can join a fused kernel of pointwise ops, which
/// then reads through it: each value is computed at the index its reader
/// needs, so the layout op moves no memory of its own. Such a kernel has no
/// row reduction, and the values it writes (those read outside) share one
/// shape, its iteration space; a reshape read outside stays a view.
bool isFusableLayoutNode(const Node &N);

FusionPlan analyzeFusion(const Graph &G, const FusionOptions &Opts);

/// `fuse`: records the plan in the IR (kernel ids, epilogue lists).
std::unique_ptr<Pass> createFusePass(const FusionOptions &Opts);
/// `test-print-fusion-candidates`: prints the plan and every rejection.
std::unique_ptr<Pass>
createTestPrintFusionCandidatesPass(const FusionOptions &Opts);

} // namespace mtsched

#endif // MTSCHED_SCHEDULE_FUSION_H
