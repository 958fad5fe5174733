//===- CudaHeaderCheck.cpp - Our CUDA declarations vs the toolkit's -------===//
//
// CudaApi.h, CublasLtApi.h and NcclApi.h declare by hand the CUDA driver,
// NVRTC, cuBLAS, cuBLASLt and NCCL entry points mtsched opens at run time, so
// that the build needs no toolkit. A slip there (a parameter too many, a 32-bit
// size) would not fail to build: it would crash or corrupt memory on the GPU.
// Where the toolkit's headers are installed, this file (compiled only then, see
// lib/Runtime/CMakeLists.txt) checks every declaration against the real one
// with static_assert, so the slip is a build error instead. It emits no code.
//
// Our types are not the toolkit's types (int for enums, our own opaque
// structs), so "matching" means ABI-equivalent: the same number of
// parameters, and each parameter and the result of the same kind and size
// (integers and enums alike, pointers to matching pointees, structs passed
// by value of equal size and alignment).
//
//===----------------------------------------------------------------------===//
#include "mtsched/Backend/Cuda/CublasLtApi.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/NcclApi.h"
#include <cstddef>
#include <type_traits>

namespace {

template <typename A, typename B> struct AbiSame;

template <typename T>
constexpr bool IsIntLike = std::is_integral<T>::value || std::is_enum<T>::value;

/// Pointees: equal const-ness; opaque handles (class types, possibly
/// incomplete) match any class; anything else must match recursively.
template <typename A, typename B> constexpr bool pointeeSame() {
  using UA = std::remove_cv_t<A>;
  using UB = std::remove_cv_t<B>;
  if constexpr (std::is_const<A>::value != std::is_const<B>::value)
    return false;
  else if constexpr (std::is_void<UA>::value || std::is_void<UB>::value)
    return std::is_void<UA>::value && std::is_void<UB>::value;
  else if constexpr (std::is_class<UA>::value || std::is_class<UB>::value)
    return std::is_class<UA>::value && std::is_class<UB>::value;
  else
    return AbiSame<UA, UB>::value;
}

template <typename A, typename B> struct AbiSame {
  static constexpr bool value = [] {
    if constexpr (std::is_same<A, B>::value)
      return true;
    else if constexpr (std::is_pointer<A>::value && std::is_pointer<B>::value)
      return pointeeSame<std::remove_pointer_t<A>, std::remove_pointer_t<B>>();
    else if constexpr (IsIntLike<A> && IsIntLike<B>)
      return sizeof(A) == sizeof(B);
    else if constexpr (std::is_class<A>::value && std::is_class<B>::value)
      return sizeof(A) == sizeof(B) && alignof(A) == alignof(B);
    else
      return false;
  }();
};

template <typename RA, typename... PA, typename RB, typename... PB>
constexpr bool functionSame(RA (*)(PA...), RB (*)(PB...)) {
  if constexpr (sizeof...(PA) != sizeof...(PB))
    return false;
  else
    return AbiSame<RA, RB>::value && (AbiSame<PA, PB>::value && ...);
}

} // namespace

