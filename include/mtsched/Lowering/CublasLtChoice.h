//===- CublasLtChoice.h - The names of cuBLASLt's GEMM choices --*- C++ -*-===//
//
// `extern.cublaslt_aI` is the I-th algorithm cuBLASLt's heuristic lists for
// a matmul (cublasLtMatmulAlgoGetHeuristic, asked for CublasLtListed
// answers). The name and the node's shape are all it takes to derive the
// algorithm again, so the decided IR runs (`--run`, the runtime library)
// exactly what was timed. Offered to long matmuls by default
// (ChoiceConfig::LongGemmExterns) and through a choices file's
// "gemm_externs"; the simulator prices it as every extern GEMM.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LOWERING_CUBLASLTCHOICE_H
#define MTSCHED_LOWERING_CUBLASLTCHOICE_H

#include "llvm/ADT/StringRef.h"
#include <optional>
#include <string>

namespace mtsched {

/// How many algorithms the heuristic is always asked for: the same request
/// when timing and when running, whatever index a name picks.
inline constexpr int CublasLtListed = 8;

/// `extern.cublaslt_a<Index>`.
std::string cublasLtChoiceName(int Index);

/// Whether Name is of the cuBLASLt family (`extern.cublaslt...`), well
/// formed or not.
bool isCublasLtName(llvm::StringRef Name);

/// The algorithm index of a well-formed name (`extern.cublaslt_a0` to
/// `extern.cublaslt_a7`, no leading zeros); nullopt for any other name.
std::optional<int> cublasLtAlgoOf(llvm::StringRef Name);

} // namespace mtsched

#endif
