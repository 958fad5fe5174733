//===- LayoutVecCodegenTest.cpp - Forms of read-through group kernels -----===//
//
// A fused group read through its layout ops (LayoutGroupKernels.cpp) takes
// the vector form (Vec adjacent outputs per thread, 16-byte loads and
// stores) when every load of its chains moves along the last dimension
// with coefficient 1 from a multiple of Vec, else the scalar form; and
// 32-bit index arithmetic when every value it touches has fewer than 2^31
// elements. A flat group (no layout op) of 2^20 or more 8-element groups
// with an op of 4 or more flops an element unrolls its loop by 4 (its
// loads first). Each group is the whole of a lowered graph, generated as one
// kernel, its form checked from the source, and compiled with NVRTC for
// sm_90 where libnvrtc can be opened.
//
//===----------------------------------------------------------------------===//
#include "CompileAll.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/IR/Verifier.h"
#include "mtsched/Lowering/Lowering.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"

using namespace mtsched;

namespace {

/// The kernel of the whole of graph Text's one graph (lowered) as one
/// fused group writing its returned value.
std::optional<KernelSource> groupKernel(llvm::StringRef Text) {
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(Text, "g.mir"),
                        llvm::SMLoc());
  std::unique_ptr<Module> M = parseModule(SM);
  if (!M) {
    ADD_FAILURE() << "does not parse";
    return std::nullopt;
  }
  if (llvm::Error E = verifyModule(*M, SM)) {
    ADD_FAILURE() << llvm::toString(std::move(E));
    return std::nullopt;
  }
  Graph &G = *M->getGraphs()[0];
  if (llvm::Error E = createLowerPass(LoweringOptions())->run(G)) {
    ADD_FAILURE() << llvm::toString(std::move(E));
    return std::nullopt;
  }
  std::vector<const Node *> Nodes;
  for (const std::unique_ptr<Node> &N : G.getNodes())
    Nodes.push_back(N.get());
  std::vector<const Value *> Outputs;
  for (const Operand &O : G.getOutputs())
    Outputs.push_back(O.V);
  llvm::Expected<KernelSource> K = generateGroupKernel("g", Nodes, Outputs);
  if (!K) {
    ADD_FAILURE() << llvm::toString(K.takeError());
    return std::nullopt;
  }
  return std::move(*K);
}

bool has(const KernelSource &K, llvm::StringRef S) {
  return llvm::StringRef(K.Source).contains(S);
}

} // namespace

TEST(LayoutVecCodegen, ExpandTransposeGatherIsVectorAndInt32) {
  // The DeepSeek MoE layer's dispatch (its decided IR's kernel 5), at a
  // smaller size: [64,64] broadcast to 8 experts, through a reshape and a
  // transpose that keeps the last dimension.
  auto K = groupKernel(R"(
graph @g(%x: bf16[64,64]) {
  %u = reshape(%x) : bf16[1,64,64]
  %e = expand(%u) : bf16[8,64,64]
  %v = reshape(%e) : bf16[512,64]
  %v1 = reshape(%v) : bf16[1,8,64,64]
  %p = transpose(%v1) {perm = [1, 0, 2, 3]} : bf16[8,1,64,64]
  %n = neg(%p) : bf16[8,1,64,64]
  return %n
}
)");
  ASSERT_TRUE(K);
  EXPECT_TRUE(has(*K, "8 adjacent elements per thread")) << K->Source;
  EXPECT_TRUE(has(*K, "32-bit indices"));
  EXPECT_TRUE(has(*K, "((const mt_u4 *)(p_x + "));
  EXPECT_TRUE(has(*K, "((mt_u4 *)(p_n_out + i))[q]"));
  EXPECT_FALSE(has(*K, "long long"));
  // A thread per 8 of the 32768 outputs: 4096 threads, in 128 blocks of
  // 32 (not 16 of 256: a small group spreads over the SMs).
  EXPECT_EQ(K->GridX, 128u);
  EXPECT_EQ(K->BlockX, 32u);
  EXPECT_TRUE(has(*K, "__launch_bounds__(32)"));
  EXPECT_TRUE(has(*K, "blockIdx.x * 32 + threadIdx.x) * 8"));
  EXPECT_TRUE(has(*K, "gridDim.x * 256)"));
  expectKernelCompiles(*K);
}

/// The kernel of a combine of Tokens x 2048 over 64 experts, each
/// expert's rows weighted per token.
static std::optional<KernelSource> combineOverExperts(int Tokens) {
  std::string T = std::to_string(Tokens);
  return groupKernel("graph @g(%b: bf16[64," + T + ",2048], %w: bf16[64," + T +
                     ",1]) {\n  %m = mul(%b, %w) : bf16[64," + T +
                     ",2048]\n  %s = sum(%m) {dim = -3} : bf16[" + T +
                     ",2048]\n  return %s\n}\n");
}

