//===- CudaTest.cpp - The cuda backend on a real GPU ----------------------===//
//
// Every test skips, saying why, where no GPU can be used (CI); on a GPU
// machine scripts/gpu-test.sh runs them.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaBenchSupport.h"
#include "mtsched/Backend/Cuda/CudaBenchmarker.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/IR/Verifier.h"
#include "mtsched/Lowering/ChoiceConfig.h"
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/Reference/Interpreter.h"
#include "mtsched/Reference/RandomInputs.h"
#include "mtsched/Runtime/Communicator.h"
#include "mtsched/Schedule/Fusion.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"
#include <cmath>
#include <iostream>

using namespace mtsched;

/// The one rank the single-GPU tests run as.
static SingleCommunicator Solo;
using namespace mtsched::cuda;

namespace {

struct Lowered {
  llvm::SourceMgr SM;
  std::unique_ptr<Module> M;
};

std::unique_ptr<Lowered> lower(llvm::StringRef Text) {
  auto L = std::make_unique<Lowered>();
  L->SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(Text, "t.mir"),
                           llvm::SMLoc());
  L->M = parseModule(L->SM);
  if (!L->M)
    return nullptr;
  for (auto &G : L->M->getGraphs()) {
    if (llvm::Error E = createLowerPass(LoweringOptions())->run(*G)) {
      llvm::consumeError(std::move(E));
      return nullptr;
    }
    if (llvm::Error E = createFusePass(FusionOptions())->run(*G)) {
      llvm::consumeError(std::move(E));
      return nullptr;
    }
  }
  return L;
}

#define REQUIRE_GPU()                                                          \
  do {                                                                         \
    llvm::Expected<cuda::DeviceInfo> Dev = cuda::openDevice();                 \
    if (!Dev)                                                                  \
      GTEST_SKIP() << "no usable GPU: " << llvm::toString(Dev.takeError());    \
  } while (0)

} // namespace

TEST(Interpreter, Bf16RoundTrip) {
  EXPECT_EQ(bf16ToFloat(floatToBF16(1.0f)), 1.0f);
  EXPECT_EQ(f16ToFloat(floatToF16(0.5f)), 0.5f);
  EXPECT_EQ(f16ToFloat(floatToF16(65504.0f)), 65504.0f);
  EXPECT_NEAR(roundTo(1.00390625, DType::BF16), 1.0, 1e-9); // ties to even
}

TEST(CudaBackend, ExplainsWhyItCannotRun) {
  llvm::Expected<cuda::DeviceInfo> Dev = cuda::openDevice();
  if (Dev)
    GTEST_SKIP() << "a GPU is present (" << Dev->Name << ")";
  std::string Why = llvm::toString(Dev.takeError());
  EXPECT_FALSE(Why.empty());
  AutotuneOptions Opts;
  Opts.Backend = "cuda";
  // Without the driver library the backend refuses at once; with it (but
  // no usable GPU) opening the device says why, and so does every
  // measurement, since the GPU opens lazily.
  auto B = createCudaBenchmarker(Opts, 0, Solo);
  if (B) {
    llvm::Error E = openCudaDevice(Opts);
    ASSERT_TRUE(bool(E));
    EXPECT_NE(llvm::toString(std::move(E)).find("cannot run here"),
              std::string::npos);
    return;
  }
  EXPECT_NE(llvm::toString(B.takeError()).find("cannot run here"),
            std::string::npos);
}

