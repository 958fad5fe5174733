//===- RankAgreement.h - The cross-rank layer of the autotuner --*- C++ -*-===//
//
// Every number the autotuner decides from is agreed by the ranks that time
// it: this layer runs the pre-sync, max-reduces each rank's measurements,
// broadcasts rank 0's cache lookups and holds the communicators of process
// groups smaller than the world. It also remembers whether the ranks can
// still talk: once a sync failed or a peer stopped answering the run is
// degraded, nothing more is measured and every layer above falls back.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_RANKAGREEMENT_H
#define MTSCHED_AUTOTUNE_RANKAGREEMENT_H

#include "mtsched/Autotune/AutotuneOptions.h"
#include "mtsched/Autotune/AutotuneResult.h"
#include "mtsched/Autotune/PreSync.h"
#include "mtsched/Runtime/Communicator.h"
#include "llvm/Support/Error.h"
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mtsched {

/// Hooks through which the driver makes a rank late, hung or dead on
/// purpose (fault injection).
struct RankHooks {
  /// Blocks until the driver releases hung ranks.
  std::function<void()> Hang;
  /// Sleeps for the given time, or less once the driver knows no peer waits
  /// for this rank any more (thread ranks: every other rank finished); an
  /// injected `late` fault stays within its bound that way.
  std::function<void(std::chrono::milliseconds)> Late;
  /// Marks this rank dead for its peers.
  std::function<void()> Exit;
};

/// Returned when an injected fault stopped this rank; not a user error.
class RankStoppedError : public llvm::ErrorInfo<RankStoppedError> {
public:
  static char ID;
  explicit RankStoppedError(std::string Why) : Why(std::move(Why)) {}
  void log(llvm::raw_ostream &OS) const override { OS << Why; }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }

private:
  std::string Why;
};

class RankAgreement {
public:
  RankAgreement(const AutotuneOptions &Opts, Communicator &World,
                RankHooks Hooks);

  int rank() const { return World.rank(); }
  int size() const { return World.size(); }
  Communicator &world() { return World; }

  /// Makes this rank late, hung or dead as --inject asks; once per run.
  llvm::Error applyRankFaults();

  /// The pre-sync (runPreSync) over the world; records the first one's
  /// outcome in SR. Returns an empty string on success, else the reason;
  /// Bundle gets rank 0's bundle whenever the ranks met. An llvm::Error
  /// when the ranks differ in flags or graphs.
  llvm::Expected<std::string> sync(PreSyncInput In, SyncResult &SR,
                                   std::string &Bundle);
  /// A pre-sync (or V1 sync) agreed once: ranks agree on flags.
  bool ranksAgreed() const { return Agreed; }

  /// The communicator the current node is timed on (the world, or its
  /// process group's while inside enterGroup/leaveGroup), and the suffix
  /// that keeps that group's measurements apart (empty for the world).
  Communicator &nodeComm() { return *NodeComm; }
  const std::string &nodeGroupKey() const { return NodeGroupKey; }
  /// Creates (once) and waits with Bound at this rank's communicator for
  /// the group Ranks; false, degraded, if that fails.
  bool enterGroup(const std::vector<int> &Ranks,
                  std::chrono::milliseconds Bound);
  void leaveGroup();

  /// The current node's communicator's collectives; false (and the run
  /// broken with Why) when a peer does not answer within Bound.
  bool agreeMax(std::vector<double> &Values, std::chrono::milliseconds Bound,
                llvm::StringRef Why);
  /// As agreeMax; the reason names the peers that stopped answering.
  bool agreeMaxNamingPeers(std::vector<double> &Values,
                           std::chrono::milliseconds Bound);
  bool barrier(std::chrono::milliseconds Bound, llvm::StringRef Why);
  bool broadcastFromLeader(std::string &Data, std::chrono::milliseconds Bound,
                           llvm::StringRef Why);

  /// Whether nothing more may be measured, and why.
  bool isDegraded() const { return Degraded; }
  /// Whether a peer stopped answering: even the final gather is skipped and
  /// remembered measurements are no longer trusted (a peer may have
  /// completed an exchange this rank gave up on).
  bool isBroken() const { return Broken; }
  const std::string &reason() const { return Reason; }
  /// Stops measuring for Why; the ranks can still talk.
  void degrade(std::string Why) {
    Degraded = true;
    Reason = std::move(Why);
  }
  /// A peer stopped answering.
  void markBroken(std::string Why) {
    Degraded = Broken = true;
    Reason = std::move(Why);
  }
  /// Records keyed as group Ranks' (after a failed sync, when a rank
  /// replays a subgroup's node from the cache without its group); undone
  /// by leaveGroup.
  void replayAsGroup(const std::vector<int> &Ranks);
  /// V1 syncs each collective on its own: after a failed sync that left the
  /// ranks talking, the next one tries again.
  void retryAfterSync(std::string Why) {
    Degraded = Broken;
    Reason = std::move(Why);
  }

private:
  const AutotuneOptions &Opts;
  Communicator &World;
  RankHooks Hooks;
  bool FaultsApplied = false;
  bool Agreed = false;
  bool Degraded = false;
  bool Broken = false;
  std::string Reason;
  Communicator *NodeComm;
  std::string NodeGroupKey;
  /// This rank's communicators of the subgroups it belongs to.
  std::map<std::vector<int>, std::unique_ptr<Communicator>> GroupComms;
  /// The hierarchical pre-sync's communicators (PreSync.h), made on the
  /// first pre-sync; no hosts for the flat one.
  std::optional<PreSyncLevels> Levels;
  /// GroupComms' communicator over Ranks, made on first use.
  llvm::Expected<Communicator &> subgroup(const std::vector<int> &Ranks);
};

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_RANKAGREEMENT_H
