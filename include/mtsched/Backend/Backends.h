//===- Backends.h - The backends this build has -----------------*- C++ -*-===//
//
// The one list of built-in backends, the way registerAllPasses is the one
// list of passes: `sim` (the default) and `cuda`. The driver and the tools
// pass it to what creates benchmarkers; a new backend is a folder under
// lib/Backend and one line in Backends.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_BACKEND_BACKENDS_H
#define MTSCHED_BACKEND_BACKENDS_H

#include "mtsched/Autotune/BackendRegistry.h"

namespace mtsched {

/// sim (the default, first) and cuda, built once per process.
const BackendRegistry &getBuiltinBackends();

} // namespace mtsched

#endif // MTSCHED_BACKEND_BACKENDS_H
