//===- Ops.cpp - The op table and collective recognition ------------------===//
#include "mtsched/IR/Ops.h"
#include "llvm/ADT/StringExtras.h"

using namespace mtsched;

static const OpInfo OpTable[] = {
    {OpCode::MatMul, "matmul", OpCategory::MatMul, 2},
    {OpCode::AllReduce, "all_reduce", OpCategory::Collective, 1},
    {OpCode::AllGather, "all_gather", OpCategory::Collective, 1},
    {OpCode::ReduceScatter, "reduce_scatter", OpCategory::Collective, 1},
    {OpCode::AllToAll, "all_to_all", OpCategory::Collective, 1},
    {OpCode::Custom, "custom", OpCategory::Custom, -1},
    {OpCode::Add, "add", OpCategory::Pointwise, 2},
    {OpCode::Sub, "sub", OpCategory::Pointwise, 2},
    {OpCode::Mul, "mul", OpCategory::Pointwise, 2},
    {OpCode::Div, "div", OpCategory::Pointwise, 2},
    {OpCode::Relu, "relu", OpCategory::Pointwise, 1},
    {OpCode::Gelu, "gelu", OpCategory::Pointwise, 1},
    {OpCode::Silu, "silu", OpCategory::Pointwise, 1},
    {OpCode::Exp, "exp", OpCategory::Pointwise, 1},
    {OpCode::Neg, "neg", OpCategory::Pointwise, 1},
    {OpCode::Cast, "cast", OpCategory::Pointwise, 1},
    {OpCode::Sum, "sum", OpCategory::Reduction, 1},
    {OpCode::Max, "max", OpCategory::Reduction, 1},
    {OpCode::RmsNorm, "rmsnorm", OpCategory::Reduction, 2},
    {OpCode::Softmax, "softmax", OpCategory::Reduction, 1},
    {OpCode::SwiGlu, "swiglu", OpCategory::MatMul, 3},
    {OpCode::Attention, "attention", OpCategory::MatMul, 3},
};

llvm::ArrayRef<OpInfo> mtsched::allOps() { return OpTable; }

const OpInfo &mtsched::getOpInfo(OpCode Code) {
  return OpTable[static_cast<unsigned>(Code)];
}

std::optional<OpCode> mtsched::lookupOp(llvm::StringRef Name) {
  for (const OpInfo &I : OpTable)
    if (I.Name == Name)
      return I.Code;
  return std::nullopt;
}

llvm::StringRef mtsched::suggestOp(llvm::StringRef Name) {
  llvm::StringRef Best;
  unsigned BestDist = ~0u;
  for (const OpInfo &I : OpTable) {
    unsigned D = Name.edit_distance(I.Name, /*AllowReplacements=*/true,
                                    /*MaxEditDistance=*/3);
    if (D < BestDist) {
      BestDist = D;
      Best = I.Name;
    }
  }
  // Two edits (one swapped pair) for names of four letters or more, else
  // one, so typos match but unrelated short names get no hint.
  unsigned Limit =
      Name.size() >= 4 ? std::max<unsigned>(2, Name.size() / 3) : 1;
  return BestDist <= Limit ? Best : llvm::StringRef();
}

llvm::StringRef mtsched::collectiveKindName(CollectiveKind K) {
  switch (K) {
  case CollectiveKind::None:
    return "none";
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::AllToAll:
    return "all_to_all";
  case CollectiveKind::Unknown:
    return "unknown";
  }
  return "unknown";
}

std::optional<CollectiveKind>
mtsched::parseCollectiveKind(llvm::StringRef Name) {
  for (CollectiveKind K : {CollectiveKind::AllReduce, CollectiveKind::AllGather,
                           CollectiveKind::ReduceScatter,
                           CollectiveKind::AllToAll, CollectiveKind::Unknown})
    if (collectiveKindName(K) == Name)
      return K;
  return std::nullopt;
}

CollectiveKind mtsched::collectiveKindInName(llvm::StringRef Name) {
  std::string Lower = Name.lower();
  llvm::StringRef L(Lower);
  struct Pattern {
    llvm::StringRef Underscored, Joined;
    CollectiveKind Kind;
  };
  static const Pattern Patterns[] = {
      {"all_reduce", "allreduce", CollectiveKind::AllReduce},
      {"all_gather", "allgather", CollectiveKind::AllGather},
      {"reduce_scatter", "reducescatter", CollectiveKind::ReduceScatter},
      {"all_to_all", "alltoall", CollectiveKind::AllToAll},
  };
  for (const Pattern &P : Patterns)
    if (L.contains(P.Underscored) || L.contains(P.Joined))
      return P.Kind;
  return CollectiveKind::None;
}

CollectiveKind mtsched::collectiveKindOf(OpCode C) {
  switch (C) {
  case OpCode::AllReduce:
    return CollectiveKind::AllReduce;
  case OpCode::AllGather:
    return CollectiveKind::AllGather;
  case OpCode::ReduceScatter:
    return CollectiveKind::ReduceScatter;
  case OpCode::AllToAll:
    return CollectiveKind::AllToAll;
  default:
    return CollectiveKind::None;
  }
}