// Each list names entry points once. Our member types are taken before the
// toolkit headers come in, because cuda.h renames functions with macros
// (`#define cuMemAlloc cuMemAlloc_v2`) that would rename our members too;
// after it, the same macros pick the versioned function we load by name.
#define MTSCHED_DRIVER_FUNCTIONS(X)                                            \
  X(cuInit)                                                                    \
  X(cuDriverGetVersion)                                                        \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetName)                                                           \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuCtxSetCurrent)                                                           \
  X(cuCtxSynchronize)                                                          \
  X(cuModuleLoadData)                                                          \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncSetAttribute)                                                        \
  X(cuLaunchKernel)                                                            \
  X(cuMemAlloc)                                                                \
  X(cuMemFree)                                                                 \
  X(cuMemcpyHtoDAsync)                                                         \
  X(cuMemcpyDtoH)                                                              \
  X(cuMemcpyDtoDAsync)                                                         \
  X(cuMemsetD8Async)                                                           \
  X(cuStreamCreate)                                                            \
  X(cuStreamSynchronize)                                                       \
  X(cuStreamQuery)                                                             \
  X(cuEventCreate)                                                             \
  X(cuEventDestroy)                                                            \
  X(cuEventRecord)                                                             \
  X(cuEventSynchronize)                                                        \
  X(cuEventQuery)                                                              \
  X(cuEventElapsedTime)                                                        \
  X(cuGetErrorName)                                                            \
  X(cuGetErrorString)                                                          \
  X(cuDeviceCanAccessPeer)                                                     \
  X(cuCtxEnablePeerAccess)                                                     \
  X(cuIpcGetMemHandle)                                                         \
  X(cuIpcOpenMemHandle)                                                        \
  X(cuIpcCloseMemHandle)                                                       \
  X(cuStreamBeginCapture)                                                      \
  X(cuStreamEndCapture)                                                        \
  X(cuGraphInstantiateWithFlags)                                               \
  X(cuGraphLaunch)                                                             \
  X(cuGraphExecDestroy)                                                        \
  X(cuGraphDestroy)                                                            \
  X(cuTensorMapEncodeTiled)                                                    \
  X(cuLaunchKernelEx)

#define MTSCHED_NVRTC_FUNCTIONS(X)                                             \
  X(nvrtcVersion)                                                              \
  X(nvrtcCreateProgram)                                                        \
  X(nvrtcDestroyProgram)                                                       \
  X(nvrtcCompileProgram)                                                       \
  X(nvrtcGetProgramLogSize)                                                    \
  X(nvrtcGetProgramLog)                                                        \
  X(nvrtcGetCUBINSize)                                                         \
  X(nvrtcGetCUBIN)                                                             \
  X(nvrtcGetErrorString)

#define MTSCHED_CUBLAS_FUNCTIONS(X)                                            \
  X(cublasCreate)                                                              \
  X(cublasDestroy)                                                             \
  X(cublasSetStream)                                                           \
  X(cublasSetWorkspace)

#define MTSCHED_NCCL_FUNCTIONS(X)                                              \
  X(ncclGetVersion)                                                            \
  X(ncclGetUniqueId)                                                           \
  X(ncclCommInitRank)                                                          \
  X(ncclCommDestroy)                                                           \
  X(ncclAllReduce)                                                             \
  X(ncclAllGather)                                                             \
  X(ncclReduceScatter)                                                         \
  X(ncclSend)                                                                  \
  X(ncclRecv)                                                                  \
  X(ncclGroupStart)                                                            \
  X(ncclGroupEnd)                                                              \
  X(ncclGetErrorString)

#define MTSCHED_CUBLASLT_FUNCTIONS(X)                                          \
  X(cublasLtCreate)                                                            \
  X(cublasLtDestroy)                                                           \
  X(cublasLtMatmulDescCreate)                                                  \
  X(cublasLtMatmulDescDestroy)                                                 \
  X(cublasLtMatmulDescSetAttribute)                                            \
  X(cublasLtMatrixLayoutCreate)                                                \
  X(cublasLtMatrixLayoutDestroy)                                               \
  X(cublasLtMatrixLayoutSetAttribute)                                          \
  X(cublasLtMatmulPreferenceCreate)                                            \
  X(cublasLtMatmulPreferenceDestroy)                                           \
  X(cublasLtMatmulPreferenceSetAttribute)                                      \
  X(cublasLtMatmulAlgoGetHeuristic)                                            \
  X(cublasLtMatmul)

