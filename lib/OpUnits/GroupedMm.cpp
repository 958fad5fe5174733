//===- GroupedMm.cpp - grouped_mm, MoE experts over routed rows -----------===//
//
// `grouped_mm(%x, %w, %ids)`: each (token, pick) row times the weight of
// the expert its id names,
//   out[t, a, n] = sum_k x[t, (a,) k] * w[ids[t, a], n, k]
// and `grouped_mm(%x, %w, %ids, %s)` that row scaled by s[t, a] (an MoE's
// router weight, fuse-moe-combine) before it is rounded,
// with x [T, K] (a token's row, shared by its A picks: the first GEMM of an
// MoE FFN) or [T, A, K] (one row per pick: the second), w [E, N, K] (one
// nn.Linear-layout [N, K] matrix per expert, as gpt-fast and Mixtral store
// them) and ids [T, A]. It is what `matmul(x, w[ids])` computes without the
// T * A gathered copies of an expert (fuse-grouped-mm, docs/PASSES.md).
//
// The reference sums in fp64 and reports an id outside [0, E); the kernel
// writes such a row NaN, as index_select's gather does. The kernel
// (Backend/Cuda/GroupedGemm.cpp) is one launch over all experts' row
// groups, with the row counts and offsets computed on the device.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/OpUnit.h"
#include "mtsched/OpUnits/OpUnits.h"
#include "mtsched/Reference/OpUnitReference.h"
#include "mtsched/Reference/RandomInputs.h"
#include "llvm/Support/Error.h"

using namespace mtsched;

static std::string name(const Value *V) { return "'%" + V->getName() + "'"; }

/// The combine form: the scaled rows summed over each token's picks.
static bool isCombine(const Node &N) {
  const Attribute *C = N.getAttrs().get("combine");
  return C && C->getBool();
}

/// Checks the three operands' ranks, element types and shapes against each
/// other; the result is [T, A, N] of x's element type.
static bool inferType(const Node &N, llvm::MutableArrayRef<TensorType> Results,
                      OpErrorFn Error) {
  if (N.getNumOperands() != 3 && N.getNumOperands() != 4) {
    Error(N.getLoc(), "'grouped_mm' takes x, w, ids and an optional row "
                      "scale, got " +
                          std::to_string(N.getNumOperands()) + " operands");
    return false;
  }
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
  if (N.getNumOperands() == 4) {
    const TensorType &S = N.getOperand(3)->getType();
    if (!isFloatDType(S.Dtype) || S.Shape != Ids.Shape) {
      Error(Ops[3].Loc, "row scale " + name(Ops[3].V) + " " +
                            dtypeName(S.Dtype).str() + shapeStr(S.Shape) +
                            " of 'grouped_mm' must be floating-point of the "
                            "ids' shape " +
                            shapeStr(Ids.Shape));
      return false;
    }
  }
  if (isCombine(N) && N.getNumOperands() != 4) {
    Error(N.getLoc(), "'grouped_mm' with combine = true sums the routed "
                      "rows weighted by a row scale, and has none");
    return false;
  }
  TensorType &Result = Results.front();
  Result.Dtype = X.Dtype;
  if (isCombine(N))
    Result.Shape = {Ids.Shape[0], W.Shape[1]};
  else
    Result.Shape = {Ids.Shape[0], Ids.Shape[1], W.Shape[1]};
  return true;
}

/// A multiply and an add per weight element each row reads (and the row
/// scale's multiply).
static double flops(const Node &N) {
  double Elements = double(N.getOperand(2)->getType().numElements()) *
                    double(N.getOperand(1)->getType().Shape[1]);
  return (2.0 * double(N.getOperand(1)->getType().Shape[2]) +
          (N.getNumOperands() == 4 ? 1.0 : 0.0) + (isCombine(N) ? 1.0 : 0.0)) *
         Elements;
}

