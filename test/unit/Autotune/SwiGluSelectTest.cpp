//===- SwiGluSelectTest.cpp - Merged or split SwiGLU ----------------------===//
#include "mtsched/Autotune/SwiGluSelect.h"
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/IR/Printer.h"
#include "mtsched/Lowering/SwiGlu.h"
#include "mtsched/Passes/PassManager.h"
#include "mtsched/Support/Diagnostics.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"
#include <limits>
#include <thread>

using namespace mtsched;

namespace {

constexpr double Inf = std::numeric_limits<double>::infinity();

TEST(SwiGluSelect, MergedStaysWithinTheTieTolerance) {
  // Two H100 runs of the same decode MLP: split ahead by 0.07%, then behind.
  EXPECT_TRUE(keepMergedSwiGlu(47.546, 47.513, 0.01));
  EXPECT_TRUE(keepMergedSwiGlu(47.491, 47.618, 0.01));
  EXPECT_TRUE(keepMergedSwiGlu(48.0, 48.0, 0.01));
  // Split faster by more than the tolerance, or the tolerance off.
  EXPECT_FALSE(keepMergedSwiGlu(49.0, 48.0, 0.01));
  EXPECT_FALSE(keepMergedSwiGlu(47.546, 47.513, 0));
  EXPECT_TRUE(keepMergedSwiGlu(47.513, 47.546, 0));
}

TEST(SwiGluSelect, AFailedFormNeverStays) {
  EXPECT_FALSE(keepMergedSwiGlu(Inf, 651.6, 0.01));
  EXPECT_TRUE(keepMergedSwiGlu(48.3, Inf, 0.01));
  EXPECT_FALSE(keepMergedSwiGlu(Inf, Inf, 0.01));
}

TEST(SwiGluSelect, TheFormFlagOverridesTheTimes) {
  // The Llama-3-70B prefill times of 2026-11-29: the split form faster.
  EXPECT_FALSE(keepMergedSwiGlu(2675.2, 2486.8, 0.01));
  EXPECT_TRUE(keepMergedSwiGlu(2675.2, 2486.8, 0.01, SwiGluForm::Merged));
  EXPECT_FALSE(keepMergedSwiGlu(606.6, 642.4, 0.01, SwiGluForm::Split));
  // A merged form none of whose choices ran cannot be forced.
  EXPECT_FALSE(keepMergedSwiGlu(Inf, 2486.8, 0.01, SwiGluForm::Merged));
  EXPECT_TRUE(keepMergedSwiGlu(606.6, Inf, 0.01, SwiGluForm::Merged));
}

} // namespace

// select-swiglu through a fake backend: the autotuner's (burst) times and
// the forms' interleaved (sustained) times are the runner's to say.
namespace {

/// What FormsRunner answers, and what it was asked (it outlives the
/// runner, which the autotuner owns).
struct FormsSetup {
  double MergedUs = 0, GemmUs = 0, EpilogueUs = 0;
  std::vector<Measurement> Sustained;
  /// Per measureForms call, per form, its kernels' ops (an epilogue alone
  /// as silu).
  std::vector<std::vector<std::vector<OpCode>>> Asked;
};

/// Burst times (merged, each GEMM, the epilogue) and the sustained
/// re-timing's answers for the merged and the split form.
FormsSetup forms(double MergedUs, double GemmUs, double EpilogueUs,
                 Measurement SustainedMerged, Measurement SustainedSplit) {
  FormsSetup S;
  S.MergedUs = MergedUs;
  S.GemmUs = GemmUs;
  S.EpilogueUs = EpilogueUs;
  S.Sustained = {SustainedMerged, SustainedSplit};
  return S;
}

Measurement ok(double Us) { return Measurement{ChoiceStatus::Ok, Us, ""}; }

/// Llama-3-70B's prefill on an H200 (2026-11-29): the split form faster
/// in bursts (2 x 1200 + 80 us against 2754.6).
FormsSetup llama70bPrefill(Measurement SustainedMerged,
                           Measurement SustainedSplit) {
  return forms(2754.6, 1200, 80, SustainedMerged, SustainedSplit);
}

/// Every merged choice takes MergedUs, every GEMM choice GemmUs (fused: far
/// slower), an epilogue alone EpilogueUs; measureForms answers Sustained.
class FormsRunner : public Runner {
public:
  explicit FormsRunner(FormsSetup &S) : S(S) {}

