#include "mtsched/Tools/Calibrate.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/Support/Diagnostics.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"
#include <cmath>

using namespace mtsched;

namespace {

const char *IR = R"(group @tp = [0, 1, 2, 3]
graph @g(%x: bf16[256,4096], %w: bf16[4096,4096], %b: bf16[4096]) attributes {world_size = 4} {
  %h = matmul(%x, %w) : bf16[256,4096]
  %r = all_reduce(%h) {reduce = "sum", group = "tp"} : bf16[256,4096]
  %z = add(%r, %b) : bf16[256,4096]
  %s = all_gather(%z) {group = "tp"} : bf16[1024,4096]
  %o = relu(%s) : bf16[1024,4096]
  return %o
}
)";

/// Samples of every choice (unfused and fused) and epilogue of IR's nodes
/// at several sizes, "measured" on True.
std::vector<CalibrationSample> samplesOn(const DeviceDesc &True) {
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(IR),
                        llvm::SMLoc());
  std::unique_ptr<Module> M = parseModule(SM);
  EXPECT_TRUE(M);
  Diagnostics Diags(SM);
  PassContext Ctx;
  Ctx.M = M.get();
  Ctx.Diags = &Diags;
  Graph &G = *M->getGraphs().front();
  std::unique_ptr<Pass> Passes[] = {createLowerPass(LoweringOptions()),
                                    createFusePass(FusionOptions())};
  for (std::unique_ptr<Pass> &P : Passes) {
    P->setContext(Ctx);
    EXPECT_FALSE(llvm::errorToBool(P->run(G)));
  }
  std::vector<CalibrationSample> Out;
  for (const auto &NP : G.getNodes()) {
    auto *N = llvm::dyn_cast<MultiTemplateBufferNode>(NP.get());
    if (!N)
      continue;
    bool Coll = llvm::isa<CollectiveMultiTemplateBufferNode>(N);
    for (int64_t Hint :
         Coll ? std::vector<int64_t>{8192, 262144, 4 << 20, 64 << 20}
              : std::vector<int64_t>{1, 16, 256, 4096}) {
      Workload W = describeNode(*M, G, *N, Hint);
      for (const Choice &C : N->getChoices())
        for (auto K : {CalibrationSample::Kind::Choice,
                       CalibrationSample::Kind::Fused}) {
          CalibrationSample S{K, "g", "x", W, C, 0};
          S.MeasuredUs = predictSampleUs(True, S);
          if (std::isfinite(S.MeasuredUs))
            Out.push_back(S);
        }
      CalibrationSample E{
          CalibrationSample::Kind::Epilogue, "epilogues", "e", W, Choice(), 0};
      E.MeasuredUs = predictSampleUs(True, E);
      if (W.Epilogue.NumOps)
        Out.push_back(E);
    }
  }
  return Out;
}

TEST(CalibrateTest, RecoversAnotherDevice) {
  DeviceDesc True;
  True.Name = "truth";
  True.HbmGBps = 3000;
  True.PeakBf16Tflops = 700;
  True.LinkGBps = 300;
  True.LinkLatencyUs = 0.8;
  True.LaunchUs = 3.2;
  True.BarrierUs = 2.5;
  std::vector<CalibrationSample> S = samplesOn(True);
  ASSERT_GT(S.size(), 60u);
  DeviceDesc Start; // h200
  CalibrationResult R = calibrateDevice(Start, S, "fit");
  EXPECT_EQ(R.Fitted.Name, "fit");
  EXPECT_LT(R.ObjectiveAfter, 1e-5);
  EXPECT_GT(R.ObjectiveBefore, 1e-2);
  auto Near = [](double A, double B) { return std::fabs(A / B - 1) < 0.03; };
  EXPECT_TRUE(Near(R.Fitted.HbmGBps, True.HbmGBps)) << R.Fitted.HbmGBps;
  EXPECT_TRUE(Near(R.Fitted.PeakBf16Tflops, True.PeakBf16Tflops))
      << R.Fitted.PeakBf16Tflops;
  EXPECT_TRUE(Near(R.Fitted.LinkGBps, True.LinkGBps)) << R.Fitted.LinkGBps;
  EXPECT_TRUE(Near(R.Fitted.LaunchUs, True.LaunchUs)) << R.Fitted.LaunchUs;
  EXPECT_TRUE(Near(R.Fitted.BarrierUs, True.BarrierUs)) << R.Fitted.BarrierUs;
  EXPECT_TRUE(Near(R.Fitted.LinkLatencyUs, True.LinkLatencyUs))
      << R.Fitted.LinkLatencyUs;
  for (const CalibrationError &E : R.Errors)
    EXPECT_LT(E.MaxAfter, 0.01) << E.Group;
}

