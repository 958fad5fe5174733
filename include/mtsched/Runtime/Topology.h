//===- Topology.h - Which host and NVLink domain each rank is on -*- C++
//-*-===//
//
// Peer-memory collectives (one_shot, two_shot, p2p) load and store a peer's
// memory directly, so every rank of their group must share one NVLink
// domain; a group spanning hosts needs NCCL or a hierarchical collective.
// The topology says where each rank is: by default every rank is on one
// host in one NVLink domain (one machine, as before); --topology=FILE
// overrides it (docs/RANKS.md, "Topology").
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_RUNTIME_TOPOLOGY_H
#define MTSCHED_RUNTIME_TOPOLOGY_H

#include "mtsched/Runtime/Communicator.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace mtsched {

struct Topology {
  struct Host {
    std::string Name;
    /// The host's ranks, in the order the file lists them.
    std::vector<int64_t> Ranks;
    /// A partition of Ranks into NVLink domains.
    std::vector<std::vector<int64_t>> Domains;
  };
  /// Empty: the default, every rank on one host in one NVLink domain.
  std::vector<Host> Hosts;

  bool isDefault() const { return Hosts.empty(); }

  /// Where a set of ranks lies.
  struct Span {
    /// Distinct hosts and NVLink domains among the ranks.
    int Hosts = 1;
    int Domains = 1;
    /// The most of the ranks on one host.
    int MaxPerHost = 0;
  };
  /// The span of Ranks; ranks the file does not list count as one more
  /// host each (checkWorld rejects such files before anything asks).
  Span spanOf(llvm::ArrayRef<int64_t> Ranks) const;

  /// An error unless the file lists exactly the ranks 0..WorldSize-1
  /// (always success for the default).
  llvm::Error checkWorld(int64_t WorldSize, llvm::StringRef Path) const;

  /// A canonical one-line form (`default`, or
  /// `a:[0,1]{[0,1]};b:[2,3]{[2],[3]}`): ranks with different views of the
  /// topology differ here, which the pre-sync compares.
  std::string fingerprint() const;
};

/// What one rank knows of its own place, for discovery.
struct RankPlacement {
  HostIdentity Host;
  /// The GPU the rank's collectives run on, and the GPUs of its host whose
  /// memory that GPU can access directly (cuDeviceCanAccessPeer, itself
  /// included); Ordinal -1 when no GPU was probed (no GPU, or a backend
  /// that uses none), and NoGpuReason says why.
  int Ordinal = -1;
  std::vector<int> PeerOrdinals;
  std::string NoGpuReason;

  /// One line without newlines or tabs inside fields, for an all-gather.
  std::string encode() const;
  /// The inverse of encode(); false for a line encode() did not write.
  static bool decode(llvm::StringRef Line, RankPlacement &Out);
};

/// A topology found at run time, and how, in words for the summary and
/// the report.
struct DiscoveredTopology {
  Topology Topo;
  /// E.g. "discovered: 2 hosts (MPI shared-memory split); NVLink domains
  /// from CUDA peer access" or "--topology=FILE".
  std::string Source;
};

/// The topology of ranks 0..N-1 placed as Ranks[r] says: one host per
/// distinct Host.Key, in order of its lowest rank, named by Host.Name (a
/// name two keys share gets `#KEY` appended); inside a host, NVLink domains
/// are the groups of ranks whose GPUs reach each other both ways (one
/// domain where any rank of the host has no GPU probed). One host of one
/// domain is the default topology (isDefault()), which is what it means.
DiscoveredTopology topologyFromPlacements(llvm::ArrayRef<RankPlacement> Ranks);

/// Every rank of World sends Mine and builds the same topology from all of
/// them: one all-gather, bounded by Timeout (an error names the ranks that
/// did not answer). Ranks in one process know every placement without an
/// exchange and call topologyFromPlacements directly.
llvm::Expected<DiscoveredTopology>
discoverTopology(Communicator &World, const RankPlacement &Mine,
                 std::chrono::milliseconds Timeout);

/// Parses a topology file's text; Path names it in messages
/// (`PATH:LINE:COL: ...` for malformed JSON, `PATH: hosts[1].ranks[0]: ...`
/// for a value that is wrong).
llvm::Expected<Topology> parseTopologyJSON(llvm::StringRef Text,
                                           llvm::StringRef Path);
/// Reads a topology file (at most MaxConfigFileBytes) and parses it.
llvm::Expected<Topology> loadTopologyFile(llvm::StringRef Path);

} // namespace mtsched

#endif // MTSCHED_RUNTIME_TOPOLOGY_H
