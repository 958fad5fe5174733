//===- FaultInjectingBenchmarker.h - Choice faults as a layer ---*- C++ -*-===//
//
// The layer of the measurement stack just above a backend: a choice that
// --inject names gets the outcome the fault asks for, without reaching the
// backend. A build-fail fault is a build failure its builder returns (the
// choice is then not run); run-fail, wrong-result and timeout faults are
// measurements its runner returns. Every other choice is built and timed
// by the backend below. The simulator is wrapped in it. The cuda backend
// injects its own faults: a faulty collective choice must still take part
// in its peers' collective run.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_FAULTINJECTINGBENCHMARKER_H
#define MTSCHED_AUTOTUNE_FAULTINJECTINGBENCHMARKER_H

#include "mtsched/Autotune/AutotuneOptions.h"
#include "mtsched/Autotune/Benchmarker.h"
#include <memory>

namespace mtsched {

/// Inner builds and times every choice Opts.Faults leaves alone on Rank.
std::unique_ptr<Benchmarker>
createFaultInjectingBenchmarker(std::unique_ptr<Benchmarker> Inner,
                                const AutotuneOptions &Opts, int Rank);

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_FAULTINJECTINGBENCHMARKER_H
