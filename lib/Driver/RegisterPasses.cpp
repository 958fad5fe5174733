//===- RegisterPasses.cpp - The one list of all passes --------------------===//
#include "mtsched/Driver/RegisterPasses.h"
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/Autotune/SwiGluSelect.h"
#include "mtsched/Driver/PipelineOptions.h"
#include "mtsched/Lowering/SwiGlu.h"
#include "mtsched/Passes/PassRegistry.h"
#include "mtsched/Schedule/Schedule.h"

using namespace mtsched;

/// Registers a pass under the argument and description its instances report.
template <typename FactoryT>
static void add(PassRegistry &Registry, FactoryT Factory,
                bool IsTestPass = false) {
  std::unique_ptr<Pass> Probe = Factory(PipelineOptions());
  Registry.registerPass({Probe->getArgument().str(),
                         Probe->getDescription().str(), Factory, IsTestPass});
}

void mtsched::registerAllPasses(PassRegistry &Registry) {
  add(Registry,
      [](const PipelineOptions &O) { return createLowerPass(O.Lowering); });
  add(Registry, [](const PipelineOptions &O) {
    return createFuseSwiGluPass(O.Lowering);
  });
  add(Registry,
      [](const PipelineOptions &O) { return createFusePass(O.Fusion); });
  add(Registry,
      [](const PipelineOptions &O) { return createAutotunePass(O.Session); });
  add(Registry, [](const PipelineOptions &O) {
    return createSelectSwiGluPass(O.Session);
  });
  add(
      Registry,
      [](const PipelineOptions &O) {
        return createTestPrintFusionCandidatesPass(O.Fusion);
      },
      /*IsTestPass=*/true);
  add(Registry,
      [](const PipelineOptions &) { return createVerifySchedulePass(); });
  add(
      Registry,
      [](const PipelineOptions &) { return createTestPrintSchedulePass(); },
      /*IsTestPass=*/true);
}
