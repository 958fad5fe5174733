//===- mtsched-opt.cpp - The mtsched driver -------------------------------===//
//
// Parses the command line into an OptMainConfig and hands over to optMain.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Driver/OptMain.h"
#include "mtsched/Driver/RegisterPasses.h"
#include "mtsched/Passes/PassRegistry.h"
#include "mtsched/Schedule/FusionHeuristic.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"

using namespace llvm;
using namespace mtsched;

static cl::OptionCategory DriverCat("Driver options");
static cl::OptionCategory PassCat("Pass options");

static cl::opt<std::string> InputFile(cl::Positional, cl::desc("<input file>"),
                                      cl::init("-"), cl::cat(DriverCat));
static cl::opt<std::string> OutputFile("o", cl::desc("Output file"),
                                       cl::value_desc("filename"),
                                       cl::init("-"), cl::cat(DriverCat));
static cl::opt<bool> SplitInputFile(
    "split-input-file",
    cl::desc("Process each '// -----' separated case on its own"),
    cl::cat(DriverCat));
static cl::opt<bool> VerifyDiagnostics(
    "verify-diagnostics",
    cl::desc("Check diagnostics against expected-error comments"),
    cl::cat(DriverCat));
static cl::list<std::string>
    Pipeline("pipeline", cl::desc("Comma-separated passes to run"),
             cl::CommaSeparated, cl::value_desc("pass,..."),
             cl::cat(PassCat));
static cl::opt<bool> PrintIRAfterAll("print-ir-after-all",
                                     cl::desc("Print the IR after every pass"),
                                     cl::cat(PassCat));
static cl::list<std::string>
    PrintIRAfter("print-ir-after", cl::desc("Print the IR after these passes"),
                 cl::CommaSeparated, cl::value_desc("pass"), cl::cat(PassCat));
static cl::opt<bool>
    VerifyEach("verify-each", cl::init(true),
               cl::desc("Run the verifier after every pass (default on)"),
               cl::cat(PassCat));
static cl::opt<bool> TimePasses("time-passes",
                                cl::desc("Report the time of every pass"),
                                cl::cat(PassCat));
static cl::opt<bool> DumpPassPipeline(
    "dump-pass-pipeline", cl::desc("Print the pipeline to stderr before running"),
    cl::cat(PassCat));

static cl::OptionCategory TuneCat("Lowering, fusion and autotuning options");

static cl::opt<CollectiveMode> Mode(
    "collective-mode", cl::desc("When multi-template buffers are decided"),
    cl::values(clEnumValN(CollectiveMode::Deferred, "deferred",
                          "V2: by the scheduler, one pre-sync for all "
                          "collectives (default)"),
               clEnumValN(CollectiveMode::Immediate, "immediate",
                          "V1: while lowering, one sync per collective")),
    cl::init(CollectiveMode::Deferred), cl::cat(TuneCat));
static cl::opt<std::string>
    ChoicesFile("choices-file",
                cl::desc("JSON file replacing the built-in choice lists"),
                cl::value_desc("file"), cl::cat(TuneCat));
static cl::list<std::string>
    DisableChoices("disable-choices", cl::desc("Choice names never offered"),
                   cl::CommaSeparated, cl::value_desc("name,..."),
                   cl::cat(TuneCat));
static cl::opt<std::string> FusionHeuristicName(
    "fusion-heuristic",
    cl::desc("benchmark (default), cost-model, always or never"),
    cl::init("benchmark"), cl::cat(TuneCat));
static cl::opt<double> FusionSpeedupThreshold(
    "fusion-speedup-threshold",
    cl::desc("Fuse only if unfused/fused time is at least this (default 1.0)"),
    cl::init(1.0), cl::cat(TuneCat));
static cl::opt<unsigned> MaxEpilogueLength(
    "max-epilogue-length",
    cl::desc("Longest epilogue chain considered for fusion (default 8)"),
    cl::init(8), cl::cat(TuneCat));

static void fail(const Twine &Msg) {
  errs() << "mtsched-opt: error: " << Msg << '\n';
  exit(1);
}

int main(int argc, char **argv) {
  InitLLVM X(argc, argv);
  PassRegistry Registry;
  registerAllPasses(Registry);

  // One flag per pass (`--lower`); their order on the command line is the
  // order they run in, after any --pipeline.
  std::vector<std::unique_ptr<cl::opt<bool>>> PassFlags;
  for (const PassInfo &P : Registry.getPasses())
    PassFlags.push_back(std::make_unique<cl::opt<bool>>(
        StringRef(P.Argument), cl::desc(P.Description), cl::cat(PassCat)));

  cl::HideUnrelatedOptions({&DriverCat, &PassCat, &TuneCat});
  cl::ParseCommandLineOptions(argc, argv,
                              "mtsched-opt: ML graph scheduler and autotuner\n");

  OptMainConfig Config;
  Config.InputFile = InputFile;
  Config.OutputFile = OutputFile;
  Config.SplitInputFile = SplitInputFile;
  Config.VerifyDiagnostics = VerifyDiagnostics;
  Config.DumpPassPipeline = DumpPassPipeline;
  Config.PMOptions.VerifyEach = VerifyEach;
  Config.PMOptions.PrintAfterAll = PrintIRAfterAll;
  Config.PMOptions.TimePasses = TimePasses;
  for (const std::string &P : PrintIRAfter)
    Config.PMOptions.PrintAfter.insert(P);

  LoweringOptions &Lower = Config.Pipe.Lowering;
  Lower.Mode = Mode;
  if (!ChoicesFile.empty())
    if (Error E = Lower.Choices.loadFile(ChoicesFile))
      fail(toString(std::move(E)));
  for (const std::string &C : DisableChoices)
    Lower.Choices.Disabled.insert(C);
  FusionOptions &Fusion = Config.Pipe.Fusion;
  if (auto H = createFusionHeuristic(FusionHeuristicName); !H)
    fail(toString(H.takeError()));
  Fusion.Heuristic = FusionHeuristicName;
  if (!(FusionSpeedupThreshold > 0))
    fail("--fusion-speedup-threshold must be positive");
  Fusion.SpeedupThreshold = FusionSpeedupThreshold;
  if (MaxEpilogueLength == 0)
    fail("--max-epilogue-length must be at least 1");
  Fusion.MaxEpilogueLength = MaxEpilogueLength;

  std::vector<std::string> Requested(Pipeline.begin(), Pipeline.end());
  std::vector<std::pair<unsigned, std::string>> Flagged;
  for (const auto &F : PassFlags)
    if (F->getNumOccurrences())
      Flagged.emplace_back(F->getPosition(), F->ArgStr.str());
  llvm::sort(Flagged);
  for (auto &F : Flagged)
    Requested.push_back(F.second);
  if (!expandPipeline(Registry, Requested, Config.Pipeline))
    return 1;
  for (const std::string &P : PrintIRAfter)
    if (!Registry.lookup(P))
      fail("unknown pass '" + P + "' in --print-ir-after");
  return optMain(Config, Registry);
}
