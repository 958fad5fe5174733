//===- RandomInputs.h - Seeded inputs for benchmarks and --run ---*- C++
//-*-===//
//
// The values the benchmarkers and `--run` feed to kernels. Element I of
// stream S is a hash of (seed, S, I), so the values are the same however
// many threads fill them: the GPU benchmarker fills weights of hundreds of
// millions of elements, which one thread drawing from a sequential
// generator took most of a cold autotune to do.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_REFERENCE_RANDOMINPUTS_H
#define MTSCHED_REFERENCE_RANDOMINPUTS_H

#include "mtsched/IR/Types.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include <cstdint>
#include <string>
#include <vector>

namespace mtsched {

/// N values uniform in [-1, 1), rounded to what T holds, of stream Stream
/// under Seed.
std::vector<double> randomValues(int64_t N, uint64_t Seed, uint64_t Stream,
                                 DType T);

/// The key randomValues() hashes element indices with; the GPU benchmarker's
/// fill kernel takes it to write the same values on the device.
uint64_t randomKey(uint64_t Seed, uint64_t Stream);

/// The 64 bits element I is drawn from under Key (a randomKey).
uint64_t randomBits(uint64_t Key, int64_t I);

/// Element I of randomValues(N, Seed, Stream, T), Key being randomKey(Seed,
/// Stream): one element without drawing the ones before it.
double randomValueAt(uint64_t Key, int64_t I, DType T);

/// Calls Fn(Begin, End) on disjoint chunks covering [0, N), on the hardware
/// threads when N is at least two chunks of MinChunk items (items are cheap
/// by default: a thread is worth a million of them), else on this thread.
void parallelChunks(int64_t N,
                    llvm::function_ref<void(int64_t Begin, int64_t End)> Fn,
                    int64_t MinChunk = 1 << 20);

/// A warning, or empty, for a process that may use Usable of the machine's
/// Online cores: with one, parallelChunks (and a GPU benchmarker's input
/// draws and checks) runs on one thread. An MPI launcher binding each rank
/// to a core is the usual cause.
std::string coreBindingWarning(unsigned Usable, unsigned Online);

} // namespace mtsched

#endif // MTSCHED_REFERENCE_RANDOMINPUTS_H
