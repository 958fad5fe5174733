//===- BlasEpilogue.cpp ---------------------------------------------------===//
#include "mtsched/Autotune/BlasEpilogue.h"
#include "mtsched/Lowering/CublasLtChoice.h"

using namespace mtsched;

std::optional<BlasEpilogue>
mtsched::blasEpilogueOf(const MultiTemplateBufferNode &N) {
  const TensorType &Out = N.getType();
  if (N.getOp() != OpCode::MatMul || N.getNumOperands() != 2 ||
      N.getOperand(1)->getType().rank() != 2 || N.getEpilogue().empty() ||
      N.getEpilogue().size() > 2 || !N.getEpilogueWrites().empty())
    return std::nullopt;
  BlasEpilogue E;
  const Value *Prev = N.getResult();
  for (const Operand &EO : N.getEpilogue()) {
    const Node *Add = EO.V->getDef();
    if (!Add || Add->getOp() != OpCode::Add || Add->getNumOperands() != 2 ||
        EO.V->getType() != Out)
      return std::nullopt;
    const Value *L = Add->getOperand(0), *R = Add->getOperand(1);
    if (L != Prev && R != Prev)
      return std::nullopt;
    const Value *In = L == Prev ? R : L;
    const TensorType &T = In->getType();
    if (In == Prev || T.Dtype != Out.Dtype)
      return std::nullopt;
    if (T.rank() == 1 && T.Shape[0] == Out.innerDim() && !E.Bias)
      E.Bias = In;
    else if (T == Out && !E.Residual)
      E.Residual = In;
    else
      return std::nullopt;
    Prev = EO.V;
  }
  return E;
}

bool mtsched::canFuseEpilogue(const Choice &C, bool BlasEpilogue) {
  if (!C.isExtern())
    return true;
  return BlasEpilogue && cublasLtAlgoOf(C.Name).has_value();
}
