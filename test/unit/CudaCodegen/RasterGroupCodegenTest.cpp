//===- RasterGroupCodegenTest.cpp - Persistent tiles' raster group --------===//
//
// A persistent wgmma tile with its own grouped raster (`_gN`: N tile rows
// down each column instead of 8), the GEMM's and the merged SwiGLU's: the
// names round-trip, the kernel defines GROUP_M as asked and compiles with
// NVRTC for sm_90a wherever libnvrtc can be opened.
//
//===----------------------------------------------------------------------===//
#include "CompileAll.h"
#include "IRTestUtils.h"
#include "LowerAndFuse.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/Lowering/Lowering.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"

using namespace mtsched;

namespace {

using test::Parsed;

GemmTileConfig grouped(int BM, int BN, int Stages, int GroupM) {
  GemmTileConfig T = wgmmaTile(BM, BN, 64, Stages);
  T.Persistent = true;
  T.GroupM = GroupM;
  return T;
}

} // namespace

TEST(RasterGroupCodegen, NamesRoundTrip) {
  EXPECT_EQ(gemmChoiceName(grouped(128, 256, 4, 16)),
            "gemm_wg_128x256x64_s4_p_g16");
  EXPECT_EQ(swigluChoiceName(grouped(128, 128, 4, 16)),
            "swiglu_wg_128x128x64_s4_p_g16");
  for (const char *Name :
       {"gemm_wg_128x256x64_s4_p_g16", "gemm_wg_128x256x64_s4_p_d_g4",
        "gemm_wg_128x256x64_s4_p_c2_g16"}) {
    std::optional<GemmTileConfig> T = gemmTileOf(test::named(Name));
    ASSERT_TRUE(T) << Name;
    EXPECT_EQ(gemmChoiceName(*T), Name);
  }
  std::optional<GemmTileConfig> G =
      gemmTileOf(test::named("gemm_wg_128x256x64_s4_p_c2_g16"));
  EXPECT_EQ(G->GroupM, 16);
  EXPECT_EQ(G->Cluster, 2);
  std::optional<GemmTileConfig> S =
      swigluTileOf(test::named("swiglu_wg_128x128x64_s4_p_g16"));
  ASSERT_TRUE(S);
  EXPECT_EQ(S->GroupM, 16);
  EXPECT_TRUE(S->Persistent);
  EXPECT_EQ(gemmTileOf(test::named("gemm_wg_128x256x64_s4_p"))->GroupM, 0);
  // Only a persistent wgmma tile has a raster group, of at least one row.
  for (const char *Bad :
       {"gemm_wg_128x256x64_s4_g16", "gemm_wg_128x256x64_s4_p_g0",
        "gemm_wg_128x256x64_s4_p_g", "gemm_128x128x64_w4_s4_p_g16",
        "gemm_wg_128x256x64_s4_p_g16_c2"})
    EXPECT_FALSE(gemmTileOf(test::named(Bad))) << Bad;
}

TEST(RasterGroupCodegen, GemmKernelDefinesItsGroup) {
  // The Llama-3-70B MLP's down projection: 16 tile rows of 128.
  auto P =
      test::lowered("graph @g(%x: bf16[2048,28672], %w: bf16[28672,8192]) {\n"
                    "  %y = matmul(%x, %w) : bf16[2048,8192]\n"
                    "  return %y\n}\n",
                    "g.mir");
  ASSERT_TRUE(P);
  auto K = generateGemmKernel(test::firstNode(*P), grouped(128, 256, 4, 16),
                              /*Fused=*/false);
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  EXPECT_EQ(K->Name, "y_gemm_wg_128x256x64_s4_p_g16");
  EXPECT_TRUE(K->Persistent);
  EXPECT_NE(K->Source.find("#define GROUP_M 16\n"), std::string::npos);
  auto D =
      generateGemmKernel(test::firstNode(*P), grouped(128, 256, 4, 0), false);
  ASSERT_TRUE(bool(D)) << llvm::toString(D.takeError());
  EXPECT_NE(D->Source.find("#define GROUP_M 8\n"), std::string::npos);
  expectKernelCompiles(*K);
}

TEST(RasterGroupCodegen, SwiGluKernelDefinesItsGroup) {
  auto P =
      test::lowered("graph @s(%h: bf16[2048,8192], %wg: bf16[8192,28672], "
                    "%wu: bf16[8192,28672]) {\n  %gu = swiglu(%h, %wg, %wu) "
                    ": bf16[2048,28672]\n  return %gu\n}\n",
                    "g.mir");
  ASSERT_TRUE(P);
  auto K = generateSwiGluKernel(test::firstNode(*P), grouped(128, 128, 4, 16));
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  EXPECT_EQ(K->Name, "gu_swiglu_wg_128x128x64_s4_p_g16");
  EXPECT_NE(K->Source.find("#define GROUP_M 16\n"), std::string::npos);
  expectKernelCompiles(*K);
}
