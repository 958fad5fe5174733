//===- GraphTest.cpp ------------------------------------------------------===//
#include "mtsched/IR/Graph.h"
#include "IRTestUtils.h"
#include "mtsched/IR/Printer.h"
#include "gtest/gtest.h"

using namespace mtsched;

TEST(GraphTest, ReplaceNodeKeepsUses) {
  Graph G("g");
  Value *X = G.addInput("x", TensorType(DType::F32, {4}), {});
  auto Relu = std::make_unique<OpNode>(OpCode::Relu, llvm::SMLoc());
  Relu->getOperands().push_back({X, {}});
  Node *R = G.appendNode(std::move(Relu),
                         G.createValue("r", TensorType(DType::F32, {4}), {}));
  auto Neg = std::make_unique<OpNode>(OpCode::Neg, llvm::SMLoc());
  Neg->getOperands().push_back({R->getResult(), {}});
  Node *N = G.appendNode(std::move(Neg),
                         G.createValue("n", TensorType(DType::F32, {4}), {}));

  auto Buf = std::make_unique<BufferNode>(OpCode::Relu, llvm::SMLoc());
  Buf->getOperands().push_back({X, {}});
  Node *B = G.replaceNode(R, std::move(Buf));
  EXPECT_EQ(B->getIndex(), 0u);
  EXPECT_EQ(N->getOperand(0)->getDef(), B);
  EXPECT_EQ(G.getUsers(B->getResult()), std::vector<Node *>{N});
}

namespace {

const char *LoweredText = R"(group @tp = [0, 1]
graph @g(%x: bf16[16,32], %w: bf16[32,8], %b: bf16[8], %c: bf16[16,8]) attributes {world_size = 2} {
  %y = multi_template_buffer matmul(%x, %w) choices [gemm {bm = 64}, extern.cublas] epilogue [%z] decided gemm fused timings {gemm = 1.5us, extern.cublas = inf} fused_timings {gemm = 1.25us} dispatch m {16 = gemm} : bf16[16,8]
  %r = collective_multi_template_buffer all_reduce(%c) {group = "tp"} group @tp kind all_reduce choices [nccl, one_shot] decided one_shot fallback sync failed : bf16[16,8]
  %z = buffer add(%y, %b) kernel 3 : bf16[16,8]
  %u = relu(%z) : bf16[16,8]
  return %u, %r
}
)";

} // namespace

TEST(GraphTest, GetUsersListsEachUserOnceInProgramOrder) {
  Graph G("g");
  TensorType T(DType::F32, {4});
  Value *X = G.addInput("x", T, {});
  auto Add = std::make_unique<OpNode>(OpCode::Add, llvm::SMLoc());
  // A node reading X twice is one user.
  Add->getOperands().push_back({X, {}});
  Add->getOperands().push_back({X, {}});
  Node *A = G.appendNode(std::move(Add), G.createValue("a", T, {}));
  auto Neg = std::make_unique<OpNode>(OpCode::Neg, llvm::SMLoc());
  Neg->getOperands().push_back({X, {}});
  Node *N = G.appendNode(std::move(Neg), G.createValue("n", T, {}));
  G.getOutputs().push_back({N->getResult(), {}});

  EXPECT_EQ(G.getUsers(X), (std::vector<Node *>{A, N}));
  EXPECT_TRUE(G.getUsers(N->getResult()).empty());
  EXPECT_TRUE(G.isOutput(N->getResult()));
  EXPECT_FALSE(G.isOutput(A->getResult()));
  EXPECT_TRUE(X->isGraphInput());
  EXPECT_EQ(A->getResult()->getDef(), A);
  EXPECT_EQ(N->getIndex(), 1u);
}

TEST(GraphTest, ReplaceNodeMovesTheResultToTheNewNode) {
  test::CapturedSource Src(LoweredText);
  std::unique_ptr<Module> M = test::parseAndVerify(Src);
  ASSERT_TRUE(M) << Src.Diags;
  Graph &G = *M->getGraphs()[0];
  Node *Old = G.getNodes()[3].get();
  Value *Result = Old->getResult();
  std::vector<Node *> Users = G.getUsers(Result);

  auto New = std::make_unique<BufferNode>(OpCode::Relu, Old->getLoc());
  New->getOperands() = Old->getOperands();
  New->setKernel(7);
  Node *B = G.replaceNode(Old, std::move(New));
  EXPECT_EQ(B->getIndex(), 3u);
  EXPECT_EQ(B->getResult(), Result);
  EXPECT_EQ(Result->getDef(), B);
  EXPECT_EQ(G.getNodes()[3].get(), B);
  EXPECT_TRUE(G.isOutput(Result));
  EXPECT_EQ(G.getUsers(Result), Users);
  EXPECT_NE(moduleToString(*M).find("%u = buffer relu(%z) kernel 7"),
            std::string::npos)
      << moduleToString(*M);
}

