//===- PipelineOptions.h - Every pass's options in one place ----*- C++ -*-===//
//
// The driver fills this from its command line; each pass factory picks the
// option struct of its own library.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_DRIVER_PIPELINEOPTIONS_H
#define MTSCHED_DRIVER_PIPELINEOPTIONS_H

#include "mtsched/Autotune/AutotuneOptions.h"
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/Schedule/Fusion.h"

namespace mtsched {

class Autotuner;

struct PipelineOptions {
  LoweringOptions Lowering;
  FusionOptions Fusion;
  AutotuneOptions Autotune;
  /// This rank's autotuning session; set by the driver per rank.
  Autotuner *Session = nullptr;
};

} // namespace mtsched

#endif // MTSCHED_DRIVER_PIPELINEOPTIONS_H
