//===- OpTypesCollective.cpp - Collective type rules ----------------------===//
//
// The type rules of the Collective category, the ragged all_to_all's
// among them. inferType (OpTypes.cpp) dispatches here.
//
//===----------------------------------------------------------------------===//
#include "VerifierImpl.h"
#include "llvm/Support/MathExtras.h"

using namespace mtsched;
using detail::Verifier;

/// all_to_all(%x, %send_counts, %recv_counts): rows of %x in destination
/// order, send_counts[j] of them to rank j of the group; the result holds
/// recv_counts[j] rows from each rank j in rank order, then zeros up to its
/// declared row count (the capacity), as torch's all_to_all_single with
/// split sizes does into a buffer of that size. The counts are values, so a
/// router can compute them; the receive counts are usually an even
/// all_to_all of the send counts.
bool Verifier::inferRaggedAllToAll(const Node &N, int64_t GroupSize,
                                   TensorType &Result) {
  const TensorType &In = N.getOperand(0)->getType();
  const TensorType &Out = N.getType();
  if (const Attribute *D = N.getAttrs().get("dim"))
    if (!D->isInt() || D->getInt() != 0) {
      error(N.getLoc(), "an uneven 'all_to_all' splits dimension 0; attribute "
                        "'dim' must be 0 or absent");
      return false;
    }
  if (N.getAttrs().get("reduce")) {
    error(N.getLoc(), "'all_to_all' takes no attribute 'reduce'");
    return false;
  }
  if (In.rank() == 0) {
    error(N.getOperands()[0].Loc, "operand " + name(N.getOperand(0)) +
                                      " of an uneven 'all_to_all' needs "
                                      "rank 1 or more (rows to send)");
    return false;
  }
  for (unsigned I = 1; I < 3; ++I) {
    const TensorType &C = N.getOperand(I)->getType();
    if (C.Dtype != DType::I64 || C.rank() != 1 || C.Shape[0] != GroupSize) {
      error(N.getOperands()[I].Loc,
            "operand " + name(N.getOperand(I)) + " (the " +
                (I == 1 ? "send" : "receive") + " counts) must be i64[" +
                Twine(GroupSize) + "], a count per rank of the group, got " +
                C.str());
      return false;
    }
  }
  if (Out.Dtype != In.Dtype || Out.rank() != In.rank() ||
      !std::equal(In.Shape.begin() + 1, In.Shape.end(),
                  Out.Shape.begin() + 1)) {
    error(N.getLoc(),
          "the result of an uneven 'all_to_all' must be " +
              Twine(dtypeName(In.Dtype)) + " with the trailing dimensions of " +
              name(N.getOperand(0)) + " (" + In.str() +
              ") and any row count (its capacity), got " + Out.str());
    return false;
  }
  if (Out.Shape[0] < 1) {
    error(N.getLoc(), "an uneven 'all_to_all' needs a capacity of at least "
                      "one row");
    return false;
  }
  Result = Out;
  return true;
}

bool Verifier::inferCollective(const Graph &G, const Node &N,
                               TensorType &Result) {
  bool Ragged = N.getOp() == OpCode::AllToAll && N.getNumOperands() != 1;
  if (N.getOp() == OpCode::AllToAll && N.getNumOperands() != 1 &&
      N.getNumOperands() != 3) {
    error(N.getLoc(), "'all_to_all' expects 1 operand (even splits) or 3 "
                      "(values, send counts, receive counts), got " +
                          Twine(N.getNumOperands()));
    return false;
  }
  const TensorType &In = N.getOperand(0)->getType();
  if (isFp8DType(In.Dtype)) {
    // Neither the peer-memory kernels nor the NCCL path move fp8 yet.
    error(N.getOperands()[0].Loc,
          "'" + N.getOpName() + "' of fp8 values is not supported; cast " +
              name(N.getOperand(0)) + " to bf16 first");
    return false;
  }
  std::optional<std::string> Group = groupAttr(N);
  if (!Group)
    return false;
  int64_t Size = groupSize(G, *Group, N.getLoc());
  if (Size == 0)
    return false;
  if (const Attribute *R = N.getAttrs().get("reduce")) {
    llvm::StringRef Op = R->isString() ? R->getString() : "";
    if (Op != "sum" && Op != "max" && Op != "min" && Op != "avg") {
      error(N.getLoc(), "attribute 'reduce' must be \"sum\", \"max\", "
                        "\"min\" or \"avg\"");
      return false;
    }
  }
  Result = In;
  if (N.getOp() == OpCode::AllReduce)
    return true;
  if (Ragged)
    return inferRaggedAllToAll(N, Size, Result);
  int64_t Dim = 0;
  if (const Attribute *D = N.getAttrs().get("dim")) {
    if (!D->isInt()) {
      error(N.getLoc(), "attribute 'dim' must be an integer");
      return false;
    }
    Dim = D->getInt();
  }
  if (In.rank() == 0 || Dim < 0 || Dim >= int64_t(In.rank())) {
    error(N.getLoc(), "dimension " + Twine(Dim) + " is out of range for " +
                          name(N.getOperand(0)) + " of type " + In.str());
    return false;
  }
  if (N.getOp() == OpCode::AllGather) {
    if (llvm::MulOverflow(Result.Shape[Dim], Size, Result.Shape[Dim])) {
      error(N.getLoc(), "'all_gather' result is too large: dimension " +
                            Twine(Dim) + " of size " + Twine(In.Shape[Dim]) +
                            " times " + Twine(Size) + " ranks overflows");
      return false;
    }
    return true;
  }
  if (In.Shape[Dim] % Size != 0) {
    error(N.getLoc(), "'" + N.getOpName() + "' splits dimension " + Twine(Dim) +
                          " of size " + Twine(In.Shape[Dim]) + " into " +
                          Twine(Size) + " ranks, which does not divide it");
    return false;
  }
  if (N.getOp() == OpCode::ReduceScatter)
    Result.Shape[Dim] /= Size;
  return true;
}
