//===- Ops.cpp - The op table and collective recognition ------------------===//
#include "mtsched/IR/Ops.h"
#include "mtsched/IR/Graph.h"
#include "llvm/ADT/StringExtras.h"
#include <cassert>
#include <cmath>

using namespace mtsched;

/// torch.remainder: the remainder of A / B with the divisor's sign (Python's
/// %), computed as PyTorch does, from fmod, so no quotient is rounded.
static double torchRemainder(double A, double B) {
  double M = std::fmod(A, B);
  if (M != 0 && (B < 0) != (M < 0))
    M += B;
  return M;
}

// The fp64 references: one function per pointwise op, named after it.
#define POINTWISE_OP(Code, Name, Arity, Flops, Types, Cuda, ...)               \
  static double reference##Code(llvm::ArrayRef<double> X) {                    \
    return __VA_ARGS__;                                                        \
  }
#include "mtsched/IR/Ops.def"

static const OpInfo OpTable[] = {
#define OP(Code, Name, Category, Arity, Epilogue, Flops, Types)                \
  {OpCode::Code,                                                               \
   Name,                                                                       \
   OpCategory::Category,                                                       \
   Arity,                                                                      \
   OpEpilogueRole::Epilogue,                                                   \
   Flops,                                                                      \
   OpTypeRule::Types,                                                          \
   1,                                                                          \
   nullptr,                                                                    \
   nullptr},
#define OP_UNIT(Code, Name, Arity, Results, File)                              \
  {                                                                            \
      OpCode::Code,                                                            \
      Name,                                                                    \
      OpCategory::Unit,                                                        \
      Arity,                                                                   \
      OpEpilogueRole::None,                                                    \
      0,                                                                       \
      OpTypeRule::Unit,                                                        \
      Results,                                                                 \
      nullptr,                                                                 \
      nullptr},
#define POINTWISE_OP(Code, Name, Arity, Flops, Types, Cuda, ...)               \
  {OpCode::Code,          Name,  OpCategory::Pointwise, Arity,                 \
   OpEpilogueRole::Joins, Flops, OpTypeRule::Types,     1,                     \
   reference##Code,       Cuda},
#include "mtsched/IR/Ops.def"
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

std::optional<double> mtsched::pointwiseScalar(const Node &N) {
  const OpInfo &I = getOpInfo(N.getOp());
  if (I.Category != OpCategory::Pointwise || I.NumOperands < 2 ||
      int(N.getNumOperands()) != I.NumOperands - 1)
    return std::nullopt;
  const Attribute *A = N.getAttrs().get("scalar");
  if (!A || !(A->isFloat() || A->isInt()))
    return std::nullopt;
  return A->getNumber();
}

double mtsched::evaluatePointwise(OpCode C, llvm::ArrayRef<double> X) {
  const OpInfo &I = getOpInfo(C);
  assert(I.Reference && "not a pointwise op");
  return I.Reference(X);
}

std::string mtsched::expandCudaExpr(OpCode C, llvm::ArrayRef<std::string> Ops) {
  const OpInfo &I = getOpInfo(C);
  assert(I.CudaExpr && "not a pointwise op");
  std::string S;
  for (const char *P = I.CudaExpr; *P; ++P) {
    // Operand references are one digit: no op has ten operands.
    if (P[0] == '{' && llvm::isDigit(P[1]) && P[2] == '}') {
      unsigned Idx = unsigned(P[1] - '0');
      assert(Idx < Ops.size() && "operand index past the arity");
      S += Ops[Idx];
      P += 2;
      continue;
    }
    S += *P;
  }
  return S;
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
