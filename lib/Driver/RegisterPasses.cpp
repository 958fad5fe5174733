//===- RegisterPasses.cpp - The one list of all passes --------------------===//
#include "mtsched/Driver/RegisterPasses.h"
#include "mtsched/Tools/RankPipeline.h"

using namespace mtsched;

void mtsched::registerAllPasses(PassRegistry &Registry,
                                const PipelineOptions &Options,
                                Autotuner *Session) {
  // The list lives in Tools, where the lab and calibration use it too.
  registerPipelinePasses(Registry, Options.Lowering, Options.Fusion, Session);
}
