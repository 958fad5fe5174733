//===- CudaBenchmarker.h - Timing choices on a CUDA GPU ---------*- C++ -*-===//
#ifndef MTSCHED_BACKEND_CUDA_CUDABENCHMARKER_H
#define MTSCHED_BACKEND_CUDA_CUDABENCHMARKER_H

#include "mtsched/Autotune/BackendRegistry.h"
#include "mtsched/Reference/Npy.h"
#include "mtsched/Runtime/Communicator.h"
#include "llvm/Support/raw_ostream.h"

namespace mtsched {

/// Generates each choice's kernel, compiles it with NVRTC (all choices of a
/// node at once, in parallel, cached on disk), checks its output against
/// the fp64 reference and times it with CUDA events. The error says why
/// CUDA cannot run here: only the driver library is checked, the GPU opens
/// at the first measurement (a fully cached run never opens it). Comm is
/// the rank's communicator, which collectives over several GPUs (NCCL
/// set-up, peer buffers, per-sample barriers) use; it and Opts must outlive
/// the benchmarker.
llvm::Expected<std::unique_ptr<Benchmarker>>
createCudaBenchmarker(const AutotuneOptions &Opts, int Rank,
                      Communicator &Comm);

/// The registry entry of the `cuda` backend; `--backend=auto` tries it.
BackendInfo getCudaBackend();

/// Opens the GPU the cuda backend would use (its context, stream and
/// cuBLAS; hundreds of milliseconds): the error says why it cannot.
llvm::Error openCudaDevice(const AutotuneOptions &Opts);

/// Runs every node of a decided graph on the GPU on the inputs IO gives
/// (.npy files or seeded random values) and checks each graph output against
/// the fp64 interpreter, writing it to IO.OutputDir if set; a line per output
/// goes to OS. Then, if IO.TimeRuns > 0, times the whole graph two ways and
/// prints both medians: captured once into a CUDA graph and replayed (as a
/// deployed model runs), and its launches issued eagerly back to back.
llvm::Error runGraphOnGpu(const Graph &G, const RunIO &IO,
                          llvm::raw_ostream &OS);
/// The runtime library's cuda path (BackendInfo::PrepareGraph): every
/// kernel of the decided graph compiled, loaded and launched once on zeroed
/// inputs (so a kernel that cannot run fails here, named), then the run
/// captured as a CUDA graph. Each PreparedGraph::run copies the caller's
/// inputs into the buffers bound at prepare, replays the graph on the
/// caller's stream and copies the outputs out, all queued on that stream.
llvm::Expected<std::unique_ptr<PreparedGraph>>
prepareGraphOnGpu(const Graph &G, const RunIO &IO);
/// The same with seeded random inputs, no files and no timing.
inline llvm::Error runGraphOnGpu(const Graph &G, uint64_t Seed,
                                 llvm::raw_ostream &OS) {
  RunIO IO;
  IO.Seed = Seed;
  return runGraphOnGpu(G, IO, OS);
}

} // namespace mtsched

#endif // MTSCHED_BACKEND_CUDA_CUDABENCHMARKER_H
