//===- RegisterPasses.cpp - The one list of all passes --------------------===//
#include "mtsched/Driver/RegisterPasses.h"
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/Autotune/SwiGluSelect.h"
#include "mtsched/Lowering/SwiGlu.h"
#include "mtsched/Passes/PassRegistry.h"
#include "mtsched/Schedule/Schedule.h"

using namespace mtsched;

/// Registers a pass under the argument and description its instances report.
template <typename FactoryT>
static void add(PassRegistry &Registry, FactoryT Factory,
                bool IsTestPass = false) {
  std::unique_ptr<Pass> Probe = Factory();
  Registry.registerPass({Probe->getArgument().str(),
                         Probe->getDescription().str(), Factory, IsTestPass});
}

void mtsched::registerAllPasses(PassRegistry &Registry,
                                const PipelineOptions &Options,
                                Autotuner *Session) {
  // Each factory keeps its own copy of the options it reads.
  LoweringOptions Lowering = Options.Lowering;
  FusionOptions Fusion = Options.Fusion;
  // Immediate mode (V1): `lower` also decides each node it created, before
  // fusion; lowering itself never calls the autotuner.
  if (Lowering.Mode == CollectiveMode::Immediate)
    add(Registry, [=] { return createImmediateLowerPass(Lowering, Session); });
  else
    add(Registry, [=] { return createLowerPass(Lowering); });
  add(Registry, [=] { return createFuseSwiGluPass(Lowering); });
  add(Registry, [=] { return createFusePass(Fusion); });
  add(Registry, [=] { return createAutotunePass(Session); });
  add(Registry, [=] { return createSelectSwiGluPass(Session); });
  add(
      Registry, [=] { return createTestPrintFusionCandidatesPass(Fusion); },
      /*IsTestPass=*/true);
  add(Registry, [] { return createVerifySchedulePass(); });
  add(
      Registry, [] { return createTestPrintSchedulePass(); },
      /*IsTestPass=*/true);
}
