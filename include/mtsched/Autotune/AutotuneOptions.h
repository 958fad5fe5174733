//===- AutotuneOptions.h - Settings of the autotuner ------------*- C++ -*-===//
#ifndef MTSCHED_AUTOTUNE_AUTOTUNEOPTIONS_H
#define MTSCHED_AUTOTUNE_AUTOTUNEOPTIONS_H

#include "mtsched/Autotune/FaultInjection.h"
#include "mtsched/Runtime/DeviceDesc.h"
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mtsched {

class DecisionsSource;

/// What a rank does when the pre-sync fails and nodes cannot be measured.
enum class SyncFailurePolicy {
  /// Decide them by the deterministic fallback rules and say so on stderr.
  Fallback,
  /// Stop with an error (the driver exits non-zero).
  Error
};

struct AutotuneOptions {
  /// Where choices are timed: "sim" (see createBenchmarker).
  std::string Backend = "sim";
  /// Backends that compile kernels (cuda): compile threads (0: the hardware
  /// threads) and the kernel cache folder (empty: the default, "none": no
  /// cache).
  unsigned CompileThreads = 0;
  std::string KernelCacheDir;
  /// The GPU (modulo the device count) that times this process's
  /// non-collective kernels: 0 for thread ranks, which share it; an MPI
  /// rank's own rank, so processes on one machine do not share a GPU.
  int GpuOrdinal = 0;
  DeviceDesc Device;
  /// Timed runs per measurement (median taken) and untimed warm-up runs.
  unsigned BenchRuns = 10;
  unsigned WarmupRuns = 2;
  /// Device time one sample covers at least (back-to-back launches, two at
  /// the least). Long samples time a kernel at the clock it sustains under
  /// load, as a whole prefill layer runs it; the default times short
  /// bursts.
  unsigned SampleUs = 500;
  /// The pre-sync's arrival deadline: how long the first rank waits for the
  /// last one. Ranks reach the scheduler tens of ms to seconds apart (a
  /// loaded machine, a slower process start, a bigger graph to lower), so
  /// this is seconds; the sync's own cost once everyone is there is
  /// microseconds and is measured, not bounded, by it.
  std::chrono::milliseconds PreSyncTimeout{5000};
  /// How long ranks that should be in step wait for each other in an
  /// exchange: the pre-sync's agreement after the arrival deadline (a rank
  /// later than deadline + this is missing, not late), and the margin past
  /// the choice timeout when measurements are exchanged, so that a choice
  /// that timed out on one rank is reported as a timeout, never mistaken for
  /// a silent peer.
  std::chrono::milliseconds AgreementTimeout{2000};
  /// A choice that takes longer is excluded.
  std::chrono::milliseconds ChoiceTimeout{30000};
  SyncFailurePolicy OnSyncFailure = SyncFailurePolicy::Fallback;
  /// Choice a collective falls back to; empty means its first choice.
  std::string CollectiveFallback;
  /// Topology::fingerprint() of a --topology file, empty for the default:
  /// the pre-sync stops ranks that see the hosts differently.
  std::string TopologyFingerprint;
  /// This rank's host as the topology names it (a --topology file's or the
  /// discovered one), empty for the default topology: the hierarchical
  /// collectives group a communicator's ranks by it. Set per rank.
  std::string HostName;
  /// The pre-sync's shape (--pre-sync): "flat" (one all-gather of every
  /// rank's record), "hier" (per host, then across host leaders) or "auto"
  /// (hier where the topology has two or more hosts or there are at least
  /// PreSyncHierRanks ranks); see preSyncHosts in PreSync.h.
  std::string PreSyncShape = "auto";
  unsigned PreSyncHierRanks = 256;
  /// Every world rank's host index (the topology's order), empty for the
  /// default topology.
  std::vector<int> RankHosts;
  /// Multiplicative noise of simulated timings, in percent, seeded per rank.
  double SimNoisePct = 0;
  uint64_t Seed = 0;
  /// Sizes to tune for, each getting its own winner in a dispatch table:
  /// rows (M) of matmuls, and message bytes of collectives. Sorted, unique.
  std::vector<int64_t> SizeHintsM;
  std::vector<int64_t> SizeHintsBytes;
  /// --decisions-from: an already-decided module whose dispatch tables
  /// decide the matmuls they cover without benchmarking
  /// (DecisionsSource.h); null: every node is tuned.
  std::shared_ptr<const DecisionsSource> DecisionsFrom;
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
  /// With several ranks, each rank times a disjoint share of the
  /// non-collective work and the agreement carries each time to every rank
  /// (collectives still need every rank). Off: every rank times every
  /// choice and the slowest rank's time counts.
  bool SplitTuning = true;
  /// With SplitTuning: whole nodes are dealt out (the default). Before the
  /// nodes are decided, each rank measures every time of the
  /// non-collective nodes it owns (inputs prepared once, on one rank), and
  /// one max-reduction carries them all to every rank; the choices a
  /// decision compares are timed on one GPU. False: each node's choices are
  /// dealt out, and a node's choices are compared across GPUs, whose times
  /// differ by 1-2% (docs/RANKS.md).
  bool SplitByNode = true;
};

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_AUTOTUNEOPTIONS_H
