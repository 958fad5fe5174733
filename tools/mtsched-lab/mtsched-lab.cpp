//===- mtsched-lab.cpp - The heuristics lab -------------------------------===//
//
// mtsched-lab [--sim-noise=PCT --seed=N --device=D] FILE.mir...
// runs every fusion heuristic and pruning setting over the files and prints
// one Markdown table (docs/HEURISTICS.md). The logic is in
// lib/Autotune/Lab.cpp.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Autotune/Benchmarker.h"
#include "mtsched/Support/FileIO.h"
#include "mtsched/Support/ToolError.h"
#include "mtsched/Support/Version.h"
#include "mtsched/Tools/Lab.h"
#include "mtsched/Tools/ToolOptions.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace mtsched;

static cl::OptionCategory Cat("Lab options");
static cl::list<std::string> Files(cl::Positional, cl::OneOrMore,
                                   cl::desc("<graph.mir>..."), cl::cat(Cat));
static BackendToolOptions BackendOpts(Cat, {/*SimNoisePct=*/3, /*Seed=*/1});
static cl::list<std::string>
    Heuristics("heuristics",
               cl::desc("Fusion heuristics to compare (default: all four)"),
               cl::CommaSeparated, cl::cat(Cat));
static cl::list<unsigned>
    Prune("prune", cl::desc("--prune-top-k settings, 0 = none (default 0,1,3)"),
          cl::CommaSeparated, cl::cat(Cat));
static cl::list<std::string> Searches(
    "fusion-search",
    cl::desc("Fusion searches to compare: greedy (pass order), recursive "
             "(search-fusion to --max-fusion-depth), exhaustive (no depth "
             "bound); rows of the last two are named heuristic+search "
             "(default greedy)"),
    cl::CommaSeparated, cl::cat(Cat));
static cl::opt<unsigned> MaxFusionDepth(
    "max-fusion-depth",
    cl::desc("--max-fusion-depth of the recursive rows (default 2)"),
    cl::init(2), cl::cat(Cat));

static cl::opt<bool> WallTimes(
    "wall-times",
    cl::desc("Add the autotune ms column (wall time: it differs from run to "
             "run, so the table is no longer the same for the same seed)"),
    cl::cat(Cat));

static void fail(const Twine &Msg) {
  reportToolError(Msg);
  exit(1);
}

int main(int argc, char **argv) {
  InitLLVM X(argc, argv);
  cl::HideUnrelatedOptions(Cat);
  setToolVersionPrinter("mtsched-lab");
  setErrorToolName("mtsched-lab");
  cl::ParseCommandLineOptions(
      argc, argv, "mtsched-lab: compare fusion heuristics and pruning\n");
  LabOptions Opts;
  Opts.Files.assign(Files.begin(), Files.end());
  if (Error E = BackendOpts.apply(Opts.Tune))
    fail(toString(std::move(E)));
  Opts.Tune.PreSyncTimeout = std::chrono::milliseconds(5000);
  // The lab weighs each setting by every rank's measurements and counts
  // the benchmarks one rank runs: the work split would change both.
  Opts.Tune.SplitTuning = false;
  // runLab builds each heuristic once and reports a name none has.
  if (!Heuristics.empty())
    Opts.Heuristics.assign(Heuristics.begin(), Heuristics.end());
  if (!Prune.empty())
    Opts.PruneTopK.assign(Prune.begin(), Prune.end());
  if (!Searches.empty())
    Opts.Searches.assign(Searches.begin(), Searches.end());
  Opts.MaxFusionDepth = MaxFusionDepth;
  Expected<std::vector<LabRow>> Rows = runLab(Opts);
  if (!Rows)
    fail(toString(Rows.takeError()));
  LabTableOptions Table;
  Table.WallTimes = WallTimes;
  printLabTable(*Rows, outs(), Table);
  // The table is the lab's whole output: losing it is a failure.
  return checkStdoutWritten("mtsched-lab") ? 0 : 1;
}