TEST(CudaBackend, EveryGemmChoiceMatchesTheReference) {
  REQUIRE_GPU();
  // Not tile multiples anywhere: predicated loads and stores.
  for (const char *Ty : {"bf16", "f16", "f32"}) {
    std::string Src = std::string(R"(
graph @g(%x: T[100,200], %w: T[200,72], %b: T[72]) {
  %y = matmul(%x, %w) : T[100,72]
  %z = add(%y, %b) : T[100,72]
  %o = gelu(%z) : T[100,72]
  return %o
})");
    for (size_t P; (P = Src.find("T[")) != std::string::npos;)
      Src.replace(P, 1, Ty);
    auto L = lower(Src);
    ASSERT_TRUE(L) << Ty;
    const Graph &G = *L->M->getGraphs()[0];
    const auto &N = *llvm::cast<MultiTemplateBufferNode>(G.getNodes()[0].get());
    AutotuneOptions Opts;
    Opts.Backend = "cuda";
    Opts.BenchRuns = 3;
    auto B = createCudaBenchmarker(Opts, 0, Solo);
    ASSERT_TRUE(bool(B)) << llvm::toString(B.takeError());
    Workload W = describeNode(*L->M, G, N);
    unsigned Ok = 0;
    for (const Choice &C : N.getChoices())
      for (bool Fused : {false, true}) {
        if (Fused && C.isExtern())
          continue;
        Measurement M =
            (*B)->getRunner().measure(N, W, C, Fused, BuildResult());
        EXPECT_EQ(M.Status, ChoiceStatus::Ok)
            << Ty << " " << C.Name << (Fused ? " fused: " : ": ") << M.Message;
        Ok += M.Status == ChoiceStatus::Ok;
      }
    EXPECT_GT(Ok, 2u);
    Measurement E = (*B)->getRunner().measureEpilogue(N, W);
    EXPECT_EQ(E.Status, ChoiceStatus::Ok) << E.Message;
  }
}

/// Every choice of conv2d (lib/OpUnits/Conv2d.cpp) measured by the
/// benchmarker, which checks its result against the fp64 reference: the
/// implicit-GEMM tiles, the direct kernel, and cuDNN where it loads (where
/// not, the choice fails saying so and the others still run).
TEST(CudaBackend, EveryConvChoiceMatchesTheReference) {
  REQUIRE_GPU();
  const char *Graphs[] = {
      R"(graph @dense(%x: bf16[4,64,28,28], %w: bf16[96,64,3,3], %b: bf16[96]) {
  %y = conv2d(%x, %w, %b) {padding = 1} : bf16[4,96,28,28]
  return %y
})",
      R"(graph @grouped(%x: f32[2,48,13,11], %w: f32[64,24,3,3], %b: f32[64]) {
  %y = conv2d(%x, %w, %b) {padding = [2, 1], dilation = [2, 1], groups = 2} : f32[2,64,13,11]
  return %y
})",
      R"(graph @depthwise(%x: bf16[2,96,14,14], %w: bf16[96,1,7,7], %b: bf16[96]) {
  %y = conv2d(%x, %w, %b) {padding = 3, groups = 96} : bf16[2,96,14,14]
  return %y
})",
      R"(graph @patch(%x: f16[2,3,64,64], %w: f16[192,3,16,16]) {
  %y = conv2d(%x, %w) {stride = 16} : f16[2,192,4,4]
  return %y
})"};
  for (const char *Src : Graphs) {
    auto L = lower(Src);
    ASSERT_TRUE(L) << Src;
    const Graph &G = *L->M->getGraphs()[0];
    const auto &N = *llvm::cast<MultiTemplateBufferNode>(G.getNodes()[0].get());
    AutotuneOptions Opts;
    Opts.Backend = "cuda";
    Opts.BenchRuns = 3;
    auto B = createCudaBenchmarker(Opts, 0, Solo);
    ASSERT_TRUE(bool(B)) << llvm::toString(B.takeError());
    Workload W = describeNode(*L->M, G, N);
    ASSERT_EQ(W.K, Workload::Kind::OpUnit);
    unsigned Ok = 0;
    for (const Choice &C : N.getChoices()) {
      Measurement M = (*B)->getRunner().measure(N, W, C, false, BuildResult());
      if (C.Name == "extern.cudnn" && M.Status != ChoiceStatus::Ok) {
        EXPECT_EQ(M.Status, ChoiceStatus::Failed) << M.Message;
        EXPECT_NE(M.Message.find("cuDNN cannot be loaded"), std::string::npos)
            << G.getName() << ": " << M.Message;
        continue;
      }
      EXPECT_EQ(M.Status, ChoiceStatus::Ok)
          << G.getName() << " " << C.Name << ": " << M.Message;
      Ok += M.Status == ChoiceStatus::Ok;
      std::cout << "[ conv2d ] @" << G.getName() << " " << C.Name << ": "
                << M.Us << " us\n";
    }
    EXPECT_GE(Ok, 2u) << G.getName();
  }
}

