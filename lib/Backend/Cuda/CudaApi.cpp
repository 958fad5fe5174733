//===- CudaApi.cpp - Loading the CUDA libraries at run time ---------------===//
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CublasLtApi.h"
#include "mtsched/Support/ToolError.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/raw_ostream.h"
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <thread>
#include <vector>

using namespace mtsched;
using namespace mtsched::cuda;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

/// LLVM's DynamicLibrary closes its "permanent" libraries in a static
/// destructor at exit (LLVM 17+). NVIDIA's libraries carry their own
/// libstdc++, whose allocations then lose their last reference before
/// LeakSanitizer looks, and code they registered with atexit would run
/// unmapped: mark them never to be unloaded, as permanent means.
void mtsched::cuda::keepLoaded(const std::string &Path) {
  ::dlopen(Path.c_str(), RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
}

namespace {

/// Opens the first library of Names that loads; Why collects the failures.
struct Library {
  llvm::sys::DynamicLibrary Lib;
  std::string Path;

  bool open(std::vector<std::string> Names, const char *EnvOverride,
            std::string &Why) {
    if (const char *E = std::getenv(EnvOverride))
      Names.insert(Names.begin(), E);
    for (const std::string &N : Names) {
      std::string Msg;
      Lib = llvm::sys::DynamicLibrary::getPermanentLibrary(N.c_str(), &Msg);
      if (Lib.isValid()) {
        Path = N;
        keepLoaded(N);
        return true;
      }
      Why += (Why.empty() ? "" : "; ") + Msg;
    }
    return false;
  }

  /// Looks up the first of Syms; records a missing one in Missing.
  template <typename F>
  void get(F &Fn, std::initializer_list<const char *> Syms,
           std::string &Missing) {
    for (const char *S : Syms)
      if (void *P = Lib.getAddressOfSymbol(S)) {
        Fn = reinterpret_cast<F>(P);
        return;
      }
    Fn = nullptr;
    Missing += (Missing.empty() ? "" : ", ") + std::string(*Syms.begin());
  }
};

template <typename Api> struct Loaded {
  Api A{};
  std::string Error;
  std::once_flag Once;
};

} // namespace

std::string DriverApi::errorString(CUresult R) const {
  const char *Name = nullptr, *Text = nullptr;
  if (cuGetErrorName)
    cuGetErrorName(R, &Name);
  if (cuGetErrorString)
    cuGetErrorString(R, &Text);
  return std::string(Name ? Name : "CUDA error " + std::to_string(R)) +
         (Text ? std::string(" (") + Text + ")" : std::string());
}

/// Polls Query until it stops answering CUDA_ERROR_NOT_READY: soon at
/// first (a short kernel), then every 100 us, so a long wait costs little
/// CPU; past Limit the process ends (syncStream's comment says why).
static CUresult boundedWait(llvm::function_ref<CUresult()> Query,
                            llvm::StringRef What,
                            std::chrono::milliseconds Limit) {
  auto Start = std::chrono::steady_clock::now();
  for (unsigned Spins = 0;; ++Spins) {
    CUresult R = Query();
    if (R != CUDA_ERROR_NOT_READY)
      return R;
    if (std::chrono::steady_clock::now() - Start > Limit) {
      reportToolError(What + " did not finish on the GPU within " +
                      llvm::Twine(Limit.count()) +
                      " ms; a kernel that does not end leaves a context that "
                      "can run nothing else, so stopping");
      llvm::errs().flush();
      std::_Exit(1);
    }
    if (Spins >= 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

CUresult cuda::syncStream(const DriverApi &D, CUstream S, llvm::StringRef What,
                          std::chrono::milliseconds Limit) {
  return boundedWait([&] { return D.cuStreamQuery(S); }, What, Limit);
}

CUresult cuda::syncEvent(const DriverApi &D, CUevent E, llvm::StringRef What,
                         std::chrono::milliseconds Limit) {
  return boundedWait([&] { return D.cuEventQuery(E); }, What, Limit);
}

llvm::Expected<const DriverApi &> cuda::loadDriver() {
  static Loaded<DriverApi> L;
  std::call_once(L.Once, [] {
    Library Lib;
    std::string Why;
    if (!Lib.open({"libcuda.so.1", "libcuda.so"}, "MTSCHED_LIBCUDA", Why)) {
      L.Error = "no CUDA driver library (libcuda.so.1) could be opened: " + Why;
      return;
    }
    std::string M;
    DriverApi &A = L.A;
    Lib.get(A.cuInit, {"cuInit"}, M);
    Lib.get(A.cuDriverGetVersion, {"cuDriverGetVersion"}, M);
    Lib.get(A.cuDeviceGetCount, {"cuDeviceGetCount"}, M);
    Lib.get(A.cuDeviceGet, {"cuDeviceGet"}, M);
    Lib.get(A.cuDeviceGetName, {"cuDeviceGetName"}, M);
    Lib.get(A.cuDeviceGetAttribute, {"cuDeviceGetAttribute"}, M);
    Lib.get(A.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"}, M);
    Lib.get(A.cuCtxSetCurrent, {"cuCtxSetCurrent"}, M);
    Lib.get(A.cuCtxSynchronize, {"cuCtxSynchronize"}, M);
    Lib.get(A.cuModuleLoadData, {"cuModuleLoadData"}, M);
    Lib.get(A.cuModuleUnload, {"cuModuleUnload"}, M);
    Lib.get(A.cuModuleGetFunction, {"cuModuleGetFunction"}, M);
    Lib.get(A.cuFuncSetAttribute, {"cuFuncSetAttribute"}, M);
    Lib.get(A.cuLaunchKernel, {"cuLaunchKernel"}, M);
    Lib.get(A.cuMemAlloc, {"cuMemAlloc_v2"}, M);
    Lib.get(A.cuMemFree, {"cuMemFree_v2"}, M);
    Lib.get(A.cuMemcpyHtoDAsync, {"cuMemcpyHtoDAsync_v2"}, M);
    Lib.get(A.cuMemcpyDtoH, {"cuMemcpyDtoH_v2"}, M);
    Lib.get(A.cuMemcpyDtoDAsync, {"cuMemcpyDtoDAsync_v2"}, M);
    Lib.get(A.cuMemsetD8Async, {"cuMemsetD8Async"}, M);
    Lib.get(A.cuStreamCreate, {"cuStreamCreate"}, M);
    Lib.get(A.cuStreamSynchronize, {"cuStreamSynchronize"}, M);
    Lib.get(A.cuStreamQuery, {"cuStreamQuery"}, M);
    Lib.get(A.cuEventCreate, {"cuEventCreate"}, M);
    Lib.get(A.cuEventDestroy, {"cuEventDestroy_v2", "cuEventDestroy"}, M);
    Lib.get(A.cuEventRecord, {"cuEventRecord"}, M);
    Lib.get(A.cuEventSynchronize, {"cuEventSynchronize"}, M);
    Lib.get(A.cuEventQuery, {"cuEventQuery"}, M);
    Lib.get(A.cuEventElapsedTime,
            {"cuEventElapsedTime_v2", "cuEventElapsedTime"}, M);
    Lib.get(A.cuGetErrorName, {"cuGetErrorName"}, M);
    Lib.get(A.cuGetErrorString, {"cuGetErrorString"}, M);
    Lib.get(A.cuDeviceCanAccessPeer, {"cuDeviceCanAccessPeer"}, M);
    Lib.get(A.cuCtxEnablePeerAccess, {"cuCtxEnablePeerAccess"}, M);
    std::string Optional; // graphs, IPC: missing ones disable a feature
    Lib.get(A.cuStreamBeginCapture,
            {"cuStreamBeginCapture_v2", "cuStreamBeginCapture"}, Optional);
    Lib.get(A.cuStreamEndCapture, {"cuStreamEndCapture"}, Optional);
    Lib.get(A.cuGraphInstantiateWithFlags, {"cuGraphInstantiateWithFlags"},
            Optional);
    Lib.get(A.cuGraphLaunch, {"cuGraphLaunch"}, Optional);
    Lib.get(A.cuGraphExecDestroy, {"cuGraphExecDestroy"}, Optional);
    Lib.get(A.cuGraphDestroy, {"cuGraphDestroy"}, Optional);
    Lib.get(A.cuTensorMapEncodeTiled, {"cuTensorMapEncodeTiled"}, Optional);
    Lib.get(A.cuLaunchKernelEx, {"cuLaunchKernelEx"}, Optional);
    Lib.get(A.cuIpcGetMemHandle, {"cuIpcGetMemHandle"}, Optional);
    Lib.get(A.cuIpcOpenMemHandle,
            {"cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle"}, Optional);
    Lib.get(A.cuIpcCloseMemHandle, {"cuIpcCloseMemHandle"}, Optional);
    if (!M.empty())
      L.Error = Lib.Path + " lacks " + M + " (driver too old?)";
  });
  if (!L.Error.empty())
    return err(L.Error);
  return L.A;
}

llvm::Expected<const NvrtcApi &> cuda::loadNvrtc() {
  static Loaded<NvrtcApi> L;
  std::call_once(L.Once, [] {
    Library Lib;
    std::string Why;
    if (!Lib.open({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                   "/usr/local/cuda/lib64/libnvrtc.so"},
                  "MTSCHED_LIBNVRTC", Why)) {
      L.Error = "no NVRTC library (libnvrtc.so.13) could be opened: " + Why;
      return;
    }
    std::string M;
    NvrtcApi &A = L.A;
    Lib.get(A.nvrtcVersion, {"nvrtcVersion"}, M);
    Lib.get(A.nvrtcCreateProgram, {"nvrtcCreateProgram"}, M);
    Lib.get(A.nvrtcDestroyProgram, {"nvrtcDestroyProgram"}, M);
    Lib.get(A.nvrtcCompileProgram, {"nvrtcCompileProgram"}, M);
    Lib.get(A.nvrtcGetProgramLogSize, {"nvrtcGetProgramLogSize"}, M);
    Lib.get(A.nvrtcGetProgramLog, {"nvrtcGetProgramLog"}, M);
    Lib.get(A.nvrtcGetCUBINSize, {"nvrtcGetCUBINSize"}, M);
    Lib.get(A.nvrtcGetCUBIN, {"nvrtcGetCUBIN"}, M);
    Lib.get(A.nvrtcGetErrorString, {"nvrtcGetErrorString"}, M);
    if (!M.empty()) {
      L.Error = Lib.Path + " lacks " + M;
      return;
    }
    A.nvrtcVersion(&A.Major, &A.Minor);
  });
  if (!L.Error.empty())
    return err(L.Error);
  return L.A;
}

llvm::Expected<const CublasApi &> cuda::loadCublas() {
  static Loaded<CublasApi> L;
  std::call_once(L.Once, [] {
    Library Lib;
    std::string Why;
    if (!Lib.open({"libcublas.so.13", "libcublas.so.12", "libcublas.so"},
                  "MTSCHED_LIBCUBLAS", Why)) {
      L.Error = "no cuBLAS library (libcublas.so.13) could be opened: " + Why;
      return;
    }
    std::string M;
    CublasApi &A = L.A;
    Lib.get(A.cublasCreate, {"cublasCreate_v2"}, M);
    Lib.get(A.cublasDestroy, {"cublasDestroy_v2"}, M);
    Lib.get(A.cublasSetStream, {"cublasSetStream_v2"}, M);
    Lib.get(A.cublasSetWorkspace, {"cublasSetWorkspace_v2"}, M);
    Lib.get(A.cublasGemmEx, {"cublasGemmEx"}, M);
    Lib.get(A.cublasGemmStridedBatchedEx, {"cublasGemmStridedBatchedEx"}, M);
    if (!M.empty())
      L.Error = Lib.Path + " lacks " + M;
  });
  if (!L.Error.empty())
    return err(L.Error);
  return L.A;
}

llvm::Expected<const CublasLtApi &> cuda::loadCublasLt() {
  static Loaded<CublasLtApi> L;
  std::call_once(L.Once, [] {
    Library Lib;
    std::string Why;
    if (!Lib.open({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"},
                  "MTSCHED_LIBCUBLASLT", Why)) {
      L.Error =
          "no cuBLASLt library (libcublasLt.so.13) could be opened: " + Why;
      return;
    }
    std::string M;
    CublasLtApi &A = L.A;
    Lib.get(A.cublasLtCreate, {"cublasLtCreate"}, M);
    Lib.get(A.cublasLtDestroy, {"cublasLtDestroy"}, M);
    Lib.get(A.cublasLtMatmulDescCreate, {"cublasLtMatmulDescCreate"}, M);
    Lib.get(A.cublasLtMatmulDescDestroy, {"cublasLtMatmulDescDestroy"}, M);
    Lib.get(A.cublasLtMatmulDescSetAttribute,
            {"cublasLtMatmulDescSetAttribute"}, M);
    Lib.get(A.cublasLtMatrixLayoutCreate, {"cublasLtMatrixLayoutCreate"}, M);
    Lib.get(A.cublasLtMatrixLayoutDestroy, {"cublasLtMatrixLayoutDestroy"}, M);
    Lib.get(A.cublasLtMatrixLayoutSetAttribute,
            {"cublasLtMatrixLayoutSetAttribute"}, M);
    Lib.get(A.cublasLtMatmulPreferenceCreate,
            {"cublasLtMatmulPreferenceCreate"}, M);
    Lib.get(A.cublasLtMatmulPreferenceDestroy,
            {"cublasLtMatmulPreferenceDestroy"}, M);
    Lib.get(A.cublasLtMatmulPreferenceSetAttribute,
            {"cublasLtMatmulPreferenceSetAttribute"}, M);
    Lib.get(A.cublasLtMatmulAlgoGetHeuristic,
            {"cublasLtMatmulAlgoGetHeuristic"}, M);
    Lib.get(A.cublasLtMatmul, {"cublasLtMatmul"}, M);
    if (!M.empty())
      L.Error = Lib.Path + " lacks " + M;
  });
  if (!L.Error.empty())
    return err(L.Error);
  return L.A;
}

int cuda::deviceCount() {
  llvm::Expected<const DriverApi &> D = loadDriver();
  if (!D) {
    llvm::consumeError(D.takeError());
    return 0;
  }
  int Count = 0;
  if (D->cuInit(0) || D->cuDeviceGetCount(&Count))
    return 0;
  return Count;
}

llvm::Expected<DeviceInfo> cuda::queryDevice(int Ordinal) {
  llvm::Expected<const DriverApi &> DrvOr = loadDriver();
  if (!DrvOr)
    return DrvOr.takeError();
  const DriverApi &D = *DrvOr;
  if (CUresult R = D.cuInit(0))
    return err("the CUDA driver did not initialise: " + D.errorString(R) +
               " (no GPU, or no permission to use it?)");
  int Count = 0;
  if (CUresult R = D.cuDeviceGetCount(&Count))
    return err("cannot count CUDA devices: " + D.errorString(R));
  if (Count == 0)
    return err("the CUDA driver sees no device");
  if (Ordinal >= Count)
    return err("CUDA device " + llvm::Twine(Ordinal) + " does not exist (" +
               llvm::Twine(Count) + " device" + (Count == 1 ? "" : "s") + ")");
  DeviceInfo Info;
  Info.Ordinal = Ordinal;
  CUdevice Dev;
  if (CUresult R = D.cuDeviceGet(&Dev, Ordinal))
    return err("cannot open CUDA device " + llvm::Twine(Ordinal) + ": " +
               D.errorString(R));
  char Name[256] = {0};
  D.cuDeviceGetName(Name, sizeof(Name) - 1, Dev);
  Info.Name = Name;
  D.cuDriverGetVersion(&Info.DriverVersion);
  D.cuDeviceGetAttribute(&Info.Major,
                         CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, Dev);
  D.cuDeviceGetAttribute(&Info.Minor,
                         CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, Dev);
  D.cuDeviceGetAttribute(&Info.SMs, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                         Dev);
  D.cuDeviceGetAttribute(&Info.L2Bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, Dev);
  D.cuDeviceGetAttribute(&Info.MaxSharedOptin,
                         CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                         Dev);
  if (Info.Major < 8)
    return err("CUDA device " + llvm::Twine(Ordinal) + " (" + Info.Name +
               ") is sm_" + llvm::Twine(Info.Major) + llvm::Twine(Info.Minor) +
               "; the generated kernels need sm_80 or newer");
  return Info;
}

llvm::Expected<DeviceInfo> cuda::openDevice(int Ordinal) {
  llvm::Expected<DeviceInfo> Info = queryDevice(Ordinal);
  if (!Info)
    return Info.takeError();
  if (llvm::Error E = openContext(*Info))
    return std::move(E);
  return Info;
}

llvm::Error cuda::openContext(DeviceInfo &Info) {
  const DriverApi &D = *loadDriver();
  CUdevice Dev;
  if (CUresult R = D.cuDeviceGet(&Dev, Info.Ordinal))
    return err("cannot open CUDA device " + llvm::Twine(Info.Ordinal) + ": " +
               D.errorString(R));
  if (CUresult R = D.cuDevicePrimaryCtxRetain(&Info.Ctx, Dev))
    return err("cannot create a context on " + Info.Name + ": " +
               D.errorString(R));
  return makeCurrent(Info);
}

llvm::Error cuda::makeCurrent(const DeviceInfo &Info) {
  llvm::Expected<const DriverApi &> D = loadDriver();
  if (!D)
    return D.takeError();
  if (CUresult R = D->cuCtxSetCurrent(Info.Ctx))
    return err("cannot make the CUDA context current: " + D->errorString(R));
  return llvm::Error::success();
}

static std::string archOption(int Arch, bool ArchSpecific) {
  return "--gpu-architecture=sm_" + std::to_string(Arch) +
         (ArchSpecific ? "a" : "");
}

std::string cuda::compileOptionsKey(int Arch, bool ArchSpecific) {
  return archOption(Arch, ArchSpecific) +
         " -std=c++17 --use_fast_math -default-device";
}

llvm::Expected<std::string> cuda::compileToCubin(llvm::StringRef Source,
                                                 llvm::StringRef Name, int Arch,
                                                 bool ArchSpecific) {
  llvm::Expected<const NvrtcApi &> NOr = loadNvrtc();
  if (!NOr)
    return NOr.takeError();
  const NvrtcApi &N = *NOr;
  std::string Src = Source.str(), FileName = Name.str() + ".cu";
  nvrtcProgram Prog = nullptr;
  if (nvrtcResult R = N.nvrtcCreateProgram(&Prog, Src.c_str(), FileName.c_str(),
                                           0, nullptr, nullptr))
    return err("nvrtcCreateProgram failed: " +
               llvm::Twine(N.nvrtcGetErrorString(R)));
  std::string ArchOpt = archOption(Arch, ArchSpecific);
  const char *Opts[] = {ArchOpt.c_str(), "-std=c++17", "--use_fast_math",
                        "-default-device"};
  nvrtcResult R = N.nvrtcCompileProgram(Prog, 4, Opts);
  size_t LogSize = 0;
  N.nvrtcGetProgramLogSize(Prog, &LogSize);
  std::string Log(LogSize, '\0');
  if (LogSize)
    N.nvrtcGetProgramLog(Prog, &Log[0]);
  while (!Log.empty() && (Log.back() == '\0' || Log.back() == '\n'))
    Log.pop_back();
  if (R) {
    N.nvrtcDestroyProgram(&Prog);
    return err("NVRTC failed to compile '" + Name + "' (" +
               N.nvrtcGetErrorString(R) + "):\n" + Log);
  }
  size_t Size = 0;
  N.nvrtcGetCUBINSize(Prog, &Size);
  std::string Cubin(Size, '\0');
  if (Size)
    N.nvrtcGetCUBIN(Prog, &Cubin[0]);
  N.nvrtcDestroyProgram(&Prog);
  if (Cubin.empty())
    return err("NVRTC produced no cubin for '" + Name + "'");
  return Cubin;
}
