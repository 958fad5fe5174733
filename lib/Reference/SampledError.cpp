//===- SampledError.cpp - Relative error of sampled outputs ---------------===//
#include "mtsched/Reference/SampledError.h"
#include "mtsched/Reference/RandomInputs.h"
#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

using namespace mtsched;

void ErrorSums::add(double V, double Ref) {
  Finite &= std::isfinite(V);
  E2 += (V - Ref) * (V - Ref);
  R2 += Ref * Ref;
}

void ErrorSums::add(const ErrorSums &O) {
  E2 += O.E2;
  R2 += O.R2;
  Finite &= O.Finite;
}

double ErrorSums::rel() const {
  return R2 > 0 ? std::sqrt(E2 / R2) : std::sqrt(E2);
}

ErrorSums
mtsched::sampledErrors(int64_t N, int64_t Step,
                       llvm::function_ref<void(int64_t, ErrorSums &)> Fn) {
  Step = std::max<int64_t>(1, Step);
  int64_t Count = N > 0 ? (N + Step - 1) / Step : 0;
  std::mutex Mu;
  std::map<int64_t, ErrorSums> Parts; // by chunk start: added in order
  // Chunks of 32K elements: parallelChunks' default (a million cheap items
  // a thread) gave a 4M-element all_reduce's check two threads.
  parallelChunks(
      Count,
      [&](int64_t Begin, int64_t End) {
        ErrorSums Part;
        for (int64_t K = Begin; K < End; ++K)
          Fn(K * Step, Part);
        std::lock_guard<std::mutex> Lock(Mu);
        Parts[Begin] = Part;
      },
      /*MinChunk=*/1 << 15);
  ErrorSums Sums;
  for (const auto &[Begin, Part] : Parts)
    Sums.add(Part);
  for (int64_t I = std::max<int64_t>(0, N - 16); I < N; ++I)
    Fn(I, Sums);
  return Sums;
}
