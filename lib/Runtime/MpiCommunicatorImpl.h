//===- MpiCommunicatorImpl.h - MpiCommunicator's state ----------*- C++ -*-===//
//
// Internal to MpiCommunicator: the state its files share, which only they
// see (they alone include <mpi.h>). One MpiWorld per process holds two
// duplicates of MPI_COMM_WORLD: Coll for the collectives, Ctl for the small
// point-to-point messages (departure, "finished") that must not be matched
// against collectives. Each operation keeps its MPI request and buffers in
// an InFlight; when an operation is given up while MPI may still use them,
// the InFlight is parked in the world and never freed, because MPI offers
// no way to cancel a collective.
//
// MpiCommunicator.cpp makes the world and handles departures and the end;
// MpiWorld.cpp polls, waits and records failures; MpiSubgroups.cpp makes
// subgroups and MpiCollectives.cpp runs the collectives.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_RUNTIME_MPICOMMUNICATORIMPL_H
#define MTSCHED_LIB_RUNTIME_MPICOMMUNICATORIMPL_H

#include "mtsched/Runtime/MpiCommunicator.h"
#include "llvm/ADT/STLExtras.h"
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mpi.h>
#include <utility>
#include <vector>

namespace mtsched {

/// The MPI communicator an instance works on: the world's Coll, or a
/// subgroup's (kept until MPI_Finalize, which frees it).
struct MpiCommHandle {
  explicit MpiCommHandle(MPI_Comm C, std::vector<int> Members = {},
                         bool Local = false)
      : C(C), Members(std::move(Members)), Local(Local) {}
  MPI_Comm C;
  /// A subgroup's members as world ranks, in its rank order; empty for the
  /// world.
  std::vector<int> Members;
  /// A subgroup made at start (prepareSubgroups) fails on its own: a
  /// departed non-member does not fail its operations, and its failure
  /// breaks it, not the world, so the hierarchical pre-sync's other levels
  /// can still say who is missing. Other subgroups fail as the world does.
  bool Local = false;
  bool Broken = false;
  /// A Local subgroup's barriers, announced to its members with its own
  /// tag on the control communicator, as the world's are (see barrier()):
  /// how many this process entered, and per member how many it announced.
  int ArriveTag = 0;
  uint64_t Barriers = 0;
  std::vector<uint64_t> PeerBarriers;

  /// Whether a departure among Departed fails this communicator.
  bool hit(const std::vector<bool> &Departed) const {
    if (!Local)
      return true;
    return llvm::any_of(Members, [&](int R) { return Departed[size_t(R)]; });
  }
};

namespace mpi {

using Clock = std::chrono::steady_clock;

enum Tag : int { TagBye = 1, TagFinished = 2, TagArrive = 3 };

/// One operation's request and every buffer MPI may write or read.
struct InFlight {
  MPI_Request Req = MPI_REQUEST_NULL;
  int64_t Hdr[2] = {0, 0};
  int64_t HdrOut[2] = {0, 0};
  std::vector<int64_t> Sizes;
  std::vector<int> Counts, Displs;
  std::vector<char> Send, Recv;
  std::vector<double> Values, Reduced;
};

/// Longer waits are clamped so a deadline never overflows the clock.
inline constexpr std::chrono::hours MaxTimeout{24};

inline Clock::time_point deadlineAfter(std::chrono::milliseconds Timeout) {
  return Clock::now() +
         std::min<std::chrono::milliseconds>(
             std::max<std::chrono::milliseconds>(Timeout, {}), MaxTimeout);
}

/// A token for messages whose content does not matter; static so that sends
/// freed before completion always have a valid buffer.
inline int Token = 1;

struct MpiWorld {
  MPI_Comm Coll = MPI_COMM_NULL;
  MPI_Comm Ctl = MPI_COMM_NULL;
  MPI_Op MaxOp = MPI_OP_NULL;
  /// This process's host (hostIdentity()).
  HostIdentity Host;
  int Rank = 0;
  int Size = 1;
  /// An operation failed or was given up with data in flight.
  bool Broken = false;
  /// A data operation timed out: some peer may never come.
  bool DataTimedOut = false;
  /// This process called depart().
  bool Departed = false;
  std::vector<bool> PeerDeparted;
  bool AnyPeerDeparted = false;
  /// Barriers that timed out and are still posted (see MpiCommunicator.h).
  std::vector<MPI_Request> StaleBarriers;
  /// Operations given up with data in flight; never freed.
  std::vector<std::unique_ptr<InFlight>> Abandoned;
  /// Ranks whose "finished" message arrived.
  std::vector<bool> Finished;
  bool FinishedSent = false;
  /// Barriers this process entered, and per peer the barriers it announced
  /// entering: a peer behind this process never reached the last one.
  uint64_t Barriers = 0;
  std::vector<uint64_t> PeerBarriers;
  /// The peers missing from the operation that last failed or timed out.
  std::vector<int> Missing;
  /// A prepared subgroup of this process broke (on its own, see
  /// MpiCommHandle::Local): isBroken() says so, as it would have had the
  /// subgroup broken the world, so the ranks pick their reporter by
  /// messages.
  bool SubgroupBroken = false;
  /// Subgroups made at start (prepareSubgroups): each rank list, and its
  /// communicator where this process is a member (else MPI_COMM_NULL).
  std::vector<std::pair<std::vector<int>, MPI_Comm>> Prepared;

  bool usable() const { return !Broken && !Departed; }

  /// Receives every departure message that has arrived; true if any peer
  /// departed so far.
  bool pollDepartures();

  /// Receives every barrier announcement that has arrived.
  void pollArrivals();

  /// The member announcements of H's barriers that have arrived.
  void pollArrivals(MpiCommHandle &H);

  /// noteMissing() for an operation on H: for a Local subgroup, its
  /// departed members if any, else the members that have not announced its
  /// latest barrier (world ranks either way).
  void noteMissing(MpiCommHandle &H);

  /// Records which peers are missing: the departed ones if any (a departure
  /// fails an operation at once, while slower peers may still be on their
  /// way), else those that have not announced this process's latest
  /// barrier.
  void noteMissing();

  /// Forgets the stale barriers that completed since.
  void reapStale();

  /// Polls Op's request until it completes, a peer departs, or Deadline.
  /// Polling yields the core at first and then sleeps briefly, so ranks
  /// oversubscribing a machine leave each other room to arrive.
  CommStatus wait(InFlight &Op, Clock::time_point Deadline,
                  const MpiCommHandle &H);

  /// Waits for one phase of a data operation; on failure parks Op (MPI may
  /// still use its buffers) and breaks the communicator.
  CommStatus finishPhase(std::unique_ptr<InFlight> &Op, int StartRC,
                         Clock::time_point Deadline, MpiCommHandle &H);

  /// The pair (V, -V) max-reduced: every rank passed V iff the result is
  /// (V, -V). Used to check lengths and roots before the data moves.
  CommStatus agree(MpiCommHandle &H, int64_t V, bool &Same,
                   Clock::time_point Deadline);
};

/// The process's world, made by the first MpiCommunicator::create().
extern MpiWorld *World;

inline MPI_Comm asComm(const std::unique_ptr<MpiCommHandle> &H) { return H->C; }

} // namespace mpi
} // namespace mtsched

#endif // MTSCHED_LIB_RUNTIME_MPICOMMUNICATORIMPL_H
