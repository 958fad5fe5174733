//===- MpiCommunicatorTest.cpp - MpiCommunicator under mpirun -------------===//
//
// Every process of `mpirun -np N` (N >= 2) runs every test, so each test is a
// collective: all ranks make the same calls in the same order, whatever an
// expectation on one rank found. Rank 0 prints the usual gtest output; other
// ranks print only their failures. The exit code is non-zero if any
// expectation failed on this rank.
//
// A communicator that breaks stays broken for the whole process (a prepared
// subgroup breaks only itself), so the tests that break it on purpose run
// in their own mpirun, selected with --gtest_filter
// (scripts/test-extra.d/mpi.sh):
//
//   mpirun -np N MpiCommunicatorTests --gtest_filter=-*Breaks*
//   mpirun -np N MpiCommunicatorTests --gtest_filter=*DepartureBreaks*
//   mpirun -np N MpiCommunicatorTests --gtest_filter=*TimeoutBreaks*
//
// Timing assertions are generous upper bounds (ranks oversubscribe a
// two-core machine): they prove an operation is bounded, not how fast it is.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Runtime/MpiCommunicator.h"
#include "gtest/gtest.h"
#include <cmath>
#include <limits>
#include <thread>

using namespace mtsched;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr double Inf = std::numeric_limits<double>::infinity();
constexpr double NaN = std::numeric_limits<double>::quiet_NaN();
/// Long enough that no healthy exchange times out.
constexpr std::chrono::milliseconds Patient = 20s;

MpiCommunicator *TheComm = nullptr;
MpiCommunicator &comm() { return *TheComm; }

double msSince(Clock::time_point Start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - Start)
      .count();
}

TEST(MpiCommunicatorTest, Basics) {
  MpiCommunicator &C = comm();
  EXPECT_EQ(C.kind(), "mpi");
  EXPECT_GE(C.size(), 2);
  EXPECT_GE(C.rank(), 0);
  EXPECT_LT(C.rank(), C.size());
  EXPECT_EQ(C.barrier(Patient), CommStatus::Ok);
  EXPECT_FALSE(MpiCommunicator::isBroken());
}

TEST(MpiCommunicatorTest, AllGatherOfDifferentSizes) {
  MpiCommunicator &C = comm();
  auto Mine = [](int R) {
    // Rank 0 sends nothing at all.
    return R == 0 ? std::string()
                  : "r" + std::to_string(R) + std::string(R * 7, 'x');
  };
  std::vector<std::string> Out;
  ASSERT_EQ(C.allGather(Mine(C.rank()), Out, Patient), CommStatus::Ok);
  ASSERT_EQ(int(Out.size()), C.size());
  for (int R = 0; R < C.size(); ++R)
    EXPECT_EQ(Out[R], Mine(R));
  // A large one, to leave the eager protocol.
  std::string Big(1 << 20, char('a' + C.rank()));
  ASSERT_EQ(C.allGather(Big, Out, Patient), CommStatus::Ok);
  for (int R = 0; R < C.size(); ++R)
    EXPECT_EQ(Out[R], std::string(1 << 20, char('a' + R)));
}

TEST(MpiCommunicatorTest, AllReduceMaxOrdersNaNAboveInfAboveNumbers) {
  MpiCommunicator &C = comm();
  int R = C.rank(), N = C.size();
  std::vector<double> V{
      double(R), -double(R),         R == 1 ? Inf : 0.0, R == N - 1 ? NaN : 1.0,
      -Inf,      R == 0 ? NaN : Inf, R == 0 ? Inf : -1.0};
  ASSERT_EQ(C.allReduceMax(V, Patient), CommStatus::Ok);
  EXPECT_EQ(V[0], double(N - 1));
  EXPECT_EQ(V[1], 0.0);
  EXPECT_EQ(V[2], Inf);
  EXPECT_TRUE(std::isnan(V[3]));
  EXPECT_EQ(V[4], -Inf);
  EXPECT_TRUE(std::isnan(V[5]));
  EXPECT_EQ(V[6], Inf);
  std::vector<double> Empty;
  EXPECT_EQ(C.allReduceMax(Empty, Patient), CommStatus::Ok);
}

