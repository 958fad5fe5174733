//===- CudaBenchSupport.cpp - Fills and references on the GPU -------------===//
#include "mtsched/Backend/Cuda/CudaBenchSupport.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Reference/RandomInputs.h"
#include "llvm/ADT/ScopeExit.h"
#include <future>
#include <map>
#include <mutex>

using namespace mtsched;
using namespace mtsched::cuda;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

// The conversions mirror the host's floatToBF16 / floatToF16 / f16ToFloat
// (lib/Reference/Interpreter.cpp) bit for bit, and the hash mirrors
// RandomInputs.cpp: a value filled here equals the host's.
static const char Source[] = R"cuda(
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;

__device__ __forceinline__ u64 mix(u64 X) {
  X += 0x9e3779b97f4a7c15ULL;
  X = (X ^ (X >> 30)) * 0xbf58476d1ce4e5b9ULL;
  X = (X ^ (X >> 27)) * 0x94d049bb133111ebULL;
  return X ^ (X >> 31);
}
__device__ __forceinline__ float draw(u64 Key, long long I) {
  double U = (double)(mix(Key + (u64)I) >> 11) * 0x1.0p-53;
  return __double2float_rn(2.0 * U - 1.0);
}
__device__ __forceinline__ u16 toBF16(float F) {
  u32 U = __float_as_uint(F);
  if ((U & 0x7fffffffu) > 0x7f800000u)
    return 0x7fc0;
  U += 0x7fffu + ((U >> 16) & 1u);
  return (u16)(U >> 16);
}
__device__ __forceinline__ u16 toF16(float F) {
  u32 U = __float_as_uint(F);
  u32 Sign = (U >> 16) & 0x8000u;
  int Exp = (int)((U >> 23) & 0xff) - 127 + 15;
  u32 Man = U & 0x7fffffu;
  if (((U >> 23) & 0xff) == 0xff)
    return (u16)(Sign | 0x7c00u | (Man ? 0x200u : 0));
  if (Exp >= 31)
    return (u16)(Sign | 0x7c00u);
  if (Exp <= 0) {
    if (Exp < -10)
      return (u16)Sign;
    Man |= 0x800000u;
    u32 Shift = (u32)(14 - Exp);
    u32 H = Man >> Shift;
    u32 Rem = Man & ((1u << Shift) - 1), Half = 1u << (Shift - 1);
    if (Rem > Half || (Rem == Half && (H & 1)))
      ++H;
    return (u16)(Sign | H);
  }
  u32 H = Sign | ((u32)Exp << 10) | (Man >> 13);
  u32 Rem = Man & 0x1fffu;
  if (Rem > 0x1000u || (Rem == 0x1000u && (H & 1)))
    ++H;
  return (u16)H;
}
__device__ __forceinline__ double fromBF16(u16 H) {
  return (double)__uint_as_float((u32)H << 16);
}
__device__ __forceinline__ double fromF16(u16 H) {
  u32 Sign = (u32)(H & 0x8000u) << 16;
  u32 Exp = (H >> 10) & 0x1f, Man = H & 0x3ffu;
  if (Exp == 0) {
    double F = (double)Man * 0x1.0p-24;
    return Sign ? -F : F;
  }
  u32 U = Exp == 31 ? (Sign | 0x7f800000u | (Man << 13))
                    : (Sign | ((Exp - 15 + 127) << 23) | (Man << 13));
  return (double)__uint_as_float(U);
}
__device__ __forceinline__ double fromF32(float X) { return (double)X; }

extern "C" __global__ void mtsched_fill_bf16(u16 *P, long long N, u64 Key) {
  for (long long I = blockIdx.x * (long long)blockDim.x + threadIdx.x; I < N;
       I += (long long)gridDim.x * blockDim.x)
    P[I] = toBF16(draw(Key, I));
}
extern "C" __global__ void mtsched_fill_f16(u16 *P, long long N, u64 Key) {
  for (long long I = blockIdx.x * (long long)blockDim.x + threadIdx.x; I < N;
       I += (long long)gridDim.x * blockDim.x)
    P[I] = toF16(draw(Key, I));
}
extern "C" __global__ void mtsched_fill_f32(float *P, long long N, u64 Key) {
  for (long long I = blockIdx.x * (long long)blockDim.x + threadIdx.x; I < N;
       I += (long long)gridDim.x * blockDim.x)
    P[I] = draw(Key, I);
}

