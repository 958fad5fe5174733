//===- GroupedMmCodegenTest.cpp - grouped_mm's kernel ---------------------===//
//
// The grouped_mm kernel (lib/Backend/Cuda/GroupedGemm.cpp) for Mixtral's
// decode and prefill shapes (both forms: x a token's row, and a row per
// pick), f16 with ragged N and K, i32 ids, an f32 graph (the SIMT loop)
// and the row-scaled and combine forms: the launch covers every row tile the
// ids can make, a row with a bad id is written NaN, and every kernel compiles
// with NVRTC for sm_90 wherever libnvrtc can be opened.
//
//===----------------------------------------------------------------------===//
#include "CompileAll.h"
#include "IRTestUtils.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "mtsched/IR/OpUnit.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"
#include <iostream>

using namespace mtsched;

namespace {

struct Case {
  const char *Src;
  /// The tile's rows, columns and whether it takes the tensor cores.
  unsigned BM, BN;
  bool TensorCores;
};

const Case Cases[] = {
    // Mixtral decode: 32 routed rows over 8 experts, the 16-row tile.
    {"graph @up(%x: bf16[16,4096], %w: bf16[8,14336,4096], %ids: "
     "i64[16,2]) {\n  %y = grouped_mm(%x, %w, %ids) : bf16[16,2,14336]\n  "
     "return %y\n}\n",
     16, 64, true},
    {"graph @down(%h: bf16[16,2,14336], %w: bf16[8,4096,14336], %ids: "
     "i64[16,2]) {\n  %y = grouped_mm(%h, %w, %ids) : bf16[16,2,4096]\n  "
     "return %y\n}\n",
     16, 64, true},
    // Prefill: 4096 routed rows, the 64 x 128 tile.
    {"graph @prefill(%x: bf16[2048,4096], %w: bf16[8,14336,4096], %ids: "
     "i64[2048,2]) {\n  %y = grouped_mm(%x, %w, %ids) : bf16[2048,2,14336]\n "
     " return %y\n}\n",
     64, 128, true},
    // f16, N and K off the tile, i32 ids; 20 rows an expert on average.
    {"graph @ragged(%x: f16[40,3,200], %w: f16[6,100,200], %ids: i32[40,3]) "
     "{\n  %y = grouped_mm(%x, %w, %ids) : f16[40,3,100]\n  return %y\n}\n",
     64, 128, true},
    // f32 and an odd K: the SIMT loop.
    {"graph @simt(%x: f32[24,37], %w: f32[4,20,37], %ids: i64[24,2]) {\n  %y "
     "= grouped_mm(%x, %w, %ids) : f32[24,2,20]\n  return %y\n}\n",
     16, 64, false},
    // The row-scaled form (fuse-moe-combine): Mixtral's down projection
    // weighted by the router, bf16 weights; f32 weights on the SIMT loop.
    {"graph @down_scaled(%h: bf16[16,2,14336], %w: bf16[8,4096,14336], %ids: "
     "i64[16,2], %s: bf16[16,2]) {\n  %y = grouped_mm(%h, %w, %ids, %s) : "
     "bf16[16,2,4096]\n  return %y\n}\n",
     16, 64, true},
    {"graph @simt_scaled(%x: f32[24,37], %w: f32[4,20,37], %ids: i64[24,2], "
     "%s: f32[24,2]) {\n  %y = grouped_mm(%x, %w, %ids, %s) : f32[24,2,20]\n "
     " return %y\n}\n",
     16, 64, false},
    // The combine form (fuse-moe-combine-sum): the scaled rows summed over
    // each token's picks in the kernel, [T, N].
    {"graph @down_combine(%h: bf16[16,2,14336], %w: bf16[8,4096,14336], "
     "%ids: i64[16,2], %s: bf16[16,2]) {\n  %y = grouped_mm(%h, %w, %ids, %s) "
     "{combine = true} : bf16[16,4096]\n  return %y\n}\n",
     16, 64, true},
    {"graph @simt_combine(%x: f32[24,37], %w: f32[4,20,37], %ids: i64[24,3], "
     "%s: f32[24,3]) {\n  %y = grouped_mm(%x, %w, %ids, %s) {combine = true} "
     ": f32[24,20]\n  return %y\n}\n",
     16, 64, false},
};

} // namespace

