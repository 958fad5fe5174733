//===- Workload.h - What a choice has to compute ----------------*- C++ -*-===//
//
// The shape-level description of a multi-template buffer (and its epilogue)
// that cost models and benchmarkers work from, at its own size or at a size
// hint.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_WORKLOAD_H
#define MTSCHED_AUTOTUNE_WORKLOAD_H

#include "mtsched/IR/Attention.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/OpUnit.h"
#include "mtsched/Runtime/Roofline.h"
#include <optional>

namespace mtsched {

struct Workload {
  /// SwiGlu: a merged gate+up GEMM; Gemm.N counts its output columns.
  /// Attention: an attention op, described by Attn.
  /// OpUnit: an op unit with kernel choices (conv2d, IR/OpUnit.h), its
  /// choices priced by UnitCosts.
  enum class Kind { Gemm, Collective, Custom, SwiGlu, Attention, OpUnit };
  Kind K = Kind::Custom;
  GemmProblem Gemm{};
  AttentionShape Attn{};
  CollectiveKind Collective = CollectiveKind::None;
  /// Per-rank message size of a collective.
  int64_t Bytes = 0;
  /// An uneven all_to_all (counts as operands): Bytes is what a rank may
  /// send at most, OutBytes its receive buffer.
  bool Ragged = false;
  int Ranks = 1;
  /// A collective's row: its input's last dimension (0 where it has none).
  int64_t RowElems = 0;
  /// A custom op's or op unit's input and output bytes.
  int64_t InBytes = 0, OutBytes = 0;
  /// An op unit's problem in words (its operands' types and attributes):
  /// two convolutions of one size but different strides are different
  /// workloads to the memo and the cache.
  std::string UnitKey;
  /// An op unit's choices and the simulator's terms of each.
  std::vector<std::pair<std::string, OpUnitChoiceCost>> UnitCosts;
  /// The epilogue candidate (NumOps == 0 if none).
  EpilogueDesc Epilogue{};
  /// The epilogue is a bias and/or residual add cuBLASLt runs in its GEMM
  /// (BlasEpilogue.h): `extern.cublaslt_aI` has a fused variant.
  bool BlasEpilogue = false;
};

/// The name of a workload kind in reports ("gemm", "attention", ...), and
/// back; every kind has one (a switch the compiler checks).
llvm::StringRef workloadKindName(Workload::Kind K);
std::optional<Workload::Kind> parseWorkloadKind(llvm::StringRef Name);

/// Describes N at its own size (Hint == 0) or at a size hint: M for a
/// matmul, message bytes for a collective.
Workload describeNode(const Module &M, const Graph &G,
                      const MultiTemplateBufferNode &N, int64_t Hint = 0);

// collectiveAlgoOf() lives in Runtime/Roofline.h, beside CollectiveAlgo, so
// that codegen can name a decided collective's kernel too.
/// The algorithm a choice is: its `algo` parameter (a custom collective's
/// config, `custom_ar {algo = "one_shot"}`), else what its name says.
std::optional<CollectiveAlgo> collectiveAlgoOf(const Choice &C);

/// Why `hier` over hosts of PerHost ranks cannot run W fused with its
/// epilogue, or "" where it can: it fuses onto all_reduce only, running the
/// epilogue on each rank's reduced shard (the input over PerHost), which
/// must be whole rows (W.RowElems). The cost model, the sim and the CUDA
/// backends refuse alike, with this reason.
std::string hierFusedRefusal(const Workload &W, int64_t PerHost);

/// Noise-free predicted time of a choice (fused with the epilogue if Fused)
/// in microseconds; +inf if it cannot run that way. A choice with a
/// `cost_us` parameter takes that time unfused and cannot run fused.
double predictChoiceUs(const DeviceDesc &D, const Workload &W, const Choice &C,
                       bool Fused);
/// Predicted time of the epilogue as its own kernel.
double predictEpilogueUs(const DeviceDesc &D, const Workload &W);

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_WORKLOAD_H
