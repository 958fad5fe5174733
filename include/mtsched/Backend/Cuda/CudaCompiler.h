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

/// Process-wide settings of the CUDA backend, set by the driver.
struct CudaOptions {
  /// NVRTC threads; 0 means the hardware threads (at most 32).
  unsigned CompileThreads = 0;
  /// Where cubins are cached; empty means the user cache directory +
  /// /mtsched/kernels; "none" disables the cache.
  std::string KernelCacheDir;
};
CudaOptions &cudaOptions();

/// Counts of this process, for the report.
struct KernelStats {
  std::atomic<unsigned> Compiled{0};
  std::atomic<unsigned> Cached{0};
  std::atomic<unsigned> Failed{0};
  /// Wall time spent in precompile batches, in milliseconds.
  std::atomic<uint64_t> CompileMs{0};
};
KernelStats &kernelStats();

struct CompileJob {
  std::string Name;
  std::string Source;
  /// For sm_<Arch>a (wgmma kernels), not sm_<Arch>.
  bool ArchSpecific = false;
};

/// The cache directory in use (resolving the default), or empty if none.
std::string kernelCacheDir();
/// The threads a batch uses.
unsigned compileThreads();

/// Compiles every job for sm_<Arch> (on compileThreads() threads, reading
/// and filling the cache); one result per job, in order.
std::vector<llvm::Expected<std::string>>
compileAll(const std::vector<CompileJob> &Jobs, int Arch);

} // namespace cuda
} // namespace mtsched

#endif // MTSCHED_BACKEND_CUDA_CUDACOMPILER_H
