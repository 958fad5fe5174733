//===- CudaCompiler.cpp - Parallel NVRTC compilation with a disk cache ----===//
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"
#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

using namespace mtsched;
using namespace mtsched::cuda;

std::string cuda::kernelCacheDir(const KernelCompileOptions &O) {
  const std::string &D = O.CacheDir;
  if (D == "none")
    return "";
  if (!D.empty())
    return D;
  llvm::SmallString<256> P;
  if (!llvm::sys::path::cache_directory(P))
    return "";
  llvm::sys::path::append(P, "mtsched", "kernels");
  return std::string(P);
}

unsigned cuda::compileThreads(const KernelCompileOptions &O) {
  unsigned T = O.Threads;
  if (T)
    return T;
  // Every hardware thread: on a 16-core H100 host, 16 threads compiled the
  // 29 kernels of a 4096^3 GEMM's choices in half the time 8 took
  // (bench/autotune-speed.sh, docs/BENCHMARKS.md).
  return std::max(
      1u, std::min(32u, llvm::hardware_concurrency().compute_thread_count()));
}

static constexpr char Magic[8] = {'M', 'T', 'S', 'C', 'U', 'B', '1', '\0'};

static std::string cacheKey(const CompileJob &J, int Arch) {
  const NvrtcApi *N = nullptr;
  if (auto NOr = loadNvrtc())
    N = &*NOr;
  else
    llvm::consumeError(NOr.takeError());
  std::string Blob =
      J.Source + '\0' + compileOptionsKey(Arch, J.ArchSpecific) + '\0' +
      J.Name + '\0' +
      (N ? std::to_string(N->Major) + "." + std::to_string(N->Minor)
         : std::string("?"));
  // Always 16 digits: the entry header stores the key at a fixed width.
  std::string Hex = llvm::utohexstr(llvm::xxHash64(Blob), /*LowerCase=*/true);
  return std::string(16 - Hex.size(), '0') + Hex;
}

/// The cached cubin for Key, if present and intact.
static std::optional<std::string> readEntry(llvm::StringRef Path,
                                            llvm::StringRef Key) {
  auto Buf = llvm::MemoryBuffer::getFile(Path, /*IsText=*/false);
  if (!Buf)
    return std::nullopt;
  llvm::StringRef B = (*Buf)->getBuffer();
  // magic, key (16 hex), size (8 bytes), data, checksum (8 bytes)
  if (B.size() < 8 + 16 + 8 + 8 ||
      B.substr(0, 8) != llvm::StringRef(Magic, 8) || B.substr(8, 16) != Key)
    return std::nullopt;
  uint64_t Size, Sum;
  std::memcpy(&Size, B.data() + 24, 8);
  if (B.size() != 32 + Size + 8)
    return std::nullopt;
  llvm::StringRef Data = B.substr(32, Size);
  std::memcpy(&Sum, B.data() + 32 + Size, 8);
  if (Sum != llvm::xxHash64(Data))
    return std::nullopt;
  return Data.str();
}

static void writeEntry(llvm::StringRef Dir, llvm::StringRef Path,
                       llvm::StringRef Key, llvm::StringRef Data) {
  if (llvm::sys::fs::create_directories(Dir))
    return;
  llvm::SmallString<256> Tmp;
  int FD;
  if (llvm::sys::fs::createUniqueFile(Path + "-%%%%%%%%.tmp", FD, Tmp))
    return;
  {
    llvm::raw_fd_ostream OS(FD, /*shouldClose=*/true);
    uint64_t Size = Data.size(), Sum = llvm::xxHash64(Data);
    OS.write(Magic, 8);
    OS << Key;
    OS.write(reinterpret_cast<const char *>(&Size), 8);
    OS << Data;
    OS.write(reinterpret_cast<const char *>(&Sum), 8);
    OS.close();
    if (OS.has_error()) {
      OS.clear_error();
      llvm::sys::fs::remove(Tmp);
      return;
    }
  }
  if (llvm::sys::fs::rename(Tmp, Path))
    llvm::sys::fs::remove(Tmp);
}

CompiledKernel cuda::compileOne(const CompileJob &J, int Arch,
                                const KernelCompileOptions &O, KernelStats &S) {
  CompiledKernel Out;
  std::string Dir = kernelCacheDir(O);
  std::string Key = cacheKey(J, Arch);
  llvm::SmallString<256> Path(Dir);
  llvm::sys::path::append(Path, Key + ".cubin");
  if (!Dir.empty())
    if (std::optional<std::string> Hit = readEntry(Path, Key)) {
      ++S.Cached;
      Out.Cubin = std::move(*Hit);
      return Out;
    }
  llvm::Expected<std::string> C =
      compileToCubin(J.Source, J.Name, Arch, J.ArchSpecific);
  if (!C) {
    ++S.Failed;
    Out.Error = llvm::toString(C.takeError());
    return Out;
  }
  ++S.Compiled;
  if (!Dir.empty())
    writeEntry(Dir, Path, Key, *C);
  Out.Cubin = std::move(*C);
  return Out;
}

std::vector<size_t> cuda::longestFirst(const std::vector<CompileJob> &Jobs) {
  // The sm_90a (wgmma) kernels take several times as long as the others,
  // and a batch ends with its slowest thread.
  std::vector<size_t> Order;
  for (bool Slow : {true, false})
    for (size_t I = 0; I < Jobs.size(); ++I)
      if (Jobs[I].ArchSpecific == Slow)
        Order.push_back(I);
  return Order;
}

std::vector<llvm::Expected<std::string>>
cuda::compileAll(const std::vector<CompileJob> &Jobs, int Arch,
                 const KernelCompileOptions &O, KernelStats *Stats) {
  auto T0 = std::chrono::steady_clock::now();
  KernelStats Unused;
  KernelStats &S = Stats ? *Stats : Unused;
  std::vector<CompiledKernel> Done(Jobs.size());
  unsigned Threads = std::min<unsigned>(compileThreads(O), Jobs.size());
  if (Threads <= 1) {
    for (size_t I = 0; I < Jobs.size(); ++I)
      Done[I] = compileOne(Jobs[I], Arch, O, S);
  } else {
    llvm::DefaultThreadPool Pool(llvm::hardware_concurrency(Threads));
    for (size_t I : longestFirst(Jobs))
      Pool.async([&, I] { Done[I] = compileOne(Jobs[I], Arch, O, S); });
    Pool.wait();
  }
  std::vector<llvm::Expected<std::string>> Out;
  for (CompiledKernel &C : Done) {
    if (C.Error.empty())
      Out.push_back(std::move(C.Cubin));
    else
      Out.push_back(
          llvm::createStringError(llvm::inconvertibleErrorCode(), C.Error));
  }
  S.CompileMs += std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - T0)
                     .count();
  return Out;
}