TEST(GroupedMmCodegen, EveryShapeCompiles) {
  std::vector<KernelSource> Work;
  for (const Case &C : Cases) {
    llvm::SourceMgr SM;
    std::unique_ptr<Module> M = test::parseAndVerify(SM, C.Src, "g.mir");
    ASSERT_TRUE(M) << C.Src;
    const Graph &G = *M->getGraphs()[0];
    const Node &N = *G.getNodes().back();
    ASSERT_EQ(N.getOp(), OpCode::GroupedMm);
    llvm::Expected<KernelSource> K = generateOpUnitKernel("k", N);
    ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
    const TensorType &Out = N.getType();
    int64_t Rows = N.getOperand(2)->getType().numElements();
    int64_t Cols = N.getOperand(1)->getType().Shape[1];
    int64_t E = N.getOperand(1)->getType().Shape[0];
    // x over N's column tiles; y over every row tile the ids can make:
    // ceil(rows / BM), plus one partial tile per expert at most.
    EXPECT_EQ(K->GridX, unsigned((Cols + C.BN - 1) / C.BN)) << C.Src;
    EXPECT_EQ(K->GridY, unsigned((Rows + C.BM - 1) / C.BM + std::min(Rows, E)))
        << C.Src;
    EXPECT_EQ(K->SharedBytes > 0, C.TensorCores) << C.Src;
    EXPECT_EQ(K->Source.find("mt_mma(") != std::string::npos, C.TensorCores);
    // The routing is the kernel's own: a histogram, the scan and the rows.
    EXPECT_NE(K->Source.find("atomicAdd(&cnt[e], 1)"), std::string::npos);
    EXPECT_NE(K->Source.find("__ballot_sync"), std::string::npos);
    // A row whose id names no expert is written NaN.
    EXPECT_NE(K->Source.find("atomicAdd(&s_bad, 1)"), std::string::npos);
    EXPECT_NE(K->Source.find("MT_STORE(__int_as_float(0x7fc00000))"),
              std::string::npos);
    // The row scale is the fourth input, read once a row.
    bool Scaled = N.getNumOperands() == 4;
    EXPECT_EQ(K->Inputs.size(), Scaled ? 4u : 3u) << C.Src;
    EXPECT_EQ(K->Source.find("#define MT_ROW_SCALE(r) 1.f") ==
                  std::string::npos,
              Scaled)
        << C.Src;
    EXPECT_EQ(K->Source.find("*__restrict__ scale,") != std::string::npos,
              Scaled)
        << C.Src;
    // The combine form: [T, N], the rows' fp32 products and a counter per
    // token and column tile in the workspace, the last arrival summing.
    bool Combine = Out.rank() == 2;
    EXPECT_EQ(K->WorkspaceBytes,
              Combine ? uint64_t(Rows * Cols * 4 + Out.Shape[0] * K->GridX * 4)
                      : 0u)
        << C.Src;
    EXPECT_EQ(K->Source.find("#define COMBINE 1") != std::string::npos,
              Combine);
    Work.push_back(std::move(*K));
  }
  llvm::Expected<const cuda::NvrtcApi &> Nv = cuda::loadNvrtc();
  if (!Nv) {
    std::cout << "[ skipped ] NVRTC not available: "
              << llvm::toString(Nv.takeError()) << "\n";
    return;
  }
  expectEveryKernelCompiles(Work, 2);
}