TEST(MpiCommunicatorTest, DisagreementFailsEverywhereAndKeepsStep) {
  MpiCommunicator &C = comm();
  // Different lengths: every rank gets Failed, values untouched.
  std::vector<double> V(C.rank() == 0 ? 2 : 3, 7.0);
  EXPECT_EQ(C.allReduceMax(V, Patient), CommStatus::Failed);
  EXPECT_EQ(V.front(), 7.0);
  // Different roots, and a root out of range.
  std::string S = "unchanged";
  EXPECT_EQ(C.broadcast(S, C.rank() == 0 ? 0 : 1, Patient), CommStatus::Failed);
  EXPECT_EQ(C.broadcast(S, C.size(), Patient), CommStatus::Failed);
  EXPECT_EQ(S, "unchanged");
  // The ranks are still in step.
  EXPECT_FALSE(MpiCommunicator::isBroken());
  std::vector<std::string> Out;
  EXPECT_EQ(C.allGather("ok", Out, Patient), CommStatus::Ok);
}

TEST(MpiCommunicatorTest, Broadcast) {
  MpiCommunicator &C = comm();
  int Root = 1 % C.size();
  std::string S = C.rank() == Root ? "hello from the root" : "junk";
  ASSERT_EQ(C.broadcast(S, Root, Patient), CommStatus::Ok);
  EXPECT_EQ(S, "hello from the root");
  std::string Empty = C.rank() == 0 ? "" : "junk";
  ASSERT_EQ(C.broadcast(Empty, 0, Patient), CommStatus::Ok);
  EXPECT_EQ(Empty, "");
}

TEST(MpiCommunicatorTest, LateRankMeetsItsPeersAtTheNextOperation) {
  MpiCommunicator &C = comm();
  // Rank 1 misses the window; the others time out, but the barrier stays
  // posted, so rank 1 completes it and everyone meets at the all-gather.
  if (C.rank() == 1)
    std::this_thread::sleep_for(300ms);
  auto T0 = Clock::now();
  CommStatus B = C.barrier(50ms);
  if (C.rank() == 1) {
    EXPECT_EQ(B, CommStatus::Ok);
  } else {
    EXPECT_EQ(B, CommStatus::Timeout);
    EXPECT_LT(msSince(T0), 5000);
  }
  std::vector<std::string> Out;
  ASSERT_EQ(C.allGather(B == CommStatus::Ok ? "1" : "0", Out, Patient),
            CommStatus::Ok);
  EXPECT_EQ(Out[1], "1");
  EXPECT_FALSE(MpiCommunicator::isBroken());
  EXPECT_EQ(C.barrier(Patient), CommStatus::Ok);
}

// Subgroups made at start (the hierarchical pre-sync's hosts and leaders):
// every rank passes the same lists, overlapping ones included; afterwards
// each member gets its communicator without waiting, and every rank, member
// or not, knows which lists are ready.
TEST(MpiCommunicatorTest, PreparedSubgroups) {
  MpiCommunicator &C = comm();
  int N = C.size(), Half = N / 2;
  std::vector<std::vector<int>> Lists(3);
  for (int R = 0; R < N; ++R)
    Lists[R < Half ? 0 : 1].push_back(R);
  Lists[2] = {0, Half};
  ASSERT_FALSE(bool(C.prepareSubgroups(Lists)));
  for (const std::vector<int> &L : Lists)
    EXPECT_TRUE(C.createsSubgroupAtOnce(L));
  EXPECT_FALSE(C.createsSubgroupAtOnce({0, 1, 2, 3, 4, 5, 6, 7, 8}));
  const std::vector<int> &Mine = Lists[C.rank() < Half ? 0 : 1];
  llvm::Expected<std::unique_ptr<Communicator>> Host = C.createSubgroup(Mine);
  ASSERT_TRUE(bool(Host)) << toString(Host.takeError());
  EXPECT_EQ(Mine[(*Host)->rank()], C.rank());
  EXPECT_FALSE((*Host)->createsSubgroupAtOnce(Mine));
  EXPECT_EQ((*Host)->barrier(Patient), CommStatus::Ok);
  std::vector<std::string> Out;
  EXPECT_EQ((*Host)->allGather(std::to_string(C.rank()), Out, Patient),
            CommStatus::Ok);
  ASSERT_EQ(Out.size(), Mine.size());
  EXPECT_EQ(Out.back(), std::to_string(Mine.back()));
  if (Mine.front() == C.rank()) {
    llvm::Expected<std::unique_ptr<Communicator>> Lead =
        C.createSubgroup(Lists[2]);
    ASSERT_TRUE(bool(Lead)) << toString(Lead.takeError());
    std::string B = C.rank() == 0 ? "verdict" : "";
    EXPECT_EQ((*Lead)->broadcast(B, 0, Patient), CommStatus::Ok);
    EXPECT_EQ(B, "verdict");
  }
  EXPECT_EQ(C.barrier(Patient), CommStatus::Ok);
  EXPECT_FALSE(MpiCommunicator::isBroken());
}

