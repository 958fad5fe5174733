//===- SwiGluCodegenTest.cpp - The merged gate+up GEMM compiles -----------===//
//
// generateSwiGluKernel for every default swiglu tile on ragged, decode and
// prefill shapes, bf16 and f16, compiled with NVRTC for sm_90 wherever
// libnvrtc can be opened (skips and says why elsewhere).
//
//===----------------------------------------------------------------------===//
#include "CompileAll.h"
#include "IRTestUtils.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Lowering/Lowering.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "gtest/gtest.h"
#include <mutex>

using namespace mtsched;

namespace {

struct Parsed {
  llvm::SourceMgr SM;
  std::unique_ptr<Module> M;
};

/// `%gu = swiglu(%h, %wg, %wu)` over [M, K] x [K, N], lowered.
std::unique_ptr<Parsed> swiglu(const char *Ty, int64_t M, int64_t K,
                               int64_t N) {
  std::string T(Ty);
  auto Shape = [&](int64_t A, int64_t B) {
    return T + "[" + std::to_string(A) + "," + std::to_string(B) + "]";
  };
  std::string Src = "graph @s(%h: " + Shape(M, K) + ", %wg: " + Shape(K, N) +
                    ", %wu: " + Shape(K, N) +
                    ") {\n  %gu = swiglu(%h, %wg, %wu) : " + Shape(M, N) +
                    "\n  return %gu\n}\n";
  auto P = std::make_unique<Parsed>();
  P->M = test::parseAndVerify(P->SM, Src, "s.mir");
  if (!P->M)
    return nullptr;
  if (llvm::Error E =
          createLowerPass(LoweringOptions())->run(*P->M->getGraphs()[0])) {
    llvm::consumeError(std::move(E));
    return nullptr;
  }
  return P;
}

const MultiTemplateBufferNode &node(const Parsed &P) {
  return *llvm::cast<MultiTemplateBufferNode>(
      P.M->getGraphs()[0]->getNodes()[0].get());
}

} // namespace

TEST(SwiGluCodegen, LoweringOffersMergedTiles) {
  auto P = swiglu("bf16", 16, 4096, 7168);
  ASSERT_TRUE(P);
  const MultiTemplateBufferNode &N = node(*P);
  ASSERT_FALSE(N.getChoices().empty());
  for (const Choice &C : N.getChoices()) {
    std::optional<GemmTileConfig> T = swigluTileOf(C);
    ASSERT_TRUE(T) << C.Name;
    // Decode: only tiles no taller than the 16 rows.
    EXPECT_LE(T->BM, 16) << C.Name;
    EXPECT_EQ(swigluChoiceName(*T), C.Name);
  }
  // f32 has no merged template: no choices (fuse-swiglu adds nothing).
  EXPECT_TRUE(
      ChoiceConfig::getDefault().swigluChoices(16, 64, 64, DType::F32).empty());
}

TEST(SwiGluCodegen, KernelShape) {
  auto P = swiglu("bf16", 100, 200, 76);
  ASSERT_TRUE(P);
  GemmTileConfig T{64, 64, 64, 4, 4};
  llvm::Expected<KernelSource> K = generateSwiGluKernel(node(*P), T);
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  // Reads h and both weights, writes N columns once.
  ASSERT_EQ(K->Inputs.size(), 3u);
  ASSERT_EQ(K->Outputs.size(), 1u);
  EXPECT_EQ(K->Outputs[0]->getName(), "gu");
  EXPECT_EQ(K->GridX, 2u);
  EXPECT_EQ(K->GridY, 2u);
  EXPECT_EQ(K->BlockX, 128u);
  // Two B stages per k-tile: 4 * (64 * 72 + 2 * 64 * 72) * 2 bytes.
  EXPECT_EQ(K->SharedBytes, 4u * (64 * 72 + 2 * 64 * 72) * 2);
  EXPECT_NE(K->Source.find("#define ALIGNED8 0"), std::string::npos);
  // A size hint changes the rows only.
  llvm::Expected<KernelSource> H = generateSwiGluKernel(node(*P), T, 300);
  ASSERT_TRUE(bool(H));
  EXPECT_EQ(H->GridY, 5u);
  // Tiles the template cannot split are refused with a reason.
  llvm::Expected<KernelSource> Bad =
      generateSwiGluKernel(node(*P), GemmTileConfig{16, 16, 16, 8, 2});
  ASSERT_FALSE(bool(Bad));
  EXPECT_NE(llvm::toString(Bad.takeError()).find("warp tiles"),
            std::string::npos);
}

TEST(SwiGluCodegen, EveryTileCompilesWithNvrtc) {
  llvm::Expected<const cuda::NvrtcApi &> Nv = cuda::loadNvrtc();
  if (!Nv)
    GTEST_SKIP() << "NVRTC not available, merged kernels not compiled: "
                 << llvm::toString(Nv.takeError());
  struct Shape {
    const char *Ty;
    int64_t M, K, N;
  };
  // Ragged (element-wise copies), decode and prefill of Llama-3-8B at TP=2.
  const Shape Shapes[] = {{"bf16", 100, 200, 76},
                          {"f16", 33, 136, 200},
                          {"bf16", 16, 4096, 7168},
                          {"bf16", 4096, 4096, 7168}};
  std::vector<std::unique_ptr<Parsed>> Keep;
  std::vector<KernelSource> Work;
  for (const Shape &S : Shapes) {
    auto P = swiglu(S.Ty, S.M, S.K, S.N);
    ASSERT_TRUE(P);
    for (const GemmTileConfig &T : ChoiceConfig::getDefault().SwiGluTiles) {
      llvm::Expected<KernelSource> K = generateSwiGluKernel(node(*P), T);
      ASSERT_TRUE(bool(K)) << swigluChoiceName(T) << ": "
                           << llvm::toString(K.takeError());
      Work.push_back(std::move(*K));
    }
    Keep.push_back(std::move(P));
  }
  expectEveryKernelCompiles(Work, 8);
}
