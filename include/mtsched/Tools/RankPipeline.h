//===- RankPipeline.h - What one rank runs ----------------------*- C++ -*-===//
//
// One rank's set-up, shared by mtsched-opt's rank runner (lib/Driver), the
// heuristics lab and calibration: the default pipeline's pass list, the
// passes bound to a rank's options and autotuner, and the rank's autotuner
// itself (the backend's benchmarker, the roofline cost model, the fusion
// heuristic its caller built once). It lives in Tools, below the Driver, so
// the lab and calibration use the driver's set-up instead of a copy.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_TOOLS_RANKPIPELINE_H
#define MTSCHED_TOOLS_RANKPIPELINE_H

#include "mtsched/Autotune/Autotuner.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include <memory>

namespace mtsched {

class PassRegistry;

/// The passes `--pipeline=default` stands for, in order: the one list the
/// driver, the lab and calibration run.
inline constexpr const char *DefaultPipeline[] = {
    "fuse-grouped-mm", "lower",         "fuse-swiglu",
    "fuse-horizontal", "fuse",          "autotune",
    "select-swiglu",   "search-fusion", "select-horizontal",
    "select-prologue"};

/// The default pipeline's passes before the first one that needs an
/// autotuner ("autotune"): what lowers and fuses a graph without deciding.
llvm::ArrayRef<const char *> defaultPipelineBeforeAutotune();

/// Registers every pass, its factory bound to Lowering, Fusion and Session
/// (null where no pass needs a decision). In immediate mode (V1) `lower`
/// is the autotuner's ImmediateLowerPass.
void registerPipelinePasses(PassRegistry &Registry,
                            const LoweringOptions &Lowering,
                            const FusionOptions &Fusion, Autotuner *Session);

/// Rank's autotuner: the backend Tune names (from getBuiltinBackends(),
/// created on first use, so that a run the cache answers entirely never
/// starts a GPU context or compiles a kernel), the roofline cost model of
/// Tune.Device, and Heuristic (which must outlive it). A rank that does not
/// share this process's address space (MPI) times on GPU number Rank. Fails
/// as every rank would if the backend cannot be created.
llvm::Expected<std::unique_ptr<Autotuner>>
createRankAutotuner(AutotuneOptions Tune, const FusionOptions &Fusion,
                    const FusionHeuristic &Heuristic, CollectiveMode Mode,
                    int Rank, Communicator &Comm, Diagnostics &Diags,
                    const Module &M, RankHooks Hooks = {});

} // namespace mtsched

#endif // MTSCHED_TOOLS_RANKPIPELINE_H
