//===- Communicator.h - How ranks talk to each other ------------*- C++ -*-===//
//
// The small interface the autotuner uses to synchronise ranks: a timed
// barrier, an all-gather of strings, an element-wise max and a broadcast.
// Every operation is collective (every rank of the group calls it, in the
// same order) and bounded: it returns Timeout instead of waiting past its
// deadline, and Failed as soon as a peer is known to be gone, so a late,
// hung or dead rank can never hang the others.
//
// Implementations: SingleCommunicator (one rank), ThreadCommunicator (ranks
// as threads of one process, from a ThreadGroup) and MpiCommunicator.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_RUNTIME_COMMUNICATOR_H
#define MTSCHED_RUNTIME_COMMUNICATOR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mtsched {

/// Where a rank runs, as topology discovery reads it (discoverTopology in
/// Topology.h).
struct HostIdentity {
  /// The host's name as people know it (MPI_Get_processor_name; the
  /// machine's name for ranks in one process).
  std::string Name;
  /// Equal exactly for the ranks of one host: the lowest world rank of
  /// MPI's shared-memory split (MPI_COMM_TYPE_SHARED), 0 for ranks in one
  /// process. Names alone can repeat across hosts (containers).
  int64_t Key = 0;
  /// How the host was found, for the summary: "MPI shared-memory split",
  /// "one process".
  std::string Method;
  /// This process's index among the processes of its host, and their
  /// number (MPI's shared-memory split): which GPU an MPI process takes.
  /// -1 and 0 for ranks in one process, whose GPU is their rank's.
  int LocalRank = -1;
  int LocalSize = 0;
};

enum class CommStatus {
  Ok,
  /// Not every rank arrived before the deadline (on this rank or, for a rank
  /// that arrives late, on a peer that already gave up).
  Timeout,
  /// A peer is dead, or the ranks disagree about the operation (different
  /// operations, lengths or roots at the same step).
  Failed
};

/// "ok", "timeout", "failed".
llvm::StringRef commStatusName(CommStatus S);

class Communicator {
public:
  virtual ~Communicator();
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "threads", "mpi", "single".
  virtual llvm::StringRef kind() const = 0;
  /// True when every rank lives in this process (a device pointer of one
  /// rank is valid in another); false for MPI processes, which must share
  /// device memory through IPC handles.
  virtual bool sharesAddressSpace() const { return true; }
  /// This rank's host. The default: every rank in this process, on this
  /// machine.
  virtual HostIdentity hostIdentity() const;
  /// Barrier that gives up after Timeout.
  virtual CommStatus barrier(std::chrono::milliseconds Timeout) = 0;
  /// Every rank's Data, indexed by rank. Out is only written on Ok.
  virtual CommStatus allGather(llvm::StringRef Data,
                               std::vector<std::string> &Out,
                               std::chrono::milliseconds Timeout) = 0;
  /// Element-wise max over ranks, in place; every rank must pass the same
  /// length. +inf wins over every number; NaN wins over everything, so the
  /// result never depends on the order contributions arrive in. Values are
  /// only written on Ok.
  virtual CommStatus allReduceMax(llvm::MutableArrayRef<double> Values,
                                  std::chrono::milliseconds Timeout) = 0;
  /// Root's Data to everyone (Data is only written on Ok).
  virtual CommStatus broadcast(std::string &Data, int Root,
                               std::chrono::milliseconds Timeout) = 0;
  /// After an operation returned Timeout or Failed: the peers known not to
  /// have joined it (dead or departed ranks, and ranks that never arrived),
  /// in rank order. Empty when the implementation cannot tell. It is what
  /// lets a fallback name the rank at fault instead of every rank.
  virtual std::vector<int> missingPeers() const { return {}; }
  /// A communicator over some of this one's ranks, for a process group
  /// smaller than the world: Ranks are ranks of this communicator, this rank
  /// among them, and the new communicator's rank() is this rank's index in
  /// Ranks. Only the members call it (non-members never wait for it), each
  /// once per rank list, with the same list in the same order. Thread ranks
  /// create it without waiting; MPI ranks wait for every member (see
  /// MpiCommunicator). A peer marked dead or departed fails the
  /// subgroup's operations as it fails this communicator's.
  virtual llvm::Expected<std::unique_ptr<Communicator>>
  createSubgroup(llvm::ArrayRef<int> Ranks) = 0;
  /// Whether createSubgroup(Ranks) returns without waiting for the other
  /// members: always for thread ranks; for MPI ranks only for the lists
  /// made at start (MpiRankCommunicator::prepareSubgroups), since waiting
  /// is unbounded while a member may never come. The same answer on every
  /// rank, members or not.
  virtual bool createsSubgroupAtOnce(llvm::ArrayRef<int> Ranks) const {
    return true;
  }
};

/// Checks a rank list for createSubgroup: not empty, no duplicates, every
/// rank in [0, Size), Self among them. Returns Self's index.
llvm::Expected<int> subgroupIndex(llvm::ArrayRef<int> Ranks, int Size,
                                  int Self);

/// A group of one: every operation succeeds at once.
class SingleCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  llvm::StringRef kind() const override { return "single"; }
  CommStatus barrier(std::chrono::milliseconds Timeout) override;
  CommStatus allGather(llvm::StringRef Data, std::vector<std::string> &Out,
                       std::chrono::milliseconds Timeout) override;
  CommStatus allReduceMax(llvm::MutableArrayRef<double> Values,
                          std::chrono::milliseconds Timeout) override;
  /// Failed unless Root is 0.
  CommStatus broadcast(std::string &Data, int Root,
                       std::chrono::milliseconds Timeout) override;
  /// Another single communicator; Ranks must be {0}.
  llvm::Expected<std::unique_ptr<Communicator>>
  createSubgroup(llvm::ArrayRef<int> Ranks) override;
};

namespace detail {
struct ThreadGroupState;
} // namespace detail

/// N ranks as threads of one process. Each rank takes its communicator with
/// get(Rank) and uses it from its own thread; operations are matched across
/// ranks by a per-rank sequence number, so a rank that gave up on one
/// operation meets its peers again at the next. The shared state is owned
/// jointly by the group and its communicators: either may outlive the other.
/// Subgroups (Communicator::createSubgroup) share the group's registry: the
/// first member to ask creates the subgroup's state, the others join it, and
/// markDead reaches every subgroup the dead rank belongs to.
class ThreadGroup {
public:
  explicit ThreadGroup(int N);
  ~ThreadGroup();
  ThreadGroup(const ThreadGroup &) = delete;
  ThreadGroup &operator=(const ThreadGroup &) = delete;

  int size() const;
  /// The communicator of Rank (0 <= Rank < size()); call once per rank.
  std::unique_ptr<Communicator> get(int Rank);
  /// Rank has exited: every operation in progress or started later returns
  /// Failed on every rank instead of waiting for it.
  void markDead(int Rank);
  bool isDead(int Rank) const;
  /// Operations some rank has not finished with yet (for tests: slots are
  /// freed once every live rank is done with them).
  size_t pendingOps() const;

private:
  std::shared_ptr<detail::ThreadGroupState> State;
};

} // namespace mtsched

#endif // MTSCHED_RUNTIME_COMMUNICATOR_H