/// The ids name experts: [0, E).
static std::optional<int64_t> indexBound(const Node &N, unsigned I) {
  if (I != 2 || N.getNumOperands() < 3 ||
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
  const TensorType &IdsT = N.getOperand(2)->getType();
  int64_t T = IdsT.Shape[0], A = IdsT.Shape[1], NN = WT.Shape[1];
  int64_t E = WT.Shape[0], K = WT.Shape[2];
  bool PerPick = XT.rank() == 3;
  // A result row: one routed row, or (combine) a token's A rows summed.
  int64_t Per = isCombine(N) ? A : 1;
  const HostValues &X = *In[0], &W = *In[1], &Ids = *In[2];
  const HostValues *Scale = In.size() == 4 ? In[3] : nullptr;
  HostValues &Result = Results.front();
  Result = HostValues::zeros(Out.Dtype, Out.numElements());
  auto IdOf = [&](int64_t R) {
    return Ids.isInt() ? Ids.ints()[R] : int64_t(Ids.getDouble(R));
  };
  for (int64_t R = 0; R < T * A; ++R)
    if (IdOf(R) < 0 || IdOf(R) >= E)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "'%" + N.getName() + "': id " + std::to_string(IdOf(R)) + " of row " +
              std::to_string(R) + " is outside [0, " + std::to_string(E) +
              ") (the experts of " + name(N.getOperand(1)) + ")");
  // Result rows apart on the hardware threads: at Mixtral's sizes a
  // prefill's reference is tens of billions of multiply-adds. Each row's
  // sums are in order, so the result does not depend on the threads.
  parallelChunks(
      T * A / Per,
      [&](int64_t Begin, int64_t End) {
        for (int64_t U = Begin; U < End; ++U)
          for (int64_t R = U * Per; R < (U + 1) * Per; ++R) {
            const double *XRow = X.floats().data() + (PerPick ? R : R / A) * K;
            const double *WE = W.floats().data() + IdOf(R) * NN * K;
            double S = Scale ? Scale->getDouble(R) : 1.0;
            for (int64_t C = 0; C < NN; ++C) {
              double Acc = 0;
              for (int64_t I = 0; I < K; ++I)
                Acc += XRow[I] * WE[C * K + I];
              Result.floats()[U * NN + C] += S * Acc;
            }
          }
      },
      /*MinChunk=*/std::max<int64_t>(1, (int64_t(1) << 20) / (NN * K * Per)));
  return llvm::Error::success();
}

/// Row Row of the result (t * A + a; with combine, t), for the
/// benchmarker's sampled check of each choice.
static llvm::Error interpretRow(const Node &N,
                                llvm::ArrayRef<const double *> In, int64_t Row,
                                llvm::MutableArrayRef<double> Out) {
  const TensorType &XT = N.getOperand(0)->getType();
  const TensorType &WT = N.getOperand(1)->getType();
  int64_t A = N.getOperand(2)->getType().Shape[1], NN = WT.Shape[1],
          K = WT.Shape[2];
  int64_t Per = isCombine(N) ? A : 1;
  std::fill(Out.begin(), Out.end(), 0.0);
  for (int64_t R = Row * Per; R < (Row + 1) * Per; ++R) {
    int64_t Id = int64_t(In[2][R]);
    if (Id < 0 || Id >= WT.Shape[0])
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "'%" + N.getName() + "': id " + std::to_string(Id) + " of row " +
              std::to_string(R) + " is outside the experts");
    const double *XRow = In[0] + (XT.rank() == 3 ? R : R / A) * K;
    const double *WE = In[1] + Id * NN * K;
    double S = In.size() == 4 ? In[3][R] : 1.0;
    for (int64_t C = 0; C < NN; ++C) {
      double Acc = 0;
      for (int64_t I = 0; I < K; ++I)
        Acc += XRow[I] * WE[C * K + I];
      Out[C] += S * Acc;
    }
  }
  return llvm::Error::success();
}

namespace {
/// N's routed rows, the experts they can reach, and their average rows.
struct Routing {
  int64_t Rows, Experts;
  double PerExpert() const { return double(Rows) / double(Experts); }
};
} // namespace

static Routing routingOf(const Node &N) {
  int64_t Rows = N.getOperand(2)->getType().numElements();
  return {Rows, std::max<int64_t>(
                    1, std::min(Rows, N.getOperand(1)->getType().Shape[0]))};
}

