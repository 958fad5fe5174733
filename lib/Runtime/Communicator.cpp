//===- Communicator.cpp - Single-rank and thread communicators ------------===//
//
// ThreadCommunicator keeps one slot per operation sequence number in state
// shared by the whole group. Each rank deposits its contribution in the slot
// of its next sequence number and waits, with a deadline, until every rank's
// contribution is there. The outcome of a slot is the same for every rank
// that takes part: all Ok, or all Timeout/Failed. That matters because the
// autotuner's ranks must decide identically.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Runtime/Communicator.h"
#include <algorithm>
#include <cassert>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <unistd.h>

using namespace mtsched;

llvm::StringRef mtsched::commStatusName(CommStatus S) {
  switch (S) {
  case CommStatus::Ok:
    return "ok";
  case CommStatus::Timeout:
    return "timeout";
  case CommStatus::Failed:
    return "failed";
  }
  return "failed";
}

Communicator::~Communicator() = default;

HostIdentity Communicator::hostIdentity() const {
  HostIdentity H;
  char Buf[256] = {};
  H.Name = gethostname(Buf, sizeof(Buf) - 1) == 0 && Buf[0] ? Buf : "localhost";
  H.Method = "one process";
  return H;
}

//===----------------------------------------------------------------------===//
// SingleCommunicator
//===----------------------------------------------------------------------===//

CommStatus SingleCommunicator::barrier(std::chrono::milliseconds) {
  return CommStatus::Ok;
}

CommStatus SingleCommunicator::allGather(llvm::StringRef Data,
                                         std::vector<std::string> &Out,
                                         std::chrono::milliseconds) {
  Out.assign(1, Data.str());
  return CommStatus::Ok;
}

CommStatus SingleCommunicator::allReduceMax(llvm::MutableArrayRef<double>,
                                            std::chrono::milliseconds) {
  return CommStatus::Ok;
}

CommStatus SingleCommunicator::broadcast(std::string &, int Root,
                                         std::chrono::milliseconds) {
  return Root == 0 ? CommStatus::Ok : CommStatus::Failed;
}

llvm::Expected<std::unique_ptr<Communicator>>
SingleCommunicator::createSubgroup(llvm::ArrayRef<int> Ranks) {
  if (llvm::Expected<int> I = subgroupIndex(Ranks, 1, 0); !I)
    return I.takeError();
  return std::make_unique<SingleCommunicator>();
}

llvm::Expected<int> mtsched::subgroupIndex(llvm::ArrayRef<int> Ranks, int Size,
                                           int Self) {
  auto Bad = [&](const llvm::Twine &Why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot create a subgroup: " + Why);
  };
  if (Ranks.empty())
    return Bad("it has no ranks");
  int Index = -1;
  for (size_t I = 0; I < Ranks.size(); ++I) {
    if (Ranks[I] < 0 || Ranks[I] >= Size)
      return Bad("rank " + llvm::Twine(Ranks[I]) + " is not below " +
                 llvm::Twine(Size));
    if (llvm::is_contained(Ranks.take_front(I), Ranks[I]))
      return Bad("rank " + llvm::Twine(Ranks[I]) + " appears twice");
    if (Ranks[I] == Self)
      Index = int(I);
  }
  if (Index < 0)
    return Bad("rank " + llvm::Twine(Self) + " is not a member");
  return Index;
}

//===----------------------------------------------------------------------===//
// ThreadGroup
//===----------------------------------------------------------------------===//

