//===- CudaCollective.h - Timing collectives across GPUs --------*- C++ -*-===//
//
// Private to the cuda backend: one rank's side of timing a collective choice
// over several GPUs (one per rank): NCCL (opened at run time) and the
// peer-memory kernels of lib/Backend/Cuda/CollectiveCodegen.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_BACKEND_CUDA_CUDACOLLECTIVE_H
#define MTSCHED_LIB_BACKEND_CUDA_CUDACOLLECTIVE_H

#include "mtsched/Autotune/AutotuneOptions.h"
#include "mtsched/Autotune/Measurement.h"
#include "mtsched/Autotune/Workload.h"
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
  /// Starts the set-up that can run while other work is measured: NCCL's
  /// communicator, which took 0.4-0.6 s of each rank on 2 H100s. Every
  /// rank calls it at the same point or none does, since it exchanges
  /// NCCL's id over the communicator; the first measure() waits for it.
  virtual void startSetUp() {}
};

/// Returns once no NCCL communicator of this process is opening on its own
/// thread (CollectiveRank::startSetUp), or once the choice timeout has
/// passed since the last started. Choices are timed only then: while one
/// opened, cuBLAS measured 12-120% slow on 2 H100s.
void waitForCollectiveSetUp();

/// Stats counts the kernels it compiles; it must outlive the result.
std::unique_ptr<CollectiveRank>
createCollectiveRank(const AutotuneOptions &Opts, Communicator &Comm,
                     cuda::KernelStats &Stats);

} // namespace mtsched

#endif // MTSCHED_LIB_BACKEND_CUDA_CUDACOLLECTIVE_H
