//===- mtsched-lab.cpp - The heuristics lab -------------------------------===//
//
// mtsched-lab [--sim-noise=PCT --seed=N --device=D] FILE.mir...
// runs every fusion heuristic and pruning setting over the files and prints
// one Markdown table (docs/HEURISTICS.md). The logic is in
// lib/Autotune/Lab.cpp.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Autotune/Benchmarker.h"
#include "mtsched/Autotune/Lab.h"
#include "mtsched/Schedule/FusionHeuristic.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace mtsched;

static cl::OptionCategory Cat("Lab options");
static cl::list<std::string> Files(cl::Positional, cl::OneOrMore,
                                   cl::desc("<graph.mir>..."), cl::cat(Cat));
static cl::opt<std::string>
    Backend("backend",
            cl::desc("Where choices are timed: sim (default), cuda (one GPU "
                     "per rank, ranks as threads) or auto"),
            cl::init("sim"), cl::cat(Cat));
static cl::opt<std::string>
    Device("device",
           cl::desc("Simulated device: h100, h200 (default) or a JSON file"),
           cl::init("h200"), cl::cat(Cat));
static cl::opt<double>
    SimNoise("sim-noise",
             cl::desc("Simulated timing noise in percent (default 3)"),
             cl::init(3), cl::cat(Cat));
static cl::opt<uint64_t> Seed("seed", cl::desc("Noise seed (default 1)"),
                              cl::init(1), cl::cat(Cat));
static cl::list<std::string>
    Heuristics("heuristics",
               cl::desc("Fusion heuristics to compare (default: all four)"),
               cl::CommaSeparated, cl::cat(Cat));
static cl::list<unsigned>
    Prune("prune", cl::desc("--prune-top-k settings, 0 = none (default 0,1,3)"),
          cl::CommaSeparated, cl::cat(Cat));

static void fail(const Twine &Msg) {
  errs() << "mtsched-lab: error: " << Msg << '\n';
  exit(1);
}

int main(int argc, char **argv) {
  InitLLVM X(argc, argv);
  cl::HideUnrelatedOptions(Cat);
  cl::ParseCommandLineOptions(
      argc, argv, "mtsched-lab: compare fusion heuristics and pruning\n");
  LabOptions Opts;
  Opts.Files.assign(Files.begin(), Files.end());
  Opts.Tune.Backend = Backend;
  if (Expected<std::unique_ptr<Benchmarker>> B =
          createBenchmarker(Opts.Tune, 0);
      !B)
    fail(toString(B.takeError()));
  Expected<DeviceDesc> Dev = StringRef(Device).ends_with(".json")
                                 ? loadDeviceFile(Device)
                                 : getBuiltinDevice(Device);
  if (!Dev)
    fail(toString(Dev.takeError()));
  Opts.Tune.Device = *Dev;
  if (SimNoise < 0 || SimNoise >= 100)
    fail("--sim-noise must be in [0, 100)");
  Opts.Tune.SimNoisePct = SimNoise;
  Opts.Tune.Seed = Seed;
  Opts.Tune.PreSyncTimeout = std::chrono::milliseconds(5000);
  if (!Heuristics.empty()) {
    Opts.Heuristics.clear();
    for (const std::string &H : Heuristics) {
      if (auto F = createFusionHeuristic(H); !F)
        fail(toString(F.takeError()));
      Opts.Heuristics.push_back(H);
    }
  }
  if (!Prune.empty())
    Opts.PruneTopK.assign(Prune.begin(), Prune.end());
  Expected<std::vector<LabRow>> Rows = runLab(Opts);
  if (!Rows)
    fail(toString(Rows.takeError()));
  printLabTable(*Rows, outs());
  return 0;
}
