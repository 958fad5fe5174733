//===- CompileAll.h - Every generated kernel through NVRTC ------*- C++ -*-===//
//
// The code generator's tests of each template (GEMM tiles, attention,
// SwiGLU, horizontal groups, conv2d) end the same way: every kernel they
// generated is compiled by NVRTC for sm_90, on a few threads, and each one
// that does not compile is a failure naming it. Tests of one kernel at a
// time use expectKernelCompiles.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_TEST_UNIT_CUDACODEGEN_COMPILEALL_H
#define MTSCHED_TEST_UNIT_CUDACODEGEN_COMPILEALL_H

#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "gtest/gtest.h"
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

namespace mtsched {

/// Compiles every kernel of Work with NVRTC (for sm_90a where it needs it)
/// on at most Threads threads; a gtest failure for each that does not
/// compile.
inline void expectEveryKernelCompiles(llvm::ArrayRef<KernelSource> Work,
                                      unsigned Threads) {
  std::mutex Mu;
  std::vector<std::string> Failures;
  llvm::DefaultThreadPool Pool(llvm::hardware_concurrency(Threads));
  for (const KernelSource &K : Work)
    Pool.async([&K, &Mu, &Failures] {
      llvm::Expected<std::string> Cubin =
          cuda::compileToCubin(K.Source, K.Name, 90, K.NeedsSm90a);
      if (!Cubin) {
        std::lock_guard<std::mutex> L(Mu);
        Failures.push_back(K.Name + ": " + llvm::toString(Cubin.takeError()));
      }
    });
  Pool.wait();
  for (const std::string &F : Failures)
    ADD_FAILURE() << F;
}

/// Compiles one kernel with NVRTC for sm_90 (sm_90a where it needs it); a
/// gtest failure with its source if it does not compile, a note on stdout
/// where NVRTC cannot be loaded.
inline void expectKernelCompiles(const KernelSource &K) {
  llvm::Expected<const cuda::NvrtcApi &> Nv = cuda::loadNvrtc();
  if (!Nv) {
    std::cout << "[ skipped ] NVRTC not available, " << K.Name
              << " not compiled: " << llvm::toString(Nv.takeError()) << "\n";
    return;
  }
  llvm::Expected<std::string> Cubin =
      cuda::compileToCubin(K.Source, K.Name, 90, K.NeedsSm90a);
  EXPECT_TRUE(bool(Cubin)) << K.Name << ": "
                           << (Cubin ? "" : llvm::toString(Cubin.takeError()))
                           << "\n"
                           << K.Source;
}

} // namespace mtsched

#endif // MTSCHED_TEST_UNIT_CUDACODEGEN_COMPILEALL_H
