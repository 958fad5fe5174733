//===- SwiGluTest.cpp - The merged gate+up GEMM on a real GPU -------------===//
//
// Every swiglu_* choice against the fp64 reference (ragged and aligned
// shapes, bf16 and f16), and both decided forms of a SwiGLU MLP run end to
// end with --run's executor. Each test skips, saying why, without a GPU.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Lowering/SwiGlu.h"
#include "mtsched/Autotune/Benchmarker.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaBenchmarker.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/Reference/Interpreter.h"
#include "mtsched/Runtime/Communicator.h"
#include "mtsched/Schedule/Fusion.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"
#include <cmath>
#include <random>

using namespace mtsched;

/// The one rank the single-GPU tests run as.
static SingleCommunicator Solo;

namespace {

struct Lowered {
  llvm::SourceMgr SM;
  std::unique_ptr<Module> M;
};

/// Parses Text and runs lower, fuse-swiglu and fuse on it.
std::unique_ptr<Lowered> lowerSwiGlu(llvm::StringRef Text) {
  auto L = std::make_unique<Lowered>();
  L->SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(Text, "t.mir"),
                           llvm::SMLoc());
  L->M = parseModule(L->SM);
  if (!L->M)
    return nullptr;
  std::unique_ptr<Pass> Passes[] = {createLowerPass(LoweringOptions()),
                                    createFuseSwiGluPass(LoweringOptions()),
                                    createFusePass(FusionOptions())};
  for (auto &G : L->M->getGraphs())
    for (auto &P : Passes)
      if (llvm::Error E = P->run(*G)) {
        llvm::consumeError(std::move(E));
        return nullptr;
      }
  return L;
}

std::string withType(std::string Src, llvm::StringRef Ty) {
  for (size_t P; (P = Src.find("T[")) != std::string::npos;)
    Src.replace(P, 1, Ty.str());
  return Src;
}

#define REQUIRE_GPU()                                                          \
  do {                                                                         \
    llvm::Expected<cuda::DeviceInfo> Dev = cuda::openDevice();                 \
    if (!Dev)                                                                  \
      GTEST_SKIP() << "no usable GPU: " << llvm::toString(Dev.takeError());    \
  } while (0)

const char *MlpSrc = R"(
graph @mlp(%x: T[M,256], %wg: T[256,D], %wu: T[256,D], %wd: T[D,256]) {
  %g = matmul(%x, %wg) : T[M,D]
  %u = matmul(%x, %wu) : T[M,D]
  %gs = silu(%g) : T[M,D]
  %gu = mul(%gs, %u) : T[M,D]
  %y = matmul(%gu, %wd) : T[M,256]
  return %y
})";

std::string mlp(llvm::StringRef Ty, int M, int D) {
  std::string S = withType(MlpSrc, Ty);
  for (size_t P; (P = S.find("M,")) != std::string::npos;)
    S.replace(P, 1, std::to_string(M));
  for (size_t P; (P = S.find(",D]")) != std::string::npos;)
    S.replace(P + 1, 1, std::to_string(D));
  for (size_t P; (P = S.find("[D,")) != std::string::npos;)
    S.replace(P + 1, 1, std::to_string(D));
  return S;
}

} // namespace

// No GPU needed: the fp64 interpreter gives the merged node exactly the
// split form's values, so --run checks either form against one reference.
TEST(SwiGluInterpreter, MergedEqualsSplit) {
  auto L = lowerSwiGlu(mlp("bf16", 24, 40));
  ASSERT_TRUE(L);
  const Graph &G = *L->M->getGraphs()[0];
  ValueData Data;
  std::mt19937_64 Rng(7);
  std::uniform_real_distribution<double> U(-1, 1);
  for (const auto &In : G.getInputs()) {
    std::vector<double> V(In->getType().numElements());
    for (double &X : V)
      X = U(Rng);
    Data[In.get()] = HostValues(std::move(V));
  }
  llvm::Error E = interpretGraph(G, Data);
  ASSERT_FALSE(bool(E)) << llvm::toString(std::move(E));
  const std::vector<double> *Split = nullptr, *Merged = nullptr;
  for (const auto &N : G.getNodes()) {
    if (N->getName() == "gu")
      Split = &Data[N->getResult()].floats();
    if (N->getOp() == OpCode::SwiGlu)
      Merged = &Data[N->getResult()].floats();
  }
  ASSERT_TRUE(Split && Merged);
  ASSERT_EQ(Split->size(), Merged->size());
  for (size_t I = 0; I < Split->size(); ++I)
    EXPECT_NEAR((*Split)[I], (*Merged)[I], 1e-9 * (1 + std::fabs((*Split)[I])));
}

