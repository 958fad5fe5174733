//===- MpiCollectives.cpp - The MPI ranks' collectives --------------------===//
//
// MpiCommunicator's barrier, all-gather, max all-reduce and broadcast: each
// a nonblocking MPI call (after an agreement on lengths or roots where the
// ranks could differ) waited for within its deadline.
//
//===----------------------------------------------------------------------===//
#include "MpiCommunicatorImpl.h"
#include <climits>

using namespace mtsched;
using namespace mtsched::mpi;

CommStatus MpiCommunicator::barrier(std::chrono::milliseconds Timeout) {
  MpiWorld &W = *World;
  if (!W.usable() || Coll->Broken)
    return CommStatus::Failed;
  auto Deadline = deadlineAfter(Timeout);
  W.reapStale();
  // Tell every peer this rank got here, so that a peer whose barrier or a
  // later operation times out can name who never came. Small messages go
  // out eagerly; draining the ones received keeps the queue short.
  // Only barriers of the whole world count: a subgroup's members are not
  // every peer.
  W.pollArrivals();
  if (Size == W.Size) {
    ++W.Barriers;
    for (int R = 0; R < W.Size; ++R) {
      if (R == W.Rank)
        continue;
      MPI_Request Req;
      if (MPI_Isend(&Token, 1, MPI_INT, R, TagArrive, W.Ctl, &Req) ==
          MPI_SUCCESS)
        MPI_Request_free(&Req);
    }
  } else if (Coll->Local) {
    W.pollArrivals(*Coll);
    ++Coll->Barriers;
    for (int R : Coll->Members) {
      if (R == W.Rank)
        continue;
      MPI_Request Req;
      if (MPI_Isend(&Token, 1, MPI_INT, R, Coll->ArriveTag, W.Ctl, &Req) ==
          MPI_SUCCESS)
        MPI_Request_free(&Req);
    }
  }
  auto Op = std::make_unique<InFlight>();
  if (MPI_Ibarrier(asComm(Coll), &Op->Req) != MPI_SUCCESS) {
    W.Broken = true;
    return CommStatus::Failed;
  }
  CommStatus S = W.wait(*Op, Deadline, *Coll);
  if (S != CommStatus::Ok)
    W.noteMissing(*Coll);
  if (S == CommStatus::Timeout) {
    // No buffers: the barrier stays posted for a late peer to complete.
    W.StaleBarriers.push_back(Op->Req);
  } else if (S == CommStatus::Failed) {
    (Coll->Local ? Coll->Broken : W.Broken) = true;
    W.SubgroupBroken |= Coll->Local;
    W.Abandoned.push_back(std::move(Op));
  }
  return S;
}

CommStatus MpiCommunicator::allGather(llvm::StringRef Data,
                                      std::vector<std::string> &Out,
                                      std::chrono::milliseconds Timeout) {
  MpiWorld &W = *World;
  if (!W.usable() || Coll->Broken)
    return CommStatus::Failed;
  auto Deadline = deadlineAfter(Timeout);
  auto Op = std::make_unique<InFlight>();
  Op->Hdr[0] = int64_t(Data.size());
  Op->Sizes.assign(Size, 0);
  int RC = MPI_Iallgather(Op->Hdr, 1, MPI_INT64_T, Op->Sizes.data(), 1,
                          MPI_INT64_T, asComm(Coll), &Op->Req);
  if (CommStatus S = W.finishPhase(Op, RC, Deadline, *Coll);
      S != CommStatus::Ok)
    return S;
  // Every rank sees the same sizes, so every rank fails here alike and the
  // communicator stays in step.
  int64_t Total = 0;
  for (int64_t S : Op->Sizes) {
    if (S < 0 || S > INT_MAX)
      return CommStatus::Failed;
    Op->Displs.push_back(int(Total));
    Op->Counts.push_back(int(S));
    Total += S;
  }
  if (Total > INT_MAX)
    return CommStatus::Failed;
  Op->Send.assign(Data.begin(), Data.end());
  Op->Send.push_back(0); // Never an empty (null) buffer.
  Op->Recv.resize(Total + 1);
  RC = MPI_Iallgatherv(Op->Send.data(), int(Data.size()), MPI_CHAR,
                       Op->Recv.data(), Op->Counts.data(), Op->Displs.data(),
                       MPI_CHAR, asComm(Coll), &Op->Req);
  if (CommStatus S = W.finishPhase(Op, RC, Deadline, *Coll);
      S != CommStatus::Ok)
    return S;
  Out.clear();
  for (int R = 0; R < Size; ++R)
    Out.emplace_back(Op->Recv.data() + Op->Displs[R], Op->Counts[R]);
  return CommStatus::Ok;
}

CommStatus MpiCommunicator::allReduceMax(llvm::MutableArrayRef<double> Values,
                                         std::chrono::milliseconds Timeout) {
  MpiWorld &W = *World;
  if (!W.usable() || Coll->Broken)
    return CommStatus::Failed;
  auto Deadline = deadlineAfter(Timeout);
  bool Same = false;
  if (CommStatus S = W.agree(*Coll, int64_t(Values.size()), Same, Deadline);
      S != CommStatus::Ok)
    return S;
  if (!Same || Values.size() > size_t(INT_MAX))
    return CommStatus::Failed;
  if (Values.empty())
    return CommStatus::Ok;
  auto Op = std::make_unique<InFlight>();
  Op->Values.assign(Values.begin(), Values.end());
  Op->Reduced.resize(Values.size());
  int RC =
      MPI_Iallreduce(Op->Values.data(), Op->Reduced.data(), int(Values.size()),
                     MPI_DOUBLE, W.MaxOp, asComm(Coll), &Op->Req);
  if (CommStatus S = W.finishPhase(Op, RC, Deadline, *Coll);
      S != CommStatus::Ok)
    return S;
  llvm::copy(Op->Reduced, Values.begin());
  return CommStatus::Ok;
}

CommStatus MpiCommunicator::broadcast(std::string &Data, int Root,
                                      std::chrono::milliseconds Timeout) {
  MpiWorld &W = *World;
  if (!W.usable() || Coll->Broken)
    return CommStatus::Failed;
  auto Deadline = deadlineAfter(Timeout);
  bool Same = false;
  if (CommStatus S = W.agree(*Coll, Root, Same, Deadline); S != CommStatus::Ok)
    return S;
  if (!Same || Root < 0 || Root >= Size)
    return CommStatus::Failed;
  auto Op = std::make_unique<InFlight>();
  bool IsRoot = Rank == Root;
  Op->Hdr[0] = IsRoot ? int64_t(Data.size()) : 0;
  int RC = MPI_Ibcast(Op->Hdr, 1, MPI_INT64_T, Root, asComm(Coll), &Op->Req);
  if (CommStatus S = W.finishPhase(Op, RC, Deadline, *Coll);
      S != CommStatus::Ok)
    return S;
  int64_t N = Op->Hdr[0];
  if (N < 0 || N > INT_MAX)
    return CommStatus::Failed;
  if (IsRoot)
    Op->Send.assign(Data.begin(), Data.end());
  Op->Send.resize(N + 1);
  RC = MPI_Ibcast(Op->Send.data(), int(N), MPI_CHAR, Root, asComm(Coll),
                  &Op->Req);
  if (CommStatus S = W.finishPhase(Op, RC, Deadline, *Coll);
      S != CommStatus::Ok)
    return S;
  if (!IsRoot)
    Data.assign(Op->Send.data(), N);
  return CommStatus::Ok;
}