TEST(CudaBackend, FusedRmsNormMatchesTheReference) {
  REQUIRE_GPU();
  auto L = lower(R"(
graph @g(%x: bf16[300,512], %w: bf16[512,256], %r: bf16[300,256], %g: bf16[256]) {
  %y = matmul(%x, %w) : bf16[300,256]
  %s = add(%y, %r) : bf16[300,256]
  %o = rmsnorm(%s, %g) {eps = 1.0e-05} : bf16[300,256]
  return %o
})");
  ASSERT_TRUE(L);
  const Graph &G = *L->M->getGraphs()[0];
  const auto &N = *llvm::cast<MultiTemplateBufferNode>(G.getNodes()[0].get());
  AutotuneOptions Opts;
  Opts.Backend = "cuda";
  Opts.BenchRuns = 3;
  auto B = createCudaBenchmarker(Opts, 0, Solo);
  ASSERT_TRUE(bool(B));
  Workload W = describeNode(*L->M, G, N);
  Choice C;
  C.Name = gemmChoiceName({128, 256, 64, 8, 3});
  Measurement M = (*B)->getRunner().measure(N, W, C, true, BuildResult());
  EXPECT_EQ(M.Status, ChoiceStatus::Ok) << M.Message;
}

TEST(CudaBackend, WgmmaChoicesMatchTheReference) {
  REQUIRE_GPU();
  // Shapes that are not tile multiples, f16, a batched B, and each kind of
  // fused epilogue: bias + relu, residual + gelu, rmsnorm and softmax.
  auto L = lower(R"(
graph @bias_relu(%x: bf16[300,200], %w: bf16[200,264], %b: bf16[264]) {
  %y = matmul(%x, %w) : bf16[300,264]
  %z = add(%y, %b) : bf16[300,264]
  %o = relu(%z) : bf16[300,264]
  return %o
}
graph @res_gelu(%x: f16[130,520], %w: f16[520,136], %r: f16[130,136]) {
  %y = matmul(%x, %w) : f16[130,136]
  %z = add(%y, %r) : f16[130,136]
  %o = gelu(%z) : f16[130,136]
  return %o
}
graph @batched(%x: bf16[3,100,72], %w: bf16[3,72,200], %b: bf16[200]) {
  %y = matmul(%x, %w) : bf16[3,100,200]
  %o = add(%y, %b) : bf16[3,100,200]
  return %o
}
graph @res_rms(%x: bf16[200,192], %w: bf16[192,256], %r: bf16[200,256], %g: bf16[256]) {
  %y = matmul(%x, %w) : bf16[200,256]
  %s = add(%y, %r) : bf16[200,256]
  %o = rmsnorm(%s, %g) {eps = 1.0e-05} : bf16[200,256]
  return %o
}
graph @soft(%x: bf16[96,128], %w: bf16[128,128]) {
  %y = matmul(%x, %w) : bf16[96,128]
  %o = softmax(%y) : bf16[96,128]
  return %o
})");
  ASSERT_TRUE(L);
  llvm::Expected<cuda::DeviceInfo> Dev = cuda::openDevice();
  ASSERT_TRUE(bool(Dev));
  bool Hopper = Dev->Major == 9 && Dev->Minor == 0;
  AutotuneOptions Opts;
  Opts.Backend = "cuda";
  Opts.BenchRuns = 3;
  auto B = createCudaBenchmarker(Opts, 0, Solo);
  ASSERT_TRUE(bool(B)) << llvm::toString(B.takeError());
  unsigned Ok = 0;
  for (auto &G : L->M->getGraphs()) {
    const auto &N =
        *llvm::cast<MultiTemplateBufferNode>(G->getNodes()[0].get());
    Workload W = describeNode(*L->M, *G, N);
    for (const Choice &C : N.getChoices()) {
      std::optional<GemmTileConfig> T = gemmTileOf(C);
      if (!T || T->Template != GemmTemplate::Wgmma)
        continue;
      for (bool Fused : {false, true}) {
        if (Fused && N.getEpilogue().empty())
          continue;
        Measurement M =
            (*B)->getRunner().measure(N, W, C, Fused, BuildResult());
        std::string What = "@" + G->getName() + " " + C.Name +
                           (Fused ? " fused: " : ": ") + M.Message;
        if (!Hopper) {
          EXPECT_NE(M.Message.find("needs an sm_90 GPU"), std::string::npos)
              << What;
          continue;
        }
        // A row reduction needs the whole row in one CTA (N <= BN).
        if (Fused && M.Message.find("whole row") != std::string::npos)
          continue;
        EXPECT_EQ(M.Status, ChoiceStatus::Ok) << What;
        Ok += M.Status == ChoiceStatus::Ok;
      }
    }
  }
  if (Hopper)
    EXPECT_GT(Ok, 20u);
}

