//===- RankPipeline.cpp - What one rank runs ------------------------------===//
#include "mtsched/Tools/RankPipeline.h"
#include "mtsched/Autotune/FusionSearch.h"
#include "mtsched/Autotune/HorizontalSelect.h"
#include "mtsched/Autotune/LazyBenchmarker.h"
#include "mtsched/Autotune/PrologueSelect.h"
#include "mtsched/Autotune/SwiGluSelect.h"
#include "mtsched/Backend/Backends.h"
#include "mtsched/Lowering/GroupedMm.h"
#include "mtsched/Lowering/MoeCombine.h"
#include "mtsched/Lowering/SwiGlu.h"
#include "mtsched/Passes/PassRegistry.h"
#include "mtsched/Schedule/Schedule.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"

using namespace mtsched;

llvm::ArrayRef<const char *> mtsched::defaultPipelineBeforeAutotune() {
  llvm::ArrayRef<const char *> All(DefaultPipeline);
  const char *const *It = llvm::find_if(All, [](const char *Name) {
    return llvm::StringRef(Name) == "autotune";
  });
  return All.take_front(It - All.begin());
}

/// Registers a pass under the argument and description its instances report.
template <typename FactoryT>
static void add(PassRegistry &Registry, FactoryT Factory,
                bool IsTestPass = false) {
  std::unique_ptr<Pass> Probe = Factory();
  Registry.registerPass({Probe->getArgument().str(),
                         Probe->getDescription().str(), Factory, IsTestPass});
}

void mtsched::registerPipelinePasses(PassRegistry &Registry,
                                     const LoweringOptions &Options,
                                     const FusionOptions &FusionOpts,
                                     Autotuner *Session) {
  // Each factory keeps its own copy of the options it reads.
  LoweringOptions Lowering = Options;
  FusionOptions Fusion = FusionOpts;
  add(Registry, [] { return createFuseGroupedMmPass(); });
  add(Registry, [] { return createFuseMoeCombinePass(); });
  add(Registry, [] { return createFuseMoeCombineSumPass(); });
  // Immediate mode (V1): `lower` also decides each node it created, before
  // fusion; lowering itself never calls the autotuner.
  if (Lowering.Mode == CollectiveMode::Immediate)
    add(Registry, [=] { return createImmediateLowerPass(Lowering, Session); });
  else
    add(Registry, [=] { return createLowerPass(Lowering); });
  add(Registry, [=] { return createFuseSwiGluPass(Lowering); });
  add(Registry, [=] { return createFuseHorizontalPass(Lowering); });
  add(Registry, [=] { return createFusePass(Fusion); });
  add(Registry, [=] { return createAutotunePass(Session); });
  add(Registry, [=] { return createSelectSwiGluPass(Session); });
  add(Registry, [=] { return createSearchFusionPass(Session, Fusion); });
  add(Registry, [=] { return createSelectHorizontalPass(Session, Fusion); });
  add(Registry, [=] { return createSelectProloguePass(Session, Fusion); });
  add(
      Registry, [=] { return createTestPrintFusionCandidatesPass(Fusion); },
      /*IsTestPass=*/true);
  add(Registry, [] { return createVerifySchedulePass(); });
  add(
      Registry, [] { return createTestPrintSchedulePass(); },
      /*IsTestPass=*/true);
}

llvm::Expected<std::unique_ptr<Autotuner>> mtsched::createRankAutotuner(
    AutotuneOptions Tune, const FusionOptions &Fusion,
    const FusionHeuristic &Heuristic, CollectiveMode Mode, int Rank,
    Communicator &Comm, Diagnostics &Diags, const Module &M, RankHooks Hooks) {
  // An MPI process takes the GPU of its index among its host's processes
  // (the world rank on one host).
  if (!Comm.sharesAddressSpace()) {
    int Local = Comm.hostIdentity().LocalRank;
    Tune.GpuOrdinal = Local >= 0 ? Local : Rank;
  }
  llvm::Expected<std::unique_ptr<Benchmarker>> Bench =
      createLazyBenchmarker(getBuiltinBackends(), Tune, Rank, Comm);
  if (!Bench)
    return Bench.takeError();
  return std::make_unique<Autotuner>(
      Tune, Fusion, Heuristic, Mode, Comm, std::move(*Bench),
      createRooflinePredictor(Tune.Device), Diags, M, std::move(Hooks));
}
