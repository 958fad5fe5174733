//===- ReduceFusionCodegenTest.cpp - Kernels of fused sum/max compile -----===//
//
// Groups that `fuse` makes with a sum/max in them (Schedule/Fusion.h,
// KernelForm): the MoE combine read through with a loop over the experts,
// a softmax and a mean written by hand as one block per row, nested and
// kept-dimension reductions, and a row reduction reading layout ops
// through before it. Each is generated from the fused graph, its
// form checked, and compiled with NVRTC for sm_90 wherever libnvrtc can be
// opened (elsewhere the compile step says why it skipped).
//
//===----------------------------------------------------------------------===//
#include "CompileAll.h"
#include "IRTestUtils.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/Schedule/Fusion.h"
#include "mtsched/Schedule/Schedule.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"
#include <iostream>

using namespace mtsched;

namespace {

struct Parsed {
  llvm::SourceMgr SM;
  std::unique_ptr<Module> M;
  std::vector<KernelSource> Kernels;
};

/// Text lowered, fused (reduction fusion on or off) and verified as a
/// schedule, with the kernels of its one graph.
std::unique_ptr<Parsed> fused(llvm::StringRef Text, bool Reductions = true) {
  auto P = std::make_unique<Parsed>();
  P->M = test::parseAndVerify(P->SM, Text, "g.mir");
  if (!P->M) {
    // The diagnostics went to stderr; the test stops at its ASSERT_TRUE.
    ADD_FAILURE() << "the graph does not parse and verify";
    return nullptr;
  }
  Graph &G = *P->M->getGraphs()[0];
  FusionOptions FO;
  FO.Reductions = Reductions;
  auto Failed = [](llvm::Error E) {
    if (!E)
      return false;
    ADD_FAILURE() << llvm::toString(std::move(E));
    return true;
  };
  if (Failed(createLowerPass(LoweringOptions())->run(G)) ||
      Failed(createFusePass(FO)->run(G)) || Failed(verifySchedule(G)))
    return nullptr;
  std::vector<std::string> Errors;
  P->Kernels = generateGraphKernels(G, Errors);
  for (const std::string &E : Errors)
    ADD_FAILURE() << E;
  return P;
}

std::vector<std::string> names(llvm::ArrayRef<const Value *> Vs) {
  std::vector<std::string> Out;
  for (const Value *V : Vs)
    Out.push_back(V->getName());
  return Out;
}

} // namespace

TEST(ReduceFusionCodegen, MoeCombineIsOneReadThroughKernel) {
  // The gallery's Mixtral combine (examples/gallery/mixtral_8x7b_moe.mir)
  // at decode size: weights transposed, cast, reshaped, the experts'
  // outputs weighted and summed, the residual added.
  const char *Src = R"(
graph @g(%e: bf16[8,16,4096], %w: f32[16,8], %x: bf16[16,4096]) {
  %t = transpose(%w) {perm = [1, 0]} : f32[8,16]
  %c = cast(%t) : bf16[8,16]
  %u = reshape(%c) : bf16[8,16,1]
  %m = mul(%e, %u) : bf16[8,16,4096]
  %s = sum(%m) {dim = -3} : bf16[16,4096]
  %y = add(%x, %s) : bf16[16,4096]
  return %y
}
)";
  auto P = fused(Src);
  ASSERT_TRUE(P);
  ASSERT_EQ(P->Kernels.size(), 1u);
  const KernelSource &K = P->Kernels[0];
  // Reads the experts' outputs, the weights and the residual; writes the
  // layer's output only (the [8,16,4096] product is never stored).
  EXPECT_EQ(names(K.Inputs), (std::vector<std::string>{"x", "e", "w"}));
  EXPECT_EQ(names(K.Outputs), (std::vector<std::string>{"y"}));
  EXPECT_NE(K.Source.find("// %s = sum over dim 0"), std::string::npos);
  EXPECT_NE(K.Source.find("< 8; ++d"), std::string::npos) << K.Source;
  // The loop runs over the 16 x 4096 outputs (8 adjacent ones a thread).
  EXPECT_NE(K.Source.find("i < 65536;"), std::string::npos);
  expectKernelCompiles(K);
  // Unfused, the product is written by one kernel and summed by another.
  auto U = fused(Src, /*Reductions=*/false);
  ASSERT_TRUE(U);
  EXPECT_EQ(U->Kernels.size(), 3u);
}

