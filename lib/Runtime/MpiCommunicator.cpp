//===- MpiCommunicator.cpp - Ranks as MPI processes -----------------------===//
//
// The process's MPI world, made by the first create(), and its end:
// departures, who reports, whether MPI can be finalized. MpiWorld.cpp
// polls and waits, MpiSubgroups.cpp makes subgroups, MpiCollectives.cpp
// runs the collectives; MpiCommunicatorImpl.h holds their shared state.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Runtime/MpiCommunicator.h"
#include "MpiCommunicatorImpl.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <limits>
#include <thread>

using namespace mtsched;
using namespace mtsched::mpi;

namespace {

/// NaN above +inf above every number, whatever order contributions arrive
/// in; the same rule as the thread communicator.
void nanAwareMax(void *In, void *InOut, int *Len, MPI_Datatype *) {
  const double *A = static_cast<const double *>(In);
  double *B = static_cast<double *>(InOut);
  for (int I = 0; I < *Len; ++I) {
    if (std::isnan(A[I]) || std::isnan(B[I]))
      B[I] = std::numeric_limits<double>::quiet_NaN();
    else
      B[I] = std::max(A[I], B[I]);
  }
}

} // namespace

llvm::Expected<std::unique_ptr<MpiCommunicator>> MpiCommunicator::create() {
  if (!World) {
    int Finalized = 0;
    MPI_Finalized(&Finalized);
    if (Finalized)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "MPI was already finalized");
    int Init = 0;
    MPI_Initialized(&Init);
    int Provided = 0;
    if (!Init && MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED,
                                 &Provided) != MPI_SUCCESS)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "MPI_Init_thread failed");
    auto W = std::make_unique<MpiWorld>();
    MPI_Comm_dup(MPI_COMM_WORLD, &W->Coll);
    MPI_Comm_dup(MPI_COMM_WORLD, &W->Ctl);
    // Errors come back as codes (turned into Failed), never abort the job.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(W->Coll, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(W->Ctl, MPI_ERRORS_RETURN);
    MPI_Comm_rank(W->Coll, &W->Rank);
    MPI_Comm_size(W->Coll, &W->Size);
    MPI_Op_create(nanAwareMax, /*commute=*/1, &W->MaxOp);
    // The host: the processes that share memory with this one. Blocking,
    // like the MPI_Comm_dup above: every process runs this at start.
    MPI_Comm Shm = MPI_COMM_NULL;
    int Leader = W->Rank;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, W->Rank,
                            MPI_INFO_NULL, &Shm) == MPI_SUCCESS &&
        Shm != MPI_COMM_NULL) {
      MPI_Allreduce(&W->Rank, &Leader, 1, MPI_INT, MPI_MIN, Shm);
      MPI_Comm_rank(Shm, &W->Host.LocalRank);
      MPI_Comm_size(Shm, &W->Host.LocalSize);
      MPI_Comm_free(&Shm);
    }
    W->Host.Key = Leader;
    char Name[MPI_MAX_PROCESSOR_NAME + 1] = {};
    int Len = 0;
    if (MPI_Get_processor_name(Name, &Len) == MPI_SUCCESS && Len > 0)
      W->Host.Name.assign(Name, size_t(Len));
    else
      W->Host.Name = "host-of-rank-" + std::to_string(Leader);
    W->Host.Method = "MPI shared-memory split";
    W->PeerDeparted.assign(W->Size, false);
    W->PeerBarriers.assign(W->Size, 0);
    W->Finished.assign(W->Size, false);
    World = W.release();
  }
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(
      new MpiCommHandle(World->Coll), World->Rank, World->Size));
}

bool MpiCommunicator::isInitialized() { return World != nullptr; }

HostIdentity MpiCommunicator::hostIdentity() const { return World->Host; }

MpiCommunicator::MpiCommunicator(MpiCommHandle *Coll, int Rank, int Size)
    : Coll(Coll), Rank(Rank), Size(Size) {}
