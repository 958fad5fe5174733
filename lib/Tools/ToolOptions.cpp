//===- ToolOptions.cpp - Options every tool shares ------------------------===//
#include "mtsched/Tools/ToolOptions.h"
#include "mtsched/Backend/Backends.h"
#include "mtsched/Runtime/DeviceDesc.h"

using namespace mtsched;
namespace cl = llvm::cl;

static llvm::Error fail(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

llvm::Expected<DeviceDesc> mtsched::loadDevice(llvm::StringRef Name) {
  return Name.ends_with(".json") ? loadDeviceFile(Name)
                                 : getBuiltinDevice(Name);
}

BackendToolOptions::BackendToolOptions(cl::OptionCategory &Cat, Defaults D)
    : SimNoiseDesc("Simulated timing noise, in percent (default " +
                   std::to_string(int(D.SimNoisePct)) + ")"),
      SeedDesc("Seed of the simulated noise (default " +
               std::to_string(D.Seed) + ")"),
      Backend("backend",
              cl::desc("Where choices are timed: sim (default), cuda, or "
                       "auto (cuda when it can run, else sim)"),
              cl::init("sim"), cl::cat(Cat)),
      Device("device",
             cl::desc("Simulated device: h100, h200 (default) or a JSON file"),
             cl::init("h200"), cl::cat(Cat)),
      SimNoise("sim-noise", cl::desc(SimNoiseDesc), cl::init(D.SimNoisePct),
               cl::cat(Cat)),
      Seed("seed", cl::desc(SeedDesc), cl::init(D.Seed), cl::cat(Cat)) {}

llvm::Error BackendToolOptions::apply(AutotuneOptions &Opts) const {
  Opts.Backend = Backend;
  // A backend is created when a choice first needs measuring (a warm start
  // from the cache never initialises the GPU); a bad name is an error now,
  // and auto must try its backends to know which it is.
  if (llvm::Expected<const BackendInfo &> B =
          getBuiltinBackends().resolve(Opts);
      !B)
    return B.takeError();
  llvm::Expected<DeviceDesc> Dev = loadDevice(Device);
  if (!Dev)
    return Dev.takeError();
  Opts.Device = *Dev;
  // Written so that NaN, which compares false with everything, fails too.
  if (!(SimNoise >= 0 && SimNoise < 100))
    return fail("--sim-noise must be in [0, 100)");
  Opts.SimNoisePct = SimNoise;
  Opts.Seed = Seed;
  return llvm::Error::success();
}

ChoiceToolOptions::ChoiceToolOptions(cl::OptionCategory &Cat)
    : ChoicesFile("choices-file",
                  cl::desc("JSON file replacing the built-in choice lists"),
                  cl::value_desc("file"), cl::cat(Cat)),
      DisableChoices("disable-choices", cl::desc("Choice names never offered"),
                     cl::CommaSeparated, cl::value_desc("name,..."),
                     cl::cat(Cat)),
      MaxEpilogueLength(
          "max-epilogue-length",
          cl::desc("Longest epilogue chain considered for fusion (default 8)"),
          cl::init(8), cl::cat(Cat)),
      HorizontalFusion(
          "horizontal-fusion",
          cl::desc("Let select-horizontal merge GEMMs that read one input "
                   "(Q/K/V) into one GEMM when faster (default true)"),
          cl::init(true), cl::cat(Cat)),
      PrologueFusion(
          "prologue-fusion",
          cl::desc("Let select-prologue run an RMSNorm read only by GEMMs "
                   "inside those GEMMs, while they load A, when the cost "
                   "model prices it faster (default false: not timed, and "
                   "slower on an H200)"),
          cl::init(false), cl::cat(Cat)),
      FusionSearchMode(
          "fusion-search",
          cl::desc("How fusion decisions are taken: 'greedy' (each alone, "
                   "in pass order; default) or 'recursive' (also reopen "
                   "fused epilogues where horizontal and prologue fusion "
                   "then win more; search-fusion)"),
          cl::value_desc("greedy|recursive"), cl::init("greedy"), cl::cat(Cat)),
      MaxFusionDepth(
          "max-fusion-depth",
          cl::desc("With --fusion-search=recursive: how many fused "
                   "epilogues one candidate may reopen (default 2; 0: no "
                   "bound but the search's cap of 256 sets per input)"),
          cl::init(2), cl::cat(Cat)),
      ReductionFusion(
          "reduction-fusion",
          cl::desc("Let float sum/max join the kernel of their producer "
                   "chain (the MoE combine, a softmax or mean written by "
                   "hand; default true)"),
          cl::init(true), cl::cat(Cat)),
      EpilogueThroughLayout(
          "epilogue-through-layout",
          cl::desc("Let a matmul's epilogue continue through reshape and "
                   "transpose by index substitution (the Q projection's "
                   "reshape, permute and RoPE in its kernel; default false: "
                   "slower at decode on an H200 as decided today)"),
          cl::init(false), cl::cat(Cat)),
      SwiGluFormMode(
          "swiglu-form",
          cl::desc("What select-swiglu keeps of each SwiGLU: 'measured' "
                   "(the faster form; default), 'merged' (the merged "
                   "gate+up GEMM wherever one of its choices ran) or "
                   "'split' (the two GEMMs): to time a whole graph in "
                   "either form"),
          cl::value_desc("measured|merged|split"), cl::init("measured"),
          cl::cat(Cat)),
      SwiGluSustainedUs(
          "swiglu-sustained-us",
          cl::desc("select-swiglu re-times a SwiGLU's two forms "
                   "interleaved, in samples of 20 ms after 5 ms of the "
                   "same form (the clock the GPU sustains), when either "
                   "form's autotuning time is at least this many us "
                   "(default 1000; 0: never). Short bursts favour short "
                   "kernels: at Llama-3-70B's prefill they kept the split "
                   "form, which ran slower in the layer"),
          cl::init(1000), cl::cat(Cat)),
      GemmSustainedUs(
          "gemm-sustained-us",
          cl::desc("The autotuner re-times a matmul's 3 best forms (a "
                   "choice unfused with its epilogue kernel, or fused) "
                   "interleaved at sustained load, as select-swiglu's, and "
                   "keeps the fastest, when the decided form takes at least "
                   "this many us (default 3000; 0: never)"),
          cl::init(3000), cl::cat(Cat)),
      TopologyFile("topology",
                   cl::desc("JSON file saying which host and NVLink domain "
                            "each rank is on (default: discovered, MPI's "
                            "shared-memory split and CUDA peer access)"),
                   cl::value_desc("file"), cl::cat(Cat)) {}

llvm::Error ChoiceToolOptions::apply(LoweringOptions &Lowering,
                                     FusionOptions &Fusion) const {
  if (!ChoicesFile.empty())
    if (llvm::Error E = Lowering.Choices.loadFile(ChoicesFile))
      return E;
  for (const std::string &C : DisableChoices)
    Lowering.Choices.Disabled.insert(C);
  if (!TopologyFile.empty()) {
    llvm::Expected<Topology> T = loadTopologyFile(TopologyFile);
    if (!T)
      return T.takeError();
    Lowering.Choices.Topo = std::move(*T);
    Lowering.Choices.TopologyPath = TopologyFile;
  }
  if (MaxEpilogueLength == 0)
    return fail("--max-epilogue-length must be at least 1");
  Fusion.MaxEpilogueLength = MaxEpilogueLength;
  Fusion.Horizontal = HorizontalFusion;
  Fusion.Prologue = PrologueFusion;
  if (FusionSearchMode == "greedy")
    Fusion.Search = FusionSearch::Greedy;
  else if (FusionSearchMode == "recursive")
    Fusion.Search = FusionSearch::Recursive;
  else
    return fail("--fusion-search must be 'greedy' or 'recursive', not '" +
                FusionSearchMode + "'");
  Fusion.MaxFusionDepth = MaxFusionDepth;
  Fusion.Reductions = ReductionFusion;
  Fusion.EpilogueThroughLayout = EpilogueThroughLayout;
  if (SwiGluFormMode == "measured")
    Fusion.SwiGlu = SwiGluForm::Measured;
  else if (SwiGluFormMode == "merged")
    Fusion.SwiGlu = SwiGluForm::Merged;
  else if (SwiGluFormMode == "split")
    Fusion.SwiGlu = SwiGluForm::Split;
  else
    return fail("--swiglu-form must be 'measured', 'merged' or 'split', not '" +
                SwiGluFormMode + "'");
  Fusion.SwiGluSustainedUs = SwiGluSustainedUs;
  Fusion.GemmSustainedUs = GemmSustainedUs;
  return llvm::Error::success();
}
