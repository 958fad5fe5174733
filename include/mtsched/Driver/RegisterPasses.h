//===- RegisterPasses.h - The one list of all passes ------------*- C++ -*-===//
#ifndef MTSCHED_DRIVER_REGISTERPASSES_H
#define MTSCHED_DRIVER_REGISTERPASSES_H

#include "mtsched/Driver/PipelineOptions.h"

namespace mtsched {

class Autotuner;
class PassRegistry;

/// Registers every pass, test passes included, each factory bound to a copy
/// of Options and to Session, the rank's autotuner (the passes that need
/// one fail without it). With the defaults the registry serves for names,
/// descriptions and --list-passes.
void registerAllPasses(PassRegistry &Registry,
                       const PipelineOptions &Options = PipelineOptions(),
                       Autotuner *Session = nullptr);

} // namespace mtsched

#endif // MTSCHED_DRIVER_REGISTERPASSES_H
