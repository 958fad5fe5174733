//===- MeasurementStore.h - Memo and cache under the autotuner --*- C++ -*-===//
//
// The top of the measurement stack: every agreed measurement is remembered
// by its key (workload, choice, fusion, size, process group) so that a
// second node with the same workload measures nothing, and the persistent
// cache replays a node's measurements from an earlier run. While a node is
// finalized the store also records what the node used, to write back.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_MEASUREMENTSTORE_H
#define MTSCHED_AUTOTUNE_MEASUREMENTSTORE_H

#include "mtsched/Autotune/AutotuneOptions.h"
#include "mtsched/Autotune/Cache.h"
#include "mtsched/Autotune/Measurement.h"
#include "mtsched/Autotune/Workload.h"
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace mtsched {

/// A measurement agreed by every rank that timed it, plus this rank's own.
struct AgreedMeasurement {
  ChoiceStatus Status = ChoiceStatus::Skipped;
  double Us = std::numeric_limits<double>::infinity();
  double LocalUs = std::numeric_limits<double>::infinity();
  std::string Message;
  /// Skipped because --prune-top-k dropped it (Message says why).
  bool Pruned = false;
};

/// The part of a measurement's key that depends on the workload only; it is
/// computed once per node and shared by all its choices.
std::string workloadKey(const Workload &W, bool Fused);
/// The key under which a measurement of C is remembered and reused.
std::string choiceKey(const std::string &WorkloadKey, const Choice &C);

class MeasurementStore {
public:
  /// Opens the persistent cache when Opts names one and faults do not make
  /// the measurements unfit to keep.
  explicit MeasurementStore(const AutotuneOptions &Opts);

  AutotuneCache *getCache() { return Cache.get(); }

  /// A measurement agreed earlier this run, or null.
  const AgreedMeasurement *findMemo(const std::string &Key) const;
  /// Remembers A for this run and records it for the node's cache entry.
  void remember(const std::string &Key, const AgreedMeasurement &A);
  /// Records a measurement the node's decision used, for the cache.
  void record(const std::string &Key, const AgreedMeasurement &A);

  /// Rank 0's lookup of Key for N: "H" + the entry's text, or "M". Warning
  /// is set when an entry exists but is ignored. GroupKey is N's subgroup
  /// key, or std::nullopt where it is not known yet (accepts any).
  std::string lookupEntry(const std::string &Key,
                          const MultiTemplateBufferNode &N,
                          std::optional<llvm::StringRef> GroupKey,
                          std::string &Warning);

  /// Starts a node with no cache entry consulted.
  void beginNode();
  /// The cache was consulted for the node: Data is what lookupEntry gave
  /// (on rank 0, sent to every rank).
  void beginReplay(llvm::StringRef Data, llvm::StringRef Key);
  /// Whether the cache was consulted for the current node, and whether it
  /// held an entry.
  bool isActive() const { return Active; }
  bool hasReplay() const { return !Replay.Records.empty(); }
  /// Looks Key up in the replayed entry: true and A set on a hit. On a miss
  /// under --cache-only, Missing is set: nothing may be measured.
  bool replay(const std::string &Key, AgreedMeasurement &A, bool &Missing);
  /// Writes the node's entry: what it held plus what was recorded.
  llvm::Error storeNode(const std::string &Key);

private:
  const AutotuneOptions &Opts;
  std::unique_ptr<AutotuneCache> Cache;
  std::map<std::string, AgreedMeasurement> Memo;
  bool Active = false;
  CacheEntry Replay;
  CacheEntry Recording;
};

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_MEASUREMENTSTORE_H
