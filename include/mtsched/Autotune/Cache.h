//===- Cache.h - The persistent autotune cache ------------------*- C++ -*-===//
//
// Remembers, across runs and processes, the measurements every rank agreed
// on for a node (each choice unfused and fused, the epilogue, at the node's
// size and at every size hint), so that a later run replays the decision
// without benchmarking. One file per node key; see docs/CACHE.md for the
// key, the layout on disk and how entries are invalidated.
//
// The cache only stores and loads; the autotuner decides who reads it (rank
// 0) and broadcasts what it found, so ranks never diverge.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_CACHE_H
#define MTSCHED_AUTOTUNE_CACHE_H

#include "mtsched/Autotune/AutotuneOptions.h"
#include "mtsched/Autotune/Measurement.h"
#include "mtsched/Autotune/Workload.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <map>
#include <string>

namespace mtsched {

class Graph;
class Module;
class MultiTemplateBufferNode;

/// mtsched's own version; part of every cache key.
llvm::StringRef getMtschedVersion();

/// One agreed measurement.
struct CacheRecord {
  ChoiceStatus Status = ChoiceStatus::Ok;
  /// Max over ranks; +inf unless Status is Ok.
  double Us = 0;
  std::string Message;
};

/// Everything a node's decision needs, keyed by measurement (workload,
/// choice, fusion, size).
struct CacheEntry {
  std::map<std::string, CacheRecord> Records;

  /// The entry's JSON text, with the key it belongs to.
  std::string serialize(llvm::StringRef Key) const;
  /// Parses what serialize() wrote; an error if the text is not an entry
  /// for Key.
  static llvm::Expected<CacheEntry> parse(llvm::StringRef Text,
                                          llvm::StringRef Key);
};

/// The text of a node's cache key: everything that can change its
/// measurements (see docs/CACHE.md). BackendVersion comes from the
/// benchmarker; WorldSize is the number of ranks running.
std::string cacheKeyOf(const Module &M, const Graph &G,
                       const MultiTemplateBufferNode &N,
                       const AutotuneOptions &Opts, llvm::StringRef BackendName,
                       llvm::StringRef BackendVersion, int WorldSize);

class AutotuneCache {
public:
  explicit AutotuneCache(std::string Dir) : Dir(std::move(Dir)) {}

  enum class LookupState {
    Hit,
    Miss,
    /// A file exists but cannot be trusted (corrupt, truncated, another
    /// format or version, another key): Problem says why.
    Invalid
  };
  struct LookupResult {
    LookupState State = LookupState::Miss;
    CacheEntry Entry;
    std::string Problem;
  };

  LookupResult lookup(llvm::StringRef Key) const;
  /// Writes the entry atomically (a temporary file renamed over the old
  /// one), so concurrent readers see the old entry or the new one.
  llvm::Error store(llvm::StringRef Key, const CacheEntry &E) const;
  /// Where Key's entry lives.
  std::string pathFor(llvm::StringRef Key) const;
  llvm::StringRef getDir() const { return Dir; }

  /// The on-disk format; a file of another format is ignored and rewritten.
  static constexpr unsigned FormatVersion = 1;
  /// Larger entry files are refused unread. An entry holds a few hundred
  /// bytes per measurement: choices x (unfused, fused) x (1 + size hints).
  static constexpr int64_t MaxEntryBytes = 64 << 20;

private:
  std::string Dir;
};

/// The cache directory the driver uses: FlagDir if given, else
/// $MTSCHED_CACHE_DIR, else the user's cache directory + "/mtsched". Empty
/// (no cache) with NoCache, or when $MTSCHED_CACHE is "off" or "0" and
/// neither FlagDir nor CacheOnly asks for one. Creates the directory; an
/// error names it if that fails or if the flags conflict. With CacheOnly
/// nothing is created: a missing directory is an empty cache (a warning
/// says so), a path that is not a directory an error.
llvm::Expected<std::string> resolveCacheDir(llvm::StringRef FlagDir,
                                            bool NoCache, bool CacheOnly);

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_CACHE_H