TEST(SwiGluGpu, EveryMergedChoiceMatchesTheReference) {
  REQUIRE_GPU();
  // Ragged (no tile multiple, N not a multiple of 8: element-wise copies),
  // decode-sized and aligned prefill-sized shapes.
  for (auto [M, D] : {std::pair<int, int>{100, 76}, {16, 512}, {512, 768}})
    for (const char *Ty : {"bf16", "f16"}) {
      auto L = lowerSwiGlu(mlp(Ty, M, D));
      ASSERT_TRUE(L) << Ty;
      const Graph &G = *L->M->getGraphs()[0];
      const MultiTemplateBufferNode *Alt = nullptr;
      for (const auto &N : G.getNodes())
        if (N->getOp() == OpCode::SwiGlu)
          Alt = llvm::cast<MultiTemplateBufferNode>(N.get());
      ASSERT_TRUE(Alt) << "fuse-swiglu added no alternative";
      AutotuneOptions Opts;
      Opts.Backend = "cuda";
      Opts.BenchRuns = 3;
      auto B = createCudaBenchmarker(Opts, 0, Solo);
      ASSERT_TRUE(bool(B)) << llvm::toString(B.takeError());
      Workload W = describeNode(*L->M, G, *Alt);
      for (const Choice &C : Alt->getChoices()) {
        Measurement R =
            (*B)->getRunner().measure(*Alt, W, C, false, BuildResult());
        EXPECT_EQ(R.Status, ChoiceStatus::Ok)
            << Ty << " [" << M << "," << D << "] " << C.Name << ": "
            << R.Message;
      }
    }
}

TEST(SwiGluGpu, BothDecidedFormsRunEndToEnd) {
  REQUIRE_GPU();
  for (bool Merged : {true, false}) {
    auto L = lowerSwiGlu(mlp("bf16", 64, 384));
    ASSERT_TRUE(L);
    Graph &G = *L->M->getGraphs()[0];
    // Decide every node by hand, then keep one form as select-swiglu would.
    MultiTemplateBufferNode *Alt = nullptr;
    for (const auto &N : G.getNodes())
      if (auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get())) {
        M->setDecision(M->getChoices().front().Name);
        // Unfused: the split form runs its epilogues as buffer kernels,
        // whichever GEMM the fusion rules give them to.
        M->setEpilogueFused(false);
        if (M->getOp() == OpCode::SwiGlu)
          Alt = M;
      }
    ASSERT_TRUE(Alt);
    if (Merged) {
      Node *Mul = nullptr;
      for (const auto &N : G.getNodes())
        if (N->getName() == "gu")
          Mul = N.get();
      std::optional<SwiGluMatch> S =
          matchSwiGlu(*Mul, countUses(G), /*Decided=*/true);
      ASSERT_TRUE(S);
      std::unique_ptr<Node> New = Alt->clone();
      New->getAttrs() = AttrDict();
      G.eraseNode(Alt);
      G.replaceNode(S->Mul, std::move(New));
      G.eraseNode(S->Silu);
      G.eraseNode(S->Gate);
      G.eraseNode(S->Up);
    } else {
      G.eraseNode(Alt);
    }
    std::string Log;
    llvm::raw_string_ostream OS(Log);
    llvm::Error E = runGraphOnGpu(G, 1, OS);
    EXPECT_FALSE(bool(E)) << (Merged ? "merged: " : "split: ")
                          << llvm::toString(std::move(E)) << OS.str();
    EXPECT_NE(OS.str().find("output %y matches"), std::string::npos) << Log;
  }
}
