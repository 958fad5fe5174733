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

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
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

/// Parses a topology file's text; Path names it in messages
/// (`PATH:LINE:COL: ...` for malformed JSON, `PATH: hosts[1].ranks[0]: ...`
/// for a value that is wrong).
llvm::Expected<Topology> parseTopologyJSON(llvm::StringRef Text,
                                           llvm::StringRef Path);
/// Reads a topology file (at most MaxConfigFileBytes) and parses it.
llvm::Expected<Topology> loadTopologyFile(llvm::StringRef Path);

} // namespace mtsched

#endif // MTSCHED_RUNTIME_TOPOLOGY_H