TEST(CalibrateTest, KeepsWhatTheSamplesDoNotDetermine) {
  // Only collectives: the tensor-core peak moves no prediction.
  DeviceDesc True;
  True.LinkGBps = 200;
  std::vector<CalibrationSample> All = samplesOn(True), Coll;
  for (const CalibrationSample &S : All)
    if (S.W.K == Workload::Kind::Collective)
      Coll.push_back(S);
  CalibrationResult R = calibrateDevice(DeviceDesc(), Coll, "fit");
  EXPECT_TRUE(llvm::is_contained(R.Undetermined, "peak_bf16_tflops"));
  EXPECT_EQ(R.Fitted.PeakBf16Tflops, DeviceDesc().PeakBf16Tflops);
  EXPECT_NEAR(R.Fitted.LinkGBps, 200, 6);
}

TEST(CalibrateTest, ReportErrorsNameTheProblem) {
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(IR),
                        llvm::SMLoc());
  std::unique_ptr<Module> M = parseModule(SM);
  ASSERT_TRUE(M);
  auto Err = [&](llvm::StringRef Json) {
    llvm::Expected<llvm::json::Value> V = llvm::json::parse(Json);
    EXPECT_TRUE(bool(V));
    auto S = collectCalibrationSamples(M.get(), *V);
    return S ? std::string("ok") : llvm::toString(S.takeError());
  };
  EXPECT_EQ(Err("{}"), "the report has no 'nodes' list");
  EXPECT_EQ(Err(R"({"nodes": [{"graph": "@nope", "name": "%h"}]})"),
            "the report's graph '@nope' is not in the IR file");
  // Not lowered: %h is an op, not a multi-template buffer.
  EXPECT_NE(Err(R"({"nodes": [{"graph": "@g", "name": "%h"}]})")
                .find("is not a multi-template buffer"),
            std::string::npos);
  EXPECT_EQ(Err(R"({"nodes": []})"),
            "the report holds no measured times to calibrate from");
}

// A report carries each node's workload and each choice's parameters, so
// no IR is needed to calibrate from it.
TEST(CalibrateTest, ReportWorkloadsNeedNoIR) {
  llvm::Expected<llvm::json::Value> V = llvm::json::parse(R"({"nodes": [
    {"graph": "@g", "name": "%h",
     "workload": {"kind": "gemm", "batch": 1, "m": 256, "n": 1024,
                  "k": 1024, "dtype": "bf16", "bytes": 0, "ranks": 1,
                  "in_bytes": 0, "out_bytes": 0},
     "choices": [{"name": "gemm_64x64x64_w4_s4", "ms": 0.004},
                 {"name": "k", "ms": 0.002, "params": {"cost_us": 2}}]}]})");
  ASSERT_TRUE(bool(V));
  auto S = collectCalibrationSamples(nullptr, *V);
  ASSERT_TRUE(bool(S)) << llvm::toString(S.takeError());
  ASSERT_EQ(S->size(), 2u);
  EXPECT_EQ((*S)[0].W.Gemm.M, 256);
  EXPECT_EQ((*S)[0].MeasuredUs, 4);
  EXPECT_EQ((*S)[1].C.Params.getInt("cost_us"), 2);
  // Without a workload and without an IR, the node cannot be described.
  V = llvm::json::parse(R"({"nodes": [{"graph": "@g", "name": "%h"}]})");
  S = collectCalibrationSamples(nullptr, *V);
  ASSERT_FALSE(bool(S));
  EXPECT_NE(llvm::toString(S.takeError()).find("has no workload"),
            std::string::npos);
  V = llvm::json::parse(R"({"nodes": [{"graph": "@g", "name": "%h",
      "workload": {"kind": "gemm", "dtype": "q7"}}]})");
  S = collectCalibrationSamples(nullptr, *V);
  ASSERT_FALSE(bool(S));
  EXPECT_EQ(llvm::toString(S.takeError()),
            "the workload of '%h' has an unknown dtype 'q7'");
}

} // namespace
