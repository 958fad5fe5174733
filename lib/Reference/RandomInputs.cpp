//===- RandomInputs.cpp - Seeded inputs for benchmarks and --run ----------===//
#include "mtsched/Reference/RandomInputs.h"
#include "mtsched/Reference/Interpreter.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include <algorithm>

using namespace mtsched;

/// SplitMix64's finaliser: a bijection that mixes every input bit into every
/// output bit, enough for benchmark data (not for cryptography).
static uint64_t mix(uint64_t X) {
  X += 0x9e3779b97f4a7c15ULL;
  X = (X ^ (X >> 30)) * 0xbf58476d1ce4e5b9ULL;
  X = (X ^ (X >> 27)) * 0x94d049bb133111ebULL;
  return X ^ (X >> 31);
}

void mtsched::parallelChunks(int64_t N,
                             llvm::function_ref<void(int64_t, int64_t)> Fn,
                             int64_t MinChunk) {
  MinChunk = std::max<int64_t>(1, MinChunk);
  unsigned Threads = llvm::hardware_concurrency().compute_thread_count();
  int64_t Chunks = std::min<int64_t>(Threads, (N + MinChunk - 1) / MinChunk);
  if (Chunks <= 1) {
    if (N > 0)
      Fn(0, N);
    return;
  }
  llvm::DefaultThreadPool Pool(llvm::hardware_concurrency(unsigned(Chunks)));
  int64_t Step = (N + Chunks - 1) / Chunks;
  for (int64_t B = 0; B < N; B += Step)
    Pool.async([=] { Fn(B, std::min(N, B + Step)); });
  Pool.wait();
}

uint64_t mtsched::randomKey(uint64_t Seed, uint64_t Stream) {
  return mix(mix(Seed) ^ (Stream * 0xd1b54a32d192ed03ULL));
}

uint64_t mtsched::randomBits(uint64_t Key, int64_t I) {
  return mix(Key + uint64_t(I));
}

double mtsched::randomValueAt(uint64_t Key, int64_t I, DType T) {
  // The top 53 bits as a double in [0, 1), scaled to [-1, 1).
  double U = double(randomBits(Key, I) >> 11) * 0x1.0p-53;
  // A bool input (a mask) is true half the time.
  if (T == DType::Bool)
    return U < 0.5 ? 1 : 0;
  return roundTo(2 * U - 1, T);
}

std::vector<double> mtsched::randomValues(int64_t N, uint64_t Seed,
                                          uint64_t Stream, DType T) {
  std::vector<double> V(std::max<int64_t>(0, N));
  uint64_t Key = randomKey(Seed, Stream);
  // A value is a hash and a rounding (several ns): a thread per 256K.
  parallelChunks(
      N,
      [&](int64_t B, int64_t E) {
        for (int64_t I = B; I < E; ++I)
          V[I] = randomValueAt(Key, I, T);
      },
      /*MinChunk=*/1 << 18);
  return V;
}

std::string mtsched::coreBindingWarning(unsigned Usable, unsigned Online) {
  if (Usable != 1 || Online <= 1)
    return "";
  return "this process may use 1 of the machine's " + std::to_string(Online) +
         " cores (mpirun binds each rank to a core by default); the GPU "
         "benchmarker draws inputs and checks outputs on the host's threads, "
         "beside NCCL's: run mpirun --bind-to none, or give each rank cores "
         "with --map-by slot:PE=N (docs/RANKS.md)";
}
