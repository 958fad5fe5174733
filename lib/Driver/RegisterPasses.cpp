//===- RegisterPasses.cpp - The one list of all passes --------------------===//
#include "mtsched/Driver/RegisterPasses.h"
#include "mtsched/Driver/PipelineOptions.h"
#include "mtsched/Passes/PassRegistry.h"

using namespace mtsched;

void mtsched::registerAllPasses(PassRegistry &Registry) { (void)Registry; }
