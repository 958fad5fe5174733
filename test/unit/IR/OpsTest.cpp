//===- OpsTest.cpp --------------------------------------------------------===//
#include "mtsched/IR/Ops.h"
#include "gtest/gtest.h"

using namespace mtsched;

TEST(OpsTest, TableIsInOpCodeOrderAndLookupsAgree) {
  unsigned I = 0;
  for (const OpInfo &Info : allOps()) {
    EXPECT_EQ(static_cast<unsigned>(Info.Code), I++) << Info.Name.str();
    EXPECT_EQ(&getOpInfo(Info.Code), &Info);
    EXPECT_EQ(lookupOp(Info.Name), Info.Code);
  }
  EXPECT_EQ(I, 22u);
  EXPECT_FALSE(lookupOp("Relu").has_value());
  EXPECT_FALSE(lookupOp("").has_value());
}

TEST(OpsTest, CategoriesAndArity) {
  EXPECT_EQ(getOpInfo(OpCode::MatMul).NumOperands, 2);
  EXPECT_EQ(getOpInfo(OpCode::RmsNorm).NumOperands, 2);
  EXPECT_EQ(getOpInfo(OpCode::SwiGlu).NumOperands, 3);
  EXPECT_EQ(getOpInfo(OpCode::SwiGlu).Category, OpCategory::MatMul);
  EXPECT_EQ(getOpInfo(OpCode::Attention).NumOperands, 3);
  EXPECT_EQ(getOpInfo(OpCode::Attention).Category, OpCategory::MatMul);
  EXPECT_EQ(getOpInfo(OpCode::Custom).NumOperands, -1);
  EXPECT_EQ(getOpInfo(OpCode::AllToAll).Category, OpCategory::Collective);
  EXPECT_TRUE(isPointwise(OpCode::Cast));
  EXPECT_TRUE(isPointwise(OpCode::Div));
  EXPECT_FALSE(isPointwise(OpCode::Sum));
  EXPECT_TRUE(isReduction(OpCode::Softmax));
  EXPECT_TRUE(isRowReduction(OpCode::RmsNorm));
  EXPECT_TRUE(isRowReduction(OpCode::Softmax));
  // sum and max drop or keep a dimension, so they are not row reductions.
  EXPECT_FALSE(isRowReduction(OpCode::Sum));
  EXPECT_FALSE(isRowReduction(OpCode::Max));
}

TEST(OpsTest, SuggestionsForTypos) {
  EXPECT_EQ(suggestOp("rleu"), "relu");
  EXPECT_EQ(suggestOp("matmull"), "matmul");
  EXPECT_EQ(suggestOp("allreduce"), "all_reduce");
  EXPECT_EQ(suggestOp("all_gahter"), "all_gather");
  EXPECT_EQ(suggestOp("softmx"), "softmax");
  EXPECT_EQ(suggestOp("rms_norm"), "rmsnorm");
  // Short names get a hint for one edit only.
  EXPECT_EQ(suggestOp("ad"), "add");
  EXPECT_EQ(suggestOp("xyz"), "");
  // Unrelated names get none.
  EXPECT_EQ(suggestOp("convolution"), "");
  EXPECT_EQ(suggestOp("transpose"), "");
  EXPECT_EQ(suggestOp(""), "");
}

TEST(OpsTest, CollectiveKindsOfOps) {
  EXPECT_EQ(collectiveKindOf(OpCode::AllReduce), CollectiveKind::AllReduce);
  EXPECT_EQ(collectiveKindOf(OpCode::AllGather), CollectiveKind::AllGather);
  EXPECT_EQ(collectiveKindOf(OpCode::ReduceScatter),
            CollectiveKind::ReduceScatter);
  EXPECT_EQ(collectiveKindOf(OpCode::AllToAll), CollectiveKind::AllToAll);
  EXPECT_EQ(collectiveKindOf(OpCode::MatMul), CollectiveKind::None);
  // A custom op is a collective only through its name or configs, which
  // collectiveKindInName inspects.
  EXPECT_EQ(collectiveKindOf(OpCode::Custom), CollectiveKind::None);
}

TEST(OpsTest, CollectiveKindsInNames) {
  EXPECT_EQ(collectiveKindInName("all_reduce"), CollectiveKind::AllReduce);
  EXPECT_EQ(collectiveKindInName("vllm.allreduce_tp"),
            CollectiveKind::AllReduce);
  EXPECT_EQ(collectiveKindInName("NCCL_AllReduce"), CollectiveKind::AllReduce);
  EXPECT_EQ(collectiveKindInName("my_All_Gather"), CollectiveKind::AllGather);
  EXPECT_EQ(collectiveKindInName("ReduceScatterV"),
            CollectiveKind::ReduceScatter);
  EXPECT_EQ(collectiveKindInName("moe.alltoall"), CollectiveKind::AllToAll);
  EXPECT_EQ(collectiveKindInName("ep.all_to_all_v"), CollectiveKind::AllToAll);
  EXPECT_EQ(collectiveKindInName("flash_attention"), CollectiveKind::None);
  EXPECT_EQ(collectiveKindInName("reduce"), CollectiveKind::None);
  EXPECT_EQ(collectiveKindInName("gather"), CollectiveKind::None);
  EXPECT_EQ(collectiveKindInName(""), CollectiveKind::None);
  // The patterns are tried in order, so a name containing two collectives
  // takes the first: all_reduce before all_gather.
  EXPECT_EQ(collectiveKindInName("allgather_then_allreduce"),
            CollectiveKind::AllReduce);
}

TEST(OpsTest, CollectiveKindNames) {
  for (CollectiveKind K : {CollectiveKind::AllReduce, CollectiveKind::AllGather,
                           CollectiveKind::ReduceScatter,
                           CollectiveKind::AllToAll, CollectiveKind::Unknown})
    EXPECT_EQ(parseCollectiveKind(collectiveKindName(K)), K);
  EXPECT_EQ(collectiveKindName(CollectiveKind::None), "none");
  // `none` is a name for messages, never a kind a node can be parsed with.
  EXPECT_FALSE(parseCollectiveKind("none").has_value());
  EXPECT_FALSE(parseCollectiveKind("allreduce").has_value());
}
