//===- RowChain.cpp - fp64 reference of a row's epilogue chain -----------===//
//
// interpretRowChain: one row carried through a chain of row reductions and
// pointwise ops (a GEMM's epilogue, a fused group), reading the other
// operands through RowOperands and, past layout ops, their element maps.
//
//===----------------------------------------------------------------------===//
#include "InterpreterImpl.h"
#include "mtsched/IR/Layout.h"
#include "mtsched/Reference/Interpreter.h"
#include "llvm/ADT/SmallVector.h"
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

using namespace mtsched;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

static double epsOf(const Node &N) {
  if (const Attribute *A = N.getAttrs().get("eps"))
    return A->getNumber();
  // PyTorch's defaults: LayerNorm's 1e-5; rmsnorm's is the IR's 1e-6.
  return N.getOp() == OpCode::LayerNorm ? 1e-5 : 1e-6;
}

RowOperands::~RowOperands() = default;

int64_t StoredRowOperands::size(const Value *V) const {
  auto It = Data.find(V);
  return It == Data.end() ? -1 : int64_t(It->second.size());
}

double StoredRowOperands::at(const Value *V, int64_t I) const {
  return Data.find(V)->second.getDouble(size_t(I));
}

llvm::Error mtsched::interpretRowChain(llvm::ArrayRef<const Node *> Chain,
                                       const Value *Start, int64_t R,
                                       int64_t Rows, std::vector<double> &Row,
                                       const ValueData &Data) {
  return interpretRowChain(Chain, Start, R, Rows, Row, StoredRowOperands(Data));
}

llvm::Error mtsched::interpretRowChain(llvm::ArrayRef<const Node *> Chain,
                                       const Value *Start, int64_t R,
                                       int64_t Rows, std::vector<double> &Row,
                                       const RowOperands &Data) {
  int64_t L = Row.size();
  const Value *Prev = Start;
  // Past a reshape or transpose (a GEMM's epilogue through layout ops):
  // Row keeps the start's order, and element C of it is at index
  // Moved(R * L + C) of the shape Iter that later values have.
  std::vector<ElementMap> Maps;
  llvm::ArrayRef<int64_t> Iter;
  auto Moved = [&](int64_t I) {
    for (const ElementMap &M : Maps)
      I = M.apply(I);
    return I;
  };
  auto At = [&](const Value *V, int64_t C) -> double {
    int64_t Num = Data.size(V);
    if (Num == 1)
      return Data.at(V, 0);
    if (!Maps.empty())
      return Data.at(
          V, broadcastIndex(V->getType().Shape, Iter, Moved(R * L + C)));
    if (Num == L && V->getType().innerDim() == L)
      return Data.at(V, C);
    if (Num == Rows * L)
      return Data.at(V, R * L + C);
    if (Num == Rows)
      return Data.at(V, R);
    return Data.at(V, broadcastIndex(V->getType().Shape, Start->getType().Shape,
                                     R * L + C));
  };
  for (const Node *N : Chain) {
    for (const Operand &O : N->getOperands())
      if (O.V != Prev && Data.size(O.V) < 0)
        return err("no value for '%" + O.V->getName() + "'");
    OpCode Op = N->getOp();
    if (isLayout(Op)) {
      std::optional<ElementMap> M = elementMapOf(*N);
      if (!M || N->getOperand(0) != Prev)
        return err("'%" + N->getName() +
                   "' is a layout op that moves no element chain through");
      Maps.push_back(std::move(*M));
      Iter = N->getType().Shape;
      Prev = N->getResult();
      continue;
    }
    if (isRowReduction(Op) && !Maps.empty())
      return err("row reduction '%" + N->getName() +
                 "' follows a layout op in a row chain");
    if (Op == OpCode::RmsNorm) {
      double SS = 0;
      for (double V : Row)
        SS += V * V;
      double Scale = 1 / std::sqrt(SS / L + epsOf(*N));
      for (int64_t C = 0; C < L; ++C)
        Row[C] = Row[C] * Scale * At(N->getOperand(1), C);
    } else if (Op == OpCode::LayerNorm) {
      // Two passes, as torch's reference: the mean, then the biased
      // variance of the deviations.
      double Mean = 0, Var = 0;
      for (double V : Row)
        Mean += V;
      Mean /= L;
      for (double V : Row)
        Var += (V - Mean) * (V - Mean);
      double Scale = 1 / std::sqrt(Var / L + epsOf(*N));
      for (int64_t C = 0; C < L; ++C) {
        Row[C] = (Row[C] - Mean) * Scale;
        if (N->getNumOperands() > 1)
          Row[C] *= At(N->getOperand(1), C);
        if (N->getNumOperands() > 2)
          Row[C] += At(N->getOperand(2), C);
      }
    } else if (Op == OpCode::Softmax) {
      double Mx = -std::numeric_limits<double>::infinity(), Sum = 0;
      for (double V : Row)
        Mx = std::max(Mx, V);
      for (double &V : Row)
        Sum += (V = std::exp(V - Mx));
      for (double &V : Row)
        V /= Sum;
    } else if (isPointwise(Op)) {
      std::optional<double> Scalar = pointwiseScalar(*N);
      llvm::SmallVector<double, 3> X(N->getNumOperands() + (Scalar ? 1 : 0));
      if (Scalar)
        X.back() = *Scalar;
      for (int64_t C = 0; C < L; ++C) {
        for (unsigned I = 0; I < N->getNumOperands(); ++I)
          X[I] = N->getOperand(I) == Prev ? Row[C] : At(N->getOperand(I), C);
        Row[C] = evaluatePointwise(Op, X);
      }
      if (isFp8DType(N->getType().Dtype) || N->getType().Dtype == DType::Bool)
        for (double &V : Row)
          V = roundTo(V, N->getType().Dtype);
    } else {
      return err("'%" + N->getName() + "' cannot be in an epilogue");
    }
    Prev = N->getResult();
  }
  return llvm::Error::success();
}