TEST(CudaBackend, RunsAGraphEndToEnd) {
  REQUIRE_GPU();
  auto L = lower(R"(
graph @g(%x: bf16[64,128], %w: bf16[128,256], %b: bf16[256], %g: bf16[256]) {
  %y = matmul(%x, %w) : bf16[64,256]
  %z = add(%y, %b) : bf16[64,256]
  %a = silu(%z) : bf16[64,256]
  %s = softmax(%a) : bf16[64,256]
  %n = rmsnorm(%s, %g) : bf16[64,256]
  %m = max(%n) : bf16[64]
  return %n, %m
})");
  ASSERT_TRUE(L);
  Graph &G = *L->M->getGraphs()[0];
  auto *N = llvm::cast<MultiTemplateBufferNode>(G.getNodes()[0].get());
  N->setDecision(N->getChoices().front().Name);
  std::string Log;
  llvm::raw_string_ostream OS(Log);
  RunIO IO;
  IO.Seed = 1;
  llvm::Error E = runGraphOnGpu(G, IO, OS);
  EXPECT_FALSE(bool(E)) << llvm::toString(std::move(E)) << OS.str();
  EXPECT_NE(OS.str().find("output %n matches"), std::string::npos) << Log;
}

//===----------------------------------------------------------------------===//
// The benchmarker's support kernels: GPU fills equal the host's values, GPU
// reference rows equal the host's fp64 sums.
//===----------------------------------------------------------------------===//

TEST(BenchSupport, CompilesWithNvrtc) {
  llvm::Expected<const cuda::NvrtcApi &> N = cuda::loadNvrtc();
  if (!N)
    GTEST_SKIP() << "NVRTC not available: " << llvm::toString(N.takeError());
  llvm::Expected<std::string> Cubin = cuda::compileToCubin(
      cuda::benchSupportSource(), "mtsched_bench_support", 90, false);
  EXPECT_TRUE(bool(Cubin)) << (Cubin ? "" : llvm::toString(Cubin.takeError()));
}

namespace {

/// Device bytes of N elements of type T at P, as doubles.
std::vector<double> readBack(const cuda::DriverApi &D, CUdeviceptr P, int64_t N,
                             DType T) {
  std::vector<double> Out(N);
  if (T == DType::F32) {
    std::vector<float> F(N);
    EXPECT_EQ(D.cuMemcpyDtoH(F.data(), P, N * 4), CUDA_SUCCESS);
    std::copy(F.begin(), F.end(), Out.begin());
    return Out;
  }
  std::vector<uint16_t> H(N);
  EXPECT_EQ(D.cuMemcpyDtoH(H.data(), P, N * 2), CUDA_SUCCESS);
  for (int64_t I = 0; I < N; ++I)
    Out[I] = T == DType::BF16 ? bf16ToFloat(H[I]) : f16ToFloat(H[I]);
  return Out;
}

} // namespace

TEST(BenchSupport, FillsTheValuesTheHostDraws) {
  REQUIRE_GPU();
  llvm::Expected<cuda::DeviceInfo> Dev = cuda::openDevice();
  ASSERT_FALSE(bool(cuda::makeCurrent(*Dev)));
  const cuda::DriverApi &D = *cuda::loadDriver();
  auto S = cuda::BenchSupport::load(D, Dev->Major * 10 + Dev->Minor,
                                    cuda::KernelCompileOptions());
  ASSERT_TRUE(bool(S)) << llvm::toString(S.takeError());
  // Odd sizes: the grid-stride loop's tail, more elements than threads.
  for (DType T : {DType::BF16, DType::F16, DType::F32})
    for (int64_t N : {int64_t(1), int64_t(1000), int64_t(3 << 20) + 7}) {
      CUdeviceptr P;
      ASSERT_EQ(D.cuMemAlloc(&P, N * dtypeBytes(T)), CUDA_SUCCESS);
      ASSERT_FALSE(
          bool((*S)->fill(P, N, T, /*Seed=*/5, /*Stream=*/2, nullptr)));
      ASSERT_EQ(D.cuCtxSynchronize(), CUDA_SUCCESS);
      std::vector<double> Got = readBack(D, P, N, T);
      std::vector<double> Want = randomValues(N, 5, 2, T);
      int64_t Diff = 0;
      for (int64_t I = 0; I < N; ++I)
        Diff += Got[I] != Want[I];
      EXPECT_EQ(Diff, 0) << dtypeName(T).str() << " N=" << N;
      D.cuMemFree(P);
    }
}

