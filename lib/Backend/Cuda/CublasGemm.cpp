//===- CublasGemm.cpp -----------------------------------------------------===//
#include "CublasGemm.h"

using namespace mtsched;
using namespace mtsched::cuda;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

llvm::Expected<CublasGemmShape>
cuda::cublasGemmShapeOf(const MultiTemplateBufferNode &N) {
  if (N.getNumOperands() != 2)
    return err("fp8 operands are not passed to cuBLAS (its fp8 GEMM needs "
               "both operands K-major)");
  const TensorType &A = N.getOperand(0)->getType(),
                   &W = N.getOperand(1)->getType(), &C = N.getType();
  CublasGemmShape S;
  S.Type = C.Dtype == DType::BF16  ? CUDA_R_16BF
           : C.Dtype == DType::F16 ? CUDA_R_16F
                                   : CUDA_R_32F;
  S.K = A.innerDim();
  S.N = C.innerDim();
  int64_t Rows = A.numElements() / std::max<int64_t>(1, S.K);
  if (W.rank() == 3) {
    // One weight per batch: A's leading dimensions are the batches.
    S.Batch = W.Shape[0];
  } else if (W.rank() != 2) {
    return err("cuBLAS takes a weight of rank 2 or 3");
  }
  S.M = Rows / std::max<int64_t>(1, S.Batch);
  if (S.M * S.Batch != Rows)
    return err("the rows of A do not split into the weight's batches");
  // cuBLAS's dimensions, leading dimensions and batch count are ints.
  for (int64_t V : {S.Batch, S.M, S.N, S.K, S.M * S.K, S.M * S.N})
    if (V > INT32_MAX)
      return err("a dimension over 2^31 - 1 does not fit cuBLAS's int");
  return S;
}

int cuda::cublasGemm(const CublasApi &B, cublasHandle_t H,
                     const CublasGemmShape &S, const void *A, const void *W,
                     void *C) {
  float One = 1, Zero = 0;
  // Row-major C = A W is column-major C^T = W^T A^T.
  if (S.Batch == 1)
    return B.cublasGemmEx(H, CUBLAS_OP_N, CUBLAS_OP_N, int(S.N), int(S.M),
                          int(S.K), &One, W, S.Type, int(S.N), A, S.Type,
                          int(S.K), &Zero, C, S.Type, int(S.N),
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return B.cublasGemmStridedBatchedEx(
      H, CUBLAS_OP_N, CUBLAS_OP_N, int(S.N), int(S.M), int(S.K), &One, W,
      S.Type, int(S.N), S.K * S.N, A, S.Type, int(S.K), S.M * S.K, &Zero, C,
      S.Type, int(S.N), S.M * S.N, int(S.Batch), CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT);
}