  Measurement measure(const MultiTemplateBufferNode &N, const Workload &,
                      const Choice &, bool Fused,
                      const BuildResult &) override {
    double Us = N.getOp() == OpCode::SwiGlu ? S.MergedUs : S.GemmUs;
    return Measurement{ChoiceStatus::Ok, Fused ? Us * 10 : Us, ""};
  }
  Measurement measureEpilogue(const MultiTemplateBufferNode &,
                              const Workload &) override {
    return Measurement{ChoiceStatus::Ok, S.EpilogueUs, ""};
  }
  std::vector<Measurement>
  measureForms(llvm::ArrayRef<std::vector<FormKernel>> Forms,
               const SustainedProtocol &P) override {
    EXPECT_GE(P.SampleUs, 10000u);
    auto &Call = S.Asked.emplace_back();
    for (const std::vector<FormKernel> &F : Forms) {
      auto &Ops = Call.emplace_back();
      for (const FormKernel &K : F)
        Ops.push_back(K.C ? K.N->getOp() : OpCode::Silu);
    }
    return S.Sustained;
  }

private:
  FormsSetup &S;
};

const char *SwiGlu70B =
    R"(graph @swiglu_70b(%h: bf16[2048,8192], %wg: bf16[8192,28672], %wu: bf16[8192,28672]) {
  %g = matmul(%h, %wg) : bf16[2048,28672]
  %u = matmul(%h, %wu) : bf16[2048,28672]
  %gs = silu(%g) : bf16[2048,28672]
  %gu = mul(%gs, %u) : bf16[2048,28672]
  return %gu
}
)";

/// The decided IR of SwiGlu70B through lower, fuse-swiglu, fuse, autotune
/// and select-swiglu, timed as Setup says, on Comm's rank (one rank of its
/// own without).
std::string decide(FormsSetup &Setup, unsigned SustainedUs = 1000,
                   Communicator *Comm = nullptr) {
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(SwiGlu70B, "t.mir"), llvm::SMLoc());
  std::unique_ptr<Module> M = parseModule(SM);
  EXPECT_TRUE(M);
  Diagnostics Diags(SM);
  SingleCommunicator One;
  AutotuneOptions Opts;
  FusionOptions Fusion;
  Fusion.SwiGluSustainedUs = SustainedUs;
  std::unique_ptr<FusionHeuristic> Heuristic =
      llvm::cantFail(createFusionHeuristic(Fusion.Heuristic));
  Autotuner Session(Opts, Fusion, *Heuristic, CollectiveMode::Deferred,
                    Comm ? *Comm : One,
                    std::make_unique<Benchmarker>(
                        "fake", "unversioned", createTrivialBuilder(),
                        std::make_unique<FormsRunner>(Setup)),
                    createRooflinePredictor(Opts.Device), Diags, *M);
  LoweringOptions Lower;
  PassContext Ctx{M.get(), &Diags, &llvm::nulls()};
  PassManager PM(PassManagerOptions(), Ctx, llvm::nulls());
  PM.addPass(createLowerPass(Lower));
  PM.addPass(createFuseSwiGluPass(Lower));
  PM.addPass(createFusePass(Fusion));
  PM.addPass(createAutotunePass(&Session));
  PM.addPass(createSelectSwiGluPass(&Session));
  if (llvm::Error E = PM.run(*M)) {
    ADD_FAILURE() << llvm::toString(std::move(E));
    return "";
  }
  return moduleToString(*M);
}

bool has(const std::string &IR, const char *S) {
  return IR.find(S) != std::string::npos;
}