TEST(LayoutVecCodegen, SmallCombineOverManyExpertsUnrollsBySixteen) {
  // A decode step's combine: 16 tokens x 2048 summed over 64 experts is
  // 4096 threads of 8 lanes, each 64 loads deep: sixteen in flight.
  auto K = combineOverExperts(16);
  ASSERT_TRUE(K);
  EXPECT_TRUE(has(*K, "8 adjacent elements per thread")) << K->Source;
  EXPECT_TRUE(has(*K, "#pragma unroll 16\n    for (int d")) << K->Source;
  EXPECT_EQ(K->GridX, 128u);
  // Each lane's sum still in order of the expert index.
  EXPECT_TRUE(has(*K, "[k] = t0[k] + t"));
  expectKernelCompiles(*K);
  // The same combine over 4096 tokens has threads enough: four in flight,
  // blocks of 256.
  auto Big = combineOverExperts(4096);
  ASSERT_TRUE(Big);
  EXPECT_TRUE(has(*Big, "#pragma unroll 4\n    for (int d")) << Big->Source;
  EXPECT_EQ(Big->BlockX, 256u);
}

TEST(LayoutVecCodegen, MoeCombineLoadsSixteenBytesPerExpert) {
  // The combine (kernel 9): the experts' outputs transposed back, weighted
  // by a per-row weight broadcast along the last dimension (one load for
  // the eight lanes), summed over the experts in order.
  auto K = groupKernel(R"(
graph @g(%b: bf16[8,1,64,64], %w: bf16[8,64,1]) {
  %v3 = reshape(%b) : bf16[8,1,64,64]
  %p1 = transpose(%v3) {perm = [1, 0, 2, 3]} : bf16[1,8,64,64]
  %v4 = reshape(%p1) : bf16[512,64]
  %v5 = reshape(%v4) : bf16[8,64,64]
  %m = mul(%v5, %w) : bf16[8,64,64]
  %s = sum(%m) {dim = -3} : bf16[64,64]
  return %s
}
)");
  ASSERT_TRUE(K);
  EXPECT_TRUE(has(*K, "8 adjacent elements per thread")) << K->Source;
  EXPECT_TRUE(has(*K, "32-bit indices"));
  EXPECT_TRUE(has(*K, "#pragma unroll 4\n    for (int d"));
  EXPECT_TRUE(has(*K, "((const mt_u4 *)(p_b + "));
  // The weight: one scalar load, every lane multiplied by it.
  EXPECT_TRUE(has(*K, "mt_bf16_to_f32(p_w["));
  EXPECT_TRUE(has(*K, "[k] * t"));
  // Each lane's sum in order of the expert index.
  EXPECT_TRUE(has(*K, "[k] = t0[k] + t"));
  expectKernelCompiles(*K);
}

TEST(LayoutVecCodegen, AlignedConcatIsVector) {
  // A concat along the last dimension at a multiple of 8 and one along
  // another dimension: every lane takes its first lane's branch.
  for (const char *Src : {R"(
graph @g(%a: f16[4,16], %b: f16[4,32]) {
  %c = concat(%a, %b) {dim = -1} : f16[4,48]
  %n = neg(%c) : f16[4,48]
  return %n
}
)",
                          R"(
graph @g(%a: bf16[3,32], %b: bf16[5,32]) {
  %c = concat(%a, %b) {dim = 0} : bf16[8,32]
  %n = exp(%c) : bf16[8,32]
  return %n
}
)"}) {
    auto K = groupKernel(Src);
    ASSERT_TRUE(K);
    EXPECT_TRUE(has(*K, "8 adjacent elements per thread")) << K->Source;
    EXPECT_TRUE(has(*K, "} else {"));
    expectKernelCompiles(*K);
  }
}

TEST(LayoutVecCodegen, UnalignedReadsAreScalar) {
  // Lanes that would not start a 16-byte word, or not be adjacent: a slice
  // of the last dimension from 3, a concat along it at 12, a transpose
  // that moves it, an expand along it, and a last dimension of 12.
  for (const char *Src : {R"(
graph @g(%x: bf16[4,67]) {
  %s = slice(%x) {dim = -1, start = 3, end = 67, step = 1} : bf16[4,64]
  %n = neg(%s) : bf16[4,64]
  return %n
}
)",
                          R"(
graph @g(%a: bf16[4,12], %b: bf16[4,20]) {
  %c = concat(%a, %b) {dim = -1} : bf16[4,32]
  %n = neg(%c) : bf16[4,32]
  return %n
}
)",
                          R"(
graph @g(%x: bf16[32,64]) {
  %t = transpose(%x) {perm = [1, 0]} : bf16[64,32]
  %n = neg(%t) : bf16[64,32]
  return %n
}
)",
                          R"(
graph @g(%x: bf16[16,1], %y: bf16[16,4,8]) {
  %r = reshape(%x) : bf16[16,1,1]
  %e = expand(%r) : bf16[16,4,8]
  %t = transpose(%e) {perm = [0, 2, 1]} : bf16[16,8,4]
  %r2 = reshape(%t) : bf16[16,4,8]
  %a = add(%r2, %y) : bf16[16,4,8]
  return %a
}
)",
                          R"(
