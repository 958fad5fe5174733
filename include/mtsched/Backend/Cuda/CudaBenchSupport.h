//===- CudaBenchSupport.h - Fills and references on the GPU -----*- C++ -*-===//
//
// Kernels the cuda benchmarker runs besides the choices it times: seeded
// fills of its inputs and the fp64 reference rows of a GEMM. Weights of
// hundreds of millions of elements were drawn, converted and copied on the
// host, and each check row of their reference cost K x N multiply-adds
// there: most of a cold autotune. Here a fill writes the very values
// randomValues() gives on the host (same hash, same rounding), so small
// tensors can still be drawn on the host where the epilogue's reference
// needs them.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_BACKEND_CUDA_CUDABENCHSUPPORT_H
#define MTSCHED_BACKEND_CUDA_CUDABENCHSUPPORT_H

#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/IR/Types.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include <memory>
#include <string>
#include <vector>

namespace mtsched {
namespace cuda {

/// The CUDA C++ of the support module (for the NVRTC compile test).
std::string benchSupportSource();

class BenchSupport {
public:
  /// Compiles the module for sm_<Arch> (through the kernel cache) and loads
  /// it into the current context.
  static llvm::Expected<std::unique_ptr<BenchSupport>>
  load(const DriverApi &D, int Arch, const KernelCompileOptions &O);
  /// Starts compiling the module for sm_<Arch> on a thread of its own, so
  /// that load() finds it compiled: NVRTC took 0.36 s of a cold start on a
  /// fresh H100, which can run while the GPU's context opens.
  static void compileAhead(int Arch, const KernelCompileOptions &O);
  ~BenchSupport();

  /// Whether fill writes elements of type T (bf16, f16, f32); others are
  /// drawn on the host and copied.
  static bool canFill(DType T);
  /// Writes randomValues(N, Seed, Stream, T) to the N elements at P.
  llvm::Error fill(CUdeviceptr P, int64_t N, DType T, uint64_t Seed,
                   uint64_t Stream, CUstream S);

  /// Rows[i] of A x B in fp64: A is [*, K], B is [K, N], or [Batch, K, N]
  /// when BatchedB (row r then uses batch r / M1). A and B are of type T.
  llvm::Expected<std::vector<std::vector<double>>>
  gemmRows(CUdeviceptr A, CUdeviceptr B, DType T, llvm::ArrayRef<int64_t> Rows,
           int64_t K, int64_t N, int64_t M1, bool BatchedB, CUstream S);

private:
  BenchSupport(const DriverApi &D) : D(D) {}
  const DriverApi &D;
  CUmodule Mod = nullptr;
  CUfunction Fill[3] = {};
  CUfunction Gemm[3] = {};
};

} // namespace cuda
} // namespace mtsched

#endif // MTSCHED_BACKEND_CUDA_CUDABENCHSUPPORT_H
