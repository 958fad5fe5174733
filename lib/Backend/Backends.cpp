//===- Backends.cpp - The backends this build has -------------------------===//
#include "mtsched/Backend/Backends.h"
#include "mtsched/Backend/Cuda/CudaBenchmarker.h"
#include "mtsched/Backend/Sim/SimBackend.h"

using namespace mtsched;

const BackendRegistry &mtsched::getBuiltinBackends() {
  static const BackendRegistry Registry = [] {
    BackendRegistry R;
    // The first is the default: what `auto` falls back to.
    R.add(getSimBackend());
    R.add(getCudaBackend());
    return R;
  }();
  return Registry;
}
