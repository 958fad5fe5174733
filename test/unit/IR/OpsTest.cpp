//===- OpsTest.cpp --------------------------------------------------------===//
#include "mtsched/IR/Ops.h"
#include "llvm/ADT/StringMap.h"
#include "gtest/gtest.h"
#include <cmath>
#include <functional>
#include <vector>

using namespace mtsched;

TEST(OpsTest, TableIsInOpCodeOrderAndLookupsAgree) {
  unsigned I = 0;
  for (const OpInfo &Info : allOps()) {
    EXPECT_EQ(static_cast<unsigned>(Info.Code), I++) << Info.Name.str();
    EXPECT_EQ(&getOpInfo(Info.Code), &Info);
    EXPECT_EQ(lookupOp(Info.Name), Info.Code);
  }
  EXPECT_GE(I, 22u);
  EXPECT_FALSE(lookupOp("Relu").has_value());
  EXPECT_FALSE(lookupOp("").has_value());
}

TEST(OpsTest, CategoriesAndArity) {
  // 2, or 4 with fp8 operands and their scales: the verifier checks.
  EXPECT_EQ(getOpInfo(OpCode::MatMul).NumOperands, -1);
  EXPECT_EQ(getOpInfo(OpCode::RmsNorm).NumOperands, 2);
  EXPECT_EQ(getOpInfo(OpCode::SwiGlu).NumOperands, 3);
  EXPECT_EQ(getOpInfo(OpCode::SwiGlu).Category, OpCategory::MatMul);
  EXPECT_EQ(getOpInfo(OpCode::Attention).NumOperands, -1);
  EXPECT_EQ(getOpInfo(OpCode::Attention).Category, OpCategory::MatMul);
  EXPECT_EQ(getOpInfo(OpCode::Custom).NumOperands, -1);
  EXPECT_EQ(getOpInfo(OpCode::AllToAll).Category, OpCategory::Collective);
  EXPECT_TRUE(isPointwise(OpCode::Cast));
  EXPECT_TRUE(isPointwise(OpCode::Div));
  EXPECT_FALSE(isPointwise(OpCode::Sum));
  EXPECT_TRUE(isReduction(OpCode::Softmax));
  EXPECT_TRUE(isRowReduction(OpCode::RmsNorm));
  EXPECT_TRUE(isRowReduction(OpCode::Softmax));
  EXPECT_TRUE(isRowReduction(OpCode::LayerNorm));
  EXPECT_EQ(getOpInfo(OpCode::Gather).Category, OpCategory::Layout);
  EXPECT_EQ(getOpInfo(OpCode::Eq).Types, OpTypeRule::Compare);
  EXPECT_EQ(getOpInfo(OpCode::LogicalAnd).Types, OpTypeRule::Logical);
  // sum and max drop or keep a dimension, so they are not row reductions.
  EXPECT_FALSE(isRowReduction(OpCode::Sum));
  EXPECT_FALSE(isRowReduction(OpCode::Max));
}

/// What <cmath> says each pointwise op computes, by name: the table's fp64
/// reference must agree. A new pointwise op adds its line here.
static const llvm::StringMap<std::function<double(const std::vector<double> &)>>
    &cmathReference() {
  using V = const std::vector<double> &;
  static const llvm::StringMap<std::function<double(V)>> R = {
      {"add", [](V X) { return X[0] + X[1]; }},
      {"sub", [](V X) { return X[0] - X[1]; }},
      {"mul", [](V X) { return X[0] * X[1]; }},
      {"div", [](V X) { return X[0] / X[1]; }},
      {"relu", [](V X) { return std::fmax(X[0], 0.0); }},
      {"gelu",
       [](V X) { return X[0] * 0.5 * std::erfc(-X[0] / std::sqrt(2.0)); }},
      {"silu", [](V X) { return X[0] / (1 + std::exp(-X[0])); }},
      {"exp", [](V X) { return std::exp(X[0]); }},
      {"neg", [](V X) { return -X[0]; }},
      {"cast", [](V X) { return X[0]; }},
      {"rsqrt", [](V X) { return std::pow(X[0], -0.5); }},
      {"sin", [](V X) { return std::sin(X[0]); }},
      {"cos", [](V X) { return std::cos(X[0]); }},
      {"sigmoid", [](V X) { return 0.5 * (1 + std::tanh(X[0] / 2)); }},
      {"tanh", [](V X) { return std::sinh(X[0]) / std::cosh(X[0]); }},
      {"sqrt", [](V X) { return std::pow(X[0], 0.5); }},
      {"abs", [](V X) { return X[0] < 0 ? -X[0] : X[0]; }},
      {"recip", [](V X) { return std::pow(X[0], -1.0); }},
      {"pow", [](V X) { return std::pow(X[0], X[1]); }},
      {"maximum", [](V X) { return X[0] > X[1] ? X[0] : X[1]; }},
      {"minimum", [](V X) { return X[0] < X[1] ? X[0] : X[1]; }},
      {"where",
       [](V X) { return std::fpclassify(X[0]) == FP_ZERO ? X[2] : X[1]; }},
      // The first operand gives only the shape.
      {"full_like", [](V X) { return X[1]; }},
      {"log", [](V X) { return std::log2(X[0]) / std::log2(std::exp(1.0)); }},
      {"erf", [](V X) { return 1 - std::erfc(X[0]); }},
      {"gelu_tanh",
       [](V X) {
         double K = std::sqrt(2 / std::acos(-1.0));
         return X[0] /
                (1 + std::exp(-2 * K * (X[0] + 0.044715 * X[0] * X[0] * X[0])));
       }},
      {"log1p", [](V X) { return std::log(1 + X[0]); }},
      {"expm1", [](V X) { return std::exp(X[0]) - 1; }},
      {"floor",
       [](V X) {
         return X[0] - std::fmod(X[0], 1.0) -
                (std::fmod(X[0], 1.0) < 0 ? 1 : 0);
       }},
      {"ceil", [](V X) { return -std::floor(-X[0]); }},
      // Half to even, as torch.round: -2.5 is -2, 0.5 is 0.
      {"round", [](V X) { return X[0] - std::remainder(X[0], 1.0); }},
      {"sign", [](V X) { return double((X[0] > 0) - (X[0] < 0)); }},
      {"fmod", [](V X) { return X[0] - std::trunc(X[0] / X[1]) * X[1]; }},
      // Python's %: the divisor's sign.
      {"remainder", [](V X) { return X[0] - std::floor(X[0] / X[1]) * X[1]; }},
      {"eq", [](V X) { return double(X[0] == X[1]); }},
      {"ne", [](V X) { return double(X[0] != X[1]); }},
      {"lt", [](V X) { return double(X[0] < X[1]); }},
      {"le", [](V X) { return double(X[0] <= X[1]); }},
      {"gt", [](V X) { return double(X[0] > X[1]); }},
      {"ge", [](V X) { return double(X[0] >= X[1]); }},
      {"logical_not", [](V X) { return double(!X[0]); }},
      {"logical_and", [](V X) { return double(X[0] && X[1]); }},
      {"logical_or", [](V X) { return double(X[0] || X[1]); }},
  };
  return R;
}