MpiCommunicator::~MpiCommunicator() = default;

int MpiCommunicator::rank() const { return Rank; }
int MpiCommunicator::size() const { return Size; }

void MpiCommunicator::depart() {
  MpiWorld &W = *World;
  if (W.Departed)
    return;
  W.Departed = true;
  // Small messages go out eagerly: the send completes without the peer
  // receiving it, so a hung peer cannot hold this rank up.
  for (int R = 0; R < W.Size; ++R) {
    if (R == W.Rank)
      continue;
    MPI_Request Req;
    if (MPI_Isend(&Token, 1, MPI_INT, R, TagBye, W.Ctl, &Req) == MPI_SUCCESS)
      MPI_Request_free(&Req);
  }
}

bool MpiCommunicator::hasDeparted(int Rank) const {
  if (Rank < 0 || Rank >= World->Size)
    return false;
  if (World->usable())
    World->pollDepartures();
  return World->PeerDeparted[Rank];
}

std::vector<int> MpiCommunicator::missingPeers() const {
  if (Coll->Members.empty())
    return World->Missing;
  // Ranks of this communicator, as the interface says.
  std::vector<int> Out;
  for (size_t I = 0; I < Coll->Members.size(); ++I)
    if (llvm::is_contained(World->Missing, Coll->Members[I]))
      Out.push_back(int(I));
  return Out;
}

bool MpiCommunicator::isBroken() {
  return World && (!World->usable() || World->SubgroupBroken);
}

bool MpiCommunicator::canFinalize() {
  if (!World)
    return true;
  MpiWorld &W = *World;
  if (W.Departed)
    return true;
  W.pollDepartures();
  W.reapStale();
  // An operation given up on may have completed since (its peer was late).
  llvm::erase_if(W.Abandoned, [](std::unique_ptr<InFlight> &Op) {
    int Done = 0;
    MPI_Test(&Op->Req, &Done, MPI_STATUS_IGNORE);
    return Done != 0;
  });
  if (W.StaleBarriers.empty() && W.Abandoned.empty())
    return true;
  // Something still waits for a peer. If that peer departed, it is in
  // MPI_Finalize too, whose own synchronisation then completes; a silent
  // peer may never come.
  return W.AnyPeerDeparted && !W.DataTimedOut;
}

bool MpiCommunicator::isLowestFinishedRank(std::chrono::milliseconds Grace) {
  MpiWorld &W = *World;
  if (!W.FinishedSent) {
    W.FinishedSent = true;
    W.pollDepartures();
    for (int R = W.Rank + 1; R < W.Size; ++R) {
      if (W.PeerDeparted[R])
        continue;
      MPI_Request Req;
      if (MPI_Isend(&Token, 1, MPI_INT, R, TagFinished, W.Ctl, &Req) ==
          MPI_SUCCESS)
        MPI_Request_free(&Req);
    }
  }
  auto Deadline = deadlineAfter(Grace);
  while (true) {
    int Flag = 0;
    MPI_Status St;
    while (MPI_Iprobe(MPI_ANY_SOURCE, TagFinished, W.Ctl, &Flag, &St) ==
               MPI_SUCCESS &&
           Flag) {
      int Buf;
      MPI_Recv(&Buf, 1, MPI_INT, St.MPI_SOURCE, TagFinished, W.Ctl,
               MPI_STATUS_IGNORE);
      W.Finished[St.MPI_SOURCE] = true;
    }
    W.pollDepartures();
    bool AllLowerGone = true;
    for (int R = 0; R < W.Rank; ++R) {
      if (W.Finished[R])
        return false;
      AllLowerGone &= W.PeerDeparted[R];
    }
    if (AllLowerGone || Clock::now() >= Deadline)
      return true;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

bool MpiCommunicator::finalize() {
  int Finalized = 0;
  MPI_Finalized(&Finalized);
  if (!World || Finalized)
    return false;
  MPI_Finalize();
  return true;
}
