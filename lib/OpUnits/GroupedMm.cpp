//===- GroupedMm.cpp - grouped_mm, MoE experts over routed rows -----------===//
//
// `grouped_mm(%x, %w, %ids)`: each (token, pick) row times the weight of
// the expert its id names,
//   out[t, a, n] = sum_k x[t, (a,) k] * w[ids[t, a], n, k]
// with x [T, K] (a token's row, shared by its A picks: the first GEMM of an
// MoE FFN) or [T, A, K] (one row per pick: the second), w [E, N, K] (one
// nn.Linear-layout [N, K] matrix per expert, as gpt-fast and Mixtral store
// them) and ids [T, A]. It is what `matmul(x, w[ids])` computes without the
// T * A gathered copies of an expert (fuse-grouped-mm, docs/PASSES.md).
//
// The reference sums in fp64 and reports an id outside [0, E). The kernel
// (Backend/Cuda/GroupedGemm.cpp) is one launch over all experts' row
// groups, with the row counts and offsets computed on the device.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/OpUnit.h"
#include "mtsched/OpUnits/OpUnits.h"
#include "mtsched/Reference/OpUnitReference.h"
#include "llvm/Support/Error.h"

using namespace mtsched;

static std::string name(const Value *V) { return "'%" + V->getName() + "'"; }

/// Checks the three operands' ranks, element types and shapes against each
/// other; the result is [T, A, N] of x's element type.
static bool inferType(const Node &N, llvm::MutableArrayRef<TensorType> Results,
                      OpErrorFn Error) {
  const TensorType &X = N.getOperand(0)->getType();
  const TensorType &W = N.getOperand(1)->getType();
  const TensorType &Ids = N.getOperand(2)->getType();
  const std::vector<Operand> &Ops = N.getOperands();
  if (X.rank() != 2 && X.rank() != 3) {
    Error(Ops[0].Loc, "input " + name(Ops[0].V) +
                          " of 'grouped_mm' must be [T, K] or [T, A, K], got " +
                          shapeStr(X.Shape));
    return false;
  }
  if (!isFloatDType(X.Dtype)) {
    Error(Ops[0].Loc, "input " + name(Ops[0].V) +
                          " of 'grouped_mm' must be floating-point, got " +
                          dtypeName(X.Dtype));
    return false;
  }
  if (W.rank() != 3) {
    Error(Ops[1].Loc, "weight " + name(Ops[1].V) +
                          " of 'grouped_mm' must be [E, N, K], got " +
                          shapeStr(W.Shape));
    return false;
  }
  if (W.Dtype != X.Dtype) {
    Error(Ops[1].Loc, "weight " + name(Ops[1].V) + " has element type " +
                          dtypeName(W.Dtype) + ", expected " +
                          dtypeName(X.Dtype) + " (the input's)");
    return false;
  }
  if (W.Shape[2] != X.Shape.back()) {
    Error(Ops[1].Loc, "weight " + name(Ops[1].V) + " " + shapeStr(W.Shape) +
                          " has K = " + llvm::Twine(W.Shape[2]) +
                          ", but the input " + name(Ops[0].V) +
                          " has K = " + llvm::Twine(X.Shape.back()));
    return false;
  }
  if (Ids.Dtype != DType::I32 && Ids.Dtype != DType::I64) {
    Error(Ops[2].Loc, "ids " + name(Ops[2].V) +
                          " of 'grouped_mm' must be i32 or i64, got " +
                          dtypeName(Ids.Dtype));
    return false;
  }
  if (Ids.rank() != 2 || Ids.Shape[0] != X.Shape[0] ||
      (X.rank() == 3 && Ids.Shape[1] != X.Shape[1])) {
    std::string Want = X.rank() == 3
                           ? shapeStr({X.Shape[0], X.Shape[1]})
                           : "[" + std::to_string(X.Shape[0]) + ", A]";
    Error(Ops[2].Loc, "ids " + name(Ops[2].V) + " has shape " +
                          shapeStr(Ids.Shape) + ", expected " + Want +
                          " (the input's tokens" +
                          (X.rank() == 3 ? " and picks)" : ")"));
    return false;
  }
  TensorType &Result = Results.front();
  Result.Dtype = X.Dtype;
  Result.Shape = {Ids.Shape[0], Ids.Shape[1], W.Shape[1]};
  return true;
}

/// A multiply and an add per weight element each row reads.
static double flops(const Node &N) {
  return 2.0 * double(N.getType().numElements()) *
         double(N.getOperand(1)->getType().Shape[2]);
}

/// The ids name experts: [0, E).
static std::optional<int64_t> indexBound(const Node &N, unsigned I) {
  if (I != 2 || N.getNumOperands() != 3 ||
      N.getOperand(1)->getType().rank() != 3)
    return std::nullopt;
  return N.getOperand(1)->getType().Shape[0];
}

static llvm::Error interpret(const Node &N,
                             llvm::ArrayRef<const HostValues *> In,
                             llvm::MutableArrayRef<HostValues> Results) {
  const TensorType &XT = N.getOperand(0)->getType();
  const TensorType &WT = N.getOperand(1)->getType();
  const TensorType &Out = N.getType();
  int64_t T = Out.Shape[0], A = Out.Shape[1], NN = Out.Shape[2];
  int64_t E = WT.Shape[0], K = WT.Shape[2];
  bool PerPick = XT.rank() == 3;
  const HostValues &X = *In[0], &W = *In[1], &Ids = *In[2];
  HostValues &Result = Results.front();
  Result = HostValues::zeros(Out.Dtype, Out.numElements());
  for (int64_t R = 0; R < T * A; ++R) {
    int64_t Id = Ids.isInt() ? Ids.ints()[R] : int64_t(Ids.getDouble(R));
    if (Id < 0 || Id >= E)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "'%" + N.getName() + "': id " + std::to_string(Id) + " of row " +
              std::to_string(R) + " is outside [0, " + std::to_string(E) +
              ") (the experts of " + name(N.getOperand(1)) + ")");
    const double *XRow = X.floats().data() + (PerPick ? R : R / A) * K;
    const double *WE = W.floats().data() + Id * NN * K;
    for (int64_t C = 0; C < NN; ++C) {
      double Acc = 0;
      for (int64_t I = 0; I < K; ++I)
        Acc += XRow[I] * WE[C * K + I];
      Result.floats()[R * NN + C] = Acc;
    }
  }
  return llvm::Error::success();
}

void mtsched::opunits::registerGroupedMm() {
  OpUnitInfo Info;
  Info.InferType = inferType;
  Info.Flops = flops;
  Info.IndexBound = indexBound;
  registerOpUnitInfo(OpCode::GroupedMm, Info);
  registerOpUnitReference(OpCode::GroupedMm, interpret);
  registerOpUnitKernel(OpCode::GroupedMm, codegen::generateGroupedMmKernel);
}
