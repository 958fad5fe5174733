//===- CublasLtApi.h - cuBLASLt opened at run time --------------*- C++ -*-===//
//
// The part of cuBLASLt that `extern.cublaslt_aN` needs (a matmul described
// by layouts, the heuristic's list of algorithms, the call), declared by
// hand and looked up at run time as CudaApi.h does for cuBLAS: mtsched
// never links against CUDA. CudaHeaderCheck.cpp checks these declarations
// against cublasLt.h where the toolkit is installed.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_BACKEND_CUDA_CUBLASLTAPI_H
#define MTSCHED_BACKEND_CUDA_CUBLASLTAPI_H

#include "mtsched/Backend/Cuda/CudaApi.h"
#include <cstddef>
#include <cstdint>

namespace mtsched {
namespace cuda {

using cublasLtHandle_t = struct cublasLtContext *;
using cublasLtMatmulDesc_t = struct CublasLtMatmulDescOpaque *;
using cublasLtMatrixLayout_t = struct CublasLtMatrixLayoutOpaque *;
using cublasLtMatmulPreference_t = struct CublasLtMatmulPreferenceOpaque *;

/// An algorithm as cuBLASLt hands it out: plain data, valid for the
/// library version and device that produced it.
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};

/// One answer of cublasLtMatmulAlgoGetHeuristic.
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};

constexpr int CUBLASLT_MATMUL_DESC_TRANSA = 3;
constexpr int CUBLASLT_MATMUL_DESC_TRANSB = 4;
constexpr int CUBLASLT_MATMUL_DESC_EPILOGUE = 7;
constexpr int CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8;
constexpr int CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5;
constexpr int CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6;
constexpr int CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1;
constexpr int CUBLASLT_EPILOGUE_DEFAULT = 1;
constexpr int CUBLASLT_EPILOGUE_BIAS = 4;

/// cuBLASLt (libcublasLt.so.13, else .12, else libcublasLt.so).
struct CublasLtApi {
  cublasStatus_t (*cublasLtCreate)(cublasLtHandle_t *);
  cublasStatus_t (*cublasLtDestroy)(cublasLtHandle_t);
  cublasStatus_t (*cublasLtMatmulDescCreate)(cublasLtMatmulDesc_t *, int, int);
  cublasStatus_t (*cublasLtMatmulDescDestroy)(cublasLtMatmulDesc_t);
  cublasStatus_t (*cublasLtMatmulDescSetAttribute)(cublasLtMatmulDesc_t, int,
                                                   const void *, size_t);
  cublasStatus_t (*cublasLtMatrixLayoutCreate)(cublasLtMatrixLayout_t *, int,
                                               uint64_t, uint64_t, int64_t);
  cublasStatus_t (*cublasLtMatrixLayoutDestroy)(cublasLtMatrixLayout_t);
  cublasStatus_t (*cublasLtMatrixLayoutSetAttribute)(cublasLtMatrixLayout_t,
                                                     int, const void *, size_t);
  cublasStatus_t (*cublasLtMatmulPreferenceCreate)(
      cublasLtMatmulPreference_t *);
  cublasStatus_t (*cublasLtMatmulPreferenceDestroy)(cublasLtMatmulPreference_t);
  cublasStatus_t (*cublasLtMatmulPreferenceSetAttribute)(
      cublasLtMatmulPreference_t, int, const void *, size_t);
  cublasStatus_t (*cublasLtMatmulAlgoGetHeuristic)(
      cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
      cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
      cublasLtMatmulPreference_t, int, cublasLtMatmulHeuristicResult_t *,
      int *);
  cublasStatus_t (*cublasLtMatmul)(cublasLtHandle_t, cublasLtMatmulDesc_t,
                                   const void *, const void *,
                                   cublasLtMatrixLayout_t, const void *,
                                   cublasLtMatrixLayout_t, const void *,
                                   const void *, cublasLtMatrixLayout_t, void *,
                                   cublasLtMatrixLayout_t,
                                   const cublasLtMatmulAlgo_t *, void *, size_t,
                                   CUstream);
};

/// Opens cuBLASLt once per process; the error says which library or symbol
/// is missing. MTSCHED_LIBCUBLASLT overrides the library's path.
llvm::Expected<const CublasLtApi &> loadCublasLt();

} // namespace cuda
} // namespace mtsched

#endif
