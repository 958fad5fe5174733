//===- CudaApi.h - CUDA driver, NVRTC and cuBLAS opened at run time -*- C++
//-*-===//
//
// mtsched never links against CUDA and never includes its headers: the few
// types and entry points it needs are declared here and looked up with
// llvm::sys::DynamicLibrary, so one binary runs with or without a GPU and
// can say exactly what is missing.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_BACKEND_CUDA_CUDAAPI_H
#define MTSCHED_BACKEND_CUDA_CUDAAPI_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace mtsched {
namespace cuda {

/// Marks an already opened shared library (by the path it was opened with)
/// never to be unloaded, not even by DynamicLibrary's exit-time cleanup.
void keepLoaded(const std::string &Path);

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUevent = struct CUevent_st *;
using CUgraph = struct CUgraph_st *;
using CUgraphExec = struct CUgraphExec_st *;
using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram *;
using cublasHandle_t = struct cublasContext *;
using cublasStatus_t = int;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_NOT_READY = 600; // a query of unfinished work
constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;
constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
constexpr int CU_EVENT_DEFAULT = 0;
constexpr int CU_STREAM_NON_BLOCKING = 1;
constexpr int CU_STREAM_CAPTURE_MODE_RELAXED = 2;
constexpr int CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14;
constexpr int CUBLAS_COMPUTE_32F = 68;
constexpr int CUBLAS_OP_N = 0;
constexpr int CUBLAS_GEMM_DEFAULT = -1;
constexpr int CU_TENSOR_MAP_DATA_TYPE_UINT16 = 1;
constexpr int CU_TENSOR_MAP_DATA_TYPE_UINT32 = 2;
constexpr int CU_TENSOR_MAP_INTERLEAVE_NONE = 0;
constexpr int CU_TENSOR_MAP_SWIZZLE_128B = 3;
constexpr int CU_TENSOR_MAP_L2_PROMOTION_NONE = 0;
constexpr int CU_TENSOR_MAP_L2_PROMOTION_L2_64B = 1;
constexpr int CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2;
constexpr int CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3;
constexpr int CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0; // zeros
constexpr unsigned CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1;
constexpr int CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4;
constexpr int CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6;

/// An allocation exported to another process (CU_IPC_HANDLE_SIZE bytes).
struct CUipcMemHandle {
  char Reserved[64];
};

/// A TMA descriptor, passed to kernels by value.
struct alignas(128) CUtensorMap {
  unsigned long long Opaque[16];
};

/// One attribute of a launch (CUlaunchAttribute): an id and a 64-byte value,
/// of which mtsched sets only the cluster's shape and programmatic stream
/// serialization (PDL).
struct CUlaunchAttribute {
  int Id;
  char Pad[4];
  union {
    char Raw[64];
    unsigned long long Align;
    struct {
      unsigned X, Y, Z;
    } ClusterDim;
    int ProgrammaticStreamSerializationAllowed;
  } Value;
};

/// cuLaunchKernelEx's launch (CUlaunchConfig).
struct CUlaunchConfig {
  unsigned GridDimX, GridDimY, GridDimZ;
  unsigned BlockDimX, BlockDimY, BlockDimZ;
  unsigned SharedMemBytes;
  CUstream Stream;
  CUlaunchAttribute *Attrs;
  unsigned NumAttrs;
};

/// The driver API (libcuda.so.1).
struct DriverApi {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int *);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, CUstream, void **,
                             void **);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  /// Host to device only on the stream that reads the copy: from pageable
  /// memory the synchronous cuMemcpyHtoD may return before its DMA lands,
  /// and the legacy stream it uses does not order our non-blocking
  /// streams, so a kernel queued next could read what was there before.
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamQuery)(CUstream);
  CUresult (*cuEventCreate)(CUevent *, unsigned);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*cuGetErrorName)(CUresult, const char **);
  CUresult (*cuDeviceCanAccessPeer)(int *, CUdevice, CUdevice);
  CUresult (*cuCtxEnablePeerAccess)(CUcontext, unsigned);
  /// Device memory shared between processes (MPI ranks); null where the
  /// driver lacks them (peer kernels are then unavailable to MPI ranks).
  CUresult (*cuIpcGetMemHandle)(CUipcMemHandle *, CUdeviceptr) = nullptr;
  CUresult (*cuIpcOpenMemHandle)(CUdeviceptr *, CUipcMemHandle,
                                 unsigned) = nullptr;
  CUresult (*cuIpcCloseMemHandle)(CUdeviceptr) = nullptr;
  /// CUDA graphs; null where the driver lacks them (callers then launch
  /// eagerly).
  CUresult (*cuStreamBeginCapture)(CUstream, int) = nullptr;
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph *) = nullptr;
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph,
                                          unsigned long long) = nullptr;
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*cuGraphExecDestroy)(CUgraphExec) = nullptr;
  CUresult (*cuGraphDestroy)(CUgraph) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char **);
  /// TMA descriptors (CUDA 12+); null where the driver lacks it (the wgmma
  /// GEMM template then fails).
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap *, int, uint32_t, void *,
                                     const uint64_t *, const uint64_t *,
                                     const uint32_t *, const uint32_t *, int,
                                     int, int, int) = nullptr;
  /// Launches with attributes (CUDA 12+): thread block clusters; null where
  /// the driver lacks it (clustered kernels then fail).
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **,
                               void **) = nullptr;

  /// "CUDA_ERROR_X (text)" for a result code.
  std::string errorString(CUresult R) const;
};

