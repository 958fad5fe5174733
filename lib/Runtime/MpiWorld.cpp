//===- MpiWorld.cpp - Polling, waiting and failures of the MPI ranks ------===//
//
// The process's MpiWorld: receives the control messages (departures,
// barrier announcements), waits for an operation's request within its
// deadline, and records which peers were missing when one failed.
//
//===----------------------------------------------------------------------===//
#include "MpiCommunicatorImpl.h"
#include <thread>

using namespace mtsched;
using namespace mtsched::mpi;

MpiWorld *mtsched::mpi::World = nullptr;

bool MpiWorld::pollDepartures() {
  while (true) {
    int Flag = 0;
    MPI_Status St;
    if (MPI_Iprobe(MPI_ANY_SOURCE, TagBye, Ctl, &Flag, &St) != MPI_SUCCESS ||
        !Flag)
      break;
    int Buf;
    MPI_Recv(&Buf, 1, MPI_INT, St.MPI_SOURCE, TagBye, Ctl, MPI_STATUS_IGNORE);
    PeerDeparted[St.MPI_SOURCE] = true;
    AnyPeerDeparted = true;
  }
  return AnyPeerDeparted;
}

void MpiWorld::pollArrivals() {
  while (true) {
    int Flag = 0;
    MPI_Status St;
    if (MPI_Iprobe(MPI_ANY_SOURCE, TagArrive, Ctl, &Flag, &St) != MPI_SUCCESS ||
        !Flag)
      break;
    int Buf;
    MPI_Recv(&Buf, 1, MPI_INT, St.MPI_SOURCE, TagArrive, Ctl,
             MPI_STATUS_IGNORE);
    ++PeerBarriers[St.MPI_SOURCE];
  }
}

void MpiWorld::pollArrivals(MpiCommHandle &H) {
  while (true) {
    int Flag = 0;
    MPI_Status St;
    if (MPI_Iprobe(MPI_ANY_SOURCE, H.ArriveTag, Ctl, &Flag, &St) !=
            MPI_SUCCESS ||
        !Flag)
      break;
    int Buf;
    MPI_Recv(&Buf, 1, MPI_INT, St.MPI_SOURCE, H.ArriveTag, Ctl,
             MPI_STATUS_IGNORE);
    auto It = llvm::find(H.Members, St.MPI_SOURCE);
    if (It != H.Members.end())
      ++H.PeerBarriers[size_t(It - H.Members.begin())];
  }
}

void MpiWorld::noteMissing(MpiCommHandle &H) {
  if (!H.Local)
    return noteMissing();
  pollDepartures();
  pollArrivals(H);
  Missing.clear();
  bool Departures = H.hit(PeerDeparted);
  for (size_t I = 0; I < H.Members.size(); ++I) {
    int R = H.Members[I];
    if (R != Rank && (Departures ? bool(PeerDeparted[size_t(R)])
                                 : H.PeerBarriers[I] < H.Barriers))
      Missing.push_back(R);
  }
}

void MpiWorld::noteMissing() {
  pollDepartures();
  pollArrivals();
  Missing.clear();
  for (int R = 0; R < Size; ++R)
    if (R != Rank &&
        (AnyPeerDeparted ? PeerDeparted[R] : PeerBarriers[R] < Barriers))
      Missing.push_back(R);
}

void MpiWorld::reapStale() {
  llvm::erase_if(StaleBarriers, [](MPI_Request &R) {
    int Done = 0;
    MPI_Test(&R, &Done, MPI_STATUS_IGNORE);
    return Done != 0;
  });
}

CommStatus MpiWorld::wait(InFlight &Op, Clock::time_point Deadline,
                          const MpiCommHandle &H) {
  for (unsigned Spin = 0;; ++Spin) {
    int Done = 0;
    if (MPI_Test(&Op.Req, &Done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      return CommStatus::Failed;
    if (Done)
      return CommStatus::Ok;
    if (pollDepartures() && H.hit(PeerDeparted))
      return CommStatus::Failed;
    if (Clock::now() >= Deadline)
      return CommStatus::Timeout;
    if (Spin < 200)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

CommStatus MpiWorld::finishPhase(std::unique_ptr<InFlight> &Op, int StartRC,
                                 Clock::time_point Deadline, MpiCommHandle &H) {
  CommStatus S =
      StartRC == MPI_SUCCESS ? wait(*Op, Deadline, H) : CommStatus::Failed;
  if (S == CommStatus::Ok)
    return S;
  noteMissing(H);
  (H.Local ? H.Broken : Broken) = true;
  SubgroupBroken |= H.Local;
  DataTimedOut |= S == CommStatus::Timeout;
  if (Op->Req != MPI_REQUEST_NULL)
    Abandoned.push_back(std::move(Op));
  return S;
}

CommStatus MpiWorld::agree(MpiCommHandle &H, int64_t V, bool &Same,
                           Clock::time_point Deadline) {
  auto Op = std::make_unique<InFlight>();
  Op->Hdr[0] = V;
  Op->Hdr[1] = -V;
  int RC = MPI_Iallreduce(Op->Hdr, Op->HdrOut, 2, MPI_INT64_T, MPI_MAX, H.C,
                          &Op->Req);
  CommStatus S = finishPhase(Op, RC, Deadline, H);
  Same = S == CommStatus::Ok && Op->HdrOut[0] == V && Op->HdrOut[1] == -V;
  return S;
}