TEST(OpsTest, PointwiseReferencesAgreeWithCmath) {
  const double Points[] = {-2.5, -1, -0.25, 0, 0.5, 1, 3};
  unsigned Checked = 0;
  for (const OpInfo &Info : allOps()) {
    if (Info.Category != OpCategory::Pointwise)
      continue;
    ASSERT_TRUE(Info.Reference && Info.CudaExpr) << Info.Name.str();
    auto It = cmathReference().find(Info.Name);
    ASSERT_NE(It, cmathReference().end())
        << "no <cmath> reference for '" << Info.Name.str() << "' in this test";
    ASSERT_GE(Info.NumOperands, 1);
    // Every combination of points over the op's operands.
    unsigned Combos = 1;
    for (int I = 0; I < Info.NumOperands; ++I)
      Combos *= std::size(Points);
    for (unsigned C = 0; C < Combos; ++C) {
      std::vector<double> X;
      for (unsigned I = 0, Rest = C; I < unsigned(Info.NumOperands);
           ++I, Rest /= std::size(Points))
        X.push_back(Points[Rest % std::size(Points)]);
      double Want = It->second(X), Got = evaluatePointwise(Info.Code, X);
      std::string At = Info.Name.str() + " at " + std::to_string(X[0]) +
                       (X.size() > 1 ? ", " + std::to_string(X[1]) : "");
      if (std::isnan(Want)) {
        EXPECT_TRUE(std::isnan(Got)) << At;
      } else if (std::isinf(Want)) {
        EXPECT_EQ(Got, Want) << At;
      } else {
        EXPECT_NEAR(Got, Want, 1e-12 * std::max(1.0, std::fabs(Want))) << At;
      }
      ++Checked;
    }
  }
  EXPECT_GT(Checked, 0u);
}

TEST(OpsTest, CudaExpressionsNameEachOperandOnce) {
  for (const OpInfo &Info : allOps()) {
    if (Info.Category != OpCategory::Pointwise)
      continue;
    std::vector<std::string> Ops;
    for (int I = 0; I < Info.NumOperands; ++I)
      Ops.push_back("OPERAND" + std::to_string(I) + "_");
    std::string E = expandCudaExpr(Info.Code, Ops);
    // Every operand is used (but a fill's first, which gives only the
    // shape) and nothing is left unexpanded.
    for (const std::string &O : Ops)
      if (Info.Types == OpTypeRule::Fill && O == Ops.front())
        EXPECT_EQ(E.find(O), std::string::npos) << Info.Name.str() << ": " << E;
      else
        EXPECT_NE(E.find(O), std::string::npos) << Info.Name.str() << ": " << E;
    EXPECT_EQ(E.find('{'), std::string::npos) << Info.Name.str() << ": " << E;
  }
  EXPECT_EQ(expandCudaExpr(OpCode::Add, {"a", "b[i]"}), "(a + b[i])");
  EXPECT_EQ(expandCudaExpr(OpCode::Silu, {"x"}), "(x / (1.f + expf(-x)))");
}

TEST(OpsTest, EpilogueRolesAndCosts) {
  for (const OpInfo &Info : allOps()) {
    bool Member = joinsEpilogue(Info.Code);
    // Pointwise ops and row reductions join epilogues, and only they cost
    // flops as members.
    EXPECT_EQ(Member, Info.Category == OpCategory::Pointwise ||
                          isRowReduction(Info.Code))
        << Info.Name.str();
    EXPECT_EQ(Member, Info.FlopsPerElement > 0) << Info.Name.str();
  }
  EXPECT_EQ(getOpInfo(OpCode::Gelu).FlopsPerElement, 8);
  EXPECT_EQ(getOpInfo(OpCode::MatMul).Epilogue, OpEpilogueRole::Absorbs);
  EXPECT_EQ(getOpInfo(OpCode::Sum).Epilogue, OpEpilogueRole::None);
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
  EXPECT_EQ(suggestOp("permute"), "");
  EXPECT_EQ(suggestOp("tranpose"), "transpose");
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