namespace ours {
#define MTSCHED_OUR_TYPE(Api, Name) using Name##_t = decltype(Api::Name);
#define MTSCHED_DRIVER(Name) MTSCHED_OUR_TYPE(mtsched::cuda::DriverApi, Name)
#define MTSCHED_NVRTC(Name) MTSCHED_OUR_TYPE(mtsched::cuda::NvrtcApi, Name)
#define MTSCHED_CUBLAS(Name) MTSCHED_OUR_TYPE(mtsched::cuda::CublasApi, Name)
#define MTSCHED_NCCL(Name) MTSCHED_OUR_TYPE(mtsched::nccl::NcclApi, Name)
#define MTSCHED_CUBLASLT(Name)                                                 \
  MTSCHED_OUR_TYPE(mtsched::cuda::CublasLtApi, Name)
MTSCHED_DRIVER_FUNCTIONS(MTSCHED_DRIVER)
MTSCHED_NVRTC_FUNCTIONS(MTSCHED_NVRTC)
MTSCHED_CUBLAS_FUNCTIONS(MTSCHED_CUBLAS)
MTSCHED_NCCL_FUNCTIONS(MTSCHED_NCCL)
MTSCHED_CUBLASLT_FUNCTIONS(MTSCHED_CUBLASLT)
using cublasGemmEx_t = decltype(mtsched::cuda::CublasApi::cublasGemmEx);
using cublasGemmStridedBatchedEx_t =
    decltype(mtsched::cuda::CublasApi::cublasGemmStridedBatchedEx);
#undef MTSCHED_DRIVER
#undef MTSCHED_NVRTC
#undef MTSCHED_CUBLAS
#undef MTSCHED_NCCL
#undef MTSCHED_CUBLASLT
#undef MTSCHED_OUR_TYPE
} // namespace ours

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <nvrtc.h>