TEST(GroupedMmCodegen, EveryChoiceCompiles) {
  // Decode offers the 16- and 32-row tiles, prefill the 32- to 128-row
  // ones, f32 the SIMT loop; each choice's kernel compiles.
  const char *const Src[] = {Cases[0].Src, Cases[2].Src, Cases[4].Src,
                             Cases[5].Src};
  const std::vector<std::string> Want[] = {
      {"gmm_16x64x64_w2_s4", "gmm_16x128x64_w4_s4", "gmm_16x64x128_w4_s3",
       "gmm_32x128x64_w4_s3"},
      {"gmm_32x128x64_w4_s3", "gmm_64x128x32_w4_s4", "gmm_128x128x32_w8_s4"},
      {"gmm_simt"},
      {"gmm_16x64x64_w2_s4", "gmm_16x128x64_w4_s4", "gmm_16x64x128_w4_s3",
       "gmm_32x128x64_w4_s3"}};
  std::vector<KernelSource> Work;
  for (int I = 0; I < 4; ++I) {
    llvm::SourceMgr SM;
    std::unique_ptr<Module> M = test::parseAndVerify(SM, Src[I], "g.mir");
    ASSERT_TRUE(M);
    const Node &N = *M->getGraphs()[0]->getNodes().back();
    const OpUnitInfo *Info = lookupOpUnitInfo(OpCode::GroupedMm);
    ASSERT_TRUE(Info && Info->Choices && Info->ChoiceCost);
    EXPECT_EQ(Info->Choices(N), Want[I]);
    for (const std::string &C : Want[I]) {
      EXPECT_TRUE(opUnitOffersChoice(C)) << C;
      std::optional<OpUnitChoiceCost> Cost = Info->ChoiceCost(N, C);
      ASSERT_TRUE(Cost) << C;
      EXPECT_GT(Cost->Bytes, 0) << C;
      llvm::Expected<KernelSource> K = generateOpUnitChoiceKernel("k", N, C);
      ASSERT_TRUE(bool(K)) << C << ": " << llvm::toString(K.takeError());
      std::optional<codegen::GroupedMmTile> T = codegen::groupedMmTileOf(C);
      ASSERT_TRUE(T);
      EXPECT_EQ(codegen::groupedMmChoiceName(*T), C);
      EXPECT_EQ(int64_t(K->SharedBytes), codegen::groupedMmSharedBytes(*T));
      Work.push_back(std::move(*K));
    }
  }
  // Names that are no tile.
  for (const char *Bad :
       {"gmm_16x64x64_w2", "gmm_15x64x64_w2_s4", "gmm_16x64x8_w2_s4",
        "gmm_16x64x64_w3_s4", "gemm_16x64x64_w2_s4"})
    EXPECT_FALSE(opUnitOffersChoice(Bad)) << Bad;
  llvm::Expected<const cuda::NvrtcApi &> Nv = cuda::loadNvrtc();
  if (!Nv) {
    std::cout << "[ skipped ] NVRTC not available: "
              << llvm::toString(Nv.takeError()) << "\n";
    return;
  }
  expectEveryKernelCompiles(Work, 2);
}

TEST(GroupedMmCodegen, MalformedNodeIsAnError) {
  // A matmul handed to grouped_mm's generator is refused, not miscompiled.
  llvm::SourceMgr SM;
  std::unique_ptr<Module> M = test::parseAndVerify(
      SM,
      "graph @g(%a: bf16[4,8], %b: bf16[8,16]) {\n  %c = matmul(%a, %b) : "
      "bf16[4,16]\n  return %c\n}\n",
      "g.mir");
  ASSERT_TRUE(M);
  llvm::Expected<KernelSource> K =
      codegen::generateGroupedMmKernel("k", *M->getGraphs()[0]->getNodes()[0]);
  ASSERT_FALSE(bool(K));
  EXPECT_NE(llvm::toString(K.takeError()).find("not a well-formed"),
            std::string::npos);
}