// One thread per (check row, column), the K sum in order, in fp64.
#define MTSCHED_REF_GEMM(NAME, T, LOAD)                                        \
  extern "C" __global__ void NAME(const T *A, const T *B,                      \
                                  const long long *Rows, long long K,          \
                                  long long N, long long M1, int Batched,      \
                                  double *Out) {                               \
    long long C = blockIdx.x * (long long)blockDim.x + threadIdx.x;            \
    if (C >= N)                                                                \
      return;                                                                  \
    long long R = Rows[blockIdx.y];                                            \
    const T *Ar = A + R * K;                                                   \
    const T *Bm = B + (Batched ? (R / M1) * K * N : 0);                        \
    double Acc = 0;                                                            \
    for (long long Kk = 0; Kk < K; ++Kk)                                       \
      Acc += LOAD(Ar[Kk]) * LOAD(Bm[Kk * N + C]);                              \
    Out[blockIdx.y * N + C] = Acc;                                             \
  }
MTSCHED_REF_GEMM(mtsched_ref_gemm_bf16, u16, fromBF16)
MTSCHED_REF_GEMM(mtsched_ref_gemm_f16, u16, fromF16)
MTSCHED_REF_GEMM(mtsched_ref_gemm_f32, float, fromF32)
)cuda";

std::string cuda::benchSupportSource() { return Source; }

/// Index of T among the kernels' types, or -1.
static int typeIndex(DType T) {
  switch (T) {
  case DType::BF16:
    return 0;
  case DType::F16:
    return 1;
  case DType::F32:
    return 2;
  default:
    return -1;
  }
}

bool BenchSupport::canFill(DType T) { return typeIndex(T) >= 0; }

namespace {
/// The support module's cubin for one architecture, or why there is none.
struct SupportCubin {
  std::string Cubin, Error;
};
} // namespace

static SupportCubin compileSupport(int Arch, const KernelCompileOptions &O) {
  SupportCubin C;
  auto Cubins = compileAll({{"mtsched_bench_support", Source, false}}, Arch, O);
  if (Cubins[0])
    C.Cubin = std::move(*Cubins[0]);
  else
    C.Error = llvm::toString(Cubins[0].takeError());
  return C;
}

/// The support module compiled for sm_<Arch>, on a thread of its own from
/// the first call. Compiled once per process and architecture: the
/// benchmarker's GPU and every thread rank's collectives load the same
/// module, and without a kernel cache each would run NVRTC.
static std::shared_future<SupportCubin>
supportCubin(int Arch, const KernelCompileOptions &O) {
  static std::mutex Mu;
  static std::map<int, std::shared_future<SupportCubin>> Compiled;
  std::lock_guard<std::mutex> Lock(Mu);
  auto It = Compiled.find(Arch);
  if (It == Compiled.end())
    It = Compiled
             .emplace(Arch,
                      std::async(std::launch::async, compileSupport, Arch, O))
             .first;
  return It->second;
}

void BenchSupport::compileAhead(int Arch, const KernelCompileOptions &O) {
  supportCubin(Arch, O);
}

llvm::Expected<std::unique_ptr<BenchSupport>>
BenchSupport::load(const DriverApi &D, int Arch,
                   const KernelCompileOptions &O) {
  const SupportCubin &C = supportCubin(Arch, O).get();
  if (!C.Error.empty())
    return err("the benchmark support kernels do not compile: " + C.Error);
  const std::string &Cubin = C.Cubin;
  std::unique_ptr<BenchSupport> S(new BenchSupport(D));
  if (CUresult R = D.cuModuleLoadData(&S->Mod, Cubin.data()))
    return err("cannot load the benchmark support kernels: " +
               D.errorString(R));
  const char *Types[] = {"bf16", "f16", "f32"};
  for (int I = 0; I < 3; ++I) {
    std::string Fill = std::string("mtsched_fill_") + Types[I];
    std::string Gemm = std::string("mtsched_ref_gemm_") + Types[I];
    if (CUresult R = D.cuModuleGetFunction(&S->Fill[I], S->Mod, Fill.c_str()))
      return err("no '" + Fill + "': " + D.errorString(R));
    if (CUresult R = D.cuModuleGetFunction(&S->Gemm[I], S->Mod, Gemm.c_str()))
      return err("no '" + Gemm + "': " + D.errorString(R));
  }
  return std::move(S);
}

