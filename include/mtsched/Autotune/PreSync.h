//===- PreSync.h - The one timed agreement before measuring -----*- C++ -*-===//
//
// Before any rank measures, the ranks meet once: a barrier bounded by the
// arrival deadline (how long the first rank waits for the last), then one
// all-gather bounded by the agreement timeout, carrying each rank's arrival
// time and barrier wait, its protocol flags, fingerprints of its graph and of
// its collective nodes, and rank 0's cache entries. Every rank judges the
// same gathered data, so every rank reaches the same verdict. The arrival
// deadline and the sync's own cost are different numbers: the first is
// seconds, the second is measured (microseconds when every rank has a core).
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_PRESYNC_H
#define MTSCHED_AUTOTUNE_PRESYNC_H

#include "mtsched/Autotune/AutotuneOptions.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/Runtime/Communicator.h"
#include "mtsched/Schedule/Fusion.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace mtsched {

/// What a rank brings to the pre-sync.
struct PreSyncInput {
  const Graph *G = nullptr;
  /// The collective nodes about to be tuned, in order.
  std::vector<const CollectiveMultiTemplateBufferNode *> Collectives;
  /// Whether the whole graph is compared (V1 syncs compare it only once,
  /// the graph still being lowered).
  bool CompareStructure = true;
  /// protocolFlags() of this rank.
  std::string Flags;
  /// groupMembership() of this rank's module: which ranks each process
  /// group has (a collective's text names its group, not the members).
  std::string Groups;
  /// Rank 0's cache entries (opaque here); empty on other ranks.
  std::string Bundle;
};

struct PreSyncOutcome {
  enum StateKind {
    /// Every rank arrived within the deadline.
    InStep,
    /// Every rank came, but some after the first one's deadline.
    Late,
    /// Some rank never came within deadline + agreement timeout, or left.
    Broken
  };
  StateKind State = InStep;
  /// Empty when InStep; else names the late or missing ranks.
  std::string Reason;
  /// Last arrival minus first, and the sync's own cost (last arrival to
  /// release, plus the all-gather); negative when not measured.
  double SkewMs = -1;
  double CostMs = -1;
  /// CostMs's two parts: the last arrival's barrier wait (the smallest
  /// wait of any rank), and this rank's own agreement exchange, from
  /// leaving the barrier to holding every record (encoding its own
  /// included, decoding them not); negative when not measured.
  double LastWaitMs = -1;
  double ExchangeMs = -1;
  std::vector<int> LateRanks;
  std::vector<int> MissingRanks;
  /// Rank 0's Bundle; when Broken, this rank's own (nobody's arrived).
  std::string Bundle;
};

/// The hierarchical agreement's shape for one rank: the world's ranks by
/// host, and this rank's host's communicator and (on a host's first rank,
/// its leader) the leaders' one, made once (RankAgreement).
struct PreSyncLevels {
  /// World ranks by host, each in order, hosts in order of their first.
  std::vector<std::vector<int>> Hosts;
  int MyHost = 0;
  Communicator *Host = nullptr;
  Communicator *Leaders = nullptr;
};

/// The hosts the hierarchical agreement groups N ranks into, or none for
/// the flat one. Opts.PreSyncShape "flat": none; "hier": by
/// Opts.RankHosts where it has two or more hosts, else groups of about
/// sqrt(N) consecutive ranks; "auto": hier where the topology has two or
/// more hosts or N >= Opts.PreSyncHierRanks. Its communicators must be made
/// without waiting (see preSyncSubgroups).
std::vector<std::vector<int>> preSyncHosts(const AutotuneOptions &Opts, int N);

/// The communicators the hierarchical agreement over Hosts needs: each host,
/// then the hosts' leaders (their first ranks); none when Hosts is empty.
/// MPI ranks make them once at start (MpiRankCommunicator::prepareSubgroups),
/// because MPI waits for every member of a communicator it makes, which
/// before the pre-sync could wait for a rank that never comes; a world that
/// cannot make every one at once (Communicator::createsSubgroupAtOnce) runs
/// the flat agreement.
std::vector<std::vector<int>>
preSyncSubgroups(const std::vector<std::vector<int>> &Hosts);

/// Runs the pre-sync on Comm with Opts' deadline (PreSyncTimeout) and
/// agreement timeout. An error, the same on every rank, when the ranks run
/// with different flags or graphs: it names the first difference. With
/// Levels (hosts non-empty), hierarchically: per host, across the hosts'
/// leaders, back (docs/RANKS.md), deciding what the flat one decides.
llvm::Expected<PreSyncOutcome>
runPreSync(Communicator &Comm, const AutotuneOptions &Opts, PreSyncInput In,
           const PreSyncLevels *Levels = nullptr);

/// Hash of the ordered collective nodes as printed (name, op, attributes
/// such as `reduce` and `group`, operand and result types, choices); equal
/// on every rank that is about to benchmark the same collectives in the
/// same order.
uint64_t fingerprintCollectives(
    const Graph &G,
    llvm::ArrayRef<const CollectiveMultiTemplateBufferNode *> Nodes);

/// Hash of every node of G as printed, in program order: ranks that would
/// exchange measurements for different non-collective nodes differ here.
uint64_t fingerprintStructure(const Graph &G);

/// The options that change what ranks exchange or decide, as `name=value`
/// words (command-line spelling): ranks must agree on every one.
/// "@name = [r, ...]" for every process group of M, one per line, in
/// declaration order.
std::string groupMembership(const Module &M);

std::string protocolFlags(const AutotuneOptions &Opts,
                          const FusionOptions &Fusion, CollectiveMode Mode);

/// "rank 3" or "ranks 1, 3".
std::string formatRanks(llvm::ArrayRef<int> Ranks);

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_PRESYNC_H
