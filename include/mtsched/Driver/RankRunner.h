//===- RankRunner.h - Runs the pipeline on every rank -----------*- C++ -*-===//
//
// Each rank runs the whole pipeline on its own copy of the module, as a
// thread, talking to its peers through a Communicator. The lowest rank that
// finishes reports: its IR is printed and its session writes the report.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_DRIVER_RANKRUNNER_H
#define MTSCHED_DRIVER_RANKRUNNER_H

#include "mtsched/Driver/OptMain.h"
#include "llvm/Support/raw_ostream.h"
#include <string>
#include <utility>
#include <vector>

namespace mtsched {

class Diagnostics;
class Module;

/// Runs Config's pipeline on M with Config.NumRanks ranks (or the module's
/// world size). Prints the reporting rank's IR dumps and final IR to OS and
/// writes the report and trace Config asks for; FrontendPhasesMs (parse,
/// verify) go into the report. Returns false after reporting an error.
bool runOnRanks(const OptMainConfig &Config, const PassRegistry &Registry,
                const Module &M, Diagnostics &Diags, llvm::raw_ostream &OS,
                std::vector<std::pair<std::string, double>> FrontendPhasesMs);

} // namespace mtsched

#endif // MTSCHED_DRIVER_RANKRUNNER_H
