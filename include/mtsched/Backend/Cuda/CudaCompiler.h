//===- CudaCompiler.h - Parallel NVRTC compilation with a disk cache -*- C++
//-*-===//
//
// Compiles many kernels on an llvm::ThreadPool and caches each cubin on
// disk under a key hashing (source, options, arch, NVRTC version). Entries
// are written atomically (unique temp file, then rename) and carry a
// checksum: a corrupt entry is ignored and rewritten, never trusted.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_BACKEND_CUDA_CUDACOMPILER_H
#define MTSCHED_BACKEND_CUDA_CUDACOMPILER_H

#include "llvm/Support/Error.h"
#include <atomic>
#include <string>
#include <vector>

namespace mtsched {
namespace cuda {

/// How kernels are compiled: plain values the caller passes along
/// (mtsched-opt's --compile-threads and --kernel-cache-dir).
struct KernelCompileOptions {
  /// NVRTC threads; 0 means the hardware threads (at most 32).
  unsigned Threads = 0;
  /// Where cubins are cached; empty means the user cache directory +
  /// /mtsched/kernels; "none" disables the cache.
  std::string CacheDir;
};

/// What one user of the compiler (a benchmarker) compiled, for the report.
struct KernelStats {
  std::atomic<unsigned> Compiled{0};
  std::atomic<unsigned> Cached{0};
  std::atomic<unsigned> Failed{0};
  /// Milliseconds spent compiling: a batch's wall time, or for kernels
  /// compiled ahead on other threads, the time spent waiting for them.
  std::atomic<uint64_t> CompileMs{0};
};

struct CompileJob {
  std::string Name;
  std::string Source;
  /// For sm_<Arch>a (wgmma kernels), not sm_<Arch>.
  bool ArchSpecific = false;
};

/// One job's cubin, or why there is none (a copyable result, for futures).
struct CompiledKernel {
  std::string Cubin, Error;
};

/// The cache directory O names (resolving the default), or empty if none.
std::string kernelCacheDir(const KernelCompileOptions &O);
/// The threads a batch uses under O.
unsigned compileThreads(const KernelCompileOptions &O);

/// Compiles one job for sm_<Arch> on the calling thread, reading and
/// filling O's cache, counting into S.
CompiledKernel compileOne(const CompileJob &J, int Arch,
                          const KernelCompileOptions &O, KernelStats &S);
/// The order to start Jobs in: the sm_<Arch>a ones first (the slowest).
std::vector<size_t> longestFirst(const std::vector<CompileJob> &Jobs);

/// Compiles every job for sm_<Arch> (on compileThreads(O) threads, reading
/// and filling O's cache), counting into Stats if given; one result per job,
/// in order.
std::vector<llvm::Expected<std::string>>
compileAll(const std::vector<CompileJob> &Jobs, int Arch,
           const KernelCompileOptions &O, KernelStats *Stats = nullptr);

} // namespace cuda
} // namespace mtsched

#endif // MTSCHED_BACKEND_CUDA_CUDACOMPILER_H