BenchSupport::~BenchSupport() {
  if (Mod)
    D.cuModuleUnload(Mod);
}

llvm::Error BenchSupport::fill(CUdeviceptr P, int64_t N, DType T, uint64_t Seed,
                               uint64_t Stream, CUstream S) {
  int Ti = typeIndex(T);
  if (Ti < 0)
    return err("no GPU fill for element type " + dtypeName(T).str());
  if (N <= 0)
    return llvm::Error::success();
  long long Count = N;
  unsigned long long Key = randomKey(Seed, Stream);
  void *Args[] = {&P, &Count, &Key};
  unsigned Blocks = unsigned(std::min<int64_t>(4096, (N + 255) / 256));
  if (CUresult R = D.cuLaunchKernel(Fill[Ti], Blocks, 1, 1, 256, 1, 1, 0, S,
                                    Args, nullptr))
    return err("the fill kernel failed to launch: " + D.errorString(R));
  return llvm::Error::success();
}

llvm::Expected<std::vector<std::vector<double>>>
BenchSupport::gemmRows(CUdeviceptr A, CUdeviceptr B, DType T,
                       llvm::ArrayRef<int64_t> Rows, int64_t K, int64_t N,
                       int64_t M1, bool BatchedB, CUstream S) {
  int Ti = typeIndex(T);
  if (Ti < 0)
    return err("no GPU reference for element type " + dtypeName(T).str());
  std::vector<std::vector<double>> Out(Rows.size(), std::vector<double>(N));
  if (Rows.empty() || N <= 0)
    return std::move(Out);
  CUdeviceptr RowsDev = 0, OutDev = 0;
  auto Free = llvm::make_scope_exit([&] {
    if (RowsDev)
      D.cuMemFree(RowsDev);
    if (OutDev)
      D.cuMemFree(OutDev);
  });
  size_t OutBytes = Rows.size() * size_t(N) * sizeof(double);
  if (CUresult R = D.cuMemAlloc(&RowsDev, Rows.size() * sizeof(int64_t)))
    return err("cannot allocate the reference rows: " + D.errorString(R));
  if (CUresult R = D.cuMemAlloc(&OutDev, OutBytes))
    return err("cannot allocate the reference: " + D.errorString(R));
  if (CUresult R = D.cuMemcpyHtoDAsync(RowsDev, Rows.data(),
                                       Rows.size() * sizeof(int64_t), S))
    return err("cannot copy the reference rows: " + D.errorString(R));
  long long Kl = K, Nl = N, M1l = std::max<int64_t>(1, M1);
  int Batched = BatchedB;
  void *Args[] = {&A, &B, &RowsDev, &Kl, &Nl, &M1l, &Batched, &OutDev};
  if (CUresult R = D.cuLaunchKernel(Gemm[Ti], unsigned((N + 127) / 128),
                                    unsigned(Rows.size()), 1, 128, 1, 1, 0, S,
                                    Args, nullptr))
    return err("the reference kernel failed to launch: " + D.errorString(R));
  if (CUresult R = syncStream(D, S, "the fp64 reference kernel"))
    return err("the reference kernel failed: " + D.errorString(R));
  std::vector<double> Flat(Rows.size() * size_t(N));
  if (CUresult R = D.cuMemcpyDtoH(Flat.data(), OutDev, OutBytes))
    return err("cannot read the reference: " + D.errorString(R));
  for (size_t I = 0; I < Rows.size(); ++I)
    std::copy(Flat.begin() + I * N, Flat.begin() + (I + 1) * N, Out[I].begin());
  return std::move(Out);
}
