//===- Ops.h - The table of high-level operations ---------------*- C++ -*-===//
//
// Every operation the IR knows, its category and arity, and the rules that
// recognise a collective from an op or config name.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_IR_OPS_H
#define MTSCHED_IR_OPS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include <optional>

namespace mtsched {

enum class OpCode {
  MatMul,
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Custom,
  Add,
  Sub,
  Mul,
  Div,
  Relu,
  Gelu,
  Silu,
  Exp,
  Neg,
  Cast,
  Sum,
  Max,
  RmsNorm,
  Softmax,
  /// silu(A x Wg) * (A x Wu): a gate and an up projection merged into one
  /// GEMM (see the fuse-swiglu pass).
  SwiGlu,
  /// softmax(q kᵀ · scale + mask) v with grouped-query heads (IR/Attention.h).
  Attention,
};

/// MatMul: ops lowered to a multi-template buffer of kernel templates
/// (matmul, swiglu, attention).
enum class OpCategory { MatMul, Collective, Custom, Pointwise, Reduction };

struct OpInfo {
  OpCode Code;
  llvm::StringRef Name;
  OpCategory Category;
  /// Required operand count; -1 means any number (custom ops).
  int NumOperands;
};

/// All known ops, in OpCode order.
llvm::ArrayRef<OpInfo> allOps();
const OpInfo &getOpInfo(OpCode Code);
std::optional<OpCode> lookupOp(llvm::StringRef Name);
/// The known op name closest to Name, for did-you-mean hints; empty if none
/// is close enough.
llvm::StringRef suggestOp(llvm::StringRef Name);

inline bool isPointwise(OpCode C) {
  return getOpInfo(C).Category == OpCategory::Pointwise;
}
inline bool isReduction(OpCode C) {
  return getOpInfo(C).Category == OpCategory::Reduction;
}
/// Row reductions normalise over the last dimension and keep the shape, so
/// they can be fused as an epilogue of the producer of their input.
inline bool isRowReduction(OpCode C) {
  return C == OpCode::RmsNorm || C == OpCode::Softmax;
}

enum class CollectiveKind {
  None,
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Unknown
};

llvm::StringRef collectiveKindName(CollectiveKind K);
std::optional<CollectiveKind> parseCollectiveKind(llvm::StringRef Name);
/// Collective kind named inside Name (all_reduce / allreduce, ...), or None.
CollectiveKind collectiveKindInName(llvm::StringRef Name);
/// Collective kind of a built-in op, None for non-collectives.
CollectiveKind collectiveKindOf(OpCode C);

} // namespace mtsched

#endif // MTSCHED_IR_OPS_H
