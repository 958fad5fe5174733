//===- HorizontalCodegenTest.cpp - The merged GEMM of a group compiles ----===//
//
// generateHorizontalGemmKernel over Q/K/V-shaped groups (GQA: different N)
// for every default mma.sync tile, bf16 and f16, ragged, decode and
// prefill, compiled with NVRTC for sm_90 wherever libnvrtc can be opened
// (skips and says why elsewhere); and what it refuses.
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
  std::vector<const MultiTemplateBufferNode *> Members;
};

/// `%y<i> = matmul(%h, %w<i>)` over [M, K] x [K, N_i], lowered.
std::unique_ptr<Parsed> group(const char *Ty, int64_t M, int64_t K,
                              std::vector<int64_t> Ns) {
  std::string T(Ty);
  auto Shape = [&](int64_t A, int64_t B) {
    return T + "[" + std::to_string(A) + "," + std::to_string(B) + "]";
  };
  std::string Args = "%h: " + Shape(M, K), Body, Ret;
  for (size_t I = 0; I < Ns.size(); ++I) {
    std::string W = "%w" + std::to_string(I), Y = "%y" + std::to_string(I);
    Args += ", " + W + ": " + Shape(K, Ns[I]);
    Body += "  " + Y + " = matmul(%h, " + W + ") : " + Shape(M, Ns[I]) + "\n";
    Ret += (Ret.empty() ? "" : ", ") + Y;
  }
  std::string Src =
      "graph @g(" + Args + ") {\n" + Body + "  return " + Ret + "\n}\n";
  auto P = std::make_unique<Parsed>();
  P->M = test::parseAndVerify(P->SM, Src, "g.mir");
  if (!P->M)
    return nullptr;
  Graph &G = *P->M->getGraphs()[0];
  if (llvm::Error E = createLowerPass(LoweringOptions())->run(G)) {
    llvm::consumeError(std::move(E));
    return nullptr;
  }
  for (const auto &N : G.getNodes())
    P->Members.push_back(llvm::cast<MultiTemplateBufferNode>(N.get()));
  return P;
}

/// The default tiles the merged kernel takes: mma.sync, split-K or not.
std::vector<GemmTileConfig> mmaTiles() {
  std::vector<GemmTileConfig> Out;
  for (const GemmTileConfig &T : ChoiceConfig::getDefault().GemmTiles)
    if (T.Template == GemmTemplate::MmaSync && !T.Persistent)
      Out.push_back(T);
  return Out;
}

} // namespace

TEST(HorizontalCodegen, KernelShape) {
  // Llama-3-8B's Q/K/V at TP=2, 100 rows (ragged M).
  auto P = group("bf16", 100, 4096, {2048, 512, 512});
  ASSERT_TRUE(P);
  GemmTileConfig T{64, 128, 32, 4, 3};
  llvm::Expected<KernelSource> K =
      generateHorizontalGemmKernel("qkv", P->Members, T);
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  // Reads A once and each weight; writes each member's own output.
  ASSERT_EQ(K->Inputs.size(), 4u);
  EXPECT_EQ(K->Inputs[0]->getName(), "h");
  ASSERT_EQ(K->Outputs.size(), 3u);
  EXPECT_EQ(K->Outputs[0]->getName(), "y0");
  EXPECT_EQ(K->Outputs[2]->getName(), "y2");
  // 16 + 4 + 4 tile columns, 2 tile rows.
  EXPECT_EQ(K->GridX, 24u);
  EXPECT_EQ(K->GridY, 2u);
  EXPECT_EQ(K->BlockX, 128u);
  EXPECT_EQ(K->SharedBytes, 3u * (64 * 40 + 32 * 136) * 2);
  EXPECT_NE(K->Source.find("#define N_ 512LL"), std::string::npos);
  EXPECT_NE(K->Source.find("namespace hz2"), std::string::npos);
  // A member's columns that are not a tile multiple start the next
  // member's tiles in a fresh CTA column.
  auto R = group("f16", 33, 136, {200, 76});
  ASSERT_TRUE(R);
  llvm::Expected<KernelSource> K2 = generateHorizontalGemmKernel(
      "g", R->Members, GemmTileConfig{64, 64, 32, 4, 2});
  ASSERT_TRUE(bool(K2)) << llvm::toString(K2.takeError());
  EXPECT_EQ(K2->GridX, 4u + 2u);
  EXPECT_NE(K2->Source.find("#define ALIGNED8 0"), std::string::npos);
  EXPECT_EQ(K2->WorkspaceBytes, 0u);
  // Split-K: a slice of K per grid z, a partial tile per CTA and a counter
  // per output tile in the workspace.
  GemmTileConfig S{16, 64, 64, 4, 4};
  S.SplitK = 4;
  llvm::Expected<KernelSource> K3 =
      generateHorizontalGemmKernel("qkv", P->Members, S);
  ASSERT_TRUE(bool(K3)) << llvm::toString(K3.takeError());
  EXPECT_EQ(K3->GridX, 32u + 8u + 8u);
  EXPECT_EQ(K3->GridY, 7u);
  EXPECT_EQ(K3->GridZ, 4u);
  EXPECT_EQ(K3->WorkspaceBytes, 48u * 7 * 4 * 16 * 64 * 4 + 48u * 7 * 4);
  EXPECT_NE(K3->Source.find("float *__restrict__ mt_ws"), std::string::npos);
}