TEST(ReduceFusionCodegen, SoftmaxByHandIsOneRowKernel) {
  auto P = fused(R"(
graph @g(%x: bf16[64,4096]) {
  %m = max(%x) {dim = -1, keepdim = true} : bf16[64,1]
  %d = sub(%x, %m) : bf16[64,4096]
  %e = exp(%d) : bf16[64,4096]
  %s = sum(%e) {dim = -1, keepdim = true} : bf16[64,1]
  %p = div(%e, %s) : bf16[64,4096]
  return %p
}
)");
  ASSERT_TRUE(P);
  ASSERT_EQ(P->Kernels.size(), 1u);
  const KernelSource &K = P->Kernels[0];
  EXPECT_EQ(K.GridX, 64u); // a block per row
  EXPECT_NE(K.Source.find("mt_block_max(v_m, red)"), std::string::npos);
  EXPECT_NE(K.Source.find("mt_block_sum(v_s, red)"), std::string::npos);
  EXPECT_EQ(names(K.Outputs), (std::vector<std::string>{"p"}));
  expectKernelCompiles(K);
}

TEST(ReduceFusionCodegen, MeanWritesOneValuePerRow) {
  auto P = fused(R"(
graph @g(%x: f32[100,1000]) {
  %a = mul(%x, %x) : f32[100,1000]
  %s = sum(%a) {dim = -1} : f32[100]
  %n = mul(%s) {scalar = 0.001} : f32[100]
  %q = sqrt(%n) : f32[100]
  return %q
}
)");
  ASSERT_TRUE(P);
  ASSERT_EQ(P->Kernels.size(), 1u);
  const KernelSource &K = P->Kernels[0];
  EXPECT_EQ(K.GridX, 100u);
  EXPECT_NE(K.Source.find("p_q_out[r] ="), std::string::npos) << K.Source;
  EXPECT_EQ(names(K.Inputs), (std::vector<std::string>{"x"}));
  expectKernelCompiles(K);
}

TEST(ReduceFusionCodegen, NestedAndKeptDimensionReductions) {
  // A max over the middle dimension kept as 1, then a sum of it over the
  // first: two nested loops in one read-through kernel; f16 throughout.
  auto P = fused(R"(
graph @g(%x: f16[6,5,40], %b: f16[40]) {
  %a = add(%x, %b) : f16[6,5,40]
  %m = max(%a) {dim = 1, keepdim = true} : f16[6,1,40]
  %s = sum(%m) {dim = 0} : f16[1,40]
  %o = neg(%s) : f16[1,40]
  return %o
}
)");
  ASSERT_TRUE(P);
  ASSERT_EQ(P->Kernels.size(), 1u);
  const KernelSource &K = P->Kernels[0];
  EXPECT_NE(K.Source.find("// %m = max over dim 1"), std::string::npos);
  EXPECT_NE(K.Source.find("// %s = sum over dim 0"), std::string::npos);
  EXPECT_NE(K.Source.find("fmaxf("), std::string::npos);
  expectKernelCompiles(K);
}

TEST(ReduceFusionCodegen, RowReductionReadsLayoutOpsThrough) {
  // A reshape and a transpose before a bias add and an RMSNorm: one block
  // per row of [32,256], the transposed value read at each element's own
  // index (and an odd row length, so that the read is guarded).
  for (const char *Src : {R"(
graph @g(%x: bf16[4,64,32], %b: bf16[32,256], %g: bf16[256]) {
  %r = reshape(%x) : bf16[256,32]
  %t = transpose(%r) {perm = [1, 0]} : bf16[32,256]
  %a = add(%t, %b) : bf16[32,256]
  %n = rmsnorm(%a, %g) {eps = 1.0e-05} : bf16[32,256]
  %o = mul(%n, %a) : bf16[32,256]
  return %o
}
)",
                          R"(
graph @g(%x: f32[3,100,7], %y: f32[7,100]) {
  %t = transpose(%x) {perm = [0, 2, 1]} : f32[3,7,100]
  %s = softmax(%t) : f32[3,7,100]
  %u = reshape(%y) : f32[1,7,100]
  %o = add(%s, %u) : f32[3,7,100]
  return %o
}
)"}) {
    auto P = fused(Src);
    ASSERT_TRUE(P);
    ASSERT_EQ(P->Kernels.size(), 1u);
    const KernelSource &K = P->Kernels[0];
    EXPECT_NE(K.Source.find("One block per row"), std::string::npos);
    EXPECT_NE(K.Source.find("= transpose, read through"), std::string::npos)
        << K.Source;
    // Every value has fewer than 2^31 elements: the coordinates are taken
    // from the element's index in 32 bits.
    EXPECT_NE(K.Source.find("const int rt_i = (int)(r * "), std::string::npos);
    EXPECT_EQ(names(K.Outputs), (std::vector<std::string>{"o"}));
    expectKernelCompiles(K);
  }
}
