//===- Calibrate.h - Fit the simulator's device to measured times -*- C++
//-*-===//
//
// Calibration makes the simulator predict a particular GPU: it takes the
// timings of a real run (a --report JSON and the IR file that produced it),
// pairs every measured time with the workload and choice it belongs to, and
// fits the continuous DeviceDesc parameters so that the cost model's
// predictions match, minimising the mean squared relative error with
// Nelder-Mead on the logarithms of the parameters (restarted until it stops
// improving). Parameters the timings do not determine (changing them by 20%
// moves no prediction by 0.1%) keep their starting values and are reported.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_TOOLS_CALIBRATE_H
#define MTSCHED_TOOLS_CALIBRATE_H

#include "mtsched/Autotune/Workload.h"
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/Runtime/DeviceDesc.h"
#include "mtsched/Schedule/Fusion.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include <string>
#include <vector>

namespace mtsched {

/// One measured time and what the cost model must predict for it.
struct CalibrationSample {
  enum class Kind { Choice, Fused, Epilogue };
  Kind K = Kind::Choice;
  /// The error group it is reported under: "gemm tiles", "extern gemm",
  /// "collective nccl", "collective one_shot", ..., "epilogues", and
  /// "... + epilogue" for fused variants.
  std::string Group;
  /// `@graph/%node choice [fused]`, for messages.
  std::string What;
  Workload W;
  Choice C;
  double MeasuredUs = 0;
};

/// The model's time for a sample on device D.
double predictSampleUs(const DeviceDesc &D, const CalibrationSample &S);

/// Pairs the finite, measured (not predicted) times of Report with their
/// workloads: M's when given, which must be the report's IR after `lower`
/// and `fuse` with the run's options, else the report's own (each node's
/// `workload` and each choice's `params`). Nodes
/// decided by fallback are skipped; a node or choice the IR does not have
/// is an error naming it, as is a report without workloads and no M.
llvm::Expected<std::vector<CalibrationSample>>
collectCalibrationSamples(const Module *M, const llvm::json::Value &Report);

/// Reads ReportPath and collects its samples; IRPath, if not empty, is
/// parsed, lowered and fused with the given options for a report that
/// carries no workloads. Errors name the file at fault.
llvm::Expected<std::vector<CalibrationSample>>
loadCalibrationSamples(llvm::StringRef IRPath, llvm::StringRef ReportPath,
                       const LoweringOptions &Lowering,
                       const FusionOptions &Fusion);

struct CalibrationError {
  std::string Group;
  unsigned Count = 0;
  /// Root-mean-square and largest relative error, before and after.
  double RmsBefore = 0, MaxBefore = 0, RmsAfter = 0, MaxAfter = 0;
};

struct CalibrationResult {
  DeviceDesc Fitted;
  /// Parameters the samples do not determine (kept at the start value).
  std::vector<std::string> Undetermined;
  std::vector<CalibrationError> Errors;
  double ObjectiveBefore = 0, ObjectiveAfter = 0;
  unsigned Evaluations = 0;
};

/// The names of the fitted DeviceDesc fields, as in device files.
std::vector<std::string> calibratedParameterNames();

/// Fits Start's continuous parameters to Samples (num_sms and l2_mb are
/// kept). The fitted device is named Name.
CalibrationResult calibrateDevice(const DeviceDesc &Start,
                                  const std::vector<CalibrationSample> &Samples,
                                  llvm::StringRef Name);

/// The fitted parameters against the start and the error table per group.
void printCalibration(const DeviceDesc &Start, const CalibrationResult &R,
                      llvm::raw_ostream &OS);

} // namespace mtsched

#endif // MTSCHED_TOOLS_CALIBRATE_H
