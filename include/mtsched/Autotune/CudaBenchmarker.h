//===- CudaBenchmarker.h - Timing choices on a CUDA GPU ---------*- C++ -*-===//
#ifndef MTSCHED_AUTOTUNE_CUDABENCHMARKER_H
#define MTSCHED_AUTOTUNE_CUDABENCHMARKER_H

#include "mtsched/Autotune/Benchmarker.h"
#include "llvm/Support/raw_ostream.h"

namespace mtsched {

/// Generates each choice's kernel, compiles it with NVRTC (all choices of a
/// node at once, in parallel, cached on disk), checks its output against
/// the fp64 reference and times it with CUDA events. The error says why
/// CUDA cannot run here.
llvm::Expected<std::unique_ptr<Benchmarker>>
createCudaBenchmarker(const AutotuneOptions &Opts, int Rank);

/// Runs every node of a decided graph on the GPU with seeded random inputs
/// and checks each graph output against the fp64 interpreter; a line per
/// output goes to OS.
llvm::Error runGraphOnGpu(const Graph &G, uint64_t Seed, llvm::raw_ostream &OS);

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_CUDABENCHMARKER_H
