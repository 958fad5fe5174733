//===- VerifyScheduleTest.cpp - The schedule checker on unverified IR -----===//
//
// The verifier rejects these graphs first; the checker is the last line of
// defence, so it is tested on IR that skipped the verifier.
//
//===----------------------------------------------------------------------===//
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/Schedule/Schedule.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"

using namespace mtsched;

namespace {

std::string check(llvm::StringRef Text) {
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(Text, "t.mir"),
                        llvm::SMLoc());
  std::unique_ptr<Module> M = parseModule(SM);
  if (!M)
    return "<parse error>";
  llvm::Error E = verifySchedule(*M->getGraphs().front());
  return E ? llvm::toString(std::move(E)) : "";
}

TEST(VerifyScheduleTest, LegalSplitSwiGluRuns) {
  EXPECT_EQ(
      check(R"(graph @g(%h: bf16[16,64], %wg: bf16[64,32], %wu: bf16[64,32]) {
  %g = multi_template_buffer matmul(%h, %wg) choices [a] epilogue [%gs] decided a fused : bf16[16,32]
  %u = multi_template_buffer matmul(%h, %wu) choices [a] epilogue [%gu] decided a fused : bf16[16,32]
  %gs = buffer silu(%g) kernel 0 : bf16[16,32]
  %gu = buffer mul(%gs, %u) kernel 1 : bf16[16,32]
  return %gu
})"),
      "");
}

TEST(VerifyScheduleTest, NodeFusedIntoTwoKernels) {
  EXPECT_EQ(
      check(R"(graph @g(%h: bf16[16,64], %wg: bf16[64,32], %wu: bf16[64,32]) {
  %g = multi_template_buffer matmul(%h, %wg) choices [a] epilogue [%gs, %gu] decided a fused : bf16[16,32]
  %u = multi_template_buffer matmul(%h, %wu) choices [a] epilogue [%gu] decided a fused : bf16[16,32]
  %gs = buffer silu(%g) : bf16[16,32]
  %gu = buffer mul(%gs, %u) : bf16[16,32]
  return %gu
})"),
      "'%gu' is fused into the kernels of '%g' and '%u'");
}

TEST(VerifyScheduleTest, FusedTemplateResultIsNeverWritten) {
  EXPECT_EQ(check(R"(graph @g(%x: bf16[16,64], %w: bf16[64,32]) {
  %y = multi_template_buffer matmul(%x, %w) choices [a] epilogue [%r] decided a fused : bf16[16,32]
  %r = buffer relu(%y) : bf16[16,32]
  %o = buffer neg(%y) : bf16[16,32]
  return %r, %o
})"),
            "kernel 1 ('%o') reads '%y', which no earlier kernel writes");
}

TEST(VerifyScheduleTest, MissingExtraWrite) {
  EXPECT_EQ(
      check(
          R"(graph @g(%x: bf16[16,64], %w: bf16[64,32], %b: bf16[32], %gw: bf16[32]) {
  %y = multi_template_buffer matmul(%x, %w) choices [a] epilogue [%s, %n] decided a fused : bf16[16,32]
  %s = buffer add(%y, %b) : bf16[16,32]
  %n = buffer rmsnorm(%s, %gw) : bf16[16,32]
  return %s, %n
})"),
      "returned value '%s' is never written to memory");
  EXPECT_EQ(
      check(
          R"(graph @g(%x: bf16[16,64], %w: bf16[64,32], %b: bf16[32], %gw: bf16[32]) {
  %y = multi_template_buffer matmul(%x, %w) choices [a] epilogue [%s, %n] writes [%s] decided a fused : bf16[16,32]
  %s = buffer add(%y, %b) : bf16[16,32]
  %n = buffer rmsnorm(%s, %gw) : bf16[16,32]
  return %s, %n
})"),
      "");
}

TEST(VerifyScheduleTest, UnfusedEpilogueRunsAsItsOwnKernel) {
  EXPECT_EQ(check(R"(graph @g(%x: bf16[16,64], %w: bf16[64,32]) {
  %y = multi_template_buffer matmul(%x, %w) choices [a] epilogue [%r] decided a : bf16[16,32]
  %r = buffer relu(%y) kernel 0 : bf16[16,32]
  return %r
})"),
            "");
}

} // namespace