namespace {

enum class OpKind { Barrier, AllGather, AllReduceMax, Broadcast };

/// The contributions to one operation.
struct Slot {
  OpKind Kind;
  /// Broadcast: the root every rank named. AllReduceMax: the length.
  int64_t Shape = 0;
  /// AllGather: one string per rank. Broadcast: the root's in [0].
  std::vector<std::string> Strings;
  /// AllReduceMax: the running maximum.
  std::vector<double> Values;
  int Arrived = 0;
  /// Which ranks deposited, so a timeout can name the ones that did not.
  std::vector<bool> Present;
  /// Some rank gave up at its deadline; later arrivals give up at once, so
  /// no rank can see this slot complete after another saw it time out.
  bool TimedOut = false;
  /// The ranks disagree about what this operation is.
  bool Mismatch = false;
};

/// max() that is independent of argument order: NaN above +inf above all.
double maxOf(double A, double B) {
  if (std::isnan(A) || std::isnan(B))
    return std::numeric_limits<double>::quiet_NaN();
  return std::max(A, B);
}

/// Longer waits are clamped so a deadline never overflows the clock; no
/// caller needs a day.
constexpr std::chrono::hours MaxTimeout{24};

} // namespace

namespace mtsched {
namespace detail {

struct ThreadGroupState {
  explicit ThreadGroupState(int N) : N(N), Dead(N, false), Done(N, 0) {}

  /// A subgroup of this group, by its ranks in this group.
  struct Subgroup {
    std::vector<int> Ranks;
    std::shared_ptr<ThreadGroupState> State;
    /// Members that took their communicator.
    std::vector<bool> Taken;
  };

  const int N;
  std::mutex M;
  std::condition_variable CV;
  std::vector<bool> Dead;
  int NumDead = 0;
  /// Per rank, the number of operations it has finished (its next sequence
  /// number): every slot below the minimum over live ranks is garbage.
  std::vector<uint64_t> Done;
  std::map<uint64_t, Slot> Slots;
  /// Created by the first member that asked, keyed by the rank list.
  std::map<std::vector<int>, Subgroup> Subgroups;

  /// Marks Rank dead here and in every subgroup it belongs to. Takes M (and
  /// each subgroup's, one at a time).
  void markDead(int Rank) {
    std::vector<std::pair<std::shared_ptr<ThreadGroupState>, int>> Subs;
    {
      std::lock_guard<std::mutex> Lock(M);
      if (Dead[Rank])
        return;
      Dead[Rank] = true;
      ++NumDead;
      collect();
      CV.notify_all();
      for (auto &KV : Subgroups)
        for (size_t I = 0; I < KV.second.Ranks.size(); ++I)
          if (KV.second.Ranks[I] == Rank)
            Subs.emplace_back(KV.second.State, int(I));
    }
    for (auto &[Sub, Index] : Subs)
      Sub->markDead(Index);
  }

  /// Frees the slots every live rank has finished with. Needs M held.
  void collect() {
    uint64_t Min = std::numeric_limits<uint64_t>::max();
    for (int R = 0; R < N; ++R)
      if (!Dead[R])
        Min = std::min(Min, Done[R]);
    Slots.erase(Slots.begin(), Slots.lower_bound(Min));
  }
};

} // namespace detail
} // namespace mtsched

namespace {

using detail::ThreadGroupState;

class ThreadCommunicator final : public Communicator {
public:
  ThreadCommunicator(std::shared_ptr<ThreadGroupState> S, int Rank)
      : S(std::move(S)), Rank(Rank) {}

  int rank() const override { return Rank; }
  int size() const override { return S->N; }
  llvm::StringRef kind() const override { return "threads"; }
  std::vector<int> missingPeers() const override { return Missing; }

  CommStatus barrier(std::chrono::milliseconds Timeout) override {
    return run(
        OpKind::Barrier, 0, [](Slot &) {}, [](const Slot &) {}, Timeout);
  }

  CommStatus allGather(llvm::StringRef Data, std::vector<std::string> &Out,
                       std::chrono::milliseconds Timeout) override {
    return run(
        OpKind::AllGather, 0,
        [&](Slot &Sl) {
          Sl.Strings.resize(S->N);
          Sl.Strings[Rank] = Data.str();
        },
        [&](const Slot &Sl) { Out = Sl.Strings; }, Timeout);
  }

