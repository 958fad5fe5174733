//===- CudaDevice.cpp - The process's GPU session -------------------------===//
#include "CudaDevice.h"
#include "mtsched/Reference/Interpreter.h"
#include "mtsched/Reference/RandomInputs.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/TimeProfiler.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <future>
#include <limits>

using namespace mtsched;
using namespace mtsched::cuda;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

namespace mtsched {
namespace cuda {

BenchSupport *loadSupportOnce(std::unique_ptr<BenchSupport> &Support,
                              bool &Tried, const DriverApi &D,
                              const DeviceInfo &Info,
                              const KernelCompileOptions &O,
                              llvm::StringRef Otherwise) {
  if (!Tried) {
    Tried = true;
    llvm::Expected<std::unique_ptr<BenchSupport>> S =
        BenchSupport::load(D, Info.Major * 10 + Info.Minor, O);
    if (S)
      Support = std::move(*S);
    else
      llvm::errs() << "mtsched-opt: warning: " << llvm::toString(S.takeError())
                   << "; " << Otherwise << " (slower)\n";
  }
  return Support.get();
}

BenchSupport *support(Gpu &G, const KernelCompileOptions &O) {
  return loadSupportOnce(G.Support, G.SupportTried, *G.D, G.Info, O,
                         "benchmark inputs are drawn and checked on the host");
}

llvm::Expected<const DeviceInfo &> deviceInfo(int Ordinal) {
  static DeviceInfo Info;
  static std::string Error;
  static std::once_flag Once;
  std::call_once(Once, [Ordinal] {
    llvm::TimeTraceScope Scope("cuda.query-device");
    llvm::Expected<DeviceInfo> I =
        queryDevice(Ordinal % std::max(1, deviceCount()));
    if (!I) {
      Error = llvm::toString(I.takeError());
      return;
    }
    // Compiling needs NVRTC: a machine without it cannot measure at all.
    // Loaded after cuInit, not beside it: loading NVRTC's and cuBLAS's
    // libraries on other threads during cuInit made it 0.25-0.4 s slower
    // on an H100 (docs/BENCHMARKS.md).
    if (auto N = loadNvrtc(); !N) {
      Error = llvm::toString(N.takeError());
      return;
    }
    Info = *I;
  });
  if (!Error.empty())
    return err(Error);
  return Info;
}

/// Loads cuBLASLt and creates G's handle for it (after cuBLAS, whose
/// workspace it shares); a failure leaves cuBLAS usable.
static void openBlasLt(Gpu &G) {
  llvm::Expected<const CublasLtApi &> L = loadCublasLt();
  if (!L) {
    G.BlasLtError = llvm::toString(L.takeError());
    return;
  }
  if (int S = L->cublasLtCreate(&G.BlasLt)) {
    G.BlasLtError = "cublasLtCreate failed with status " + std::to_string(S);
    return;
  }
  G.Lt = &*L;
}

/// Loads cuBLAS and creates G's handle, with a workspace of its own, on the
/// calling thread (with G's context made current there).
static void openBlas(Gpu &G) {
  llvm::TimeTraceScope Scope("cuda.open-cublas");
  if (llvm::Error E = makeCurrent(G.Info)) {
    G.BlasError = llvm::toString(std::move(E));
    return;
  }
  llvm::Expected<const CublasApi &> B = loadCublas();
  if (!B) {
    G.BlasError = llvm::toString(B.takeError());
    return;
  }
  if (int S = B->cublasCreate(&G.Blas)) {
    G.BlasError = "cublasCreate failed with status " + std::to_string(S);
    return;
  }
  B->cublasSetStream(G.Blas, G.Stream);
  // A workspace of its own, sized as NVIDIA recommends (32 MiB on Hopper,
  // 4 MiB before) and as PyTorch, the peers' cuBLAS, sizes its own:
  // `extern.cublas` then runs with the same workspace whether or not a
  // graph is being captured, not with cuBLAS's default pool.
  G.BlasWorkspaceBytes = size_t(G.Info.Major >= 9 ? 32 : 4) << 20;
  if (G.D->cuMemAlloc(&G.BlasWorkspace, G.BlasWorkspaceBytes) ||
      B->cublasSetWorkspace(G.Blas, reinterpret_cast<void *>(G.BlasWorkspace),
                            G.BlasWorkspaceBytes))
    llvm::errs() << "mtsched-opt: warning: no cuBLAS workspace of "
                 << (G.BlasWorkspaceBytes >> 20)
                 << " MiB; cuBLAS uses its default pool\n";
  G.B = &*B;
  openBlasLt(G);
}

const CublasApi *Gpu::blas() {
  // Once, for every thread rank: a future is not waited on from several
  // threads at once.
  std::call_once(BlasJoined, [this] {
    llvm::TimeTraceScope Scope("cuda.cublas.wait");
    if (BlasReady.valid())
      BlasReady.wait();
  });
  return B;
}

const CublasLtApi *Gpu::blasLt() {
  blas();
  return Lt;
}

llvm::Expected<Gpu &> gpu(int Ordinal) {
  static Gpu G;
  static std::string Error;
  static std::once_flag Once;
  std::call_once(Once, [Ordinal] {
    llvm::Expected<const DeviceInfo &> Query = deviceInfo(Ordinal);
    if (!Query) {
      Error = llvm::toString(Query.takeError());
      return;
    }
    llvm::TimeTraceScope Scope("cuda.open-device");
    G.Info = *Query;
    if (llvm::Error E = openContext(G.Info)) {
      Error = llvm::toString(std::move(E));
      return;
    }
    G.D = &*loadDriver();
    if (CUresult R = G.D->cuStreamCreate(&G.Stream, CU_STREAM_NON_BLOCKING)) {
      Error = "cannot create a CUDA stream: " + G.D->errorString(R);
      return;
    }
    G.D->cuEventCreate(&G.E0, CU_EVENT_DEFAULT);
    G.D->cuEventCreate(&G.E1, CU_EVENT_DEFAULT);
    G.FlushBytes = size_t(std::max(G.Info.L2Bytes, 1 << 20)) * 2;
    if (G.D->cuMemAlloc(&G.Flush, G.FlushBytes))
      G.Flush = 0;
    // cuBLAS's libraries are the largest the process loads (0.2-0.5 s
    // from a cold disk); they load while the templates compile and run.
    // Not earlier: loading them during cuInit or the context's creation
    // slowed those down by as much as it saved (docs/BENCHMARKS.md).
    G.BlasReady = std::async(std::launch::async, [] {
      openBlas(G);
      if (!G.Lt && G.BlasLtError.empty())
        G.BlasLtError = "cuBLASLt is opened after cuBLAS: " + G.BlasError;
    });
  });
  if (!Error.empty())
    return err(Error);
  return G;
}

std::string unsupportedReason(const KernelSource &K, const DeviceInfo &Info,
                              const DriverApi &D) {
  if (!K.NeedsSm90a)
    return "";
  // sm_90a code runs on compute capability 9.0 only.
  if (Info.Major != 9 || Info.Minor != 0)
    return "needs an sm_90 GPU (wgmma, TMA); " + Info.Name + " is sm_" +
           std::to_string(Info.Major) + std::to_string(Info.Minor);
  if (!K.TensorMaps.empty() && !D.cuTensorMapEncodeTiled)
    return "the CUDA driver lacks cuTensorMapEncodeTiled (TMA)";
  if (K.ClusterX > 1 && !D.cuLaunchKernelEx)
    return "the CUDA driver lacks cuLaunchKernelEx (thread block clusters)";
  return "";
}

/// MTSCHED_PDL=0 in the environment launches every kernel without PDL (the
/// same kernels: their waits return at once), to compare the two;
/// MTSCHED_PDL=skip:TEXT launches without it the kernels whose name holds
/// TEXT (pdlEnvironment; MTSCHED_PDL=all: long GEMMs wait too).
static bool pdlAllowed(const KernelSource &K) {
  llvm::StringRef Skip = pdlEnvironment();
  if (Skip == "0")
    return false;
  return !Skip.consume_front("skip:") ||
         !llvm::StringRef(K.Name).contains(Skip);
}

CUresult launchKernel(const DriverApi &D, CUfunction Fn, const KernelSource &K,
                      const DeviceInfo &Info, CUstream Stream, void **Args) {
  unsigned GridX = launchGridX(K, Info.SMs);
  // PDL needs sm_90, where the kernel was compiled with its wait. Without
  // cuLaunchKernelEx a kernel with the wait runs as any other: the wait
  // returns at once when the launch names no dependency.
  bool Pdl = K.ProgrammaticWait && Info.Major >= 9 && D.cuLaunchKernelEx &&
             pdlAllowed(K);
  if (K.ClusterX <= 1 && !Pdl)
    return D.cuLaunchKernel(Fn, GridX, K.GridY, K.GridZ, K.BlockX, 1, 1,
                            K.SharedBytes, Stream, Args, nullptr);
  if (!D.cuLaunchKernelEx)
    return CUDA_ERROR_NOT_SUPPORTED;
  CUlaunchAttribute Attrs[2] = {};
  unsigned NumAttrs = 0;
  if (K.ClusterX > 1) {
    CUlaunchAttribute &Cluster = Attrs[NumAttrs++];
    Cluster.Id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    Cluster.Value.ClusterDim.X = K.ClusterX;
    Cluster.Value.ClusterDim.Y = Cluster.Value.ClusterDim.Z = 1;
  }
  if (Pdl) {
    CUlaunchAttribute &Serial = Attrs[NumAttrs++];
    Serial.Id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    Serial.Value.ProgrammaticStreamSerializationAllowed = 1;
  }
  CUlaunchConfig C = {};
  C.GridDimX = GridX;
  C.GridDimY = K.GridY;
  C.GridDimZ = K.GridZ;
  C.BlockDimX = K.BlockX;
  C.BlockDimY = C.BlockDimZ = 1;
  C.SharedMemBytes = K.SharedBytes;
  C.Stream = Stream;
  C.Attrs = Attrs;
  C.NumAttrs = NumAttrs;
  return D.cuLaunchKernelEx(&C, Fn, Args, nullptr);
}

/// CUtensorMapL2promotion for TensorMapParam::L2PromotionBytes.
static int l2Promotion(unsigned Bytes) {
  switch (Bytes) {
  case 0:
    return CU_TENSOR_MAP_L2_PROMOTION_NONE;
  case 64:
    return CU_TENSOR_MAP_L2_PROMOTION_L2_64B;
  case 128:
    return CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  default:
    assert(Bytes == 256 && "L2 promotion is 0, 64, 128 or 256 bytes");
    return CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  }
}

CUresult encodeTensorMaps(const DriverApi &D, const KernelSource &K,
                          llvm::ArrayRef<CUdeviceptr> Ptrs,
                          std::vector<CUtensorMap> &Out) {
  Out.assign(K.TensorMaps.size(), CUtensorMap());
  const uint32_t ElementStrides[3] = {1, 1, 1};
  for (size_t I = 0; I < K.TensorMaps.size(); ++I) {
    const TensorMapParam &T = K.TensorMaps[I];
    if (CUresult R = D.cuTensorMapEncodeTiled(
            &Out[I],
            T.ElementBytes == 4 ? CU_TENSOR_MAP_DATA_TYPE_UINT32
                                : CU_TENSOR_MAP_DATA_TYPE_UINT16,
            3, reinterpret_cast<void *>(Ptrs[T.Input]), T.Dims, T.Strides,
            T.Box, ElementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_128B, l2Promotion(T.L2PromotionBytes),
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE))
      return R;
  }
  return CUDA_SUCCESS;
}

std::vector<double> toHostValues(const std::string &Bytes, DType T) {
  size_t Elt = dtypeBytes(T), N = Bytes.size() / Elt;
  std::vector<double> Out(N);
  parallelChunks(int64_t(N), [&](int64_t Begin, int64_t End) {
    for (size_t I = Begin; I < size_t(End); ++I) {
      const char *P = Bytes.data() + I * Elt;
      uint16_t H;
      float F;
      switch (T) {
      case DType::BF16:
        std::memcpy(&H, P, 2);
        Out[I] = bf16ToFloat(H);
        break;
      case DType::F16:
        std::memcpy(&H, P, 2);
        Out[I] = f16ToFloat(H);
        break;
      case DType::F32:
        std::memcpy(&F, P, 4);
        Out[I] = F;
        break;
      case DType::I32: {
        int32_t V;
        std::memcpy(&V, P, 4);
        Out[I] = V;
        break;
      }
      case DType::I64: {
        int64_t V;
        std::memcpy(&V, P, 8);
        Out[I] = double(V);
        break;
      }
      case DType::F8E4M3:
      case DType::F8E5M2:
        Out[I] = f8ToFloat(uint8_t(*P), T);
        break;
      case DType::Bool:
        Out[I] = *P != 0;
        break;
      }
    }
  });
  return Out;
}

std::string toDeviceBytes(const std::vector<double> &V, DType T) {
  size_t Elt = dtypeBytes(T);
  std::string Out(V.size() * Elt, '\0');
  parallelChunks(int64_t(V.size()), [&](int64_t Begin, int64_t End) {
    for (size_t I = Begin; I < size_t(End); ++I) {
      char *P = &Out[I * Elt];
      uint16_t H;
      float F = float(V[I]);
      switch (T) {
      case DType::BF16:
        H = floatToBF16(F);
        std::memcpy(P, &H, 2);
        break;
      case DType::F16:
        H = floatToF16(F);
        std::memcpy(P, &H, 2);
        break;
      case DType::F32:
        std::memcpy(P, &F, 4);
        break;
      case DType::I32: {
        int32_t X = int32_t(V[I]);
        std::memcpy(P, &X, 4);
        break;
      }
      case DType::I64: {
        int64_t X = int64_t(V[I]);
        std::memcpy(P, &X, 8);
        break;
      }
      case DType::F8E4M3:
      case DType::F8E5M2:
        *P = char(floatToF8(F, T));
        break;
      case DType::Bool:
        *P = char(V[I] != 0);
        break;
      }
    }
  });
  return Out;
}

double relError(const std::vector<double> &Out, int64_t N,
                llvm::ArrayRef<int64_t> Rows,
                const std::vector<std::vector<double>> &Ref) {
  double E2 = 0, R2 = 0;
  for (size_t I = 0; I < Rows.size(); ++I)
    for (int64_t C = 0; C < N; ++C) {
      double O = Out[Rows[I] * N + C], R = Ref[I][C];
      if (!std::isfinite(O) && std::isfinite(R))
        return Inf;
      E2 += (O - R) * (O - R);
      R2 += R * R;
    }
  return R2 > 0 ? std::sqrt(E2 / R2) : std::sqrt(E2);
}

double tolerance(DType T) {
  switch (T) {
  case DType::BF16:
    return 2e-2;
  case DType::F16:
    return 5e-3;
  // An fp8 result and its reference round alike but for values near a
  // rounding boundary, which land one fp8 step apart (up to 12.5% for
  // e4m3, 25% for e5m2); values computed from an fp8 one inherit this
  // (CudaGraphExecutor.cpp's outputTolerance).
  case DType::F8E4M3:
    return 5e-2;
  case DType::F8E5M2:
    return 1e-1;
  default:
    return 1e-3;
  }
}

} // namespace cuda
} // namespace mtsched
