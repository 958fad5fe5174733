#include "mtsched/IR/Graph.h"
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

TEST(OpsTest, CollectiveKindFromNames) {
  EXPECT_EQ(collectiveKindInName("vllm.allreduce_tp"),
            CollectiveKind::AllReduce);
  EXPECT_EQ(collectiveKindInName("my_All_Gather"), CollectiveKind::AllGather);
  EXPECT_EQ(collectiveKindInName("ReduceScatterV"),
            CollectiveKind::ReduceScatter);
  EXPECT_EQ(collectiveKindInName("moe.alltoall"), CollectiveKind::AllToAll);
  EXPECT_EQ(collectiveKindInName("flash_attention"), CollectiveKind::None);
}

TEST(OpsTest, SuggestsCloseNamesOnly) {
  EXPECT_EQ(suggestOp("matmull"), "matmul");
  EXPECT_EQ(suggestOp("allreduce"), "all_reduce");
  EXPECT_EQ(suggestOp("convolution"), "");
}
