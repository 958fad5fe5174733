//===- Scatter.cpp - scatter, values written at positions read at run time ===//
//
// `scatter(%dst, %index, %src) {dim, reduce}` copies %dst and writes each
// element of %src at the position along 'dim' that %index names in the
// same place:
//   out[o, index[o, k, i], i] = src[o, k, i]
// (+= with attribute reduce = "add") with the tensors seen as [Outer,
// length along dim, Inner]. The index (i32 or i64) and the source have one
// shape, the destination's but along 'dim', so each position across 'dim'
// (a fibre) is written only from its own fibre of the source; that keeps
// the op deterministic and its kernel one thread per fibre. Equal indices
// in one fibre are written in order, so the last one wins (the interpreter
// and the kernel agree); an index outside [0, DstLen) is an error in the
// interpreter and NaN (0 for integers) over the whole fibre in the kernel,
// which --run reports. Inputs drawn at random for an index stay inside
// [0, DstLen) (IndexBound).
//
// The kernel's thread copies the destination's fibre, then writes the
// source's elements at their indices in order (with reduce = "add", each
// is added in order). Routing-sized scatters (tokens x experts) are a few
// thousand fibres of tens of elements: one launch of a few microseconds,
// not worth a cooperative scheme.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/OpUnit.h"
#include "mtsched/IR/Scan.h"
#include "mtsched/OpUnits/OpUnits.h"
#include "mtsched/Reference/OpUnitReference.h"
#include "llvm/Support/Error.h"

using namespace mtsched;
using namespace mtsched::codegen;

namespace {
/// The geometry of a scatter node.
struct ScatterShape {
  /// Elements before and after 'dim' (the same for all three operands).
  int64_t Outer = 1, Inner = 1;
  /// Lengths along 'dim': the destination's and the index's (the source's).
  int64_t DstLen = 0, IdxLen = 0;
  /// reduce = "add": the source is added to what is there (scatter_add,
  /// index_add) instead of replacing it.
  bool Add = false;

  int64_t fibres() const { return Outer * Inner; }
};
} // namespace

static std::string name(const Value *V) { return "'%" + V->getName() + "'"; }

static bool inferType(const Node &N, llvm::MutableArrayRef<TensorType> Results,
                      OpErrorFn Error) {
  TensorType &Result = Results.front();
  const TensorType &Dst = N.getOperand(0)->getType();
  const TensorType &Idx = N.getOperand(1)->getType();
  const TensorType &Src = N.getOperand(2)->getType();
  if (Dst.rank() == 0) {
    Error(N.getOperands()[0].Loc,
          "'scatter' needs a destination of rank 1 or more");
    return false;
  }
  int64_t Rank = Dst.rank();
  std::optional<int64_t> D = verifyDimAttr(N, Rank, -1, Error);
  if (!D)
    return false;
  if (Idx.Dtype != DType::I32 && Idx.Dtype != DType::I64) {
    Error(N.getOperands()[1].Loc, "index " + name(N.getOperand(1)) +
                                      " of 'scatter' must be i32 or i64, got " +
                                      dtypeName(Idx.Dtype));
    return false;
  }
  if (Src.Dtype != Dst.Dtype) {
    Error(N.getOperands()[2].Loc,
          "source " + name(N.getOperand(2)) + " has element type " +
              dtypeName(Src.Dtype) + ", expected " + dtypeName(Dst.Dtype) +
              " (the destination's)");
    return false;
  }
  if (Src.Shape != Idx.Shape) {
    Error(N.getOperands()[2].Loc, "source " + name(N.getOperand(2)) +
                                      " has shape " + shapeStr(Src.Shape) +
                                      ", expected the shape of the index " +
                                      shapeStr(Idx.Shape));
    return false;
  }
  bool Fits = Idx.rank() == Dst.rank();
  for (int64_t I = 0; Fits && I < Rank; ++I)
    Fits = I == *D || Idx.Shape[I] == Dst.Shape[I];
  if (!Fits) {
    Error(N.getOperands()[1].Loc,
          "index " + name(N.getOperand(1)) + " of 'scatter' has shape " +
              shapeStr(Idx.Shape) + ", expected the shape of " +
              name(N.getOperand(0)) + " " + shapeStr(Dst.Shape) +
              " but along dimension " + llvm::Twine(*D));
    return false;
  }
  if (const Attribute *R = N.getAttrs().get("reduce"))
    if (!R->isString() || R->getString() != "add") {
      Error(N.getLoc(), "attribute 'reduce' of 'scatter' must be \"add\" "
                        "(absent: the source replaces)");
      return false;
    }
  Result = Dst;
  return true;
}

/// One operation per element of the result (the roofline's count for a
/// plain buffer).
static double flops(const Node &N) { return double(N.getType().numElements()); }

/// The geometry of a verified scatter node; nullopt if N is not one.
static std::optional<ScatterShape> shapeOf(const Node &N) {
  if (N.getOp() != OpCode::Scatter || N.getNumOperands() != 3)
    return std::nullopt;
  const TensorType &Dst = N.getOperand(0)->getType();
  const TensorType &Idx = N.getOperand(1)->getType();
  std::optional<ScanShape> Split = splitAtDim(Dst, N);
  if (!Split || Idx.rank() != Dst.rank())
    return std::nullopt;
  for (int64_t I = 0; I < int64_t(Dst.rank()); ++I)
    if (I != Split->Dim && Idx.Shape[I] != Dst.Shape[I])
      return std::nullopt;
  ScatterShape S;
  S.Outer = Split->Outer;
  S.Inner = Split->Inner;
  S.DstLen = Split->Len;
  S.IdxLen = Idx.Shape[Split->Dim];
  const Attribute *R = N.getAttrs().get("reduce");
  S.Add = R && R->isString() && R->getString() == "add";
  return S;
}