// One level of macros only: an argument passed on to a second macro would be
// expanded (cuMemAlloc -> cuMemAlloc_v2) before it reached the ##.
#define MTSCHED_DRIVER(Name)                                                   \
  static_assert(functionSame(ours::Name##_t(), &::Name),                       \
                "DriverApi::" #Name " does not match cuda.h");
#define MTSCHED_NVRTC(Name)                                                    \
  static_assert(functionSame(ours::Name##_t(), &::Name),                       \
                "NvrtcApi::" #Name " does not match nvrtc.h");
#define MTSCHED_CUBLAS(Name)                                                   \
  static_assert(functionSame(ours::Name##_t(), &::Name),                       \
                "CublasApi::" #Name " does not match cublas_v2.h");
MTSCHED_DRIVER_FUNCTIONS(MTSCHED_DRIVER)
MTSCHED_NVRTC_FUNCTIONS(MTSCHED_NVRTC)
MTSCHED_CUBLAS_FUNCTIONS(MTSCHED_CUBLAS)
#define MTSCHED_CUBLASLT(Name)                                                 \
  static_assert(functionSame(ours::Name##_t(), &::Name),                       \
                "CublasLtApi::" #Name " does not match cublasLt.h");
MTSCHED_CUBLASLT_FUNCTIONS(MTSCHED_CUBLASLT)
// cublas_api.h overloads cublasGemmEx in C++ (a cudaDataType compute type,
// for old callers); the symbol we load is the C function.
using RealGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t,
                                      cublasOperation_t, int, int, int,
                                      const void *, const void *, cudaDataType,
                                      int, const void *, cudaDataType, int,
                                      const void *, void *, cudaDataType, int,
                                      cublasComputeType_t, cublasGemmAlgo_t);
static_assert(functionSame(ours::cublasGemmEx_t(),
                           static_cast<RealGemmEx>(&::cublasGemmEx)),
              "CublasApi::cublasGemmEx does not match cublas_api.h");
using RealGemmStridedBatchedEx = cublasStatus_t (*)(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
    const void *, const void *, cudaDataType, int, long long, const void *,
    cudaDataType, int, long long, const void *, void *, cudaDataType, int,
    long long, int, cublasComputeType_t, cublasGemmAlgo_t);
static_assert(
    functionSame(
        ours::cublasGemmStridedBatchedEx_t(),
        static_cast<RealGemmStridedBatchedEx>(&::cublasGemmStridedBatchedEx)),
    "CublasApi::cublasGemmStridedBatchedEx does not match cublas_api.h");

// Constants and types passed by value.
namespace mc = mtsched::cuda;
#define MTSCHED_SAME_VALUE(Name)                                               \
  static_assert(int(mc::Name) == int(::Name),                                  \
                "cuda::" #Name " differs from the toolkit's value");
MTSCHED_SAME_VALUE(CUDA_SUCCESS)
MTSCHED_SAME_VALUE(CUDA_ERROR_NOT_READY)
MTSCHED_SAME_VALUE(CUDA_ERROR_NOT_SUPPORTED)
MTSCHED_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
MTSCHED_SAME_VALUE(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
MTSCHED_SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
MTSCHED_SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
MTSCHED_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
MTSCHED_SAME_VALUE(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
MTSCHED_SAME_VALUE(CU_EVENT_DEFAULT)
MTSCHED_SAME_VALUE(CU_STREAM_NON_BLOCKING)
MTSCHED_SAME_VALUE(CU_STREAM_CAPTURE_MODE_RELAXED)
MTSCHED_SAME_VALUE(CUDA_R_32F)
MTSCHED_SAME_VALUE(CUDA_R_16F)
MTSCHED_SAME_VALUE(CUDA_R_16BF)
MTSCHED_SAME_VALUE(CUBLAS_COMPUTE_32F)
MTSCHED_SAME_VALUE(CUBLAS_OP_N)
MTSCHED_SAME_VALUE(CUBLAS_GEMM_DEFAULT)
MTSCHED_SAME_VALUE(CUBLASLT_MATMUL_DESC_TRANSA)
MTSCHED_SAME_VALUE(CUBLASLT_MATMUL_DESC_TRANSB)
MTSCHED_SAME_VALUE(CUBLASLT_MATMUL_DESC_EPILOGUE)
MTSCHED_SAME_VALUE(CUBLASLT_MATMUL_DESC_BIAS_POINTER)
MTSCHED_SAME_VALUE(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT)
MTSCHED_SAME_VALUE(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET)
MTSCHED_SAME_VALUE(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)
MTSCHED_SAME_VALUE(CUBLASLT_EPILOGUE_DEFAULT)
MTSCHED_SAME_VALUE(CUBLASLT_EPILOGUE_BIAS)
MTSCHED_SAME_VALUE(CU_TENSOR_MAP_DATA_TYPE_UINT16)
MTSCHED_SAME_VALUE(CU_TENSOR_MAP_DATA_TYPE_UINT32)
MTSCHED_SAME_VALUE(CU_TENSOR_MAP_INTERLEAVE_NONE)
MTSCHED_SAME_VALUE(CU_TENSOR_MAP_SWIZZLE_128B)
MTSCHED_SAME_VALUE(CU_TENSOR_MAP_L2_PROMOTION_NONE)
MTSCHED_SAME_VALUE(CU_TENSOR_MAP_L2_PROMOTION_L2_64B)
MTSCHED_SAME_VALUE(CU_TENSOR_MAP_L2_PROMOTION_L2_128B)
MTSCHED_SAME_VALUE(CU_TENSOR_MAP_L2_PROMOTION_L2_256B)
MTSCHED_SAME_VALUE(CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
MTSCHED_SAME_VALUE(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
MTSCHED_SAME_VALUE(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
MTSCHED_SAME_VALUE(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
// The launch structs are passed by pointer, so functionSame cannot see
// their layout: every field mtsched sets must sit where the driver reads it.
static_assert(sizeof(mc::CUlaunchAttribute) == sizeof(::CUlaunchAttribute) &&
                  alignof(mc::CUlaunchAttribute) ==
                      alignof(::CUlaunchAttribute) &&
                  offsetof(mc::CUlaunchAttribute, Value) ==
                      offsetof(::CUlaunchAttribute, value) &&
                  offsetof(mc::CUlaunchAttribute, Value.ClusterDim.Z) ==
                      offsetof(::CUlaunchAttribute, value.clusterDim.z) &&
                  offsetof(mc::CUlaunchAttribute,
                           Value.ProgrammaticStreamSerializationAllowed) ==
                      offsetof(::CUlaunchAttribute,
                               value.programmaticStreamSerializationAllowed),
              "cuda::CUlaunchAttribute has the wrong layout");
static_assert(sizeof(mc::CUlaunchConfig) == sizeof(::CUlaunchConfig) &&
                  offsetof(mc::CUlaunchConfig, SharedMemBytes) ==
                      offsetof(::CUlaunchConfig, sharedMemBytes) &&
                  offsetof(mc::CUlaunchConfig, Stream) ==
                      offsetof(::CUlaunchConfig, hStream) &&
                  offsetof(mc::CUlaunchConfig, Attrs) ==
                      offsetof(::CUlaunchConfig, attrs) &&
                  offsetof(mc::CUlaunchConfig, NumAttrs) ==
                      offsetof(::CUlaunchConfig, numAttrs),
              "cuda::CUlaunchConfig has the wrong layout");
// cuBLASLt's heuristic fills an array of these: each field where its
// header puts it, the algorithm copied out whole.
static_assert(
    sizeof(mc::cublasLtMatmulHeuristicResult_t) ==
            sizeof(::cublasLtMatmulHeuristicResult_t) &&
        sizeof(mc::cublasLtMatmulAlgo_t) == sizeof(::cublasLtMatmulAlgo_t) &&
        offsetof(mc::cublasLtMatmulHeuristicResult_t, workspaceSize) ==
            offsetof(::cublasLtMatmulHeuristicResult_t, workspaceSize) &&
        offsetof(mc::cublasLtMatmulHeuristicResult_t, state) ==
            offsetof(::cublasLtMatmulHeuristicResult_t, state),
    "cuda::cublasLtMatmulHeuristicResult_t has the wrong layout");
static_assert(sizeof(mc::CUipcMemHandle) == sizeof(::CUipcMemHandle),
              "cuda::CUipcMemHandle has the wrong size");
static_assert(sizeof(mc::CUtensorMap) == sizeof(::CUtensorMap) &&
                  alignof(mc::CUtensorMap) >= alignof(::CUtensorMap),
              "cuda::CUtensorMap has the wrong size or alignment");
static_assert(sizeof(mc::CUdeviceptr) == sizeof(::CUdeviceptr),
              "cuda::CUdeviceptr has the wrong size");

#ifdef MTSCHED_CHECK_NCCL_HEADER
#include <nccl.h>
#define MTSCHED_NCCL(Name)                                                     \
  static_assert(functionSame(ours::Name##_t(), &::Name),                       \
                "NcclApi::" #Name " does not match nccl.h");
MTSCHED_NCCL_FUNCTIONS(MTSCHED_NCCL)
namespace mn = mtsched::nccl;
#define MTSCHED_SAME_NCCL_VALUE(Name)                                          \
  static_assert(int(mn::Name) == int(::Name),                                  \
                "nccl::" #Name " differs from nccl.h's value");
MTSCHED_SAME_NCCL_VALUE(ncclSuccess)
MTSCHED_SAME_NCCL_VALUE(ncclSum)
MTSCHED_SAME_NCCL_VALUE(ncclUint8)
MTSCHED_SAME_NCCL_VALUE(ncclFloat16)
MTSCHED_SAME_NCCL_VALUE(ncclFloat32)
MTSCHED_SAME_NCCL_VALUE(ncclBfloat16)
static_assert(sizeof(mn::ncclUniqueId) == sizeof(::ncclUniqueId),
              "nccl::ncclUniqueId has the wrong size");
#endif