/// NVRTC (libnvrtc.so.13, else libnvrtc.so).
struct NvrtcApi {
  nvrtcResult (*nvrtcVersion)(int *, int *);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *, const char *, const char *,
                                    int, const char *const *,
                                    const char *const *);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char *const *);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t *);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char *);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t *);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char *);
  const char *(*nvrtcGetErrorString)(nvrtcResult);
  int Major = 0, Minor = 0;
};

/// cuBLAS (libcublas.so.13, else libcublas.so).
struct CublasApi {
  cublasStatus_t (*cublasCreate)(cublasHandle_t *);
  cublasStatus_t (*cublasDestroy)(cublasHandle_t);
  cublasStatus_t (*cublasSetStream)(cublasHandle_t, CUstream);
  cublasStatus_t (*cublasSetWorkspace)(cublasHandle_t, void *, size_t);
  cublasStatus_t (*cublasGemmEx)(cublasHandle_t, int, int, int, int, int,
                                 const void *, const void *, int, int,
                                 const void *, int, int, const void *, void *,
                                 int, int, int, int);
  /// Batched weights: one GEMM per batch at fixed strides between them.
  cublasStatus_t (*cublasGemmStridedBatchedEx)(
      cublasHandle_t, int, int, int, int, int, const void *, const void *, int,
      int, long long, const void *, int, int, long long, const void *, void *,
      int, int, long long, int, int, int);
};

/// Each loader opens its library once per process; the error says which
/// library or symbol is missing. Library paths can be overridden for tests
/// with MTSCHED_LIBCUDA, MTSCHED_LIBNVRTC and MTSCHED_LIBCUBLAS.
llvm::Expected<const DriverApi &> loadDriver();
llvm::Expected<const NvrtcApi &> loadNvrtc();
llvm::Expected<const CublasApi &> loadCublas();

/// The device a backend would use: device 0, sm_80 or newer, with an
/// initialised primary context current on the calling thread.
struct DeviceInfo {
  std::string Name;
  int Major = 0, Minor = 0;
  int SMs = 0;
  int L2Bytes = 0;
  int MaxSharedOptin = 0;
  int DriverVersion = 0;
  CUcontext Ctx = nullptr;
  int Ordinal = 0;
};

/// How long a host wait for one stream or event may take before the GPU is
/// taken to be hung: no kernel mtsched measures or runs takes a minute.
inline constexpr std::chrono::milliseconds KernelWatchdog{60000};

/// Waits for the work queued on stream S (syncStream) or before event E
/// (syncEvent), as cuStreamSynchronize / cuEventSynchronize do, for at most
/// Limit. Work still running then (a template that deadlocks, a loop that
/// never ends) holds a context that can neither run nor free anything
/// else, and waiting for it would hang the process and every rank waiting
/// on it; so the process says what hung (What, e.g. "choice 'X' of '%y'")
/// on stderr and exits with status 1, without the context's teardown.
CUresult syncStream(const DriverApi &D, CUstream S, llvm::StringRef What,
                    std::chrono::milliseconds Limit = KernelWatchdog);
CUresult syncEvent(const DriverApi &D, CUevent E, llvm::StringRef What,
                   std::chrono::milliseconds Limit = KernelWatchdog);

/// Finds device 0 and makes its primary context current; explains exactly
/// why CUDA cannot run here otherwise (no driver, no device, sm < 80).
llvm::Expected<DeviceInfo> openDevice(int Ordinal = 0);
/// What openDevice finds out, without creating the context (Ctx stays
/// null): cuInit and the device's attributes, all a kernel's generation and
/// compilation need, so they can start while the context is created.
llvm::Expected<DeviceInfo> queryDevice(int Ordinal = 0);
/// The rest of openDevice for a queried device: retains its primary
/// context into Info.Ctx and makes it current on this thread.
llvm::Error openContext(DeviceInfo &Info);
/// The number of CUDA devices (0 when the driver cannot run).
int deviceCount();
/// Makes the primary context current on this thread.
llvm::Error makeCurrent(const DeviceInfo &D);

/// Compiles one kernel with NVRTC for sm_<Arch> to a cubin, or for
/// sm_<Arch>a (the architecture-specific target wgmma and setmaxnreg need)
/// if ArchSpecific; the error holds the compiler's log.
llvm::Expected<std::string> compileToCubin(llvm::StringRef Source,
                                           llvm::StringRef Name, int Arch,
                                           bool ArchSpecific = false);
/// The options compileToCubin passes (part of the cache key).
std::string compileOptionsKey(int Arch, bool ArchSpecific = false);

} // namespace cuda
} // namespace mtsched

#endif // MTSCHED_BACKEND_CUDA_CUDAAPI_H
