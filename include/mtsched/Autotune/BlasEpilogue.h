//===- BlasEpilogue.h - Epilogues cuBLASLt runs in its GEMM -----*- C++ -*-===//
//
// cuBLASLt computes D = A B + beta C + bias in one call
// (CUBLASLT_EPILOGUE_BIAS, beta = 1 over a residual C), so a matmul whose
// epilogue is a bias add, a residual add or both, and nothing else, can run
// it fused on `extern.cublaslt_aI`: the fused variant of that choice. Its
// GELU epilogues are not used: they are the tanh approximation, and the
// graph's `gelu` is erf's. The autotuner asks canFuseEpilogue() which
// choices have a fused variant; the CUDA backend reads the operands from
// blasEpilogueOf().
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_BLASEPILOGUE_H
#define MTSCHED_AUTOTUNE_BLASEPILOGUE_H

#include "mtsched/IR/Graph.h"
#include <optional>

namespace mtsched {

/// The epilogue's inputs as cuBLASLt takes them (either may be null, not
/// both): a bias row of N elements added to every row, and a residual of the
/// output's shape.
struct BlasEpilogue {
  const Value *Bias = nullptr;
  const Value *Residual = nullptr;
};

/// N's epilogue as a cuBLASLt epilogue: one or two `add`s of N's chain, at
/// most one of a bias `[N]` and one of a residual of the output's shape,
/// every value of the output's dtype, nothing written besides (`writes`);
/// a plain (rank 2) weight. nullopt otherwise.
std::optional<BlasEpilogue> blasEpilogueOf(const MultiTemplateBufferNode &N);

/// Whether choice C has a fused variant for a node whose epilogue is (or is
/// not: BlasEpilogue false) a cuBLASLt one: every template may (the backend
/// can still refuse), a library call never, but cuBLASLt's algorithms do
/// for a cuBLASLt epilogue.
bool canFuseEpilogue(const Choice &C, bool BlasEpilogue);

} // namespace mtsched

#endif