// Rank 1 departs after the subgroups are made: a prepared subgroup with it
// fails at once and names it (as its own rank), one without it goes on, and
// neither breaks the world (isBroken() says that one broke); the world's
// next operation fails as usual.
// (Runs before DepartureBreaks, in the same mpirun: rank 1 departs there
// too.)
TEST(MpiCommunicatorTest, PreparedSubgroupDepartureBreaks) {
  MpiCommunicator &C = comm();
  std::vector<int> WithOne{0, 1}, WithoutOne;
  for (int R = 0; R < C.size(); ++R)
    if (R != 1)
      WithoutOne.push_back(R);
  ASSERT_FALSE(bool(C.prepareSubgroups({WithOne, WithoutOne})));
  if (C.rank() == 1) {
    llvm::Expected<std::unique_ptr<Communicator>> A = C.createSubgroup(WithOne);
    ASSERT_TRUE(bool(A)) << toString(A.takeError());
    C.depart();
    return;
  }
  llvm::Expected<std::unique_ptr<Communicator>> B =
      C.createSubgroup(WithoutOne);
  ASSERT_TRUE(bool(B)) << toString(B.takeError());
  if (C.rank() == 0) {
    llvm::Expected<std::unique_ptr<Communicator>> A = C.createSubgroup(WithOne);
    ASSERT_TRUE(bool(A)) << toString(A.takeError());
    auto T0 = Clock::now();
    EXPECT_EQ((*A)->barrier(Patient), CommStatus::Failed);
    EXPECT_LT(msSince(T0), 5000);
    EXPECT_EQ((*A)->missingPeers(), std::vector<int>{1});
    std::vector<std::string> Out;
    EXPECT_EQ((*A)->allGather("x", Out, Patient), CommStatus::Failed);
  }
  // Said broken where a subgroup broke, though B and the world still work.
  EXPECT_EQ(MpiCommunicator::isBroken(), C.rank() == 0);
  std::vector<std::string> Out;
  EXPECT_EQ((*B)->allGather(std::to_string(C.rank()), Out, Patient),
            CommStatus::Ok);
  EXPECT_EQ(Out.size(), WithoutOne.size());
  EXPECT_EQ(C.barrier(Patient), CommStatus::Failed);
  EXPECT_EQ(C.missingPeers(), std::vector<int>{1});
}

TEST(MpiCommunicatorTest, DepartureBreaks) {
  MpiCommunicator &C = comm();
  if (C.rank() == 1) {
    C.depart();
    EXPECT_TRUE(MpiCommunicator::isBroken());
    EXPECT_EQ(C.barrier(Patient), CommStatus::Failed);
    return;
  }
  // The peers fail as soon as they hear of it, not at the deadline.
  auto T0 = Clock::now();
  EXPECT_EQ(C.barrier(Patient), CommStatus::Failed);
  EXPECT_LT(msSince(T0), 5000);
  EXPECT_TRUE(C.hasDeparted(1));
  EXPECT_TRUE(MpiCommunicator::isBroken());
  T0 = Clock::now();
  std::vector<double> V{1};
  EXPECT_EQ(C.allReduceMax(V, Patient), CommStatus::Failed);
  EXPECT_LT(msSince(T0), 100);
  // Departed peers finalize too, so MPI_Finalize will return.
  EXPECT_TRUE(MpiCommunicator::canFinalize());
  // Rank 0 reports: no lower rank.
  if (C.rank() == 0)
    EXPECT_TRUE(C.isLowestFinishedRank(2s));
}