  CommStatus allReduceMax(llvm::MutableArrayRef<double> Values,
                          std::chrono::milliseconds Timeout) override {
    return run(
        OpKind::AllReduceMax, int64_t(Values.size()),
        [&](Slot &Sl) {
          if (Sl.Arrived == 0) {
            Sl.Values.assign(Values.begin(), Values.end());
            return;
          }
          for (size_t I = 0; I < Values.size(); ++I)
            Sl.Values[I] = maxOf(Sl.Values[I], Values[I]);
        },
        [&](const Slot &Sl) { llvm::copy(Sl.Values, Values.begin()); },
        Timeout);
  }

  CommStatus broadcast(std::string &Data, int Root,
                       std::chrono::milliseconds Timeout) override {
    if (Root < 0 || Root >= S->N)
      Root = -1; // Marks the slot as mismatched below.
    return run(
        OpKind::Broadcast, Root,
        [&](Slot &Sl) {
          if (Rank == Root)
            Sl.Strings.assign(1, Data);
        },
        [&](const Slot &Sl) {
          if (Rank != Root)
            Data = Sl.Strings.front();
        },
        Timeout);
  }

  llvm::Expected<std::unique_ptr<Communicator>>
  createSubgroup(llvm::ArrayRef<int> Ranks) override {
    llvm::Expected<int> Index = subgroupIndex(Ranks, S->N, Rank);
    if (!Index)
      return Index.takeError();
    std::vector<int> Key(Ranks.begin(), Ranks.end());
    std::vector<int> DeadMembers;
    std::shared_ptr<ThreadGroupState> Sub;
    {
      std::lock_guard<std::mutex> Lock(S->M);
      auto [It, New] = S->Subgroups.try_emplace(Key);
      ThreadGroupState::Subgroup &G = It->second;
      if (New) {
        G.Ranks = Key;
        G.State = std::make_shared<ThreadGroupState>(int(Key.size()));
        G.Taken.assign(Key.size(), false);
        // A rank that died before the subgroup existed is dead in it too.
        for (size_t I = 0; I < Key.size(); ++I)
          if (S->Dead[Key[I]])
            DeadMembers.push_back(int(I));
      }
      if (G.Taken[*Index])
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "cannot create a subgroup: rank " + llvm::Twine(Rank) +
                " already has a communicator for these ranks");
      G.Taken[*Index] = true;
      Sub = G.State;
    }
    for (int I : DeadMembers)
      Sub->markDead(I);
    return std::make_unique<ThreadCommunicator>(std::move(Sub), *Index);
  }

private:
  /// One collective operation: deposit this rank's contribution with
  /// Deposit, wait for the others until the deadline, and on success read
  /// the result with Collect. Shape must agree across ranks (-1 never does).
  template <typename DepositFn, typename CollectFn>
  CommStatus run(OpKind Kind, int64_t Shape, DepositFn Deposit,
                 CollectFn Collect, std::chrono::milliseconds Timeout) {
    auto Deadline = std::chrono::steady_clock::now() +
                    std::min<std::chrono::milliseconds>(Timeout, MaxTimeout);
    uint64_t Seq = NextSeq++;
    std::unique_lock<std::mutex> Lock(S->M);
    CommStatus Result =
        arriveAndWait(Lock, Seq, Kind, Shape, Deposit, Collect, Deadline);
    // Whatever the outcome, this rank is done with Seq; the slot goes once
    // every live rank is.
    S->Done[Rank] = Seq + 1;
    S->collect();
    return Result;
  }

