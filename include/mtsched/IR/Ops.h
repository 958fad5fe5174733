//===- Ops.h - The table of high-level operations ---------------*- C++ -*-===//
//
// Every operation the IR knows, read from the op table (Ops.def): its name,
// category, arity, fusion role, cost, type rule, fp64 reference and CUDA
// expression; and the rules that recognise a collective from an op or config
// name.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_IR_OPS_H
#define MTSCHED_IR_OPS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include <optional>
#include <string>

namespace mtsched {

enum class OpCode {
#define OP(Code, Name, Category, Arity, Epilogue, Flops, Types) Code,
#include "mtsched/IR/Ops.def"
};

/// The number of ops: tables indexed by OpCode have this size.
constexpr unsigned NumOpCodes = 0
#define OP(Code, Name, Category, Arity, Epilogue, Flops, Types) +1
#include "mtsched/IR/Ops.def"
    ;

enum class OpCategory {
  MatMul,
  Collective,
  Custom,
  Pointwise,
  Reduction,
  /// Ops that move or reinterpret elements without arithmetic: reshape (a
  /// view), expand, transpose, slice, concat, index_select (IR/Layout.h).
  Layout,
  /// Ops with their own kernel, never fused, each defined in one file
  /// (an op unit, lib/OpUnits/<File>.cpp; IR/OpUnit.h): topk, sort,
  /// scatter, cumsum, prod.
  Unit
};

/// How an op takes part in epilogue fusion.
enum class OpEpilogueRole {
  /// Never in a fused kernel's epilogue, nor the owner of one (sum, max).
  None,
  /// A kernel that can run an epilogue after its result (GEMMs,
  /// collectives, custom ops).
  Absorbs,
  /// A pointwise epilogue member.
  Joins,
  /// A row reduction: an epilogue member that normalises over the last
  /// dimension and keeps the shape, so it ends the epilogue.
  JoinsAtEnd,
};

/// The verifier's type rule of an op (lib/IR/OpTypes.cpp).
enum class OpTypeRule {
  /// Operands of one element type broadcast together (right-aligned).
  Broadcast,
  /// As Broadcast, but the result is bool (comparisons).
  Compare,
  /// Operands of any element types (nonzero is true) broadcast together;
  /// the result is bool (logical_not, logical_and, logical_or).
  Logical,
  /// One operand; the result keeps its shape and declares its type.
  Cast,
  /// One operand and attribute 'scalar', the value every element of the
  /// result gets; the result keeps the operand's shape and declares its
  /// type.
  Fill,
  /// A condition of any element type (nonzero is true), then operands of
  /// one element type, the result's; all three broadcast together.
  Select,
  /// A reduction over attribute 'dim' (default last), 'keepdim'.
  Reduce,
  /// A floating-point row normalisation; rmsnorm's weight is a row.
  RowNorm,
  MatMul,
  SwiGlu,
  /// q [B, Hq, Sq, D], k and v [B, Hkv, Skv, D] (IR/Attention.h).
  Attention,
  Collective,
  /// Declared by the node (custom ops).
  Custom,
  /// Layout ops (IR/Layout.h): the same elements in the result's shape;
  /// broadcast to it; attribute 'perm'; 'dim', 'start', 'end', 'step';
  /// operands joined along 'dim'.
  Reshape,
  Expand,
  Transpose,
  Slice,
  Concat,
  /// A tensor, then a rank-1 i32/i64 index tensor; attribute 'dim'.
  IndexSelect,
  /// The op unit's own rule (IR/OpUnit.h), registered with it.
  Unit,
  /// A tensor, then i32/i64 indices of its rank, no larger than it in any
  /// dimension but 'dim'; the result has the indices' shape (torch.gather).
  Gather,
};

/// The fp64 reference of a pointwise op over its operand values.
using PointwiseReference = double (*)(llvm::ArrayRef<double>);

/// One entry of the op table (Ops.def).
struct OpInfo {
  OpCode Code;
  llvm::StringRef Name;
  OpCategory Category;
  /// Required operand count; -1 means any number (custom ops).
  int NumOperands;
  OpEpilogueRole Epilogue;
  /// Rough arithmetic per element as an epilogue member.
  double FlopsPerElement;
  OpTypeRule Types;
  /// How many results a node of the op defines: the OP_UNIT line's count
  /// (topk and sort: the values, then their indices), 1 for every other op.
  unsigned NumResults;
  /// Pointwise ops: the fp64 reference and the CUDA float expression
  /// ({0}, {1}, ... for the operands); null for the others.
  PointwiseReference Reference;
  const char *CudaExpr;
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
/// How many results a node of op C defines (OpInfo::NumResults).
inline unsigned opNumResults(OpCode C) { return getOpInfo(C).NumResults; }
/// Whether C is an op unit: an op with its own kernel, whose rules are
/// registered from its file in lib/OpUnits (IR/OpUnit.h).
inline bool isOpUnit(OpCode C) {
  return getOpInfo(C).Category == OpCategory::Unit;
}
inline bool isLayout(OpCode C) {
  return getOpInfo(C).Category == OpCategory::Layout;
}
/// Row reductions normalise over the last dimension and keep the shape, so
/// they can be fused as an epilogue of the producer of their input.
inline bool isRowReduction(OpCode C) {
  return getOpInfo(C).Epilogue == OpEpilogueRole::JoinsAtEnd;
}
/// Whether C can be a member of a fused kernel's epilogue.
inline bool joinsEpilogue(OpCode C) {
  OpEpilogueRole R = getOpInfo(C).Epilogue;
  return R == OpEpilogueRole::Joins || R == OpEpilogueRole::JoinsAtEnd;
}

class Node;

/// A pointwise op of two or more operands may take its last one as the
/// number in attribute `scalar` (`%y = mul(%x) {scalar = 0.125}`): the IR
/// has no constants, and models scale, shift and clamp by numbers. Returns
/// that number, or nullopt when N has all its operands.
std::optional<double> pointwiseScalar(const Node &N);

/// The fp64 value of pointwise op C over operand values X (as many as its
/// arity).
double evaluatePointwise(OpCode C, llvm::ArrayRef<double> X);
/// The CUDA float expression of pointwise op C over the operand
/// expressions Ops: its table format with {I} replaced by Ops[I]. Both code
/// generators (GEMM epilogues and kernel groups, peer collectives) use it.
std::string expandCudaExpr(OpCode C, llvm::ArrayRef<std::string> Ops);

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