// Two disjoint subgroups (the even and the odd ranks) work at the same time
// on their own communicators; ranks are numbered in the group's order, and
// the world goes on afterwards.
TEST(MpiCommunicatorTest, SubgroupsOfEvenAndOddRanks) {
  MpiCommunicator &C = comm();
  std::vector<int> Ranks;
  for (int R = C.size() - 1; R >= 0; --R)
    if (R % 2 == C.rank() % 2)
      Ranks.push_back(R);
  llvm::Expected<std::unique_ptr<Communicator>> Sub = C.createSubgroup(Ranks);
  ASSERT_TRUE(bool(Sub)) << toString(Sub.takeError());
  Communicator &S = **Sub;
  EXPECT_EQ(S.size(), int(Ranks.size()));
  EXPECT_EQ(Ranks[S.rank()], C.rank());
  for (int I = 0; I < 20; ++I)
    EXPECT_EQ(S.barrier(Patient), CommStatus::Ok);
  std::vector<double> V{double(C.rank())};
  EXPECT_EQ(S.allReduceMax(V, Patient), CommStatus::Ok);
  EXPECT_EQ(V[0], double(Ranks.front()));
  std::vector<std::string> Out;
  EXPECT_EQ(S.allGather(std::to_string(C.rank()), Out, Patient),
            CommStatus::Ok);
  ASSERT_EQ(Out.size(), Ranks.size());
  for (size_t I = 0; I < Ranks.size(); ++I)
    EXPECT_EQ(Out[I], std::to_string(Ranks[I]));
  std::string B = S.rank() == 0 ? "lead" : "";
  EXPECT_EQ(S.broadcast(B, 0, Patient), CommStatus::Ok);
  EXPECT_EQ(B, "lead");
  llvm::Expected<std::unique_ptr<Communicator>> Bad =
      C.createSubgroup({C.rank(), C.rank()});
  ASSERT_FALSE(bool(Bad));
  llvm::consumeError(Bad.takeError());
  EXPECT_EQ(C.barrier(Patient), CommStatus::Ok);
  EXPECT_FALSE(MpiCommunicator::isBroken());
}

TEST(MpiCommunicatorTest, TimeoutBreaks) {
  MpiCommunicator &C = comm();
  // Rank 1 never takes part: the data operation times out and breaks the
  // communicator for good.
  if (C.rank() == 1)
    return;
  auto T0 = Clock::now();
  std::vector<std::string> Out;
  EXPECT_EQ(C.allGather("x", Out, 100ms), CommStatus::Timeout);
  EXPECT_LT(msSince(T0), 5000);
  EXPECT_TRUE(MpiCommunicator::isBroken());
  T0 = Clock::now();
  EXPECT_EQ(C.barrier(Patient), CommStatus::Failed);
  std::string S;
  EXPECT_EQ(C.broadcast(S, 0, Patient), CommStatus::Failed);
  EXPECT_LT(msSince(T0), 100);
  // For all this rank knows, rank 1 may never come.
  EXPECT_FALSE(MpiCommunicator::canFinalize());
  // Rank 0 has no lower rank; rank 2 hears from rank 0 and waits no more.
  if (C.rank() == 0)
    EXPECT_TRUE(C.isLowestFinishedRank(0ms));
  else
    EXPECT_FALSE(C.isLowestFinishedRank(Patient));
}

/// Prints failed assertions only, prefixed with the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
public:
  explicit FailurePrinter(int Rank) : Rank(Rank) {}
  void OnTestPartResult(const ::testing::TestPartResult &R) override {
    if (R.failed())
      fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", Rank,
              R.file_name() ? R.file_name() : "?", R.line_number(),
              R.summary());
  }

private:
  int Rank;
};

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  llvm::Expected<std::unique_ptr<MpiCommunicator>> C =
      MpiCommunicator::create();
  if (!C) {
    fprintf(stderr, "error: %s\n", toString(C.takeError()).c_str());
    return 1;
  }
  TheComm = C->get();
  if ((*C)->size() < 2) {
    fprintf(stderr, "error: run under mpirun -np N with N >= 2\n");
    return 1;
  }
  if ((*C)->rank() != 0) {
    ::testing::TestEventListeners &L =
        ::testing::UnitTest::GetInstance()->listeners();
    delete L.Release(L.default_result_printer());
    L.Append(new FailurePrinter((*C)->rank()));
  }
  int RC = RUN_ALL_TESTS();
  fflush(nullptr);
  // After TimeoutBreaks the silent rank 1 finalizes too, so every rank
  // can; mpi.sh's timeout bounds it should that ever go wrong.
  MpiCommunicator::finalize();
  return RC;
}