TEST(HorizontalCodegen, Refuses) {
  auto P = group("bf16", 16, 256, {128, 64});
  ASSERT_TRUE(P);
  auto Msg = [](llvm::Expected<KernelSource> K) {
    return K ? std::string() : llvm::toString(K.takeError());
  };
  EXPECT_NE(Msg(generateHorizontalGemmKernel("g", {P->Members[0]},
                                             GemmTileConfig{16, 64, 32, 4, 2}))
                .find("two GEMMs or more"),
            std::string::npos);
  EXPECT_NE(Msg(generateHorizontalGemmKernel("g", P->Members,
                                             GemmTileConfig{16, 16, 16, 8, 2}))
                .find("warp tiles"),
            std::string::npos);
  GemmTileConfig Wg = wgmmaTile(64, 128, 64, 4);
  EXPECT_NE(Msg(generateHorizontalGemmKernel("g", P->Members, Wg))
                .find("mma.sync template only"),
            std::string::npos);
  // Members over different A operands.
  auto Q = group("bf16", 16, 256, {128});
  ASSERT_TRUE(Q);
  EXPECT_NE(
      Msg(generateHorizontalGemmKernel("g", {P->Members[0], Q->Members[0]},
                                       GemmTileConfig{16, 64, 32, 4, 2}))
          .find("does not read"),
      std::string::npos);
  auto F = group("f32", 16, 64, {64, 64});
  ASSERT_TRUE(F);
  EXPECT_NE(Msg(generateHorizontalGemmKernel("g", F->Members,
                                             GemmTileConfig{16, 64, 32, 4, 2}))
                .find("bf16 or f16"),
            std::string::npos);
}

TEST(HorizontalCodegen, EveryTileCompilesWithNvrtc) {
  llvm::Expected<const cuda::NvrtcApi &> Nv = cuda::loadNvrtc();
  if (!Nv)
    GTEST_SKIP() << "NVRTC not available, merged kernels not compiled: "
                 << llvm::toString(Nv.takeError());
  struct Shape {
    const char *Ty;
    int64_t M, K;
    std::vector<int64_t> Ns;
  };
  // Ragged (element-wise copies), Llama-3-8B Q/K/V at TP=2 decode and
  // prefill, and a MoE router (8 experts) beside a shared expert.
  const Shape Shapes[] = {{"bf16", 100, 200, {76, 40, 40}},
                          {"f16", 33, 136, {200, 72}},
                          {"bf16", 1, 4096, {2048, 512, 512}},
                          {"bf16", 4096, 4096, {2048, 512, 512}},
                          {"bf16", 64, 2048, {8, 1408}}};
  std::vector<std::unique_ptr<Parsed>> Keep;
  std::vector<KernelSource> Work;
  for (const Shape &S : Shapes) {
    auto P = group(S.Ty, S.M, S.K, S.Ns);
    ASSERT_TRUE(P);
    for (const GemmTileConfig &T : mmaTiles()) {
      llvm::Expected<KernelSource> K =
          generateHorizontalGemmKernel("g", P->Members, T);
      ASSERT_TRUE(bool(K)) << gemmChoiceName(T) << ": "
                           << llvm::toString(K.takeError());
      Work.push_back(std::move(*K));
    }
    Keep.push_back(std::move(P));
  }
  ASSERT_FALSE(Work.empty());
  expectEveryKernelCompiles(Work, 2);
}
