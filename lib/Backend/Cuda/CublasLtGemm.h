//===- CublasLtGemm.h - A matmul node as one cuBLASLt call ------*- C++ -*-===//
//
// Private to the CUDA backend: `extern.cublaslt_aI` for a matmul node, its
// descriptors and the I-th algorithm of cuBLASLt's heuristic for the
// node's shape, shared by the benchmarker and the graph run (`--run` and
// the runtime library) so that what is timed is what runs, unfused or with
// the node's bias / residual epilogue (Autotune/BlasEpilogue.h). The layout
// is extern.cublas's (CublasGemm.h): row-major C = A W as column-major
// C^T = W^T A^T, one weight or one per batch.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_BACKEND_CUDA_CUBLASLTGEMM_H
#define MTSCHED_LIB_BACKEND_CUDA_CUBLASLTGEMM_H

#include "CublasGemm.h"
#include "mtsched/Backend/Cuda/CublasLtApi.h"
#include "llvm/Support/Error.h"
#include <memory>

namespace mtsched::cuda {

/// One GEMM's cuBLASLt call, ready to issue any number of times (the
/// descriptors live as long as it does).
class CublasLtGemm {
public:
  /// The call for shape S with the Algo-th algorithm of the heuristic's
  /// list (asked for CublasLtListed answers within WorkspaceBytes of
  /// workspace); an error where cuBLASLt lists fewer or refuses the
  /// shape: a failed choice, not a failed run.
  /// With Bias, the call adds a bias row of N elements to every row
  /// (CUBLASLT_EPILOGUE_BIAS); with Residual, a matrix of C's shape (beta =
  /// 1): the fused variant, for a node whose epilogue is those adds
  /// (Autotune/BlasEpilogue.h). The heuristic is asked for the call as it
  /// will run, epilogue included.
  static llvm::Expected<std::shared_ptr<const CublasLtGemm>>
  create(const CublasLtApi &L, cublasLtHandle_t H, const CublasGemmShape &S,
         int Algo, size_t WorkspaceBytes, bool Bias = false,
         bool Residual = false);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm &) = delete;
  CublasLtGemm &operator=(const CublasLtGemm &) = delete;

  /// Issues C = A W (+ Bias, + Residual, as created) on Stream; cuBLASLt's
  /// status (0: success).
  int run(const void *A, const void *W, void *C, void *Workspace,
          CUstream Stream, const void *Bias = nullptr,
          const void *Residual = nullptr) const;
  /// The workspace the algorithm needs (at most create's WorkspaceBytes).
  size_t workspaceBytes() const { return Workspace; }

private:
  CublasLtGemm(const CublasLtApi &L, cublasLtHandle_t H) : L(L), H(H) {}
  llvm::Error describe(const CublasGemmShape &S, bool Bias);

  const CublasLtApi &L;
  cublasLtHandle_t H;
  cublasLtMatmulDesc_t Desc = nullptr;
  // cuBLASLt's A is our weight, its B our A (column-major C^T = W^T A^T).
  cublasLtMatrixLayout_t LayW = nullptr, LayA = nullptr, LayC = nullptr;
  cublasLtMatmulAlgo_t Algo{};
  size_t Workspace = 0;
  bool HasBias = false, HasResidual = false;
};

} // namespace mtsched::cuda

#endif
