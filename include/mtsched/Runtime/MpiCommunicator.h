//===- MpiCommunicator.h - Ranks as MPI processes ---------------*- C++ -*-===//
//
// The Communicator interface over MPI, for ranks that are processes started
// by `mpirun -np N`. This header does not include <mpi.h>: it is compiled
// only when MTSCHED_ENABLE_MPI is on, into the MPI plugin libmtsched_mpi.so
// that the tools load on demand (MpiPlugin.h), and into MtschedRuntimeMpi
// for the tests and benchmarks that link MPI themselves.
//
// Every operation is a non-blocking MPI collective polled with MPI_Test
// against the operation's deadline, so like the thread communicator it
// returns Timeout instead of waiting past its deadline. MPI collectives
// cannot be cancelled, which shapes the rest (docs/RANKS.md has the details):
//
//  * A barrier that times out stays posted. MPI matches collectives by their
//    order on the communicator, so a late rank completes it when it arrives
//    and meets its peers again at the next operation, as with the thread
//    communicator's sequence numbers. This is what lets the pre-sync's
//    all-gather tell a rank that missed the window from one that is gone.
//  * A data operation (allGather, allReduceMax, broadcast) that times out
//    breaks the communicator: its buffers stay allocated (a peer may still
//    write into them), and every later call returns Failed at once without
//    touching MPI.
//  * A rank that leaves on purpose calls depart(): it tells every peer on a
//    separate control communicator, and a peer's pending or later operation
//    returns Failed as soon as it sees that, as with ThreadGroup::markDead.
//
// A subgroup (createSubgroup) is an instance over its own MPI communicator;
// every instance in a process shares one MPI world (MPI is initialised once per
// process), so whether MPI can still be finalized is a property of the
// process: see canFinalize().
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_RUNTIME_MPICOMMUNICATOR_H
#define MTSCHED_RUNTIME_MPICOMMUNICATOR_H

#include "mtsched/Runtime/Communicator.h"
#include "mtsched/Runtime/MpiPlugin.h"
#include "llvm/Support/Error.h"
#include <chrono>
#include <memory>

namespace mtsched {

struct MpiCommHandle;

class MpiCommunicator final : public MpiRankCommunicator {
public:
  /// Initialises MPI on first use (MPI_Init_thread, MPI_THREAD_FUNNELED: only
  /// the thread that created the first communicator may use any of them) and
  /// returns a communicator over every process of MPI_COMM_WORLD.
  static llvm::Expected<std::unique_ptr<MpiCommunicator>> create();
  /// Whether MPI was initialised in this process (by create()).
  static bool isInitialized();
  ~MpiCommunicator() override;

  int rank() const override;
  int size() const override;
  llvm::StringRef kind() const override { return "mpi"; }
  bool sharesAddressSpace() const override { return false; }
  /// Found once, when MPI is initialised: MPI_Comm_split_type
  /// (MPI_COMM_TYPE_SHARED) groups the processes of one host, its lowest
  /// world rank is the key, MPI_Get_processor_name the name.
  HostIdentity hostIdentity() const override;
  CommStatus barrier(std::chrono::milliseconds Timeout) override;
  /// Sizes first (MPI_Iallgather), then the bytes (MPI_Iallgatherv); one
  /// deadline bounds both.
  CommStatus allGather(llvm::StringRef Data, std::vector<std::string> &Out,
                       std::chrono::milliseconds Timeout) override;
  /// Lengths are checked first (a max-reduction of (n, -n)), so ranks that
  /// pass different lengths all get Failed. The values are reduced with a
  /// user-defined MPI_Op with the thread communicator's order, not MPI_MAX
  /// (whose NaN handling is unspecified): NaN > +inf > every number.
  CommStatus allReduceMax(llvm::MutableArrayRef<double> Values,
                          std::chrono::milliseconds Timeout) override;
  /// Roots are checked first (as lengths above), then MPI_Ibcast of the size
  /// and of the bytes.
  CommStatus broadcast(std::string &Data, int Root,
                       std::chrono::milliseconds Timeout) override;
  /// Departed peers, and peers that did not announce (a control message
  /// sent on entering every barrier) the barrier this process entered last.
  std::vector<int> missingPeers() const override;
  /// A list made by prepareSubgroups at start is returned at once. Any
  /// other: MPI_Comm_create_group over the members only. It is blocking: MPI
  /// has no non-blocking way to make a communicator over a subset, so it
  /// waits until every member calls it. The autotuner calls it only after a
  /// successful pre-sync, when every member is known to be running. The
  /// subgroup shares this process's state: a departure or a broken
  /// operation on either fails both.
  llvm::Expected<std::unique_ptr<Communicator>>
  createSubgroup(llvm::ArrayRef<int> Ranks) override;
  /// Only for the lists prepareSubgroups made.
  bool createsSubgroupAtOnce(llvm::ArrayRef<int> Ranks) const override;
  /// MPI_Comm_split over the world, once per layer of lists that share no
  /// rank; blocking and collective, so every process calls it with the same
  /// lists at start, as it ran MPI_Comm_split_type in create().
  /// createSubgroup then returns these without waiting; their operations
  /// fail on their own (see MpiCommHandle in MpiCommunicatorImpl.h).
  llvm::Error prepareSubgroups(llvm::ArrayRef<std::vector<int>> Lists) override;

  /// This rank leaves: every peer is told (small messages on a control
  /// communicator, which complete without the peer's help), and every later
  /// operation of this process returns Failed. A departed process must end
  /// with MPI_Finalize, which returns once its peers finalize too.
  void depart() override;
  /// Whether Rank said it departed (as far as this process has heard).
  bool hasDeparted(int Rank) const override;

  /// An operation of this process failed or timed out with data in flight:
  /// nothing crosses ranks any more. Also after a prepared subgroup broke
  /// (though the world and the other prepared subgroups still work).
  static bool isBroken();
  /// Whether MPI_Finalize can be expected to return: no operation of this
  /// process is still waiting for a peer that never said it departed. False
  /// after any timeout that was not completed later; true after a clean run
  /// and after a peer departed (departed peers are in MPI_Finalize too).
  static bool canFinalize();

  /// For a broken run, which has no collective left to agree with: whether
  /// this rank should report, i.e. no lower rank that did not depart says
  /// within Grace that it finished. Every rank that finished calls it once;
  /// it also tells the higher ranks that this one finished.
  bool isLowestFinishedRank(std::chrono::milliseconds Grace) override;

  /// MPI_Finalize; returns whether MPI was finalized (now). It returns once
  /// every process calls it: callers bound it (see canFinalize()).
  static bool finalize();

private:
  MpiCommunicator(MpiCommHandle *Coll, int Rank, int Size);
  std::unique_ptr<MpiCommHandle> Coll;
  int Rank, Size;
};

} // namespace mtsched

#endif // MTSCHED_RUNTIME_MPICOMMUNICATOR_H
