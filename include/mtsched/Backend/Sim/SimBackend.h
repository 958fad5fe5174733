//===- SimBackend.h - Timings from the cost model ---------------*- C++ -*-===//
//
// The `sim` backend: each choice's time is the roofline cost model's
// prediction (mtsched/Runtime/Roofline.h) for the device of --device, with
// seeded noise per rank, under the injected choice faults. It needs no GPU,
// so every test and CI run decides with it.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_BACKEND_SIM_SIMBACKEND_H
#define MTSCHED_BACKEND_SIM_SIMBACKEND_H

#include "mtsched/Autotune/BackendRegistry.h"

namespace mtsched {

/// The simulator's version: it changes with the cost model.
llvm::StringRef getSimModelVersion();

/// Times choices with the roofline cost model, seeded noise per rank and the
/// injected choice faults. Opts must outlive it.
std::unique_ptr<Benchmarker> createSimBenchmarker(const AutotuneOptions &Opts,
                                                  int Rank);

/// The registry entry of the `sim` backend.
BackendInfo getSimBackend();

} // namespace mtsched

#endif // MTSCHED_BACKEND_SIM_SIMBACKEND_H