/// Operand 1, the index, names positions in [0, the destination's length
/// along 'dim').
static std::optional<int64_t> indexBound(const Node &N, unsigned I) {
  std::optional<ScatterShape> S = shapeOf(N);
  if (I != 1 || !S)
    return std::nullopt;
  return S->DstLen;
}

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

static llvm::Error interpret(const Node &N,
                             llvm::ArrayRef<const HostValues *> In,
                             llvm::MutableArrayRef<HostValues> Results) {
  HostValues &Result = Results.front();
  int64_t NumOut = N.getType().numElements();
  const TensorType &T = N.getType();
  std::optional<ScatterShape> S = shapeOf(N);
  if (!S)
    return err("'%" + N.getName() + "' is not a well-formed 'scatter'");
  Result = HostValues::zeros(T.Dtype, NumOut);
  for (int64_t I = 0; I < NumOut; ++I)
    copyElement(Result, I, *In[0], I, T.Dtype);
  const HostValues &Idx = *In[1], &Src = *In[2];
  for (int64_t O = 0; O < S->Outer; ++O)
    for (int64_t I = 0; I < S->Inner; ++I)
      for (int64_t K = 0; K < S->IdxLen; ++K) {
        int64_t Pos = (O * S->IdxLen + K) * S->Inner + I;
        int64_t X = intAt(Idx, Pos);
        if (X < 0 || X >= S->DstLen)
          return err("'%" + N.getName() + "': index " + llvm::Twine(X) +
                     " at position " + llvm::Twine(Pos) + " of %" +
                     N.getOperand(1)->getName() + " is outside [0, " +
                     llvm::Twine(S->DstLen) + ")");
        int64_t At = (O * S->DstLen + X) * S->Inner + I;
        if (!S->Add)
          copyElement(Result, At, Src, Pos, T.Dtype);
        else if (Result.isInt())
          Result.ints()[At] =
              addWrap(Result.ints()[At], intAt(Src, Pos), T.Dtype);
        else
          Result.floats()[At] += Src.getDouble(Pos);
      }
  return llvm::Error::success();
}

static llvm::Expected<KernelSource> kernel(llvm::StringRef Name,
                                           const Node &N) {
  std::optional<ScatterShape> S = shapeOf(N);
  if (!S)
    return err("'%" + N.getName() + "': not a well-formed scatter");
  const unsigned Block = 128;
  std::string Fn = sanitizeIdentifier(Name);
  ParamList Params;
  for (const Operand &O : N.getOperands())
    Params.Inputs.insert(O.V);
  Params.Outputs.push_back(N.getResult());
  DType T = N.getType().Dtype;
  std::string Dst = Params.name(N.getOperand(0));
  std::string Idx = Params.name(N.getOperand(1));
  std::string Src = Params.name(N.getOperand(2));
  std::string Out = Params.name(N.getResult()) + "_out";
  std::string In = std::to_string(S->Inner) + "LL";
  auto At = [&](const std::string &Len, const std::string &Pos) {
    return "((o * " + Len + "LL + " + Pos + ") * " + In + " + c)";
  };
  std::string DL = std::to_string(S->DstLen), IL = std::to_string(S->IdxLen);
  // What the source element does to its place: replace it, or (reduce =
  // "add") add to it, in fp32 for floats and rounded where stored, as
  // PyTorch's scatter_add rounds each add.
  std::string Write = Src + "[" + At(IL, "k") + "]";
  if (S->Add)
    Write = isFloatDType(T)
                ? storeExpr(T, loadExpr(T, Out, At(DL, "ix")) + " + " +
                                   loadExpr(T, Src, At(IL, "k")))
                : Out + "[" + At(DL, "ix") + "] + " + Write;

  std::string Src_;
  llvm::raw_string_ostream OS(Src_);
  emitFibreKernelHead(OS,
                      "scatter %" + N.getName() +
                          ": one thread per fibre across the dimension, "
                          "written in order",
                      Fn, Params, Block, S->fibres(), S->Inner);
  OS << "    for (long long d = 0; d < " << DL << "LL; ++d)\n"
     << "      " << Out << "[" << At(DL, "d") << "] = " << Dst << "["
     << At(DL, "d") << "];\n"
     << "    bool bad = false;\n"
     << "    for (long long k = 0; k < " << IL << "LL; ++k) {\n"
     << "      const long long ix = (long long)" << Idx << "[" << At(IL, "k")
     << "];\n"
     << "      if (ix < 0 || ix >= " << DL << "LL) {\n"
     << "        bad = true;\n        continue;\n      }\n"
     << "      " << Out << "[" << At(DL, "ix") << "] = " << Write << ";\n"
     << "    }\n"
     << "    if (bad)\n"
     << "      for (long long d = 0; d < " << DL << "LL; ++d)\n"
     << "        " << Out << "[" << At(DL, "d") << "] = "
     << (isFloatDType(T) ? storeExpr(T, "__int_as_float(0x7fc00000)")
                         : std::string("0"))
     << ";\n"
     << "  }\n}\n";

  return gridStrideKernel(Fn, OS.str(), Params, Block, S->fibres());
}

void mtsched::opunits::registerScatter() {
  OpUnitInfo Info;
  Info.InferType = inferType;
  Info.Flops = flops;
  Info.IndexBound = indexBound;
  registerOpUnitInfo(OpCode::Scatter, Info);
  registerOpUnitReference(OpCode::Scatter, interpret);
  registerOpUnitKernel(OpCode::Scatter, kernel);
}
