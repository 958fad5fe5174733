//===- mtsched-calibrate.cpp - Fit a simulated device to a run ------------===//
//
// mtsched-calibrate --calibrate-from=REPORT.json --calibrate=OUT.json
// (repeatable) fits the simulator's device parameters to the timings of
// REPORT (a --report of a run, which carries every node's workload) and
// writes a device file for --device=OUT. A report of an older mtsched has
// no workloads: then give the run's IR file after each report. The logic is
// in lib/Tools: Calibrate.cpp (the fit), CalibrateSamples.cpp (a report's
// times as samples) and CalibrateLoad.cpp (reading the report and its IR).
//
//===----------------------------------------------------------------------===//
#include "mtsched/Support/FileIO.h"
#include "mtsched/Support/ToolError.h"
#include "mtsched/Support/Version.h"
#include "mtsched/Tools/Calibrate.h"
#include "mtsched/Tools/ToolOptions.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace mtsched;

static cl::OptionCategory Cat("Calibration options");
static cl::list<std::string>
    IRFiles(cl::Positional, cl::ZeroOrMore,
            cl::desc("<IR file of each report, in the same order: needed "
                     "only for reports without workloads (older ones)>"),
            cl::cat(Cat));
static cl::list<std::string>
    From("calibrate-from", cl::OneOrMore,
         cl::desc("Report (--report JSON) of a run to fit; repeat it with "
                  "one IR file each to fit several runs at once"),
         cl::value_desc("report.json"), cl::cat(Cat));
static cl::opt<std::string> Out("calibrate", cl::Required,
                                cl::desc("Device file to write"),
                                cl::value_desc("out.json"), cl::cat(Cat));
static cl::opt<std::string>
    Device("device",
           cl::desc("Starting point: h100, h200 (default) or a JSON file"),
           cl::init("h200"), cl::cat(Cat));
static cl::opt<std::string> Name("name",
                                 cl::desc("Name of the fitted device "
                                          "(default: calibrated)"),
                                 cl::init("calibrated"), cl::cat(Cat));
static ChoiceToolOptions ChoiceOpts(Cat);

static void fail(const Twine &Msg) {
  reportToolError(Msg);
  exit(1);
}

int main(int argc, char **argv) {
  InitLLVM X(argc, argv);
  cl::HideUnrelatedOptions(Cat);
  setToolVersionPrinter("mtsched-calibrate");
  setErrorToolName("mtsched-calibrate");
  cl::ParseCommandLineOptions(
      argc, argv, "mtsched-calibrate: fit the simulated device to a run\n");
  Expected<DeviceDesc> Start = loadDevice(Device);
  if (!Start)
    fail(toString(Start.takeError()));
  if (Name.empty())
    fail("--name must not be empty");
  LoweringOptions Lowering;
  FusionOptions Fusion;
  if (Error E = ChoiceOpts.apply(Lowering, Fusion))
    fail(toString(std::move(E)));
  if (!IRFiles.empty() && IRFiles.size() != From.size())
    fail("give one IR file per --calibrate-from report (" + Twine(From.size()) +
         " reports, " + Twine(IRFiles.size()) + " IR files)");
  std::vector<CalibrationSample> Samples;
  for (size_t I = 0; I < From.size(); ++I) {
    Expected<std::vector<CalibrationSample>> S = loadCalibrationSamples(
        IRFiles.empty() ? "" : IRFiles[I], From[I], Lowering, Fusion);
    if (!S)
      fail(toString(S.takeError()));
    llvm::append_range(Samples, *S);
  }
  CalibrationResult R = calibrateDevice(*Start, Samples, Name);
  printCalibration(*Start, R, outs());
  // The file must load with --device: a fit that left a parameter out of
  // range (the samples cannot pin it) is an error here, not there.
  std::string Text;
  raw_string_ostream TextOS(Text);
  writeDeviceFile(R.Fitted, TextOS);
  if (Expected<DeviceDesc> Back = parseDeviceJSON(Text, Out); !Back)
    fail("the fitted device would not load, nothing written: " +
         toString(Back.takeError()));
  std::error_code EC;
  raw_fd_ostream OS(Out, EC, sys::fs::OF_Text);
  if (EC)
    fail("cannot write '" + Out + "': " + EC.message());
  OS << Text;
  OS.close();
  if (OS.has_error()) {
    std::error_code WriteEC = OS.error();
    OS.clear_error();
    // A cut-off device file would be rejected later; none is better.
    // (remove() leaves anything but a regular file alone: /dev/full stays.)
    sys::fs::remove(Out);
    fail("cannot write '" + Out + "': " + WriteEC.message());
  }
  outs() << "wrote " << Out << '\n';
  return checkStdoutWritten("mtsched-calibrate") ? 0 : 1;
}
