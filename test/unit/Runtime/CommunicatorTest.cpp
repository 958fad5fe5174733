// Ranks as threads: every test here races threads against deadlines, so the
// target carries the ctest label `threads` and CI runs it under
// ThreadSanitizer. Timing assertions are generous upper bounds that only
// prove an operation is bounded, never how fast it is.
#include "mtsched/Runtime/Communicator.h"
#include "gtest/gtest.h"
#include <atomic>
#include <cmath>
#include <functional>
#include <future>
#include <limits>
#include <string>
#include <thread>
#include <vector>

using namespace mtsched;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr double Inf = std::numeric_limits<double>::infinity();
constexpr double NaN = std::numeric_limits<double>::quiet_NaN();
/// Long enough that no healthy exchange times out, even under TSan on a
/// loaded two-core machine.
constexpr std::chrono::milliseconds Patient = 20s;

/// Runs Body(Comm, Rank) on N threads, one per rank, and joins them.
void runRanks(ThreadGroup &G,
              const std::function<void(Communicator &, int)> &Body) {
  std::vector<std::unique_ptr<Communicator>> Comms;
  for (int R = 0; R < G.size(); ++R)
    Comms.push_back(G.get(R));
  std::vector<std::thread> Threads;
  for (int R = 0; R < G.size(); ++R)
    Threads.emplace_back([&, R] { Body(*Comms[R], R); });
  for (std::thread &T : Threads)
    T.join();
}

double msSince(Clock::time_point Start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - Start)
      .count();
}

TEST(CommunicatorTest, StatusNames) {
  EXPECT_EQ(commStatusName(CommStatus::Ok), "ok");
  EXPECT_EQ(commStatusName(CommStatus::Timeout), "timeout");
  EXPECT_EQ(commStatusName(CommStatus::Failed), "failed");
}

TEST(CommunicatorTest, SingleRank) {
  SingleCommunicator C;
  EXPECT_EQ(C.rank(), 0);
  EXPECT_EQ(C.size(), 1);
  EXPECT_EQ(C.kind(), "single");
  EXPECT_EQ(C.barrier(0ms), CommStatus::Ok);
  std::vector<std::string> Out;
  EXPECT_EQ(C.allGather("x", Out, 0ms), CommStatus::Ok);
  EXPECT_EQ(Out, std::vector<std::string>{"x"});
  std::vector<double> V{1, Inf};
  EXPECT_EQ(C.allReduceMax(V, 0ms), CommStatus::Ok);
  EXPECT_EQ(V, (std::vector<double>{1, Inf}));
  std::string S = "s";
  EXPECT_EQ(C.broadcast(S, 0, 0ms), CommStatus::Ok);
  EXPECT_EQ(S, "s");
  EXPECT_EQ(C.broadcast(S, 1, 0ms), CommStatus::Failed);
}

class ThreadRanksTest : public ::testing::TestWithParam<int> {};

TEST_P(ThreadRanksTest, EveryOperation) {
  const int N = GetParam();
  ThreadGroup G(N);
  EXPECT_EQ(G.size(), N);
  std::vector<int> Failures(N, 0);
  runRanks(G, [&](Communicator &C, int R) {
    auto Check = [&](bool OK) { Failures[R] += !OK; };
    Check(C.rank() == R && C.size() == N && C.kind() == "threads");
    Check(C.barrier(Patient) == CommStatus::Ok);

    std::vector<std::string> All;
    Check(C.allGather("rank" + std::to_string(R) + std::string(R, 'x'), All,
                      Patient) == CommStatus::Ok);
    Check(int(All.size()) == N);
    for (int P = 0; P < int(All.size()); ++P)
      Check(All[P] == "rank" + std::to_string(P) + std::string(P, 'x'));

    std::vector<double> V{double(R), -double(R), R == N - 1 ? Inf : 0.5};
    Check(C.allReduceMax(V, Patient) == CommStatus::Ok);
    Check(V == (std::vector<double>{double(N - 1), 0, Inf}));

    std::string Data = R == N - 1 ? "from the root" : "ignored";
    Check(C.broadcast(Data, N - 1, Patient) == CommStatus::Ok);
    Check(Data == "from the root");
    std::string Data0 = R == 0 ? "zero" : "";
    Check(C.broadcast(Data0, 0, Patient) == CommStatus::Ok);
    Check(Data0 == "zero");
  });
  for (int R = 0; R < N; ++R)
    EXPECT_EQ(Failures[R], 0) << "rank " << R;
  EXPECT_EQ(G.pendingOps(), 0u);
}

