//===- AutotuneOptions.h - Settings of the autotuner ------------*- C++ -*-===//
#ifndef MTSCHED_AUTOTUNE_AUTOTUNEOPTIONS_H
#define MTSCHED_AUTOTUNE_AUTOTUNEOPTIONS_H

#include "mtsched/Autotune/FaultInjection.h"
#include "mtsched/Runtime/DeviceDesc.h"
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace mtsched {

struct AutotuneOptions {
  /// Where choices are timed: "sim" (see createBenchmarker).
  std::string Backend = "sim";
  /// The GPU (modulo the device count) that times this process's
  /// non-collective kernels: 0 for thread ranks, which share it; an MPI
  /// rank's own rank, so processes on one machine do not share a GPU.
  int GpuOrdinal = 0;
  DeviceDesc Device;
  /// Timed runs per measurement (median taken) and untimed warm-up runs.
  unsigned BenchRuns = 10;
  unsigned WarmupRuns = 2;
  /// The one pre-sync's window.
  std::chrono::milliseconds PreSyncTimeout{5};
  /// A choice that takes longer is excluded; also bounds every cross-rank
  /// exchange after the pre-sync window.
  std::chrono::milliseconds ChoiceTimeout{30000};
  /// Choice a collective falls back to; empty means its first choice.
  std::string CollectiveFallback;
  /// Multiplicative noise of simulated timings, in percent, seeded per rank.
  double SimNoisePct = 0;
  uint64_t Seed = 0;
  /// Sizes to tune for, each getting its own winner in a dispatch table:
  /// rows (M) of matmuls, and message bytes of collectives. Sorted, unique.
  std::vector<int64_t> SizeHintsM;
  std::vector<int64_t> SizeHintsBytes;
  FaultPlan Faults;
  /// Show a progress line on stderr for long runs.
  bool Progress = true;
  /// Directory of the persistent autotune cache (docs/CACHE.md); empty
  /// means no cache.
  std::string CacheDir;
  /// Replay every node from the cache without benchmarking; a node missing
  /// from it is an error.
  bool CacheOnly = false;
  /// Benchmark only the K choices the cost model ranks best, per node and
  /// per size hint; 0 benchmarks every choice.
  unsigned PruneTopK = 0;
};

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_AUTOTUNEOPTIONS_H