TEST(SwiGluSustained, LongFormsAreDecidedByTheirSustainedTimes) {
  // Merged faster under sustained load.
  FormsSetup Run = llama70bPrefill(ok(2641.3), ok(2690.5));
  std::string IR = decide(Run);
  EXPECT_TRUE(has(IR, "= multi_template_buffer swiglu(%h, %wg, %wu)")) << IR;
  EXPECT_FALSE(has(IR, "matmul(%h")) << IR;
  EXPECT_TRUE(has(IR, "swiglu_timing = \"sustained\"")) << IR;
  EXPECT_TRUE(has(IR, "swiglu_burst_merged_us = 2754.6")) << IR;
  // The merged form: its one GEMM; the split form: both GEMMs and any
  // epilogue they left unfused, as kernels of their own.
  ASSERT_EQ(Run.Asked.size(), 1u);
  ASSERT_EQ(Run.Asked[0].size(), 2u);
  EXPECT_EQ(Run.Asked[0][0], std::vector<OpCode>{OpCode::SwiGlu});
  EXPECT_EQ(llvm::count(Run.Asked[0][1], OpCode::MatMul), 2);
}

TEST(SwiGluSustained, SustainedTimesCanKeepTheSplitForm) {
  FormsSetup Run = forms(2400, 1250, 80, ok(2900), ok(2700));
  std::string IR = decide(Run);
  EXPECT_TRUE(has(IR, "matmul(%h, %wg)")) << IR;
  EXPECT_FALSE(has(IR, "swiglu(%h")) << IR;
  EXPECT_TRUE(has(IR, "swiglu_merged_us = 2900")) << IR;
  EXPECT_TRUE(has(IR, "swiglu_timing = \"sustained\"")) << IR;
}

TEST(SwiGluSustained, AFailedRetimeLeavesTheBurstDecisionAndSaysWhy) {
  FormsSetup Run = llama70bPrefill(
      ok(2641.3), Measurement{ChoiceStatus::Failed, 0, "no kernel"});
  std::string IR = decide(Run);
  EXPECT_TRUE(has(IR, "matmul(%h, %wg)")) << IR;
  EXPECT_TRUE(has(IR, "swiglu_merged_us = 2754.6")) << IR;
  EXPECT_TRUE(has(IR, "swiglu_timing = \"burst\"")) << IR;
  EXPECT_TRUE(has(IR, "swiglu_sustained_failed = \"split: no kernel\"")) << IR;
}

TEST(SwiGluSustained, ShortFormsAndTheFlagOffKeepTheBurstTimes) {
  // Decode-sized times: nothing re-timed, the IR as before.
  FormsSetup Run = forms(60, 25, 3, ok(1), ok(1000));
  std::string IR = decide(Run);
  EXPECT_TRUE(Run.Asked.empty());
  EXPECT_TRUE(has(IR, "matmul(%h, %wg)")) << IR;
  EXPECT_FALSE(has(IR, "swiglu_timing")) << IR;
  FormsSetup Off = llama70bPrefill(ok(1), ok(1000));
  IR = decide(Off, /*SustainedUs=*/0);
  EXPECT_TRUE(Off.Asked.empty());
  EXPECT_TRUE(has(IR, "matmul(%h, %wg)")) << IR;
  EXPECT_FALSE(has(IR, "swiglu_timing")) << IR;
}

TEST(SwiGluSustained, RanksDecideFromTheSlowestRanksSustainedTimes) {
  // Rank 0 alone would keep the merged form; rank 1's slower merged time
  // wins the max-reduction: both ranks keep the split form.
  ThreadGroup Group(2);
  std::vector<FormsSetup> Setups(2);
  std::vector<std::string> IR(2);
  std::vector<std::thread> Threads;
  for (int R = 0; R < 2; ++R) {
    Setups[R] = llama70bPrefill(ok(R ? 2990.0 : 2600.0), ok(2700));
    Threads.emplace_back([&, R] {
      std::unique_ptr<Communicator> Comm = Group.get(R);
      IR[R] = decide(Setups[R], 1000, Comm.get());
    });
  }
  for (std::thread &T : Threads)
    T.join();
  EXPECT_EQ(IR[0], IR[1]);
  EXPECT_TRUE(has(IR[0], "matmul(%h, %wg)")) << IR[0];
  EXPECT_TRUE(has(IR[0], "swiglu_merged_us = 2990")) << IR[0];
  EXPECT_EQ(Setups[0].Asked.size(), 1u);
  EXPECT_EQ(Setups[1].Asked.size(), 1u);
}

} // namespace
