//===- PrologueTest.cpp - GEMMs with an RMSNorm prologue on a real GPU ----===//
//
// Decided graphs with the marks select-prologue writes (the norm in a
// plain GEMM's prologue, split-K and not, aligned and ragged; in a merged
// Q/K/V GEMM's; in SwiGLU's merged gate+up GEMM), run end to end with
// --run's executor and checked against the fp64 interpreter. Each test
// skips, saying why, without a GPU.
//
//===----------------------------------------------------------------------===//
#include "IRTestUtils.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaBenchmarker.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/Schedule/Schedule.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"

using namespace mtsched;

#define REQUIRE_GPU()                                                          \
  do {                                                                         \
    llvm::Expected<cuda::DeviceInfo> Dev = cuda::openDevice();                 \
    if (!Dev)                                                                  \
      GTEST_SKIP() << "no usable GPU: " << llvm::toString(Dev.takeError());    \
  } while (0)

namespace {

/// Parses decided IR Text, checks its schedule, runs it on the GPU and
/// expects each of Outputs to match the fp64 interpreter.
void runDecided(const std::string &Text,
                std::initializer_list<const char *> Outputs) {
  llvm::SourceMgr SM;
  std::unique_ptr<Module> M = test::parseAndVerify(SM, Text);
  ASSERT_TRUE(M) << Text;
  Graph &G = *M->getGraphs()[0];
  if (llvm::Error E = verifySchedule(G))
    FAIL() << llvm::toString(std::move(E));
  std::string Log;
  llvm::raw_string_ostream OS(Log);
  llvm::Error E = runGraphOnGpu(G, 1, OS);
  EXPECT_FALSE(bool(E)) << llvm::toString(std::move(E)) << Log;
  for (const char *Out : Outputs)
    EXPECT_NE(Log.find("output %" + std::string(Out) + " matches"),
              std::string::npos)
        << Log;
}

std::string ty(const char *T, int64_t A, int64_t B) {
  return std::string(T) + "[" + std::to_string(A) + "," + std::to_string(B) +
         "]";
}

/// `%n = rmsnorm(%x, %w)` in the prologue of `%y = matmul(%n, %b)`.
std::string plain(const char *T, int64_t M, int64_t K, int64_t N,
                  const std::string &Tile) {
  return "graph @g(%x: " + ty(T, M, K) + ", %w: " + T + "[" +
         std::to_string(K) + "], %b: " + ty(T, K, N) +
         ") {\n  %n = buffer rmsnorm(%x, %w) {eps = 1e-05, prologue_into = "
         "[\"y\"]} kernel 0 : " +
         ty(T, M, K) + "\n  %y = multi_template_buffer matmul(%n, %b) " +
         "{prologue = \"n\"} choices [" + Tile + "] decided " + Tile + " : " +
         ty(T, M, N) + "\n  return %y\n}\n";
}

} // namespace

TEST(PrologueGpu, PlainGemmMatchesTheReference) {
  REQUIRE_GPU();
  // Decode rows, split-K and not; one row; ragged (element-wise copies,
  // rows past M); f16.
  runDecided(plain("bf16", 16, 4096, 4096, "gemm_16x64x64_w4_s8_k2"), {"y"});
  runDecided(plain("bf16", 16, 4096, 14336, "gemm_16x128x128_w4_s4"), {"y"});
  runDecided(plain("bf16", 1, 4096, 4096, "gemm_16x64x128_w4_s5_k2"), {"y"});
  runDecided(plain("bf16", 33, 130, 200, "gemm_32x64x64_w4_s4"), {"y"});
  runDecided(plain("f16", 64, 512, 256, "gemm_64x64x64_w4_s4"), {"y"});
}

TEST(PrologueGpu, MergedQkvMatchesTheReference) {
  REQUIRE_GPU();
  runDecided(
      R"(graph @g(%x: bf16[16,4096], %w: bf16[4096], %wq: bf16[4096,2048], %wk: bf16[4096,512], %wv: bf16[4096,512]) {
  %n = buffer rmsnorm(%x, %w) {eps = 1e-05, prologue_into = ["q", "k", "v"]} kernel 0 : bf16[16,4096]
  %q = multi_template_buffer matmul(%n, %wq) {horizontal = ["q", "k", "v"], horizontal_tile = "gemm_16x64x64_w4_s8_k2", prologue = "n"} choices [gemm_16x64x64_w4_s8_k2] decided gemm_16x64x64_w4_s8_k2 : bf16[16,2048]
  %k = multi_template_buffer matmul(%n, %wk) {horizontal_of = "q", prologue = "n"} choices [gemm_16x64x64_w4_s8_k2] decided gemm_16x64x64_w4_s8_k2 : bf16[16,512]
  %v = multi_template_buffer matmul(%n, %wv) {horizontal_of = "q", prologue = "n"} choices [gemm_16x64x64_w4_s8_k2] decided gemm_16x64x64_w4_s8_k2 : bf16[16,512]
  return %q, %k, %v
}
)",
      {"q", "k", "v"});
}

TEST(PrologueGpu, SwiGluMatchesTheReference) {
  REQUIRE_GPU();
  runDecided(
      R"(graph @g(%x: bf16[16,4096], %w: bf16[4096], %wg: bf16[4096,7168], %wu: bf16[4096,7168]) {
  %n = buffer rmsnorm(%x, %w) {eps = 1e-05, prologue_into = ["gu"]} kernel 0 : bf16[16,4096]
  %gu = multi_template_buffer swiglu(%n, %wg, %wu) {prologue = "n"} choices [swiglu_16x64x128_w4_s3] decided swiglu_16x64x128_w4_s3 : bf16[16,7168]
  return %gu
}
)",
      {"gu"});
}

TEST(PrologueGpu, DecidedIrParsesAndVerifiesWithoutAGpu) {
  // What the GPU tests above run is legal decided IR (checked everywhere).
  llvm::SourceMgr SM;
  std::string Text = plain("bf16", 33, 130, 200, "gemm_32x64x64_w4_s4");
  SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(Text, "t.mir"),
                        llvm::SMLoc());
  std::unique_ptr<Module> M = parseModule(SM);
  ASSERT_TRUE(M);
  llvm::Error E = verifySchedule(*M->getGraphs()[0]);
  EXPECT_FALSE(bool(E)) << llvm::toString(std::move(E));
}
