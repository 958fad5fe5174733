//===- CudaCollective.h - Timing collectives across GPUs --------*- C++ -*-===//
//
// Private to the cuda backend: one rank's side of timing a collective choice
// over several GPUs (one per rank): NCCL (opened at run time) and the
// peer-memory kernels of lib/Backend/Cuda/CollectiveCodegen.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_BACKEND_CUDA_CUDACOLLECTIVE_H
#define MTSCHED_LIB_BACKEND_CUDA_CUDACOLLECTIVE_H

#include "mtsched/Autotune/Benchmarker.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Runtime/Communicator.h"
#include <memory>

namespace mtsched {

class CollectiveRank {
public:
  virtual ~CollectiveRank();
  /// Collective over the ranks of Comm: every rank calls it for the same
  /// choice in the same order. LocalFault, if non-empty, makes this rank
  /// refuse the choice (every rank then returns failed, none hangs).
  virtual Measurement measure(const MultiTemplateBufferNode &N,
                              const Workload &W, const Choice &C, bool Fused,
                              const std::string &LocalFault) = 0;
};

/// Stats counts the kernels it compiles; it must outlive the result.
std::unique_ptr<CollectiveRank>
createCollectiveRank(const AutotuneOptions &Opts, Communicator &Comm,
                     cuda::KernelStats &Stats);

} // namespace mtsched

#endif // MTSCHED_LIB_BACKEND_CUDA_CUDACOLLECTIVE_H