graph @g(%x: bf16[12,16]) {
  %t = transpose(%x) {perm = [1, 0]} : bf16[16,12]
  %n = neg(%t) : bf16[16,12]
  return %n
}
)"}) {
    auto K = groupKernel(Src);
    ASSERT_TRUE(K);
    EXPECT_TRUE(has(*K, "one element per thread")) << K->Source;
    EXPECT_FALSE(has(*K, "mt_u4 u["));
    EXPECT_TRUE(has(*K, "32-bit indices"));
    expectKernelCompiles(*K);
  }
}

TEST(LayoutVecCodegen, AlignedSliceAndLastDimBroadcastAreVector) {
  // A slice of the last dimension from 16 and a step-1 slice of another
  // with an odd start; an operand of one element per row read once for
  // the lanes; f32 throughout: 4 lanes.
  auto K = groupKernel(R"(
graph @g(%x: f32[5,48], %r: f32[4,1]) {
  %s = slice(%x) {dim = -1, start = 16, end = 48, step = 1} : f32[5,32]
  %s2 = slice(%s) {dim = 0, start = 1, end = 5, step = 1} : f32[4,32]
  %m = mul(%s2, %r) : f32[4,32]
  return %m
}
)");
  ASSERT_TRUE(K);
  EXPECT_TRUE(has(*K, "4 adjacent elements per thread")) << K->Source;
  EXPECT_TRUE(has(*K, "const float t"));
  expectKernelCompiles(*K);
}

TEST(LayoutVecCodegen, OverTwoToTheThirtyOneElementsIsInt64) {
  // 2^31 outputs (never allocated here; only generated and compiled): the
  // indices stay 64-bit, the form still vector.
  auto K = groupKernel(R"(
graph @g(%x: bf16[1024,2048]) {
  %u = reshape(%x) : bf16[1,1024,2048]
  %e = expand(%u) : bf16[1024,1024,2048]
  %n = neg(%e) : bf16[1024,1024,2048]
  return %n
}
)");
  ASSERT_TRUE(K);
  EXPECT_TRUE(has(*K, "8 adjacent elements per thread")) << K->Source;
  EXPECT_TRUE(has(*K, "64-bit indices"));
  EXPECT_TRUE(has(*K, "const long long i"));
  EXPECT_TRUE(has(*K, "i < 2147483648LL"));
  expectKernelCompiles(*K);
  // Just under 2^31 outputs, but the grid-stride loop's index would pass
  // 2^31: still 64-bit.
  auto L = groupKernel(R"(
graph @g(%x: bf16[1023,2048]) {
  %u = reshape(%x) : bf16[1,1023,2048]
  %e = expand(%u) : bf16[1024,1023,2048]
  %n = neg(%e) : bf16[1024,1023,2048]
  return %n
}
)");
  ASSERT_TRUE(L);
  EXPECT_TRUE(has(*L, "64-bit indices")) << L->Source;
}

TEST(LayoutVecCodegen, LongFlatGroupWithGeluUnrollsByFour) {
  // Megatron's bias + GELU at prefill: 4096 x 49152 (2^24.6 groups of 8).
  auto K = groupKernel(R"(
graph @g(%m: bf16[4096,49152], %b: bf16[49152]) {
  %x = add(%m, %b) : bf16[4096,49152]
  %y = gelu(%x) : bf16[4096,49152]
  return %y
}
)");
  ASSERT_TRUE(K);
  EXPECT_TRUE(has(*K, "#define UNROLL 4")) << K->Source;
  // Every iteration's words are loaded before any is computed.
  EXPECT_TRUE(has(*K, "ld_p_m_u[uu].u[q] = ld_p_m.u[q];"));
  EXPECT_EQ(K->GridX, 4096u * 49152 / 8 / 256 / 4);
  expectKernelCompiles(*K);
  // Adds alone stream at the memory's speed with one iteration a thread.
  auto A = groupKernel(R"(
graph @g(%m: bf16[4096,49152], %b: bf16[49152]) {
  %x = add(%m, %b) : bf16[4096,49152]
  return %x
}
)");
  ASSERT_TRUE(A);
  EXPECT_FALSE(has(*A, "UNROLL")) << A->Source;
  EXPECT_EQ(A->GridX, 4096u * 49152 / 8 / 256);
  // A decode step's GELU (64 rows) keeps every thread it can get.
  auto D = groupKernel(R"(
graph @g(%m: bf16[64,49152], %b: bf16[49152]) {
  %x = add(%m, %b) : bf16[64,49152]
  %y = gelu(%x) : bf16[64,49152]
  return %y
}
)");
  ASSERT_TRUE(D);
  EXPECT_FALSE(has(*D, "UNROLL")) << D->Source;
}