TEST_P(ThreadRanksTest, ManySequentialOperations) {
  const int N = GetParam();
  const int Rounds = 200;
  ThreadGroup G(N);
  std::vector<int> Failures(N, 0);
  runRanks(G, [&](Communicator &C, int R) {
    for (int I = 0; I < Rounds; ++I) {
      switch (I % 4) {
      case 0:
        Failures[R] += C.barrier(Patient) != CommStatus::Ok;
        break;
      case 1: {
        std::vector<std::string> All;
        Failures[R] += C.allGather(std::to_string(I * N + R), All, Patient) !=
                       CommStatus::Ok;
        for (int P = 0; P < N && int(All.size()) == N; ++P)
          Failures[R] += All[P] != std::to_string(I * N + P);
        break;
      }
      case 2: {
        std::vector<double> V{double(I + R)};
        Failures[R] += C.allReduceMax(V, Patient) != CommStatus::Ok;
        Failures[R] += V[0] != double(I + N - 1);
        break;
      }
      case 3: {
        std::string S = std::to_string(I);
        if (R != I % N)
          S.clear();
        Failures[R] += C.broadcast(S, I % N, Patient) != CommStatus::Ok;
        Failures[R] += S != std::to_string(I);
        break;
      }
      }
    }
  });
  for (int R = 0; R < N; ++R)
    EXPECT_EQ(Failures[R], 0) << "rank " << R;
  // Every slot was freed once every rank was done with it.
  EXPECT_EQ(G.pendingOps(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ThreadRanksTest, ::testing::Values(2, 4, 8));

TEST(ThreadCommunicatorTest, MaxTreatsInfinityAndNaNTheSameEverywhere) {
  ThreadGroup G(3);
  std::vector<std::vector<double>> In = {
      {1, Inf, 1, -Inf, -0.0},
      {2, 5, NaN, -Inf, -1},
      {3, 1, 0, -Inf, -2},
  };
  std::vector<std::vector<double>> Out(3);
  std::vector<CommStatus> St(3);
  runRanks(G, [&](Communicator &C, int R) {
    Out[R] = In[R];
    St[R] = C.allReduceMax(Out[R], Patient);
  });
  for (int R = 0; R < 3; ++R) {
    ASSERT_EQ(St[R], CommStatus::Ok);
    EXPECT_EQ(Out[R][0], 3);
    EXPECT_EQ(Out[R][1], Inf);
    EXPECT_TRUE(std::isnan(Out[R][2]));
    EXPECT_EQ(Out[R][3], -Inf);
    EXPECT_EQ(Out[R][4], 0);
  }
}

TEST(ThreadCommunicatorTest, BarrierTimesOutWhenARankNeverArrives) {
  ThreadGroup G(4);
  std::vector<CommStatus> St(4, CommStatus::Ok);
  std::vector<double> Ms(4, 0);
  runRanks(G, [&](Communicator &C, int R) {
    if (R == 2)
      return; // Never arrives.
    auto Start = Clock::now();
    St[R] = C.barrier(20ms);
    Ms[R] = msSince(Start);
  });
  for (int R : {0, 1, 3}) {
    EXPECT_EQ(St[R], CommStatus::Timeout) << R;
    EXPECT_LT(Ms[R], 1000) << R;
  }
}

TEST(ThreadCommunicatorTest, ZeroTimeoutDoesNotWait) {
  ThreadGroup G(2);
  std::unique_ptr<Communicator> C = G.get(0);
  auto Start = Clock::now();
  EXPECT_EQ(C->barrier(0ms), CommStatus::Timeout);
  std::vector<std::string> Out{"untouched"};
  EXPECT_EQ(C->allGather("a", Out, -5ms), CommStatus::Timeout);
  EXPECT_EQ(Out, std::vector<std::string>{"untouched"});
  EXPECT_LT(msSince(Start), 1000);
}

TEST(ThreadCommunicatorTest, LateRankDoesNotBlockAndRejoins) {
  // The pre-sync pattern: a short barrier, then a patient all-gather in
  // which every rank learns who made the barrier.
  ThreadGroup G(2);
  std::promise<void> EarlyGaveUp;
  std::future<void> GaveUp = EarlyGaveUp.get_future();
  std::vector<CommStatus> Barrier(2), Gather(2), Later(2);
  std::vector<std::vector<std::string>> All(2);
  double LateBarrierMs = 0;
  runRanks(G, [&](Communicator &C, int R) {
    if (R == 0) {
      Barrier[R] = C.barrier(20ms);
      EarlyGaveUp.set_value();
    } else {
      GaveUp.wait(); // Arrive only after the peer timed out.
      auto Start = Clock::now();
      Barrier[R] = C.barrier(Patient);
      LateBarrierMs = msSince(Start);
    }
    Gather[R] =
        C.allGather(Barrier[R] == CommStatus::Ok ? "1" : "0", All[R], Patient);
    std::vector<double> V{double(R)};
    Later[R] = C.allReduceMax(V, Patient);
    if (V[0] != 1)
      Later[R] = CommStatus::Failed;
  });
  EXPECT_EQ(Barrier[0], CommStatus::Timeout);
  // The late rank sees the operation already failed and does not wait for
  // its own (long) deadline.
  EXPECT_EQ(Barrier[1], CommStatus::Timeout);
  EXPECT_LT(LateBarrierMs, 1000);
  for (int R = 0; R < 2; ++R) {
    EXPECT_EQ(Gather[R], CommStatus::Ok);
    EXPECT_EQ(All[R], (std::vector<std::string>{"0", "0"}));
    EXPECT_EQ(Later[R], CommStatus::Ok);
  }
  EXPECT_EQ(G.pendingOps(), 0u);
}

TEST(ThreadCommunicatorTest, LateRankCatchesUpOverSeveralMissedOps) {
  ThreadGroup G(3);
  std::promise<void> OthersDone;
  std::shared_future<void> Done = OthersDone.get_future().share();
  std::atomic<int> Finished{0};
  std::vector<std::vector<CommStatus>> St(3);
  runRanks(G, [&](Communicator &C, int R) {
    if (R == 2)
      Done.wait();
    for (int I = 0; I < 3; ++I)
      St[R].push_back(C.barrier(R == 2 ? Patient : 10ms));
    if (R != 2 && ++Finished == 2)
      OthersDone.set_value();
    std::vector<std::string> All;
    St[R].push_back(C.allGather(std::to_string(R), All, Patient));
  });
  for (int R = 0; R < 3; ++R) {
    ASSERT_EQ(St[R].size(), 4u);
    for (int I = 0; I < 3; ++I)
      EXPECT_EQ(St[R][I], CommStatus::Timeout) << R << " " << I;
    EXPECT_EQ(St[R][3], CommStatus::Ok) << R;
  }
  EXPECT_EQ(G.pendingOps(), 0u);
}

TEST(ThreadCommunicatorTest, DeadRankFailsWaitersPromptly) {
  ThreadGroup G(3);
  std::vector<CommStatus> St(3, CommStatus::Ok), Next(3, CommStatus::Ok);
  std::vector<double> Ms(3, 0);
  std::atomic<int> Waiting{0};
  runRanks(G, [&](Communicator &C, int R) {
    if (R == 2) {
      // Exits while the others wait for it.
      while (Waiting.load() < 2)
        std::this_thread::sleep_for(1ms);
      std::this_thread::sleep_for(20ms);
      G.markDead(2);
      return;
    }
    auto Start = Clock::now();
    ++Waiting;
    St[R] = C.barrier(Patient);
    Ms[R] = msSince(Start);
    std::vector<double> V{1};
    Next[R] = C.allReduceMax(V, Patient);
  });
  EXPECT_TRUE(G.isDead(2));
  EXPECT_FALSE(G.isDead(0));
  for (int R : {0, 1}) {
    EXPECT_EQ(St[R], CommStatus::Failed) << R;
    EXPECT_LT(Ms[R], 5000) << R; // Far below the 20 s deadline.
    EXPECT_EQ(Next[R], CommStatus::Failed) << R;
  }
  // The dead rank does not hold any slot alive.
  EXPECT_EQ(G.pendingOps(), 0u);
}

TEST(ThreadCommunicatorTest, DeadBeforeTheOperation) {
  ThreadGroup G(2);
  std::unique_ptr<Communicator> C = G.get(0);
  G.markDead(1);
  G.markDead(1); // Idempotent.
  auto Start = Clock::now();
  std::string S = "x";
  EXPECT_EQ(C->broadcast(S, 0, Patient), CommStatus::Failed);
  EXPECT_EQ(C->barrier(Patient), CommStatus::Failed);
  EXPECT_LT(msSince(Start), 1000);
}

TEST(ThreadCommunicatorTest, DisagreeingRanksFail) {
  ThreadGroup G(2);
  std::vector<CommStatus> First(2), Second(2), Third(2), Fourth(2);
  runRanks(G, [&](Communicator &C, int R) {
    // Different operations at the same step.
    if (R == 0) {
      First[R] = C.barrier(Patient);
    } else {
      std::vector<std::string> All;
      First[R] = C.allGather("x", All, Patient);
    }
    // Different lengths.
    std::vector<double> V(R + 1, 1.0);
    Second[R] = C.allReduceMax(V, Patient);
    // Different roots, then a root out of range.
    std::string S = "s";
    Third[R] = C.broadcast(S, R, Patient);
    Fourth[R] = C.broadcast(S, 7, Patient);
  });
  for (int R = 0; R < 2; ++R) {
    EXPECT_EQ(First[R], CommStatus::Failed) << R;
    EXPECT_EQ(Second[R], CommStatus::Failed) << R;
    EXPECT_EQ(Third[R], CommStatus::Failed) << R;
    EXPECT_EQ(Fourth[R], CommStatus::Failed) << R;
  }
  EXPECT_EQ(G.pendingOps(), 0u);
}

TEST(ThreadCommunicatorTest, EveryRankSeesTheSameOutcome) {
  // One rank dawdles around the deadline of each operation: whatever the
  // interleaving, an operation succeeds everywhere or nowhere.
  const int N = 4, Rounds = 40;
  ThreadGroup G(N);
  std::vector<std::vector<CommStatus>> St(N);
  runRanks(G, [&](Communicator &C, int R) {
    for (int I = 0; I < Rounds; ++I) {
      if (R == I % N)
        std::this_thread::sleep_for(std::chrono::milliseconds(I % 3 * 3));
      std::vector<double> V{double(R)};
      St[R].push_back(C.allReduceMax(V, 4ms));
    }
  });
  for (int I = 0; I < Rounds; ++I)
    for (int R = 1; R < N; ++R)
      EXPECT_EQ(St[R][I], St[0][I]) << "op " << I << " rank " << R;
  EXPECT_EQ(G.pendingOps(), 0u);
}

TEST(ThreadCommunicatorTest, CommunicatorOutlivesItsGroup) {
  std::unique_ptr<Communicator> C;
  {
    ThreadGroup G(1);
    C = G.get(0);
  }
  EXPECT_EQ(C->barrier(0ms), CommStatus::Ok);
  std::vector<std::string> All;
  EXPECT_EQ(C->allGather("only", All, 0ms), CommStatus::Ok);
  EXPECT_EQ(All, std::vector<std::string>{"only"});
}

//===----------------------------------------------------------------------===//
// Subgroups
//===----------------------------------------------------------------------===//

TEST(SubgroupTest, RankListsAreChecked) {
  auto Msg = [](llvm::Expected<int> I) {
    return I ? std::string("ok") : llvm::toString(I.takeError());
  };
  EXPECT_EQ(Msg(subgroupIndex({2, 0}, 4, 0)), "ok");
  EXPECT_EQ(*subgroupIndex({2, 0}, 4, 0), 1);
  EXPECT_EQ(Msg(subgroupIndex({}, 4, 0)),
            "cannot create a subgroup: it has no ranks");
  EXPECT_EQ(Msg(subgroupIndex({0, 4}, 4, 0)),
            "cannot create a subgroup: rank 4 is not below 4");
  EXPECT_EQ(Msg(subgroupIndex({0, 1, 0}, 4, 0)),
            "cannot create a subgroup: rank 0 appears twice");
  EXPECT_EQ(Msg(subgroupIndex({1, 2}, 4, 0)),
            "cannot create a subgroup: rank 0 is not a member");
  SingleCommunicator One;
  llvm::Expected<std::unique_ptr<Communicator>> Sub = One.createSubgroup({0});
  ASSERT_TRUE(bool(Sub));
  EXPECT_EQ((*Sub)->size(), 1);
  llvm::Expected<std::unique_ptr<Communicator>> Bad = One.createSubgroup({1});
  ASSERT_FALSE(bool(Bad));
  llvm::consumeError(Bad.takeError());
}

// TP x DP on 8 ranks: [0..3] and [4..7] work on their own communicators at
// the same time; ranks are numbered in the group's order; the world still
// works afterwards.
TEST(SubgroupTest, DisjointGroupsRunSideBySide) {
  ThreadGroup G(8);
  std::vector<std::vector<std::string>> Gathered(8);
  std::vector<double> Max(8);
  std::vector<int> SubRank(8), SubSize(8);
  std::atomic<int> Failures{0};
  runRanks(G, [&](Communicator &C, int R) {
    std::vector<int> Ranks =
        R < 4 ? std::vector<int>{3, 2, 1, 0} : std::vector<int>{4, 5, 6, 7};
    llvm::Expected<std::unique_ptr<Communicator>> Sub = C.createSubgroup(Ranks);
    if (!Sub) {
      llvm::consumeError(Sub.takeError());
      ++Failures;
      return;
    }
    Communicator &S = **Sub;
    SubRank[R] = S.rank();
    SubSize[R] = S.size();
    // Many operations per group, none of them world-wide.
    for (int I = 0; I < 50; ++I)
      if (S.barrier(Patient) != CommStatus::Ok)
        ++Failures;
    std::vector<double> V{double(R)};
    if (S.allReduceMax(V, Patient) != CommStatus::Ok ||
        S.allGather(std::to_string(R), Gathered[R], Patient) != CommStatus::Ok)
      ++Failures;
    Max[R] = V[0];
    // Root 0 is the group's first rank: 3 for the first group.
    std::string B = R == 3 || R == 4 ? "root" + std::to_string(R) : "";
    if (S.broadcast(B, 0, Patient) != CommStatus::Ok ||
        B != (R < 4 ? "root3" : "root4"))
      ++Failures;
    if (C.barrier(Patient) != CommStatus::Ok)
      ++Failures;
  });
  EXPECT_EQ(Failures, 0);
  for (int R = 0; R < 8; ++R) {
    EXPECT_EQ(SubSize[R], 4);
    EXPECT_EQ(SubRank[R], R < 4 ? 3 - R : R - 4);
    EXPECT_EQ(Max[R], R < 4 ? 3 : 7);
  }
  EXPECT_EQ(Gathered[1], (std::vector<std::string>{"3", "2", "1", "0"}));
  EXPECT_EQ(Gathered[6], (std::vector<std::string>{"4", "5", "6", "7"}));
}

// Ranks outside the group never wait for it, and a rank asking twice for
// the same group is told so instead of sharing a slot sequence.
TEST(SubgroupTest, NonMembersDoNotTakePartAndEachMemberAsksOnce) {
  ThreadGroup G(4);
  std::atomic<int> Failures{0};
  runRanks(G, [&](Communicator &C, int R) {
    if (R != 0 && R != 1)
      return;
    llvm::Expected<std::unique_ptr<Communicator>> Sub =
        C.createSubgroup({0, 1});
    if (!Sub) {
      llvm::consumeError(Sub.takeError());
      ++Failures;
      return;
    }
    if ((*Sub)->barrier(Patient) != CommStatus::Ok)
      ++Failures;
    llvm::Expected<std::unique_ptr<Communicator>> Again =
        C.createSubgroup({0, 1});
    if (Again)
      ++Failures;
    else
      EXPECT_EQ(llvm::toString(Again.takeError()),
                "cannot create a subgroup: rank " + std::to_string(R) +
                    " already has a communicator for these ranks");
  });
  EXPECT_EQ(Failures, 0);
}

// A member that dies fails its subgroups' operations at once, also a
// subgroup created after it died.
TEST(SubgroupTest, DeadMemberFailsTheSubgroup) {
  ThreadGroup G(3);
  std::vector<std::unique_ptr<Communicator>> Comms;
  for (int R = 0; R < 3; ++R)
    Comms.push_back(G.get(R));
  llvm::Expected<std::unique_ptr<Communicator>> Before =
      Comms[0]->createSubgroup({0, 1});
  ASSERT_TRUE(bool(Before));
  auto Start = Clock::now();
  std::thread Killer([&] {
    std::this_thread::sleep_for(50ms);
    G.markDead(1);
  });
  EXPECT_EQ((*Before)->barrier(Patient), CommStatus::Failed);
  Killer.join();
  EXPECT_LT(msSince(Start), 10000.0);
  llvm::Expected<std::unique_ptr<Communicator>> After =
      Comms[2]->createSubgroup({2, 1});
  ASSERT_TRUE(bool(After));
  EXPECT_EQ((*After)->barrier(Patient), CommStatus::Failed);
  // A subgroup without the dead rank goes on.
  llvm::Expected<std::unique_ptr<Communicator>> Solo =
      Comms[2]->createSubgroup({2});
  ASSERT_TRUE(bool(Solo));
  EXPECT_EQ((*Solo)->barrier(Patient), CommStatus::Ok);
}

} // namespace
