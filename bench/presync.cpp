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
static std::vector<double> runRank(Communicator &C) {
  const std::chrono::milliseconds Window(WindowMs), Patient(30000);
  std::string Mine = "1:" + llvm::utohexstr(0x9E3779B97F4A7C15ull);
  std::vector<double> Us;
  std::vector<std::string> All;
  for (int I = 0; I < Warmup + Iters; ++I) {
    C.barrier(Patient);
    auto T0 = Clock::now();
    // Both steps always run, as in the autotuner: a rank whose window
    // expired still takes part in the all-gather.
    bool InWindow = C.barrier(Window) == CommStatus::Ok;
    bool OK = C.allGather(Mine, All, Patient) == CommStatus::Ok && InWindow;
    double T =
        std::chrono::duration<double, std::micro>(Clock::now() - T0).count();
    if (I >= Warmup)
      Us.push_back(OK ? T : -1);
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
  std::vector<std::thread> Threads;
  for (int R = 0; R < Ranks; ++R)
    Threads.emplace_back([&, R] {
      std::unique_ptr<Communicator> C = G.get(R);
      Us[R] = runRank(*C);
    });
  for (std::thread &T : Threads)
    T.join();
  print("threads", Ranks, Us[0]);
  return 0;
}