  template <typename DepositFn, typename CollectFn>
  CommStatus arriveAndWait(std::unique_lock<std::mutex> &Lock, uint64_t Seq,
                           OpKind Kind, int64_t Shape, DepositFn &Deposit,
                           CollectFn &Collect,
                           std::chrono::steady_clock::time_point Deadline) {
    // A dead peer will never contribute: fail now rather than at the
    // deadline. Nothing is deposited, so the slot cannot complete either.
    if (S->NumDead > 0) {
      noteDead();
      return CommStatus::Failed;
    }
    auto It = S->Slots.find(Seq);
    if (It == S->Slots.end()) {
      It = S->Slots.emplace(Seq, Slot()).first;
      It->second.Kind = Kind;
      It->second.Shape = Shape;
      if (Shape < 0 && Kind == OpKind::Broadcast)
        It->second.Mismatch = true;
    }
    Slot &Mine = It->second;
    if (Mine.TimedOut) {
      // Late: the peers gave up on this slot before this rank came.
      Missing.clear();
      return CommStatus::Timeout;
    }
    if (Mine.Kind != Kind || Mine.Shape != Shape)
      Mine.Mismatch = true;
    if (!Mine.Mismatch) {
      Deposit(Mine);
      ++Mine.Arrived;
      Mine.Present.resize(S->N, false);
      Mine.Present[Rank] = true;
    }
    S->CV.notify_all();

    // The slot is looked up afresh after every wake-up: it stays alive
    // while this rank is live and not done with it, but a rank marked dead
    // while it waits may have lost it.
    auto Settled = [&] {
      auto I = S->Slots.find(Seq);
      if (I == S->Slots.end())
        return true;
      const Slot &Sl = I->second;
      return Sl.Mismatch || Sl.Arrived == S->N || Sl.TimedOut || S->NumDead > 0;
    };
    bool InTime = S->CV.wait_until(Lock, Deadline, Settled);
    auto I = S->Slots.find(Seq);
    Missing.clear();
    if (I == S->Slots.end()) {
      noteDead();
      return CommStatus::Failed;
    }
    Slot &Sl = I->second;
    if (Sl.Mismatch)
      return CommStatus::Failed;
    // A complete slot is complete for everyone, even if a peer died after
    // contributing.
    if (Sl.Arrived == S->N) {
      Collect(Sl);
      return CommStatus::Ok;
    }
    if (S->NumDead > 0) {
      noteDead();
      return CommStatus::Failed;
    }
    if (!InTime && !Sl.TimedOut) {
      Sl.TimedOut = true;
      S->CV.notify_all();
    }
    // Who had not deposited when the slot gave up (a rank that arrives
    // after that finds it timed out and names the same absentees, itself
    // excepted).
    Sl.Present.resize(S->N, false);
    for (int R = 0; R < S->N; ++R)
      if (!Sl.Present[R] && R != Rank)
        Missing.push_back(R);
    return CommStatus::Timeout;
  }

  /// Needs S->M held.
  void noteDead() {
    Missing.clear();
    for (int R = 0; R < S->N; ++R)
      if (S->Dead[R])
        Missing.push_back(R);
  }

  std::shared_ptr<ThreadGroupState> S;
  const int Rank;
  /// Only this rank's thread touches these.
  uint64_t NextSeq = 0;
  std::vector<int> Missing;
};

} // namespace

ThreadGroup::ThreadGroup(int N)
    : State(std::make_shared<ThreadGroupState>(std::max(N, 1))) {}

ThreadGroup::~ThreadGroup() = default;

int ThreadGroup::size() const { return State->N; }

std::unique_ptr<Communicator> ThreadGroup::get(int Rank) {
  assert(Rank >= 0 && Rank < State->N && "rank out of range");
  if (Rank < 0 || Rank >= State->N)
    return nullptr;
  return std::make_unique<ThreadCommunicator>(State, Rank);
}

void ThreadGroup::markDead(int Rank) {
  if (Rank < 0 || Rank >= State->N)
    return;
  State->markDead(Rank);
}

bool ThreadGroup::isDead(int Rank) const {
  if (Rank < 0 || Rank >= State->N)
    return false;
  std::lock_guard<std::mutex> Lock(State->M);
  return State->Dead[Rank];
}

size_t ThreadGroup::pendingOps() const {
  std::lock_guard<std::mutex> Lock(State->M);
  return State->Slots.size();
}
