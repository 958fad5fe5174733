//===- ToolOptions.h - Options every tool shares ----------------*- C++ -*-===//
//
// mtsched-opt, mtsched-lab and mtsched-calibrate take some of the same
// flags; each registers them here, once, with its own defaults, and applies
// them to the plain option structs the libraries take. The flags are
// declared in one place, so they are spelled, described and checked alike.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_TOOLS_TOOLOPTIONS_H
#define MTSCHED_TOOLS_TOOLOPTIONS_H

#include "mtsched/Autotune/AutotuneOptions.h"
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/Schedule/Fusion.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <string>

namespace mtsched {

/// --backend, --device, --sim-noise, --seed: where choices are timed.
class BackendToolOptions {
public:
  struct Defaults {
    double SimNoisePct = 0;
    uint64_t Seed = 0;
  };
  /// Registers the flags in Cat; construct before parsing the command line.
  BackendToolOptions(llvm::cl::OptionCategory &Cat, Defaults D);
  /// Fills Opts' backend, device, noise and seed; an error names the flag
  /// that is wrong (a backend that cannot run here, an unknown device).
  llvm::Error apply(AutotuneOptions &Opts) const;
  uint64_t getSeed() const { return Seed; }

private:
  // cl::desc keeps a StringRef: the texts that name the defaults must
  // outlive the options, so they are members declared (and built) first.
  std::string SimNoiseDesc, SeedDesc;
  llvm::cl::opt<std::string> Backend;
  llvm::cl::opt<std::string> Device;
  llvm::cl::opt<double> SimNoise;
  llvm::cl::opt<uint64_t> Seed;
};

/// --choices-file, --disable-choices, --max-epilogue-length,
/// --horizontal-fusion, --reduction-fusion, --epilogue-through-layout: what
/// lowering
/// offers and how far fusion looks.
class ChoiceToolOptions {
public:
  explicit ChoiceToolOptions(llvm::cl::OptionCategory &Cat);
  llvm::Error apply(LoweringOptions &Lowering, FusionOptions &Fusion) const;

private:
  llvm::cl::opt<std::string> ChoicesFile;
  llvm::cl::list<std::string> DisableChoices;
  llvm::cl::opt<unsigned> MaxEpilogueLength;
  llvm::cl::opt<bool> HorizontalFusion;
  llvm::cl::opt<bool> PrologueFusion;
  llvm::cl::opt<std::string> FusionSearchMode;
  llvm::cl::opt<unsigned> MaxFusionDepth;
  llvm::cl::opt<bool> ReductionFusion;
  llvm::cl::opt<bool> EpilogueThroughLayout;
  llvm::cl::opt<std::string> SwiGluFormMode;
  llvm::cl::opt<unsigned> SwiGluSustainedUs;
  llvm::cl::opt<unsigned> GemmSustainedUs;
  llvm::cl::opt<std::string> TopologyFile;
};

/// The device a --device value names: a built-in one or a JSON file.
llvm::Expected<DeviceDesc> loadDevice(llvm::StringRef Name);

} // namespace mtsched

#endif // MTSCHED_TOOLS_TOOLOPTIONS_H
