//===- CublasGemm.h - A matmul node as one cuBLAS call ----------*- C++ -*-===//
//
// Private to the CUDA backend: the shape of `extern.cublas` for a matmul
// node, one weight or one per batch, and the call, shared by the
// benchmarker and the graph run (`--run` and the runtime library) so that
// what is timed is what runs.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_BACKEND_CUDA_CUBLASGEMM_H
#define MTSCHED_LIB_BACKEND_CUDA_CUBLASGEMM_H

#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/IR/Graph.h"
#include "llvm/Support/Error.h"

namespace mtsched::cuda {

/// Row-major C = A x B for every batch: A [batch.., M, K], B [K, N] (one
/// weight: the batches are M's rows, Batch = 1) or [Batch, K, N].
struct CublasGemmShape {
  int Type = 0; // CUDA_R_16BF, CUDA_R_16F or CUDA_R_32F
  int64_t Batch = 1, M = 0, N = 0, K = 0;
};

/// N's shape for cuBLAS, or why cuBLAS cannot run it.
llvm::Expected<CublasGemmShape>
cublasGemmShapeOf(const MultiTemplateBufferNode &N);

/// Issues the GEMM on the handle's stream; cuBLAS's status (0: success).
int cublasGemm(const CublasApi &B, cublasHandle_t H, const CublasGemmShape &S,
               const void *A, const void *W, void *C);

} // namespace mtsched::cuda

#endif
