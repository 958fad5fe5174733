//===- SampledError.h - Relative error of sampled outputs -------*- C++ -*-===//
//
// How a benchmarker decides that an output is right: the relative error
// ||out - ref|| / ||ref|| over sampled elements, and whether every sampled
// output was finite. The samples are compared on the host's threads: the
// check of a fused all_reduce choice (2M elements against an fp64
// reference with a GELU) took 44 ms on two threads and 11 ms on all of a
// 32-core host's (docs/BENCHMARKS.md).
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_REFERENCE_SAMPLEDERROR_H
#define MTSCHED_REFERENCE_SAMPLEDERROR_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include <cstdint>

namespace mtsched {

/// Squared errors and squared references of compared elements.
struct ErrorSums {
  double E2 = 0, R2 = 0;
  bool Finite = true;
  /// One output V against its reference Ref.
  void add(double V, double Ref);
  void add(const ErrorSums &O);
  /// sqrt(E2 / R2), or sqrt(E2) when every reference is zero.
  double rel() const;
};

/// The sums of Fn(I, Sums) over I = 0, Step, 2 Step, ... below N, then over
/// the last 16 indices (a kernel's ragged tail past its last full vector),
/// which are compared always. The strided part runs on parallelChunks, its
/// chunks' sums added in index order.
ErrorSums sampledErrors(int64_t N, int64_t Step,
                        llvm::function_ref<void(int64_t, ErrorSums &)> Fn);

} // namespace mtsched

#endif // MTSCHED_REFERENCE_SAMPLEDERROR_H
