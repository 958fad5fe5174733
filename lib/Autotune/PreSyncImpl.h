//===- PreSyncImpl.h - What the two pre-sync agreements share ---*- C++ -*-===//
//
// Internal to lib/Autotune: PreSync.cpp (the flat agreement and the entry
// point) and PreSyncHier.cpp (per host, then across host leaders) exchange
// the same records and judge them with the same code.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_AUTOTUNE_PRESYNCIMPL_H
#define MTSCHED_LIB_AUTOTUNE_PRESYNCIMPL_H

#include "mtsched/Autotune/PreSync.h"
#include <chrono>
#include <string>
#include <vector>

namespace mtsched {
namespace presync {

/// One rank's contribution to the pre-sync's agreement.
struct Arrival {
  bool InTime = false;
  /// Wall-clock time at the barrier, in ns since the epoch: comparable
  /// across the processes of one machine and, to NTP accuracy, of several.
  int64_t AtNs = 0;
  /// How long this rank waited in the barrier (steady clock).
  int64_t WaitNs = 0;
  std::string Flags;
  std::string Groups;
  std::string Structure;
  std::string Collectives;
  std::string Bundle;
};

std::string encodeArrival(const Arrival &A);
bool decodeArrival(llvm::StringRef S, Arrival &A);
/// What this rank brings, ready before it arrives, so the agreement costs
/// exchanges and no rank's hashing; AtNs is set on arrival.
Arrival arrivalOf(PreSyncInput &In);
/// Wall-clock nanoseconds since the epoch.
int64_t wallNs();
double msSince(std::chrono::steady_clock::time_point T);
/// The flat agreement's verdict over every rank's record (All).
llvm::Expected<PreSyncOutcome>
judgeArrivals(Communicator &Comm, const AutotuneOptions &Opts,
              const PreSyncInput &In, const std::vector<std::string> &All,
              double AgreeMs, bool GlobalBarrier);
/// Per host, then across host leaders, then back (PreSyncHier.cpp).
llvm::Expected<PreSyncOutcome>
runHierarchicalPreSync(Communicator &Comm, const PreSyncLevels &L,
                       const AutotuneOptions &Opts, PreSyncInput In);

} // namespace presync
} // namespace mtsched

#endif // MTSCHED_LIB_AUTOTUNE_PRESYNCIMPL_H