/// The tiles offered: the SIMT loop where the tensor cores cannot run;
/// else 16- and 32-row tiles for a few rows per expert (decode), 32 to
/// 128 rows for many (prefill).
static std::vector<std::string> choices(const Node &N) {
  DType Dt = N.getType().Dtype;
  int64_t K = N.getOperand(1)->getType().Shape[2];
  if ((Dt != DType::BF16 && Dt != DType::F16) || K % 8)
    return {"gmm_simt"};
  double R = routingOf(N).PerExpert();
  std::vector<std::string> Out;
  if (R <= 64) {
    Out.push_back("gmm_16x64x64_w2_s4");
    Out.push_back("gmm_16x128x64_w4_s4");
    Out.push_back("gmm_16x64x128_w4_s3");
  }
  Out.push_back("gmm_32x128x64_w4_s3");
  if (R > 16) {
    Out.push_back("gmm_64x128x32_w4_s4");
    Out.push_back("gmm_128x128x32_w8_s4");
  }
  return Out;
}

static bool offersChoice(llvm::StringRef Name) {
  return codegen::groupedMmTileOf(Name).has_value();
}

/// The roofline's terms: each row tile streams its expert's weights (the
/// tiles of one expert share them in L2 only by luck), its rows of x and
/// of the result; the MMA rows past an expert's group are arithmetic done
/// for nothing.
static std::optional<OpUnitChoiceCost> choiceCost(const Node &N,
                                                  llvm::StringRef Name) {
  std::optional<codegen::GroupedMmTile> T = codegen::groupedMmTileOf(Name);
  if (!T)
    return std::nullopt;
  Routing R = routingOf(N);
  const TensorType &WT = N.getOperand(1)->getType();
  int64_t NN = WT.Shape[1], K = WT.Shape[2];
  double Elt = double(dtypeBytes(WT.Dtype));
  int64_t BM = T->TensorCores ? T->BM : 16, BN = T->TensorCores ? T->BN : 64;
  int64_t PerExpert = (R.Rows + R.Experts - 1) / R.Experts;
  int64_t RowTiles = R.Experts * ((PerExpert + BM - 1) / BM);
  OpUnitChoiceCost C;
  C.Flops = 2.0 * double(RowTiles * BM) * double(NN) * double(K);
  C.Bytes = double(RowTiles) * double(NN) * double(K) * Elt +
            double(R.Rows) * double(K + NN) * Elt;
  // The combine's fp32 rows, written and read back once.
  if (isCombine(N))
    C.Bytes += double(R.Rows) * double(NN) * 8.0;
  C.TensorCores = T->TensorCores;
  C.Efficiency = T->TensorCores ? 0.5 : 0.3;
  C.Ctas = RowTiles * ((NN + BN - 1) / BN);
  int64_t Smem = codegen::groupedMmSharedBytes(*T);
  C.CtasPerSm =
      int(std::max<int64_t>(1, std::min<int64_t>(Smem ? 227 * 1024 / Smem : 16,
                                                 2048 / (32 * T->Warps))));
  return C;
}

static llvm::Expected<KernelSource> kernel(llvm::StringRef Name,
                                           const Node &N) {
  return codegen::generateGroupedMmKernel(Name, N);
}

static llvm::Expected<KernelSource>
choiceKernel(llvm::StringRef Name, const Node &N, llvm::StringRef Choice) {
  std::optional<codegen::GroupedMmTile> T = codegen::groupedMmTileOf(Choice);
  if (!T)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'%" + N.getName() +
                                       "': grouped_mm has no kernel for "
                                       "choice '" +
                                       Choice + "'");
  return codegen::generateGroupedMmKernel(Name, N, *T);
}

void mtsched::opunits::registerGroupedMm() {
  OpUnitInfo Info;
  Info.InferType = inferType;
  Info.Flops = flops;
  Info.IndexBound = indexBound;
  Info.Choices = choices;
  Info.OffersChoice = offersChoice;
  Info.ChoiceCost = choiceCost;
  registerOpUnitInfo(OpCode::GroupedMm, Info);
  registerOpUnitReference(OpCode::GroupedMm, interpret);
  registerOpUnitRowReference(OpCode::GroupedMm, interpretRow);
  registerOpUnitKernel(OpCode::GroupedMm, kernel);
  registerOpUnitChoiceKernel(OpCode::GroupedMm, choiceKernel);
}
