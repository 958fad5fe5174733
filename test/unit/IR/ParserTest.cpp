#include "mtsched/IR/Graph.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/IR/Printer.h"
#include "mtsched/IR/Verifier.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"

using namespace mtsched;

namespace {

struct Parsed {
  std::unique_ptr<Module> M;
  std::string Diags;
};

Parsed parse(llvm::StringRef Text) {
  Parsed P;
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(Text, "t.mir"),
                        llvm::SMLoc());
  llvm::raw_string_ostream OS(P.Diags);
  SM.setDiagHandler(
      [](const llvm::SMDiagnostic &D, void *Ctx) {
        D.print(nullptr, *static_cast<llvm::raw_string_ostream *>(Ctx),
                /*ShowColors=*/false);
      },
      &OS);
  P.M = parseModule(SM);
  if (P.M)
    if (llvm::Error E = verifyModule(*P.M, SM)) {
      llvm::consumeError(std::move(E));
      P.M.reset();
    }
  OS.flush();
  return P;
}

TEST(ParserTest, LoweredNodesHaveTheirKinds) {
  Parsed P = parse(R"(group @tp = [0, 1]
graph @g(%x: bf16[16,32], %w: bf16[32,8]) attributes {world_size = 2} {
  %y = multi_template_buffer matmul(%x, %w) choices [gemm_a {bm = 64}, extern.cublas] epilogue [%z] decided gemm_a fused timings {gemm_a = 1.5us, extern.cublas = inf} : bf16[16,8]
  %r = collective_multi_template_buffer all_reduce(%y) {group = "tp"} group @tp kind all_reduce choices [nccl, one_shot] sync ok : bf16[16,8]
  %z = buffer relu(%r) kernel 0 : bf16[16,8]
  return %z
}
)");
  ASSERT_TRUE(P.M) << P.Diags;
  const Graph &G = *P.M->getGraphs()[0];
  ASSERT_EQ(G.size(), 3u);
  Node *Y = G.getNodes()[0].get();
  Node *R = G.getNodes()[1].get();
  Node *Z = G.getNodes()[2].get();
  EXPECT_TRUE(llvm::isa<MultiTemplateBufferNode>(Y));
  EXPECT_FALSE(llvm::isa<CollectiveMultiTemplateBufferNode>(Y));
  // A collective MTB is also an MTB: the kinds form a range.
  EXPECT_TRUE(llvm::isa<MultiTemplateBufferNode>(R));
  EXPECT_TRUE(llvm::isa<CollectiveMultiTemplateBufferNode>(R));
  EXPECT_TRUE(llvm::isa<BufferNode>(Z));
  auto *MTB = llvm::cast<MultiTemplateBufferNode>(Y);
  EXPECT_EQ(MTB->getDecision(), "gemm_a");
  EXPECT_TRUE(MTB->isEpilogueFused());
  ASSERT_EQ(MTB->getEpilogue().size(), 1u);
  EXPECT_EQ(MTB->getEpilogue()[0].V, Z->getResult());
  EXPECT_TRUE(std::isinf(MTB->getTimings()[1].Us));
  EXPECT_TRUE(MTB->getChoices()[1].isExtern());
  EXPECT_EQ(llvm::cast<CollectiveMultiTemplateBufferNode>(R)->getSync(),
            SyncState::Ok);
  EXPECT_EQ(llvm::cast<BufferNode>(Z)->getKernel(), 0);
}

TEST(ParserTest, PrintIsAFixedPoint) {
  const char *Text = R"(graph @g(%x: f32[4,8], %b: f32[8]) attributes {world_size = 1, name = "a\"b", ratio = 0.1, flags = [true, 2, [3.5]]} {
  %y = add(%x, %b) : f32[4,8]
  %s = sum(%y) {dim = 0} : f32[8]
  return %y, %s
}
)";
  Parsed P = parse(Text);
  ASSERT_TRUE(P.M) << P.Diags;
  std::string Once = moduleToString(*P.M);
  EXPECT_EQ(Once, Text);
  Parsed Again = parse(Once);
  ASSERT_TRUE(Again.M) << Again.Diags;
  EXPECT_EQ(moduleToString(*Again.M), Once);
}

TEST(ParserTest, ErrorsCarryLineAndColumn) {
  Parsed P = parse("graph @g(%x: f32[4]) {\n  %y = rleu(%x) : f32[4]\n  "
                   "return %y\n}\n");
  EXPECT_FALSE(P.M);
  EXPECT_NE(P.Diags.find("t.mir:2:8: error: unknown op 'rleu'; did you mean "
                         "'relu'?"),
            std::string::npos)
      << P.Diags;
}

TEST(ParserTest, CloneIsIndependent) {
  Parsed P = parse("graph @g(%x: f32[4]) {\n  %y = relu(%x) : f32[4]\n  "
                   "return %y\n}\n");
  ASSERT_TRUE(P.M) << P.Diags;
  std::unique_ptr<Module> C = P.M->clone();
  EXPECT_EQ(moduleToString(*C), moduleToString(*P.M));
  const Graph &G = *C->getGraphs()[0];
  EXPECT_EQ(G.getNodes()[0]->getOperand(0), G.getInputs()[0].get());
  EXPECT_NE(G.getNodes()[0]->getOperand(0),
            P.M->getGraphs()[0]->getInputs()[0].get());
}

} // namespace