TEST(GraphTest, CloneCopiesEveryNodeKindAndRemapsValues) {
  test::CapturedSource Src(LoweredText);
  std::unique_ptr<Module> M = test::parseAndVerify(Src);
  ASSERT_TRUE(M) << Src.Diags;
  std::unique_ptr<Module> C = M->clone();
  EXPECT_EQ(moduleToString(*C), moduleToString(*M));
  ASSERT_EQ(C->getGroups().size(), 1u);
  EXPECT_EQ(C->getGroups()[0].Ranks, (std::vector<int64_t>{0, 1}));

  const Graph &G = *M->getGraphs()[0];
  const Graph &CG = *C->getGraphs()[0];
  EXPECT_EQ(CG.getAttrs(), G.getAttrs());
  ASSERT_EQ(CG.size(), G.size());
  for (size_t I = 0; I < G.size(); ++I) {
    const Node &N = *G.getNodes()[I], &CN = *CG.getNodes()[I];
    EXPECT_EQ(CN.getKind(), N.getKind());
    EXPECT_NE(&CN, &N);
    EXPECT_EQ(CN.getLoc().getPointer(), N.getLoc().getPointer());
    EXPECT_EQ(CN.getResult()->getDef(), &CN);
    EXPECT_EQ(CN.getIndex(), I);
    // Every operand of the copy is a value of the copy.
    for (const Operand &O : CN.getOperands()) {
      ASSERT_NE(O.V, nullptr);
      EXPECT_TRUE(O.V->isGraphInput() ||
                  CG.getNodes()[O.V->getDef()->getIndex()].get() ==
                      O.V->getDef());
    }
  }
  // The epilogue names a value defined after its node; it is remapped too.
  auto *Y = llvm::cast<MultiTemplateBufferNode>(CG.getNodes()[0].get());
  ASSERT_EQ(Y->getEpilogue().size(), 1u);
  EXPECT_EQ(Y->getEpilogue()[0].V, CG.getNodes()[2]->getResult());
  auto *OrigY = llvm::cast<MultiTemplateBufferNode>(G.getNodes()[0].get());
  EXPECT_EQ(Y->getChoices(), OrigY->getChoices());
  EXPECT_EQ(Y->getDispatch(), OrigY->getDispatch());
  EXPECT_EQ(Y->getDispatchUnit(), OrigY->getDispatchUnit());
  ASSERT_EQ(Y->getTimings().size(), 2u);
  EXPECT_EQ(Y->getTimings()[0].Us, 1.5);
  EXPECT_EQ(Y->getFusedTimings()[0].Us, 1.25);
  EXPECT_TRUE(Y->isEpilogueFused());
  auto *R =
      llvm::cast<CollectiveMultiTemplateBufferNode>(CG.getNodes()[1].get());
  EXPECT_EQ(R->getGroup(), "tp");
  EXPECT_TRUE(R->isFallback());
  EXPECT_EQ(R->getSync(), SyncState::Failed);
  EXPECT_EQ(R->getDecision(), "one_shot");
  EXPECT_EQ(CG.getOutputs()[1].V, R->getResult());

  // Changing the copy leaves the original alone.
  Y->setDecision("extern.cublas");
  llvm::cast<BufferNode>(C->getGraphs()[0]->getNodes()[2].get())->setKernel(9);
  EXPECT_EQ(
      llvm::cast<MultiTemplateBufferNode>(G.getNodes()[0].get())->getDecision(),
      "gemm");
  EXPECT_EQ(llvm::cast<BufferNode>(G.getNodes()[2].get())->getKernel(), 3);
}

