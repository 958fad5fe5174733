//===- BlasEpilogueTest.cpp - Epilogues cuBLASLt runs in its GEMM ---------===//
#include "mtsched/Autotune/BlasEpilogue.h"
#include "IRTestUtils.h"
#include "gtest/gtest.h"

using namespace mtsched;

namespace {

const char *Text = R"(
graph @g(%x: bf16[16,32], %w: bf16[32,8], %b: bf16[8], %r: bf16[16,8], %wb: bf16[2,32,8], %xb: bf16[2,8,32], %f: f32[8]) {
  %bias_res = multi_template_buffer matmul(%x, %w) choices [extern.cublaslt_a0] epilogue [%e1, %e2] : bf16[16,8]
  %e1 = buffer add(%bias_res, %b) kernel 0 : bf16[16,8]
  %e2 = buffer add(%r, %e1) kernel 0 : bf16[16,8]
  %res_only = multi_template_buffer matmul(%x, %w) choices [extern.cublaslt_a0] epilogue [%e3] : bf16[16,8]
  %e3 = buffer add(%res_only, %r) kernel 1 : bf16[16,8]
  %two_biases = multi_template_buffer matmul(%x, %w) choices [extern.cublaslt_a0] epilogue [%e4, %e5] : bf16[16,8]
  %e4 = buffer add(%two_biases, %b) kernel 2 : bf16[16,8]
  %e5 = buffer add(%e4, %b) kernel 2 : bf16[16,8]
  %bias_gelu = multi_template_buffer matmul(%x, %w) choices [extern.cublaslt_a0] epilogue [%e6, %e7] : bf16[16,8]
  %e6 = buffer add(%bias_gelu, %b) kernel 3 : bf16[16,8]
  %e7 = buffer gelu(%e6) kernel 3 : bf16[16,8]
  %batched = multi_template_buffer matmul(%xb, %wb) choices [extern.cublaslt_a0] epilogue [%e8] : bf16[2,8,8]
  %e8 = buffer add(%batched, %b) kernel 4 : bf16[2,8,8]
  %f32_bias = multi_template_buffer matmul(%x, %w) choices [extern.cublaslt_a0] epilogue [%e9] : bf16[16,8]
  %e9 = buffer add(%f32_bias, %f) kernel 5 : bf16[16,8]
  %none = multi_template_buffer matmul(%x, %w) choices [extern.cublaslt_a0] : bf16[16,8]
  return %e2, %e3, %e5, %e7, %e8, %e9, %none
}
)";

const MultiTemplateBufferNode *node(const Graph &G, llvm::StringRef Name) {
  for (const auto &N : G.getNodes())
    if (N->getResult()->getName() == Name)
      return llvm::dyn_cast<MultiTemplateBufferNode>(N.get());
  return nullptr;
}

} // namespace

TEST(BlasEpilogue, BiasAndResidualAddsOnly) {
  test::CapturedSource Src(Text);
  std::unique_ptr<Module> M = test::parse(Src);
  ASSERT_TRUE(M) << Src.Diags;
  const Graph &G = *M->getGraphs().front();
  auto Of = [&](llvm::StringRef Name) {
    const MultiTemplateBufferNode *N = node(G, Name);
    EXPECT_TRUE(N) << Name.str();
    return N ? blasEpilogueOf(*N) : std::nullopt;
  };
  std::optional<BlasEpilogue> E = Of("bias_res");
  ASSERT_TRUE(E);
  EXPECT_EQ(E->Bias->getName(), "b");
  EXPECT_EQ(E->Residual->getName(), "r");
  E = Of("res_only");
  ASSERT_TRUE(E);
  EXPECT_EQ(E->Bias, nullptr);
  EXPECT_EQ(E->Residual->getName(), "r");
  // Two biases, GELU (cuBLASLt's is tanh's), a batched weight, a bias of
  // another dtype, no epilogue: none is cuBLASLt's.
  for (const char *Name :
       {"two_biases", "bias_gelu", "batched", "f32_bias", "none"})
    EXPECT_FALSE(Of(Name)) << Name;
}

TEST(BlasEpilogue, OnlyCublasLtAmongExternsFuses) {
  Choice Tile{"gemm_64x64x32_w4_s2", {}, {}}, Blas{"extern.cublas", {}, {}},
      Lt{"extern.cublaslt_a2", {}, {}};
  EXPECT_TRUE(canFuseEpilogue(Tile, false));
  EXPECT_TRUE(canFuseEpilogue(Tile, true));
  EXPECT_FALSE(canFuseEpilogue(Blas, true));
  EXPECT_FALSE(canFuseEpilogue(Lt, false));
  EXPECT_TRUE(canFuseEpilogue(Lt, true));
}
