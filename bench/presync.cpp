//===- presync.cpp - Cost of one successful pre-sync ----------------------===//
//
// Replays the autotuner's pre-sync exchange (Autotuner.cpp, sync(): a
// barrier with the pre-sync window, then an all-gather of "1:<fingerprint>"
// bounded by the choice timeout) through a Communicator, and prints the
// median, p10 and p90 of its wall time in microseconds. Each sample starts
// after an untimed barrier, and a sample's time is the slowest rank's
// (max-reduced at the end), as DESIGN.md asks for collectives.
//
//   mtsched-bench-presync --ranks=4 --iters=2000          # thread ranks
//   mpirun -np 4 mtsched-bench-presync --iters=2000       # MPI ranks
//   mtsched-bench-presync --ranks=16 --stagger-us=50      # ranks apart
//
// With --stagger-us=S (thread ranks), rank r works (spins) r * S µs after
// the untimed barrier, so the ranks arrive apart and the ones still
// working hold cores, as in a real run; each sample is then split as
// mtsched-opt's report splits sync.cost_ms: the last arrival's barrier
// wait, and each rank's exchange (docs/RANKS.md, "The pre-sync at scale").
//
//===----------------------------------------------------------------------===//
#include "mtsched/Runtime/Communicator.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#ifdef MTSCHED_HAVE_MPI
#include "mtsched/Runtime/MpiCommunicator.h"
#endif

using namespace mtsched;
using Clock = std::chrono::steady_clock;

static llvm::cl::opt<int> Ranks("ranks",
                                llvm::cl::desc("Thread ranks (ignored under "
                                               "mpirun; default 2)"),
                                llvm::cl::init(2));
static llvm::cl::opt<int> Iters("iters",
                                llvm::cl::desc("Samples (default 2000)"),
                                llvm::cl::init(2000));
static llvm::cl::opt<int>
    Warmup("warmup", llvm::cl::desc("Untimed samples (default 100)"),
           llvm::cl::init(100));
static llvm::cl::opt<unsigned>
    WindowMs("pre-sync-timeout-ms",
             llvm::cl::desc("The barrier's arrival deadline (default 5000, "
                            "as the driver)"),
             llvm::cl::init(5000));

/// One rank's samples, in microseconds; -1 for a sample whose sync failed.
static llvm::cl::opt<unsigned> StaggerUs(
    "stagger-us",
    llvm::cl::desc("Thread ranks: rank r spins r times this many µs before "
                   "each timed sample, so ranks arrive apart (default 0)"),
    llvm::cl::init(0));

/// Per rank and timed sample, with --stagger-us: the barrier wait and the
/// exchange after it, µs.
struct Split {
  std::vector<double> WaitUs, ExchangeUs;
};

static std::vector<double> runRank(Communicator &C, Split *S = nullptr) {
  const std::chrono::milliseconds Window(WindowMs), Patient(30000);
  std::string Mine = "1:" + llvm::utohexstr(0x9E3779B97F4A7C15ull);
  std::vector<double> Us;
  std::vector<std::string> All;
  for (int I = 0; I < Warmup + Iters; ++I) {
    C.barrier(Patient);
    if (S) {
      // Working, not sleeping: a rank that has not arrived holds a core.
      auto Until = Clock::now() +
                   std::chrono::microseconds(int64_t(StaggerUs) * C.rank());
      while (Clock::now() < Until)
        ;
    }
    auto T0 = Clock::now();
    // Both steps always run, as in the autotuner: a rank whose window
    // expired still takes part in the all-gather.
    bool InWindow = C.barrier(Window) == CommStatus::Ok;
    auto T1 = Clock::now();
    bool OK = C.allGather(Mine, All, Patient) == CommStatus::Ok && InWindow;
    auto T2 = Clock::now();
    auto Micro = [](Clock::duration D) {
      return std::chrono::duration<double, std::micro>(D).count();
    };
    if (I >= Warmup) {
      Us.push_back(OK ? Micro(T2 - T0) : -1);
      if (S) {
        S->WaitUs.push_back(OK ? Micro(T1 - T0) : -1);
        S->ExchangeUs.push_back(OK ? Micro(T2 - T1) : -1);
      }
    }
  }
  // The slowest rank's time is the sample's time.
  if (C.allReduceMax(Us, Patient) != CommStatus::Ok)
    Us.clear();
  return Us;
}

static void print(llvm::StringRef Kind, int N, std::vector<double> Us) {
  size_t Failed = llvm::count_if(Us, [](double T) { return T < 0; });
  llvm::erase_if(Us, [](double T) { return T < 0; });
  llvm::sort(Us);
  auto At = [&](double Q) {
    return Us.empty() ? 0.0
                      : Us[std::min(Us.size() - 1, size_t(Q * Us.size()))];
  };
  llvm::outs() << llvm::format(
      "presync %s ranks=%d samples=%zu failed=%zu median_us=%.1f p10_us=%.1f "
      "p90_us=%.1f\n",
      Kind.str().c_str(), N, Us.size(), Failed, At(0.5), At(0.1), At(0.9));
}

int main(int argc, char **argv) {
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "cost of one successful pre-sync\n");
#ifdef MTSCHED_HAVE_MPI
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") ||
      std::getenv("PMIX_SIZE")) {
    if (StaggerUs) {
      llvm::errs() << "error: --stagger-us is for thread ranks\n";
      return 1;
    }
    auto C = MpiCommunicator::create();
    if (!C) {
      llvm::errs() << toString(C.takeError()) << '\n';
      return 1;
    }
    std::vector<double> Us = runRank(**C);
    if ((*C)->rank() == 0)
      print("mpi", (*C)->size(), Us);
    llvm::outs().flush();
    MpiCommunicator::finalize();
    return 0;
  }
#endif
  ThreadGroup G(Ranks);
  std::vector<std::vector<double>> Us(Ranks);
  std::vector<Split> Splits(Ranks);
  std::vector<std::thread> Threads;
  for (int R = 0; R < Ranks; ++R)
    Threads.emplace_back([&, R] {
      std::unique_ptr<Communicator> C = G.get(R);
      Us[R] = runRank(*C, StaggerUs ? &Splits[R] : nullptr);
    });
  for (std::thread &T : Threads)
    T.join();
  if (!StaggerUs) {
    print("threads", Ranks, Us[0]);
    return 0;
  }
  // Per sample, as the report's sync fields: last_wait (the smallest wait),
  // the fastest, median and slowest rank's cost (last_wait + its exchange).
  std::vector<double> LastWait, Min, Med, Max;
  for (int I = 0; I < Iters; ++I) {
    double W = 1e300;
    std::vector<double> X;
    for (const Split &S : Splits) {
      if (S.WaitUs[I] < 0)
        break;
      W = std::min(W, S.WaitUs[I]);
      X.push_back(S.ExchangeUs[I]);
    }
    if (int(X.size()) != Ranks)
      continue;
    llvm::sort(X);
    LastWait.push_back(W);
    Min.push_back(W + X.front());
    Med.push_back(W + X[X.size() / 2]);
    Max.push_back(W + X.back());
  }
  auto Median = [](std::vector<double> V) {
    llvm::sort(V);
    return V.empty() ? 0.0 : V[V.size() / 2];
  };
  llvm::outs() << llvm::format(
      "presync-staggered threads ranks=%d stagger_us=%u samples=%zu "
      "last_wait_us=%.1f cost_min_us=%.1f cost_median_us=%.1f "
      "cost_max_us=%.1f\n",
      int(Ranks), unsigned(StaggerUs), LastWait.size(), Median(LastWait),
      Median(Min), Median(Med), Median(Max));
  return 0;
}