TEST(GraphTest, NodeNamesAndKeywords) {
  test::CapturedSource Src(LoweredText);
  std::unique_ptr<Module> M = test::parseAndVerify(Src);
  ASSERT_TRUE(M) << Src.Diags;
  const Graph &G = *M->getGraphs()[0];
  EXPECT_EQ(G.getNodes()[0]->getKindKeyword(), "multi_template_buffer");
  EXPECT_EQ(G.getNodes()[1]->getKindKeyword(),
            "collective_multi_template_buffer");
  EXPECT_EQ(G.getNodes()[2]->getKindKeyword(), "buffer");
  EXPECT_EQ(G.getNodes()[3]->getKindKeyword(), "");
  EXPECT_EQ(G.getNodes()[1]->getOpName(), "all_reduce");
  EXPECT_EQ(G.getNodes()[2]->getName(), "z");

  OpNode Custom(OpCode::Custom, llvm::SMLoc());
  Custom.setCustomName("vllm.allreduce_tp");
  EXPECT_EQ(Custom.getOpName(), "vllm.allreduce_tp");
}

TEST(GraphTest, ExternChoices) {
  EXPECT_TRUE((Choice{"nccl", {}, {}}.isExtern()));
  EXPECT_TRUE((Choice{"extern.cublas", {}, {}}.isExtern()));
  EXPECT_FALSE((Choice{"one_shot", {}, {}}.isExtern()));
  EXPECT_FALSE((Choice{"gemm_extern", {}, {}}.isExtern()));
  EXPECT_FALSE((Choice{"nccl_ring", {}, {}}.isExtern()));
}

TEST(GraphTest, WorldSizeAndGroupRanks) {
  Module M;
  M.getGroups().push_back({"tp", {2, 3}, {}});
  EXPECT_EQ(M.findGroup("tp")->Ranks, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(M.findGroup("pp"), nullptr);
  EXPECT_EQ(M.groupRanks("tp", 4), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(M.groupRanks("world", 3), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(M.groupRanks("pp", 4).empty());

  Graph G("g");
  EXPECT_EQ(G.getWorldSize(), 1);
  G.getAttrs().set("world_size", Attribute::getInt(8));
  EXPECT_EQ(G.getWorldSize(), 8);
  // A world_size that is not an integer is a verifier error; the accessor
  // falls back to 1.
  G.getAttrs().set("world_size", Attribute::getString("8"));
  EXPECT_EQ(G.getWorldSize(), 1);
}

TEST(GraphTest, ANodeOfTwoResultsKeepsBothThroughReplaceAndClone) {
  Graph G("g");
  Value *X = G.addInput("x", TensorType(DType::F32, {4, 8}), {});
  auto TopK = std::make_unique<OpNode>(OpCode::TopK, llvm::SMLoc());
  TopK->getOperands().push_back({X, {}});
  TopK->getAttrs().set("k", Attribute::getInt(2));
  Value *W = G.createValue("w", TensorType(DType::F32, {4, 2}), {});
  Value *E = G.createValue("e", TensorType(DType::I64, {4, 2}), {});
  Node *T = G.appendNode(std::move(TopK), W, {E});
  ASSERT_EQ(T->getNumResults(), 2u);
  EXPECT_EQ(T->getResult(1), E);
  EXPECT_EQ(E->getDef(), T);
  G.getOutputs().push_back({E, {}});

  // Lowering replaces the node: the new one defines both values.
  auto Buf = std::make_unique<BufferNode>(OpCode::TopK, llvm::SMLoc());
  Buf->getOperands().push_back({X, {}});
  Node *B = G.replaceNode(T, std::move(Buf));
  EXPECT_EQ(W->getDef(), B);
  EXPECT_EQ(E->getDef(), B);
  EXPECT_EQ(B->getResult(1), E);

  // A clone has its own values, both defined by the cloned node, and the
  // returned second result is remapped to the clone's.
  std::unique_ptr<Graph> C = G.clone();
  const Node *CB = C->getNodes().front().get();
  ASSERT_EQ(CB->getNumResults(), 2u);
  EXPECT_NE(CB->getResult(1), E);
  EXPECT_EQ(CB->getResult(1)->getName(), "e");
  EXPECT_EQ(CB->getResult(1)->getDef(), CB);
  EXPECT_EQ(C->getOutputs().front().V, CB->getResult(1));

  std::string S;
  llvm::raw_string_ostream OS(S);
  printNode(*CB, OS);
  EXPECT_EQ(OS.str(), "%w, %e = buffer topk(%x) : f32[4,2], i64[4,2]");

  G.eraseNode(B);
  EXPECT_EQ(W->getDef(), nullptr);
  EXPECT_EQ(E->getDef(), nullptr);
}
