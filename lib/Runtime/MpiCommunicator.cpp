//===- MpiCommunicator.cpp - Ranks as MPI processes -----------------------===//
//
// One MpiWorld per process holds two duplicates of MPI_COMM_WORLD: Coll for
// the collectives, Ctl for the small point-to-point messages (departure,
// "finished") that must not be matched against collectives. Each operation
// keeps its MPI request and buffers in an InFlight; when an operation is
// given up while MPI may still use them, the InFlight is parked in the world
// and never freed, because MPI offers no way to cancel a collective.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Runtime/MpiCommunicator.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mpi.h>
#include <thread>

using namespace mtsched;
using Clock = std::chrono::steady_clock;

/// The MPI communicator an instance works on: the world's Coll, or a
/// subgroup's (kept until MPI_Finalize, which frees it).
struct mtsched::MpiCommHandle {
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

namespace {

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

/// Longer waits are clamped so a deadline never overflows the clock.
constexpr std::chrono::hours MaxTimeout{24};

Clock::time_point deadlineAfter(std::chrono::milliseconds Timeout) {
  return Clock::now() +
         std::min<std::chrono::milliseconds>(
             std::max<std::chrono::milliseconds>(Timeout, {}), MaxTimeout);
}

/// A token for messages whose content does not matter; static so that sends
/// freed before completion always have a valid buffer.
int Token = 1;

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
  /// Barriers that timed out and are still posted (see the header).
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
  bool pollDepartures() {
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

  /// Receives every barrier announcement that has arrived.
  void pollArrivals() {
    while (true) {
      int Flag = 0;
      MPI_Status St;
      if (MPI_Iprobe(MPI_ANY_SOURCE, TagArrive, Ctl, &Flag, &St) !=
              MPI_SUCCESS ||
          !Flag)
        break;
      int Buf;
      MPI_Recv(&Buf, 1, MPI_INT, St.MPI_SOURCE, TagArrive, Ctl,
               MPI_STATUS_IGNORE);
      ++PeerBarriers[St.MPI_SOURCE];
    }
  }

  /// The member announcements of H's barriers that have arrived.
  void pollArrivals(MpiCommHandle &H) {
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

  /// noteMissing() for an operation on H: for a Local subgroup, its
  /// departed members if any, else the members that have not announced its
  /// latest barrier (world ranks either way).
  void noteMissing(MpiCommHandle &H) {
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

  /// Records which peers are missing: the departed ones if any (a departure
  /// fails an operation at once, while slower peers may still be on their
  /// way), else those that have not announced this process's latest
  /// barrier.
  void noteMissing() {
    pollDepartures();
    pollArrivals();
    Missing.clear();
    for (int R = 0; R < Size; ++R)
      if (R != Rank &&
          (AnyPeerDeparted ? PeerDeparted[R] : PeerBarriers[R] < Barriers))
        Missing.push_back(R);
  }

  /// Forgets the stale barriers that completed since.
  void reapStale() {
    llvm::erase_if(StaleBarriers, [](MPI_Request &R) {
      int Done = 0;
      MPI_Test(&R, &Done, MPI_STATUS_IGNORE);
      return Done != 0;
    });
  }

  /// Polls Op's request until it completes, a peer departs, or Deadline.
  /// Polling yields the core at first and then sleeps briefly, so ranks
  /// oversubscribing a machine leave each other room to arrive.
  CommStatus wait(InFlight &Op, Clock::time_point Deadline,
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

  /// Waits for one phase of a data operation; on failure parks Op (MPI may
  /// still use its buffers) and breaks the communicator.
  CommStatus finishPhase(std::unique_ptr<InFlight> &Op, int StartRC,
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

  /// The pair (V, -V) max-reduced: every rank passed V iff the result is
  /// (V, -V). Used to check lengths and roots before the data moves.
  CommStatus agree(MpiCommHandle &H, int64_t V, bool &Same,
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
};

MpiWorld *World = nullptr;

} // namespace

static MPI_Comm asComm(const std::unique_ptr<MpiCommHandle> &H) { return H->C; }

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

llvm::Error
MpiCommunicator::prepareSubgroups(llvm::ArrayRef<std::vector<int>> Lists) {
  MpiWorld &W = *World;
  auto Fail = [](const llvm::Twine &Why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot prepare subgroups: " + Why);
  };
  if (!Coll->Members.empty())
    return Fail("only the world's communicator prepares subgroups");
  if (!W.usable())
    return Fail("the MPI communicator is broken or departed");
  // Lists that share no rank are made by one MPI_Comm_split: each rank
  // takes the color of the list it is in, MPI_UNDEFINED if none, and its
  // position in that list as the key, so the new rank is that position.
  // Every process passes the same lists, so the splits match.
  std::vector<std::vector<size_t>> Layers;
  std::vector<std::vector<bool>> Used;
  for (size_t L = 0; L < Lists.size(); ++L) {
    for (int R : Lists[L])
      if (R < 0 || R >= Size)
        return Fail("rank " + llvm::Twine(R) + " is not in the world");
    size_t K = 0;
    for (; K < Layers.size(); ++K)
      if (llvm::none_of(Lists[L], [&](int R) { return Used[K][size_t(R)]; }))
        break;
    if (K == Layers.size()) {
      Layers.emplace_back();
      Used.emplace_back(size_t(Size), false);
    }
    Layers[K].push_back(L);
    for (int R : Lists[L])
      Used[K][size_t(R)] = true;
  }
  for (const std::vector<size_t> &Layer : Layers) {
    int Color = MPI_UNDEFINED, Key = 0;
    size_t Mine = Lists.size();
    for (size_t L : Layer)
      for (size_t I = 0; I < Lists[L].size(); ++I)
        if (Lists[L][I] == Rank) {
          Color = int(L);
          Key = int(I);
          Mine = L;
        }
    MPI_Comm New = MPI_COMM_NULL;
    if (MPI_Comm_split(asComm(Coll), Color, Key, &New) != MPI_SUCCESS) {
      W.Broken = true;
      return Fail("MPI_Comm_split failed");
    }
    if (New != MPI_COMM_NULL)
      MPI_Comm_set_errhandler(New, MPI_ERRORS_RETURN);
    for (size_t L : Layer)
      W.Prepared.emplace_back(Lists[L], L == Mine ? New : MPI_COMM_NULL);
  }
  return llvm::Error::success();
}

bool MpiCommunicator::createsSubgroupAtOnce(llvm::ArrayRef<int> Ranks) const {
  return Coll->Members.empty() &&
         llvm::any_of(World->Prepared, [&](const auto &P) {
           return llvm::ArrayRef<int>(P.first) == Ranks;
         });
}

llvm::Expected<std::unique_ptr<Communicator>>
MpiCommunicator::createSubgroup(llvm::ArrayRef<int> Ranks) {
  llvm::Expected<int> Index = subgroupIndex(Ranks, Size, Rank);
  if (!Index)
    return Index.takeError();
  MpiWorld &W = *World;
  // Made at start: nothing to wait for.
  if (Coll->Members.empty())
    for (size_t I = 0; I < W.Prepared.size(); ++I)
      if (const auto &P = W.Prepared[I];
          llvm::ArrayRef<int>(P.first) == Ranks && P.second != MPI_COMM_NULL) {
        auto *H = new MpiCommHandle(P.second, P.first, /*Local=*/true);
        // The same on every member: the lists are prepared in one order.
        H->ArriveTag = TagArrive + 1 + int(I);
        H->PeerBarriers.assign(Ranks.size(), 0);
        return std::unique_ptr<Communicator>(
            new MpiCommunicator(H, *Index, int(Ranks.size())));
      }
  auto Fail = [](const llvm::Twine &Why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot create a subgroup: " + Why);
  };
  if (!W.usable())
    return Fail("the MPI communicator is broken or departed");
  MPI_Group Parent, Sub;
  if (MPI_Comm_group(asComm(Coll), &Parent) != MPI_SUCCESS)
    return Fail("MPI_Comm_group failed");
  int RC = MPI_Group_incl(Parent, int(Ranks.size()), Ranks.data(), &Sub);
  MPI_Group_free(&Parent);
  if (RC != MPI_SUCCESS)
    return Fail("MPI_Group_incl failed");
  // Only the members take part. The tag tells apart creations of different
  // groups that share members, should they ever overlap in time.
  int Tag = 0;
  for (int R : Ranks)
    Tag = (Tag * 31 + R + 1) & 0x3fff;
  MPI_Comm New = MPI_COMM_NULL;
  RC = MPI_Comm_create_group(asComm(Coll), Sub, Tag, &New);
  MPI_Group_free(&Sub);
  if (RC != MPI_SUCCESS || New == MPI_COMM_NULL) {
    W.Broken = true;
    return Fail("MPI_Comm_create_group failed");
  }
  MPI_Comm_set_errhandler(New, MPI_ERRORS_RETURN);
  int SubRank = 0, SubSize = 0;
  MPI_Comm_rank(New, &SubRank);
  MPI_Comm_size(New, &SubSize);
  return std::unique_ptr<Communicator>(
      new MpiCommunicator(new MpiCommHandle(New), SubRank, SubSize));
}

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
