//===- SortTypes.cpp - Type rules of topk and sort ------------------------===//
//
// Both order each row along the last dimension of one operand (a float or
// integer tensor of rank 1 or more) and define two results: the values, of
// the operand's element type, and their positions in the row, i64.
//
//===----------------------------------------------------------------------===//
#include "VerifierImpl.h"

using namespace mtsched;
using detail::Verifier;

bool Verifier::inferSort(const Node &N, TensorType &Values,
                         TensorType &Indices) {
  const std::string Op = "'" + N.getOpName().str() + "'";
  // verifyNode calls this directly (for the second result's type), so the
  // operand count inferType checks is checked here too.
  if (N.getNumOperands() != 1) {
    error(N.getLoc(),
          Op + " expects 1 operand, got " + Twine(N.getNumOperands()));
    return false;
  }
  const TensorType &In = N.getOperand(0)->getType();
  if (In.rank() == 0) {
    error(N.getLoc(), Op + " needs an operand of rank 1 or more");
    return false;
  }
  // Only the last dimension: what routers and token grouping use.
  if (const Attribute *D = N.getAttrs().get("dim"))
    if (!D->isInt() || (D->getInt() != -1 && D->getInt() != In.rank() - 1)) {
      error(N.getLoc(), Op +
                            " orders along the last dimension only; "
                            "attribute 'dim' must be -1 or " +
                            Twine(int64_t(In.rank()) - 1));
      return false;
    }
  auto Bool = [&](const char *Key) {
    const Attribute *A = N.getAttrs().get(Key);
    if (A && !A->isBool()) {
      error(N.getLoc(),
            "attribute '" + Twine(Key) + "' of " + Op + " must be a bool");
      return false;
    }
    return true;
  };
  Values = In;
  int64_t Len = In.Shape.back();
  if (N.getOp() == OpCode::TopK) {
    if (!Bool("largest"))
      return false;
    const Attribute *K = N.getAttrs().get("k");
    if (!K || !K->isInt()) {
      error(N.getLoc(), "'topk' needs attribute 'k', an integer");
      return false;
    }
    if (K->getInt() < 1 || K->getInt() > Len) {
      error(N.getLoc(), "'k' of 'topk' must be in [1, " + Twine(Len) +
                            "] (the last dimension of " +
                            name(N.getOperand(0)) + "), got " +
                            Twine(K->getInt()));
      return false;
    }
    Values.Shape.back() = K->getInt();
  } else if (!Bool("descending")) {
    return false;
  }
  Indices = Values;
  Indices.Dtype = DType::I64;
  return true;
}