TEST(BenchSupport, ReferenceRowsMatchTheHost) {
  REQUIRE_GPU();
  llvm::Expected<cuda::DeviceInfo> Dev = cuda::openDevice();
  ASSERT_FALSE(bool(cuda::makeCurrent(*Dev)));
  const cuda::DriverApi &D = *cuda::loadDriver();
  auto S = cuda::BenchSupport::load(D, Dev->Major * 10 + Dev->Minor,
                                    cuda::KernelCompileOptions());
  ASSERT_TRUE(bool(S)) << llvm::toString(S.takeError());
  // A batched B: rows 0..M1-1 use batch 0, the next M1 batch 1.
  const int64_t M1 = 3, Batch = 2, K = 77, N = 301;
  CUdeviceptr A, B;
  ASSERT_EQ(D.cuMemAlloc(&A, Batch * M1 * K * 2), CUDA_SUCCESS);
  ASSERT_EQ(D.cuMemAlloc(&B, Batch * K * N * 2), CUDA_SUCCESS);
  ASSERT_FALSE(bool((*S)->fill(A, Batch * M1 * K, DType::BF16, 1, 0, nullptr)));
  ASSERT_FALSE(bool((*S)->fill(B, Batch * K * N, DType::BF16, 1, 1, nullptr)));
  std::vector<double> Ah = randomValues(Batch * M1 * K, 1, 0, DType::BF16);
  std::vector<double> Bh = randomValues(Batch * K * N, 1, 1, DType::BF16);
  std::vector<int64_t> Rows = {0, 2, 4, 5};
  auto Got = (*S)->gemmRows(A, B, DType::BF16, Rows, K, N, M1,
                            /*BatchedB=*/true, nullptr);
  ASSERT_TRUE(bool(Got)) << llvm::toString(Got.takeError());
  for (size_t I = 0; I < Rows.size(); ++I)
    for (int64_t C = 0; C < N; ++C) {
      double Want = 0;
      int64_t R = Rows[I], Bt = R / M1;
      for (int64_t Kk = 0; Kk < K; ++Kk)
        Want += Ah[R * K + Kk] * Bh[Bt * K * N + Kk * N + C];
      ASSERT_NEAR((*Got)[I][C], Want, 1e-12 * (1 + std::fabs(Want)))
          << "row " << R << " column " << C;
    }
  D.cuMemFree(A);
  D.cuMemFree(B);
}

namespace {

/// Launches a kernel that spins until a flag no one sets, then waits for
/// it with a 500 ms watchdog: the process must end there.
[[noreturn]] void waitForASpinningKernel() {
  llvm::Expected<cuda::DeviceInfo> Dev = cuda::openDevice();
  if (!Dev || cuda::makeCurrent(*Dev))
    std::exit(2);
  const cuda::DriverApi &D = *cuda::loadDriver();
  llvm::Expected<std::string> Cubin = cuda::compileToCubin(
      "extern \"C\" __global__ void mt_spin(volatile int *f) {\n"
      "  while (*f == 0) {}\n}\n",
      "mt_spin", Dev->Major * 10 + Dev->Minor);
  CUmodule Mod;
  CUfunction Fn;
  CUdeviceptr Flag;
  CUstream S;
  if (!Cubin || D.cuModuleLoadData(&Mod, Cubin->data()) ||
      D.cuModuleGetFunction(&Fn, Mod, "mt_spin") || D.cuMemAlloc(&Flag, 4) ||
      D.cuStreamCreate(&S, CU_STREAM_NON_BLOCKING) ||
      D.cuMemsetD8Async(Flag, 0, 4, S))
    std::exit(3);
  void *Args[] = {&Flag};
  if (D.cuLaunchKernel(Fn, 1, 1, 1, 32, 1, 1, 0, S, Args, nullptr))
    std::exit(4);
  cuda::syncStream(D, S, "the spinning test kernel",
                   std::chrono::milliseconds(500));
  std::exit(0); // not reached: the watchdog ends the process
}

} // namespace

