//===- PipelineOptions.h - Every pass's options in one place ----*- C++ -*-===//
//
// The driver fills this from its command line; each pass factory picks the
// option struct of its own library. Plain values only: the collaborators a
// pass needs (a rank's autotuner) are handed to registerAllPasses.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_DRIVER_PIPELINEOPTIONS_H
#define MTSCHED_DRIVER_PIPELINEOPTIONS_H

#include "mtsched/Autotune/AutotuneOptions.h"
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/Schedule/Fusion.h"

namespace mtsched {

struct PipelineOptions {
  LoweringOptions Lowering;
  FusionOptions Fusion;
  AutotuneOptions Autotune;
};

} // namespace mtsched

#endif // MTSCHED_DRIVER_PIPELINEOPTIONS_H
