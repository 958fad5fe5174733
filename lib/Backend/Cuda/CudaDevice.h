//===- CudaDevice.h - The process's GPU session (internal) -----*- C++ -*-===//
//
// Internal to lib/Backend/Cuda: the one GPU session of the process (context,
// stream, events, cuBLAS, the support kernels) that the benchmarker and the
// --run executor share, and the host/device conversions and checks both
// use.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_BACKEND_CUDA_CUDADEVICE_H
#define MTSCHED_LIB_BACKEND_CUDA_CUDADEVICE_H

#include "mtsched/Autotune/AutotuneOptions.h"
#include "mtsched/Autotune/Measurement.h"
#include "mtsched/Autotune/Workload.h"
#include "mtsched/Backend/Cuda/CublasLtApi.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaBenchSupport.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/IR/Types.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mtsched {
namespace cuda {

inline constexpr double Inf = std::numeric_limits<double>::infinity();

/// A measurement that did not succeed, and why.
inline Measurement failed(ChoiceStatus S, std::string Msg) {
  Measurement M;
  M.Status = S;
  M.Us = Inf;
  M.Message = std::move(Msg);
  return M;
}

/// The process's one GPU session; ranks (threads) take turns through Mu.
struct Gpu {
  DeviceInfo Info;
  const DriverApi *D = nullptr;
  CUstream Stream = nullptr;
  CUevent E0 = nullptr, E1 = nullptr;
  CUdeviceptr Flush = 0;
  size_t FlushBytes = 0;
  /// cuBLAS (its handle and workspace), opened on a thread of its own:
  /// call blas() first, which waits for it. Null, with BlasError saying
  /// why, where it cannot be used.
  const CublasApi *blas();
  cublasHandle_t Blas = nullptr;
  /// cuBLAS's workspace (cublasSetWorkspace).
  CUdeviceptr BlasWorkspace = 0;
  size_t BlasWorkspaceBytes = 0;
  std::string BlasError;
  std::future<void> BlasReady;
  std::once_flag BlasJoined;
  const CublasApi *B = nullptr;
  /// cuBLASLt (`extern.cublaslt_aN`), opened beside cuBLAS; blasLt() waits
  /// as blas() does. Null, with BlasLtError saying why, where it cannot be
  /// used. It shares cuBLAS's workspace: both run on Stream, in turn.
  const CublasLtApi *blasLt();
  cublasLtHandle_t BlasLt = nullptr;
  std::string BlasLtError;
  const CublasLtApi *Lt = nullptr;
  /// Fills and fp64 references on the GPU, loaded on first use (under Mu);
  /// if they cannot load, inputs are drawn and checked on the host.
  std::unique_ptr<BenchSupport> Support;
  bool SupportTried = false;
  std::mutex Mu;
};

/// The first call opens GPU Ordinal (modulo the device count) and keeps it
/// open for the process; later calls return it, or the first call's error.
llvm::Expected<Gpu &> gpu(int Ordinal);
/// What gpu(Ordinal) will open, queried without a context (queryDevice),
/// once; NVRTC is loaded too. Kernels can be generated and compiled from
/// it while another thread opens the GPU.
llvm::Expected<const DeviceInfo &> deviceInfo(int Ordinal);

/// How Opts says kernels are compiled.
inline KernelCompileOptions compileOptionsOf(const AutotuneOptions &Opts) {
  return KernelCompileOptions{Opts.CompileThreads, Opts.KernelCacheDir};
}

/// The support kernels in Support, compiled (under O) and loaded into the
/// current context (device Info) on the first call, Tried then set; null,
/// said once on stderr with what happens Otherwise, if they cannot load.
BenchSupport *loadSupportOnce(std::unique_ptr<BenchSupport> &Support,
                              bool &Tried, const DriverApi &D,
                              const DeviceInfo &Info,
                              const KernelCompileOptions &O,
                              llvm::StringRef Otherwise);
/// G's support kernels (loadSupportOnce). Call under G.Mu.
BenchSupport *support(Gpu &G, const KernelCompileOptions &O);

/// Why kernel K cannot run on device Info, or empty if it can.
std::string unsupportedReason(const KernelSource &K, const DeviceInfo &Info,
                              const DriverApi &D);

/// Encodes K's tensor maps over its pointer parameters at Ptrs (K.Inputs,
/// then K.Outputs).
CUresult encodeTensorMaps(const DriverApi &D, const KernelSource &K,
                          llvm::ArrayRef<CUdeviceptr> Ptrs,
                          std::vector<CUtensorMap> &Out);

/// Launches Fn, compiled from K, on Stream with Args: GridX as launchGridX
/// says for Info's multiprocessors, in clusters of K.ClusterX CTAs
/// when that is more than one, and with programmatic stream serialization
/// where K.ProgrammaticWait (both through cuLaunchKernelEx).
CUresult launchKernel(const DriverApi &D, CUfunction Fn, const KernelSource &K,
                      const DeviceInfo &Info, CUstream Stream, void **Args);

/// The values of device bytes of element type T, and back (rounded to T).
std::vector<double> toHostValues(const std::string &Bytes, DType T);
std::string toDeviceBytes(const std::vector<double> &V, DType T);

/// Relative error ||out - ref|| / ||ref|| of the checked rows (Out is
/// row-major with N columns, Ref[I] is row Rows[I]), or +inf if any element
/// is not finite where the reference is.
double relError(const std::vector<double> &Out, int64_t N,
                llvm::ArrayRef<int64_t> Rows,
                const std::vector<std::vector<double>> &Ref);

/// The relative error an output of type T may have against fp64.
double tolerance(DType T);

} // namespace cuda
} // namespace mtsched

#endif // MTSCHED_LIB_BACKEND_CUDA_CUDADEVICE_H