// A kernel that never ends (a deadlocked template) must end the process in
// bounded time, saying what hung, instead of a host wait that never
// returns (the 256-row wgmma tiles once hung an autotune this way).
TEST(CudaBackend, AHungKernelEndsTheProcess) {
  REQUIRE_GPU();
  // The child runs the test again from the start: no CUDA state crosses a
  // fork.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(waitForASpinningKernel(), ::testing::ExitedWithCode(1),
              "the spinning test kernel did not finish on the GPU within 500 "
              "ms");
}

//===----------------------------------------------------------------------===//
// The runtime library's cuda path (prepareGraphOnGpu): a decided graph run
// on buffers the caller allocated, replayed with the same pointers, then
// with an input and the outputs moved (a graph captured per binding, an
// earlier binding replayed again), then an output that keeps moving
// (staged once the captures are spent), each time against the fp64
// interpreter on the same values, then an input that keeps moving (staged
// through a buffer allocated again); its counters say so.
//===----------------------------------------------------------------------===//

TEST(CudaRuntime, RunsOnTheCallersBuffers) {
  REQUIRE_GPU();
  auto L = lower(R"(
graph @g(%x: bf16[64,128], %w: bf16[128,256], %b: bf16[256], %g: bf16[256]) {
  %y = matmul(%x, %w) : bf16[64,256]
  %z = add(%y, %b) : bf16[64,256]
  %a = silu(%z) : bf16[64,256]
  %n = rmsnorm(%a, %g) : bf16[64,256]
  %m = max(%n) : bf16[64]
  return %n, %m
})");
  ASSERT_TRUE(L);
  Graph &G = *L->M->getGraphs()[0];
  auto *N = llvm::cast<MultiTemplateBufferNode>(G.getNodes()[0].get());
  N->setDecision(N->getChoices().front().Name);
  RunIO IO;
  llvm::Expected<std::unique_ptr<PreparedGraph>> P = prepareGraphOnGpu(G, IO);
  ASSERT_TRUE(bool(P)) << llvm::toString(P.takeError());
  const cuda::DriverApi &D = *cuda::loadDriver();

  std::vector<CUdeviceptr> Owned;
  auto Alloc = [&](size_t Bytes) {
    CUdeviceptr X = 0;
    EXPECT_EQ(D.cuMemAlloc(&X, Bytes), CUDA_SUCCESS);
    Owned.push_back(X);
    return X;
  };
  // Seeded bf16 values per input (Salt changes x's), on the host for the
  // reference and in a new device buffer.
  auto Upload = [&](const Value &V, unsigned Salt, ValueData &Host) {
    int64_t Count = V.getType().numElements();
    std::vector<double> F(Count);
    std::vector<uint16_t> H(Count);
    for (int64_t I = 0; I < Count; ++I) {
      H[I] = floatToBF16(float(std::sin(0.37 * I + Salt + V.getName()[0])));
      F[I] = bf16ToFloat(H[I]);
    }
    Host[&V] = HostValues(std::move(F));
    CUdeviceptr X = Alloc(Count * 2);
    EXPECT_EQ(D.cuMemcpyHtoDAsync(X, H.data(), Count * 2, nullptr),
              CUDA_SUCCESS);
    EXPECT_EQ(D.cuStreamSynchronize(nullptr), CUDA_SUCCESS);
    return X;
  };
  auto Check = [&](ValueData Host, const std::vector<CUdeviceptr> &Outs,
                   const char *When) {
    for (const auto &X : G.getNodes())
      ASSERT_FALSE(bool(interpretNode(*X, Host))) << When;
    for (size_t I = 0; I < G.getOutputs().size(); ++I) {
      const Value *V = G.getOutputs()[I].V;
      std::vector<double> Got =
          readBack(D, Outs[I], V->getType().numElements(), DType::BF16);
      const std::vector<double> &Ref = Host[V].floats();
      double E2 = 0, R2 = 0;
      for (size_t K = 0; K < Got.size(); ++K) {
        E2 += (Got[K] - Ref[K]) * (Got[K] - Ref[K]);
        R2 += Ref[K] * Ref[K];
      }
      EXPECT_LE(std::sqrt(E2 / std::max(R2, 1e-30)), 2e-2)
          << When << ": output %" << V->getName();
    }
  };

  ValueData Host;
  std::vector<CUdeviceptr> Ins;
  for (const auto &In : G.getInputs())
    Ins.push_back(Upload(*In, 0, Host));
  std::vector<CUdeviceptr> Outs;
  for (const Operand &O : G.getOutputs())
    Outs.push_back(Alloc(O.V->getType().numBytes()));
  auto Run = [&](const char *When) {
    std::vector<void *> I, O;
    for (CUdeviceptr X : Ins)
      I.push_back(reinterpret_cast<void *>(X));
    for (CUdeviceptr X : Outs)
      O.push_back(reinterpret_cast<void *>(X));
    llvm::Error E = (*P)->run(I.data(), O.data(), nullptr);
    ASSERT_FALSE(bool(E)) << When << ": " << llvm::toString(std::move(E));
    ASSERT_EQ(D.cuStreamSynchronize(nullptr), CUDA_SUCCESS) << When;
  };
  auto Stat = [&](const char *Name) { return (*P)->stat(Name); };
  // Every kernel's cubin came from the kernel cache or NVRTC; the values
  // the kernels write (the outputs %n and %m at least) from one arena.
  EXPECT_GT(Stat("kernels"), 0);
  EXPECT_EQ(Stat("kernels_cached") + Stat("kernels_compiled"), Stat("kernels"));
  EXPECT_GE(Stat("arena_bytes"), int64_t(64 * 256 * 2 + 256));
  EXPECT_EQ(Stat("no_such_counter"), -1);
  int64_t Allocations = Stat("allocations");
  Run("first run (binds)");
  Check(Host, Outs, "first run");
  // The four inputs' own buffers are freed once the caller's are bound.
  EXPECT_EQ(Stat("allocations"), Allocations - 4);
  Run("second run (replays)");
  Check(Host, Outs, "second run");
  EXPECT_EQ(Stat("captures"), 1);
  ValueData Host0 = Host;
  std::vector<CUdeviceptr> Ins0 = Ins, Outs0 = Outs;
  // x moves to a new buffer with new values, the outputs to new buffers:
  // a second binding, captured, nothing staged.
  Ins[0] = Upload(*G.getInputs()[0], 1, Host);
  for (CUdeviceptr &X : Outs)
    X = Alloc(64 * 256 * 2);
  Run("third run (rebound)");
  Check(Host, Outs, "third run");
  // A weight moves to a new buffer with new values too: a third.
  Ins[1] = Upload(*G.getInputs()[1], 2, Host);
  Run("fourth run (a weight moved too)");
  Check(Host, Outs, "fourth run");
  EXPECT_EQ(Stat("captures"), 3);
  EXPECT_EQ(Stat("staged_inputs") + Stat("staged_outputs"), 0);
  // The first binding again: its graph is replayed, not captured again.
  Ins = Ins0;
  Outs = Outs0;
  Run("fifth run (the first binding)");
  Check(Host0, Outs, "fifth run");
  EXPECT_EQ(Stat("captures"), 3);
  EXPECT_EQ(Stat("graphs_kept"), 3);
  // An output that moves on every run: captured until the captures are
  // spent, then staged (copied out) and captured no more.
  for (int K = 0; K < 20; ++K) {
    Outs[0] = Alloc(64 * 256 * 2);
    Run("a moving output");
  }
  Check(Host0, Outs, "a moving output");
  EXPECT_EQ(Stat("staged_outputs"), 1);
  EXPECT_EQ(Stat("staged_inputs"), 0);
  EXPECT_LE(Stat("captures"), 17);
  EXPECT_LE(Stat("graphs_kept"), 4);
  // Then x moves on every run, with new values: staged at once (the
  // captures are spent), through a buffer of its own again.
  for (unsigned K = 0; K < 5; ++K) {
    Ins[0] = Upload(*G.getInputs()[0], 10 + K, Host0);
    Run("a moving input");
    Check(Host0, Outs, "a moving input");
  }
  EXPECT_EQ(Stat("staged_inputs"), 1);
  EXPECT_LE(Stat("captures"), 18);
  P->reset();
  for (CUdeviceptr X : Owned)
    D.cuMemFree(X);
}
