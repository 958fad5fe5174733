//===- Conv2d.cpp - conv2d, a 2-D convolution with kernel choices ---------===//
//
// `conv2d(%x, %w[, %b]) {stride, padding, dilation, groups}` is
// torch.nn.functional.conv2d on NCHW tensors: %x is [N, C, H, W], %w is
// [O, C / groups, KH, KW], the optional bias %b is [O], and the result is
// [N, O, HO, WO] with HO = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1 (WO
// alike). 'stride', 'padding' and 'dilation' are an integer or a list of
// two, [along H, along W] (defaults 1, 0, 1); 'groups' (default 1) divides
// both C and O. Zero padding; bf16, f16 or f32, every operand of the
// result's element type.
//
// The interpreter sums in fp64. conv2d offers kernel choices (IR/OpUnit.h,
// OpUnitInfo::Choices): it lowers to a multi-template buffer the autotuner
// decides among. The implicit GEMM (`conv_igemm_<BM>x<BN>x<BK>_t<TM>x<TN>`):
// per group, the result seen as a [N * HO * WO, O / groups] matrix is the
// product of the im2col matrix of %x, [N * HO * WO, C / groups * KH * KW],
// which is never materialised (each tile is gathered from %x as it is
// loaded, zeros where the window leaves the image), and the weight seen as
// [C / groups * KH * KW, O / groups]. A CTA computes a BM x BN tile of it,
// staging BK-deep slices of both operands in shared memory; each thread
// accumulates TM x TN results in fp32 on the CUDA cores, its rows strided
// by BM / TM so that neighbouring threads load and store neighbouring
// pixels of the NCHW tensors. The bias is added before the single rounding
// to the result's type. Where each group has one output channel
// (depthwise), the GEMM would be one column wide: a direct kernel
// (`conv_direct`) runs one thread per output element. cuDNN
// (`extern.cudnn`, Cudnn.h) is opened at run time; where it cannot be, the
// choice fails with the reason and the others are decided among.
//
// A conv2d is its own kernel: it takes no epilogue. The importer maps
// grouped and depthwise 2-D aten.convolution here (docs/IMPORT.md); a
// bias, ReLU or residual add after it runs as a kernel of its own.
//
//===----------------------------------------------------------------------===//
#include "Cudnn.h"
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/OpUnit.h"
#include "mtsched/OpUnits/OpUnits.h"
#include "mtsched/Reference/OpUnitReference.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

using namespace mtsched;
using namespace mtsched::codegen;

namespace {

/// The problem of a conv2d node: its operands' and result's sizes and its
/// attributes.
struct ConvShape {
  int64_t N = 0, C = 0, H = 0, W = 0;
  int64_t O = 0, KH = 0, KW = 0;
  int64_t HO = 0, WO = 0;
  int64_t SH = 1, SW = 1, PH = 0, PW = 0, DH = 1, DW = 1, Groups = 1;
  bool Bias = false;

  int64_t cg() const { return C / Groups; }
  int64_t og() const { return O / Groups; }
  /// The implicit GEMM per group: rows (output pixels), columns (output
  /// channels of the group), depth (the window of the group's channels).
  int64_t gemmM() const { return N * HO * WO; }
  int64_t gemmK() const { return cg() * KH * KW; }
};

/// The attributes conv2d reads; any other is a mistake (a misspelt
/// 'strides' would otherwise be ignored).
const char *const KnownAttrs[] = {"stride", "padding", "dilation", "groups"};

/// Every stride, padding and dilation is below this.
constexpr int64_t MaxAttr = int64_t(1) << 31;

/// Attribute Key of N as a pair [along H, along W]: an integer stands for
/// both. Reports a malformed one, or a value below Min, and returns false.
bool pairAttr(const Node &N, llvm::StringRef Key, int64_t Default, int64_t Min,
              int64_t &H, int64_t &W, OpErrorFn Error) {
  H = W = Default;
  const Attribute *A = N.getAttrs().get(Key);
  if (A && A->isInt()) {
    H = W = A->getInt();
  } else if (A) {
    if (!A->isList() || A->getList().size() != 2 || !A->getList()[0].isInt() ||
        !A->getList()[1].isInt()) {
      Error(N.getLoc(), "attribute '" + Key +
                            "' must be an integer or a list of two integers");
      return false;
    }
    H = A->getList()[0].getInt();
    W = A->getList()[1].getInt();
  }
  if (H < Min || W < Min) {
    Error(N.getLoc(), "attribute '" + Key + "' must be " +
                          (Min == 0 ? "non-negative" : "at least 1"));
    return false;
  }
  // Bounded so that the shape arithmetic cannot overflow.
  if (H >= MaxAttr || W >= MaxAttr) {
    Error(N.getLoc(), "attribute '" + Key + "' must be below 2^31");
    return false;
  }
  return true;
}

/// The shape of N from its operands and attributes, each mistake reported
/// through Error; nullopt after one.
std::optional<ConvShape> convShapeOf(const Node &N, OpErrorFn Error) {
  size_t Count = N.getOperands().size();
  if (Count != 2 && Count != 3) {
    Error(N.getLoc(), "'conv2d' takes 2 or 3 operands (input, weight, "
                      "optional bias), got " +
                          llvm::Twine(Count));
    return std::nullopt;
  }
  for (const AttrDict::Entry &E : N.getAttrs())
    if (!llvm::is_contained(KnownAttrs, E.first)) {
      Error(N.getLoc(), "unknown attribute '" + E.first +
                            "' of 'conv2d' (stride, padding, dilation, "
                            "groups)");
      return std::nullopt;
    }
  const TensorType &X = N.getOperand(0)->getType();
  const TensorType &Wt = N.getOperand(1)->getType();
  llvm::SMLoc XLoc = N.getOperands()[0].Loc, WLoc = N.getOperands()[1].Loc;
  DType T = X.Dtype;
  if (T != DType::F32 && T != DType::F16 && T != DType::BF16) {
    Error(XLoc, "'conv2d' needs a bf16, f16 or f32 input, got " + dtypeName(T));
    return std::nullopt;
  }
  for (size_t I = 1; I < Count; ++I)
    if (N.getOperand(I)->getType().Dtype != T) {
      Error(N.getOperands()[I].Loc,
            "'conv2d' operand " + llvm::Twine(I) + " has element type " +
                dtypeName(N.getOperand(I)->getType().Dtype) +
                ", the input has " + dtypeName(T));
      return std::nullopt;
    }
  if (X.rank() != 4) {
    Error(XLoc, "'conv2d' needs an input of rank 4 [N, C, H, W], got rank " +
                    llvm::Twine(X.rank()));
    return std::nullopt;
  }
  if (Wt.rank() != 4) {
    Error(WLoc, "'conv2d' needs a weight of rank 4 [O, C / groups, KH, KW], "
                "got rank " +
                    llvm::Twine(Wt.rank()));
    return std::nullopt;
  }
  ConvShape S;
  S.N = X.Shape[0], S.C = X.Shape[1], S.H = X.Shape[2], S.W = X.Shape[3];
  S.O = Wt.Shape[0], S.KH = Wt.Shape[2], S.KW = Wt.Shape[3];
  if (!pairAttr(N, "stride", 1, 1, S.SH, S.SW, Error) ||
      !pairAttr(N, "padding", 0, 0, S.PH, S.PW, Error) ||
      !pairAttr(N, "dilation", 1, 1, S.DH, S.DW, Error))
    return std::nullopt;
  if (const Attribute *G = N.getAttrs().get("groups")) {
    if (!G->isInt() || G->getInt() < 1) {
      Error(N.getLoc(), "attribute 'groups' must be a positive integer");
      return std::nullopt;
    }
    S.Groups = G->getInt();
  }
  if (S.C % S.Groups || S.O % S.Groups) {
    Error(N.getLoc(), "'conv2d' groups = " + llvm::Twine(S.Groups) +
                          " must divide the input's " + llvm::Twine(S.C) +
                          " channels and the weight's " + llvm::Twine(S.O) +
                          " output channels");
    return std::nullopt;
  }
  if (Wt.Shape[1] != S.cg()) {
    Error(WLoc, "'conv2d' weight has " + llvm::Twine(Wt.Shape[1]) +
                    " input channels per group, the input has " +
                    llvm::Twine(S.C) + " channels in " + llvm::Twine(S.Groups) +
                    " group(s)");
    return std::nullopt;
  }
  if (S.KH < 1 || S.KW < 1) {
    Error(WLoc, "'conv2d' needs a non-empty kernel window");
    return std::nullopt;
  }
  if (Count == 3) {
    const TensorType &B = N.getOperand(2)->getType();
    if (B.rank() != 1 || B.Shape[0] != S.O) {
      Error(N.getOperands()[2].Loc, "'conv2d' bias must be [" +
                                        llvm::Twine(S.O) +
                                        "], one per output channel");
      return std::nullopt;
    }
    S.Bias = true;
  }
  // The padded extent must hold one dilated window.
  int64_t SpanH, SpanW;
  if (llvm::MulOverflow(S.DH, S.KH - 1, SpanH) ||
      llvm::MulOverflow(S.DW, S.KW - 1, SpanW)) {
    Error(N.getLoc(), "'conv2d' dilated window is too large");
    return std::nullopt;
  }
  ++SpanH, ++SpanW;
  if (S.H + 2 * S.PH < SpanH || S.W + 2 * S.PW < SpanW) {
    Error(N.getLoc(),
          "'conv2d' window " + llvm::Twine(SpanH) + "x" + llvm::Twine(SpanW) +
              " (dilated) is larger than the padded input " +
              llvm::Twine(S.H + 2 * S.PH) + "x" + llvm::Twine(S.W + 2 * S.PW));
    return std::nullopt;
  }
  S.HO = (S.H + 2 * S.PH - SpanH) / S.SH + 1;
  S.WO = (S.W + 2 * S.PW - SpanW) / S.SW + 1;
  return S;
}

bool inferType(const Node &N, llvm::MutableArrayRef<TensorType> Results,
               OpErrorFn Error) {
  TensorType &Result = Results.front();
  std::optional<ConvShape> S = convShapeOf(N, Error);
  if (!S)
    return false;
  Result = N.getOperand(0)->getType();
  Result.Shape = {S->N, S->O, S->HO, S->WO};
  return true;
}

/// The shape of verified node N; an error if it is not a well-formed
/// conv2d.
llvm::Expected<ConvShape> shapeOf(const Node &N) {
  bool Bad = false;
  std::optional<ConvShape> S =
      convShapeOf(N, [&](llvm::SMLoc, const llvm::Twine &) { Bad = true; });
  if (!S || Bad)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'%" + N.getName() +
                                       "' is not a well-formed 'conv2d'");
  return *S;
}

/// A multiply and an add per window element of each result, plus the bias.
double flops(const Node &N) {
  llvm::Expected<ConvShape> S = shapeOf(N);
  if (!S) {
    llvm::consumeError(S.takeError());
    return 0;
  }
  double Out = double(S->N) * S->O * S->HO * S->WO;
  return Out * (2.0 * double(S->gemmK()) + (S->Bias ? 1 : 0));
}

/// Row (B, O, OH) of the result, its WO elements, into Out: the fp64 sum
/// over the window of the group's channels, plus the bias (Bias, or null).
void convRow(const ConvShape &S, const double *X, const double *Wt,
             const double *Bias, int64_t B, int64_t O, int64_t OH,
             double *Out) {
  int64_t G = O / S.og();
  for (int64_t OW = 0; OW < S.WO; ++OW) {
    double Acc = Bias ? Bias[O] : 0;
    for (int64_t C = 0; C < S.cg(); ++C)
      for (int64_t R = 0; R < S.KH; ++R) {
        int64_t IH = OH * S.SH - S.PH + R * S.DH;
        if (IH < 0 || IH >= S.H)
          continue;
        for (int64_t Q = 0; Q < S.KW; ++Q) {
          int64_t IW = OW * S.SW - S.PW + Q * S.DW;
          if (IW < 0 || IW >= S.W)
            continue;
          int64_t XI = ((B * S.C + G * S.cg() + C) * S.H + IH) * S.W + IW;
          int64_t WI = ((O * S.cg() + C) * S.KH + R) * S.KW + Q;
          Acc += X[XI] * Wt[WI];
        }
      }
    Out[OW] = Acc;
  }
}

llvm::Error interpret(const Node &N, llvm::ArrayRef<const HostValues *> In,
                      llvm::MutableArrayRef<HostValues> Results) {
  HostValues &Result = Results.front();
  llvm::Expected<ConvShape> SOr = shapeOf(N);
  if (!SOr)
    return SOr.takeError();
  const ConvShape &S = *SOr;
  Result = HostValues::zeros(N.getType().Dtype, N.getType().numElements());
  std::vector<double> &Out = Result.floats();
  const double *Bias = S.Bias ? In[2]->floats().data() : nullptr;
  for (int64_t B = 0; B < S.N; ++B)
    for (int64_t O = 0; O < S.O; ++O)
      for (int64_t OH = 0; OH < S.HO; ++OH)
        convRow(S, In[0]->floats().data(), In[1]->floats().data(), Bias, B, O,
                OH, &Out[((B * S.O + O) * S.HO + OH) * S.WO]);
  return llvm::Error::success();
}

/// Row Row of the result, (B, O, OH) flattened, for the benchmarker's
/// check of each choice (Reference/OpUnitReference.h).
llvm::Error interpretRow(const Node &N, llvm::ArrayRef<const double *> In,
                         int64_t Row, llvm::MutableArrayRef<double> Out) {
  llvm::Expected<ConvShape> SOr = shapeOf(N);
  if (!SOr)
    return SOr.takeError();
  const ConvShape &S = *SOr;
  if (Row < 0 || Row >= S.N * S.O * S.HO || int64_t(Out.size()) != S.WO)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "conv2d: row " + std::to_string(Row) +
                                       " is outside the result");
  convRow(S, In[0], In[1], S.Bias ? In[2] : nullptr, Row / (S.O * S.HO),
          Row / S.HO % S.O, Row % S.HO, Out.data());
  return llvm::Error::success();
}

/// A tile of the implicit GEMM: BM output pixels by BN output channels per
/// CTA, BK of the window per shared-memory stage, TM x TN results per
/// thread. Its choice name is `conv_igemm_<BM>x<BN>x<BK>_t<TM>x<TN>`.
struct ConvTile {
  int BM, BN, BK, TM, TN;
  int threads() const { return (BM / TM) * (BN / TN); }
  bool operator==(const ConvTile &O) const {
    return BM == O.BM && BN == O.BN && BK == O.BK && TM == O.TM && TN == O.TN;
  }
};

/// The tiles offered, narrowest in channels first: narrow ones for grouped
/// convolutions whose groups have few output channels (fewer of the CTA's
/// columns idle), wide ones with more results per thread for dense
/// convolutions (more arithmetic per shared-memory load).
const ConvTile Tiles[] = {
    {128, 16, 16, 4, 2}, {128, 32, 16, 4, 4}, {64, 32, 16, 4, 2},
    {64, 64, 16, 4, 4},  {128, 64, 8, 8, 4},  {128, 128, 8, 8, 8},
};

/// The direct kernel of a convolution with one output channel per group.
constexpr llvm::StringLiteral DirectChoice = "conv_direct";
/// cuDNN's convolution (OpUnits/Conv2dCudnn.cpp), loaded at run time.
constexpr llvm::StringLiteral CudnnChoice = "extern.cudnn";

std::string tileName(const ConvTile &T) {
  return "conv_igemm_" + std::to_string(T.BM) + "x" + std::to_string(T.BN) +
         "x" + std::to_string(T.BK) + "_t" + std::to_string(T.TM) + "x" +
         std::to_string(T.TN);
}

/// Whether T is a tile the kernel can be written with: whole thread tiles,
/// whole warps, at most 1024 threads, at most 64 accumulators a thread and
/// its two fp32 stages within 48 KiB of static shared memory.
bool validTile(const ConvTile &T) {
  if (T.BM <= 0 || T.BN <= 0 || T.BK <= 0 || T.TM <= 0 || T.TN <= 0 ||
      T.BM % T.TM || T.BN % T.TN || T.TM * T.TN > 64)
    return false;
  int Threads = T.threads();
  return Threads >= 32 && Threads <= 1024 && Threads % 32 == 0 &&
         int64_t(T.BK) * (T.BM + T.BN + 1) * 4 <= 48 * 1024;
}

/// The tile a choice name describes, if it is one the kernel can run.
std::optional<ConvTile> tileOf(llvm::StringRef Name) {
  llvm::StringRef S = Name;
  if (!S.consume_front("conv_igemm_"))
    return std::nullopt;
  auto [Block, Thread] = S.split("_t");
  llvm::SmallVector<llvm::StringRef, 3> B;
  Block.split(B, 'x');
  auto [TM, TN] = Thread.split('x');
  ConvTile T{};
  if (B.size() != 3 || B[0].getAsInteger(10, T.BM) ||
      B[1].getAsInteger(10, T.BN) || B[2].getAsInteger(10, T.BK) ||
      TM.getAsInteger(10, T.TM) || TN.getAsInteger(10, T.TN) || !validTile(T) ||
      tileName(T) != Name)
    return std::nullopt;
  return T;
}

/// Whether tile T suits shape S: at most half its columns idle on the
/// group's output channels (any tile 16 wide does), and at most half its
/// rows idle on the output pixels (any tile 64 tall does). The first tile,
/// the narrowest, is offered whatever the shape: every conv2d has an
/// implicit GEMM to fall back on.
bool tileFits(const ConvTile &T, const ConvShape &S) {
  if (T == Tiles[0])
    return true;
  return (T.BN <= 16 || 2 * S.og() > T.BN) &&
         (T.BM <= 64 || 2 * S.gemmM() > T.BM);
}

/// The tile written for a `buffer conv2d` (no choice made): narrow in
/// channels when a group has few output channels.
ConvTile defaultTile(const ConvShape &S) {
  if (S.og() <= 16)
    return {128, 16, 16, 4, 2};
  if (S.og() <= 32)
    return {128, 32, 16, 4, 4};
  return {64, 64, 16, 4, 4};
}

/// A tile of the tensor-core implicit GEMM (bf16/f16): BM output pixels
/// by BN output channels per CTA, BK of the window per shared-memory
/// stage, Warps warps in a 2 x (Warps / 2) layout, each computing its
/// sub-tile with mma.sync m16n8k16 into fp32 accumulators. Its choice
/// name is `conv_mma_<BM>x<BN>x<BK>_w<Warps>`.
struct MmaTile {
  int BM, BN, BK, Warps;
  int warpsM() const { return 2; }
  int warpsN() const { return Warps / 2; }
  /// m16 tiles down and n8 tiles across one warp's sub-tile.
  int fragsM() const { return BM / warpsM() / 16; }
  int fragsN() const { return BN / warpsN() / 8; }
  bool operator==(const MmaTile &O) const {
    return BM == O.BM && BN == O.BN && BK == O.BK && Warps == O.Warps;
  }
};

/// The tensor-core tiles offered for bf16 and f16.
const MmaTile MmaTiles[] = {{128, 64, 32, 4}, {64, 32, 32, 4}};

std::string mmaName(const MmaTile &T) {
  return "conv_mma_" + std::to_string(T.BM) + "x" + std::to_string(T.BN) + "x" +
         std::to_string(T.BK) + "_w" + std::to_string(T.Warps);
}

/// Whether T can be written: whole m16 and n8 fragments per warp, k16
/// steps, at most 128 accumulators a thread and both 16-bit stages (rows
/// padded by 8 elements) within 48 KiB.
bool validMma(const MmaTile &T) {
  if (T.BM <= 0 || T.BN <= 0 || T.BK <= 0 || T.Warps < 2 || T.Warps > 16 ||
      T.Warps % 2 || T.BK % 16 || T.BM % (T.warpsM() * 16) ||
      T.BN % (T.warpsN() * 8))
    return false;
  return T.fragsM() * T.fragsN() * 4 <= 128 &&
         int64_t(T.BM + T.BN) * (T.BK + 8) * 2 <= 48 * 1024;
}

std::optional<MmaTile> mmaTileOf(llvm::StringRef Name) {
  llvm::StringRef S = Name;
  if (!S.consume_front("conv_mma_"))
    return std::nullopt;
  auto [Block, W] = S.split("_w");
  llvm::SmallVector<llvm::StringRef, 3> B;
  Block.split(B, 'x');
  MmaTile T{};
  if (B.size() != 3 || B[0].getAsInteger(10, T.BM) ||
      B[1].getAsInteger(10, T.BN) || B[2].getAsInteger(10, T.BK) ||
      W.getAsInteger(10, T.Warps) || !validMma(T) || mmaName(T) != Name)
    return std::nullopt;
  return T;
}

/// A tensor-core tile runs bf16 and f16 convolutions with more than one
/// output channel per group, at most half its columns idle (the narrow
/// one always) and half its rows (any 64 tall).
bool mmaFits(const MmaTile &T, const ConvShape &S, DType Dt) {
  if ((Dt != DType::BF16 && Dt != DType::F16) || S.og() == 1)
    return false;
  return (T == MmaTiles[1] || 2 * S.og() > T.BN) &&
         (T.BM <= 64 || 2 * S.gemmM() > T.BM);
}

std::vector<std::string> choices(const Node &N) {
  std::vector<std::string> Out;
  llvm::Expected<ConvShape> S = shapeOf(N);
  if (!S) {
    llvm::consumeError(S.takeError());
    return Out;
  }
  if (S->og() == 1)
    Out.push_back(DirectChoice.str());
  for (const ConvTile &T : Tiles)
    if (tileFits(T, *S))
      Out.push_back(tileName(T));
  for (const MmaTile &T : MmaTiles)
    if (mmaFits(T, *S, N.getType().Dtype))
      Out.push_back(mmaName(T));
  Out.push_back(CudnnChoice.str());
  return Out;
}

bool offersChoice(llvm::StringRef Name) {
  return Name == DirectChoice || Name == CudnnChoice ||
         llvm::any_of(Tiles,
                      [&](const ConvTile &T) { return tileName(T) == Name; }) ||
         llvm::any_of(MmaTiles,
                      [&](const MmaTile &T) { return mmaName(T) == Name; });
}

/// The simulator's terms of choice Name for N. The implicit GEMM on the
/// CUDA cores reaches a fraction of the fp32 peak that grows with the
/// results each thread keeps (arithmetic per shared-memory load: TM * TN
/// against TM + TN) and shrinks with the gather of its im2col tile (a few
/// integer divisions per element, once per BN results), its idle rows and
/// columns; the im2col rows are read again from L2 by each column tile.
/// The direct kernel is a gather per multiply. cuDNN is priced like
/// cuBLAS: its tensor-core kernels near the top of their efficiency curve
/// for 16-bit types (fp32 on the CUDA cores: the call asks for FMA math,
/// no TF32), and a memory-bound kernel for depthwise convolutions.
std::optional<OpUnitChoiceCost> choiceCost(const Node &N,
                                           llvm::StringRef Name) {
  llvm::Expected<ConvShape> SOr = shapeOf(N);
  if (!SOr) {
    llvm::consumeError(SOr.takeError());
    return std::nullopt;
  }
  const ConvShape &S = *SOr;
  double XBytes = double(N.getOperand(0)->getType().numBytes());
  double WBytes = double(N.getOperand(1)->getType().numBytes());
  double OutBytes = double(N.getType().numBytes());
  OpUnitChoiceCost C;
  C.Flops = flops(N);
  C.Bytes = XBytes + WBytes + OutBytes;
  if (Name == CudnnChoice) {
    bool Half = N.getType().Dtype != DType::F32;
    C.TensorCores = Half && S.og() >= 8;
    // Narrow GEMMs (few output channels per group) leave the library's
    // tiles partly idle, as in the cuBLAS model: a ResNet stage-1 3x3 (64
    // channels) runs at about an eighth of the tensor-core peak.
    C.Efficiency = S.og() == 1
                       ? 0.25
                       : (C.TensorCores ? 0.5 : 0.7) *
                             std::clamp(double(S.og()) / 256, 0.05, 1.0);
    return C;
  }
  if (Name == DirectChoice) {
    if (S.og() != 1)
      return std::nullopt;
    C.Efficiency = 0.15;
    C.Ctas = (N.getType().numElements() + 255) / 256;
    C.CtasPerSm = 8;
    return C;
  }
  if (std::optional<MmaTile> T = mmaTileOf(Name)) {
    if (!mmaFits(*T, S, N.getType().Dtype) && !(*T == MmaTiles[1]))
      return std::nullopt;
    // The tensor cores outrun the im2col gather (a few integer divisions
    // per element on the CUDA cores, about 15 times slower per element
    // than a BN-wide row of MMAs): it bounds the tile.
    double TilesM = std::ceil(double(S.gemmM()) / T->BM);
    double TilesN = std::ceil(double(S.og()) / T->BN);
    double Idle = (double(S.gemmM()) / (TilesM * T->BM)) *
                  (double(S.og()) / (TilesN * T->BN));
    C.TensorCores = true;
    C.Efficiency = 0.6 / (1 + 150.0 / T->BN) * Idle;
    C.Bytes += XBytes * (TilesN - 1) * 0.25;
    C.Ctas = int64_t(TilesM * TilesN) * S.Groups;
    C.CtasPerSm = std::max(1, 16 / T->Warps);
    return C;
  }
  std::optional<ConvTile> T = tileOf(Name);
  if (!T)
    return std::nullopt;
  double TilesM = std::ceil(double(S.gemmM()) / T->BM);
  double TilesN = std::ceil(double(S.og()) / T->BN);
  double Reuse = double(T->TM * T->TN) / double(T->TM + T->TN);
  double Gather = 1 + 20.0 / T->BN + 5.0 / T->BM;
  double Idle = (double(S.gemmM()) / (TilesM * T->BM)) *
                (double(S.og()) / (TilesN * T->BN));
  C.Efficiency = 0.8 * Reuse / (Reuse + 1.5) / Gather * Idle;
  C.Bytes += XBytes * (TilesN - 1) * 0.25;
  C.Ctas = int64_t(TilesM * TilesN) * S.Groups;
  C.CtasPerSm = std::max(1, 1024 / T->threads());
  return C;
}

/// The kernel of a convolution whose groups have one output channel each
/// (depthwise): the GEMM would be one column wide, so one thread computes
/// one output element, neighbouring threads neighbouring pixels, summing
/// its window in the GEMM's order.
KernelSource directKernel(llvm::StringRef Name, const Node &N,
                          const ConvShape &S) {
  const unsigned Block = 256;
  int64_t Total = N.getType().numElements();
  bool Narrow = std::max(N.getOperand(0)->getType().numElements(), Total) <
                (int64_t(1) << 31) - Block;
  const char *IT = Narrow ? "int" : "long long";
  auto Lit = [&](int64_t V) {
    return std::to_string(V) + (Narrow ? "" : "LL");
  };
  std::string Fn = sanitizeIdentifier(Name);
  ParamList Params;
  for (const Operand &Op : N.getOperands())
    Params.Inputs.insert(Op.V);
  Params.Outputs.push_back(N.getResult());
  DType Dt = N.getType().Dtype;
  std::string Xp = Params.name(N.getOperand(0));
  std::string Wp = Params.name(N.getOperand(1));
  std::string Out = Params.name(N.getResult()) + "_out";
  int64_t Cg = S.cg();

  std::string Src;
  llvm::raw_string_ostream OS(Src);
  OS << kernelPrelude() << "\n// conv2d %" << N.getName()
     << ": direct, one thread per output element (one output channel per "
        "group), fp32 accumulation\n"
     << "extern \"C\" __global__ void __launch_bounds__(" << Block << ") " << Fn
     << "(" << Params.signature() << ") {\n"
     << "  for (long long f = (long long)blockIdx.x * " << Block
     << " + threadIdx.x; f < " << Total << "LL;\n"
     << "       f += (long long)gridDim.x * " << Block << ") {\n"
     << "    const " << IT << " e = (" << IT << ")f;\n"
     << "    const " << IT << " ow = e % " << Lit(S.WO) << ", oh = e / "
     << Lit(S.WO) << " % " << Lit(S.HO) << ", o = e / " << Lit(S.HO * S.WO)
     << " % " << Lit(S.O) << ", n = e / " << Lit(S.HO * S.WO * S.O) << ";\n"
     << "    float acc = 0.f;\n"
     << "    for (" << IT << " c = 0; c < " << Lit(Cg) << "; ++c)\n"
     << "      for (" << IT << " r = 0; r < " << Lit(S.KH) << "; ++r) {\n"
     << "        const " << IT << " ih = oh * " << Lit(S.SH) << " - "
     << Lit(S.PH) << " + r * " << Lit(S.DH) << ";\n"
     << "        if (ih < 0 || ih >= " << Lit(S.H) << ")\n"
     << "          continue;\n"
     << "        for (" << IT << " q = 0; q < " << Lit(S.KW) << "; ++q) {\n"
     << "          const " << IT << " iw = ow * " << Lit(S.SW) << " - "
     << Lit(S.PW) << " + q * " << Lit(S.DW) << ";\n"
     << "          if (iw < 0 || iw >= " << Lit(S.W) << ")\n"
     << "            continue;\n"
     << "          acc += "
     << loadExpr(Dt, Xp,
                 "((n * " + Lit(S.C) + " + o * " + Lit(Cg) + " + c) * " +
                     Lit(S.H) + " + ih) * " + Lit(S.W) + " + iw")
     << " * "
     << loadExpr(Dt, Wp,
                 "((o * " + Lit(Cg) + " + c) * " + Lit(S.KH) + " + r) * " +
                     Lit(S.KW) + " + q")
     << ";\n"
     << "        }\n"
     << "      }\n";
  if (S.Bias)
    OS << "    acc += " << loadExpr(Dt, Params.name(N.getOperand(2)), "o")
       << ";\n";
  OS << "    " << Out << "[f] = " << storeExpr(Dt, "acc") << ";\n"
     << "  }\n"
     << "}\n";
  return gridStrideKernel(Fn, OS.str(), Params, Block, Total);
}

/// An implicit-GEMM kernel Fn of Source over P's values: a grid of TilesM
/// x TilesN tiles per group, Block threads each.
KernelSource gridKernel(std::string Fn, std::string Source, const ParamList &P,
                        int Block, int64_t TilesM, int64_t TilesN,
                        int64_t Groups) {
  KernelSource KS;
  KS.Name = std::move(Fn);
  KS.Source = std::move(Source);
  KS.Inputs.assign(P.Inputs.begin(), P.Inputs.end());
  KS.Outputs = P.Outputs;
  KS.BlockX = unsigned(Block);
  KS.GridX = unsigned(TilesM);
  KS.GridY = unsigned(TilesN);
  KS.GridZ = unsigned(Groups);
  return KS;
}

/// The lines of an implicit-GEMM kernel that place im2col element (m, k)
/// in the input: its output pixel (n, oh, ow), window tap (c, r, q) and
/// input position (ih, iw), then the test that it lies inside the image,
/// in index type IT with literals written by Lit.
std::string im2colWindow(const ConvShape &S, const char *IT,
                         llvm::function_ref<std::string(int64_t)> Lit) {
  std::string Out;
  llvm::raw_string_ostream OS(Out);
  OS << "        const " << IT << " ow = m % " << Lit(S.WO) << ", oh = m / "
     << Lit(S.WO) << " % " << Lit(S.HO) << ", n = m / " << Lit(S.HO * S.WO)
     << ";\n"
     << "        const " << IT << " q = k % " << Lit(S.KW) << ", r = k / "
     << Lit(S.KW) << " % " << Lit(S.KH) << ", c = k / " << Lit(S.KH * S.KW)
     << ";\n"
     << "        const " << IT << " ih = oh * " << Lit(S.SH) << " - "
     << Lit(S.PH) << " + r * " << Lit(S.DH) << ";\n"
     << "        const " << IT << " iw = ow * " << Lit(S.SW) << " - "
     << Lit(S.PW) << " + q * " << Lit(S.DW) << ";\n"
     << "        if (ih >= 0 && ih < " << Lit(S.H) << " && iw >= 0 && iw < "
     << Lit(S.W) << ")\n";
  return Out;
}

/// What both implicit-GEMM kernels (CUDA-core and tensor-core tiles) start
/// from: the GEMM's sizes and grid, the index type, the parameters.
struct IgemmSetup {
  int64_t M = 0, K = 0, Og = 0, TilesM = 0, TilesN = 0;
  /// 32-bit index arithmetic where every index fits (the divisions that
  /// unravel output pixels and window positions are several times cheaper
  /// than 64-bit ones), 64-bit otherwise.
  bool Narrow = true;
  const char *IT = "int";
  std::string Fn, Xp, Wp, Out;
  ParamList Params;

  /// V as a literal of the index type.
  std::string lit(int64_t V) const {
    return std::to_string(V) + (Narrow ? "" : "LL");
  }
};

/// The set-up of N's implicit GEMM in tiles of BM x BN, BK deep; an error
/// where the grid does not fit one launch.
llvm::Expected<IgemmSetup> igemmSetup(llvm::StringRef Name, const Node &N,
                                      const ConvShape &S, int BM, int BK,
                                      int BN) {
  IgemmSetup U;
  U.M = S.gemmM();
  U.K = S.gemmK();
  U.Og = S.og();
  U.TilesM = (U.M + BM - 1) / BM;
  U.TilesN = (U.Og + BN - 1) / BN;
  if (U.TilesM > (int64_t(1) << 31) - 1 || U.TilesN > 65535 || S.Groups > 65535)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'%" + N.getName() +
                                       "': conv2d too large for one launch");
  int64_t Largest = std::max({N.getOperand(0)->getType().numElements(),
                              N.getOperand(1)->getType().numElements(),
                              N.getType().numElements(), U.M + BM, U.K + BK});
  U.Narrow = Largest < (int64_t(1) << 31);
  U.IT = U.Narrow ? "int" : "long long";
  U.Fn = sanitizeIdentifier(Name);
  for (const Operand &Op : N.getOperands())
    U.Params.Inputs.insert(Op.V);
  U.Params.Outputs.push_back(N.getResult());
  U.Xp = U.Params.name(N.getOperand(0));
  U.Wp = U.Params.name(N.getOperand(1));
  U.Out = U.Params.name(N.getResult()) + "_out";
  return U;
}

/// The implicit-GEMM kernel of N with tile T.
llvm::Expected<KernelSource> gemmKernel(llvm::StringRef Name, const Node &N,
                                        const ConvShape &S, const ConvTile &T) {
  llvm::Expected<IgemmSetup> U = igemmSetup(Name, N, S, T.BM, T.BK, T.BN);
  if (!U)
    return U.takeError();
  int64_t M = U->M, K = U->K, Og = U->Og;
  const char *IT = U->IT;
  auto Lit = [&](int64_t V) { return U->lit(V); };
  const std::string &Fn = U->Fn, &Xp = U->Xp, &Wp = U->Wp, &Out = U->Out;
  ParamList &Params = U->Params;
  DType Dt = N.getType().Dtype;
  int RowsPer = T.BM / T.TM, ColsPer = T.BN / T.TN;

  std::string Src;
  llvm::raw_string_ostream OS(Src);
  OS << kernelPrelude() << "\n// conv2d %" << N.getName()
     << ": implicit GEMM, tile " << T.BM << "x" << T.BN << "x" << T.BK
     << " (output pixels x channels x window), " << T.TM << "x" << T.TN
     << " per thread, fp32 accumulation\n"
     << "extern \"C\" __global__ void __launch_bounds__(" << T.threads() << ") "
     << Fn << "(" << Params.signature() << ") {\n"
     << "  __shared__ float As[" << T.BK << "][" << T.BM << "];\n"
     << "  __shared__ float Bs[" << T.BK << "][" << T.BN + 1 << "];\n"
     << "  const int tid = threadIdx.x;\n"
     << "  const " << IT << " m0 = (" << IT << ")blockIdx.x * " << T.BM << ";\n"
     << "  const " << IT << " n0 = (" << IT << ")blockIdx.y * " << T.BN << ";\n"
     << "  const " << IT << " g = blockIdx.z;\n"
     << "  const int tm = tid % " << RowsPer << ", tn = tid / " << RowsPer
     << ";\n"
     << "  float acc[" << T.TM << "][" << T.TN << "];\n"
     << "  for (int i = 0; i < " << T.TM << "; ++i)\n"
     << "    for (int j = 0; j < " << T.TN << "; ++j)\n"
     << "      acc[i][j] = 0.f;\n"
     << "  for (" << IT << " k0 = 0; k0 < " << Lit(K) << "; k0 += " << T.BK
     << ") {\n"
     // The im2col tile, gathered from x: consecutive threads take
     // consecutive output pixels, so their loads are neighbours in a row.
     << "    for (int e = tid; e < " << T.BM * T.BK << "; e += " << T.threads()
     << ") {\n"
     << "      const int mm = e % " << T.BM << ", kk = e / " << T.BM << ";\n"
     << "      const " << IT << " m = m0 + mm, k = k0 + kk;\n"
     << "      float v = 0.f;\n"
     << "      if (m < " << Lit(M) << " && k < " << Lit(K) << ") {\n"
     << im2colWindow(S, IT, Lit) << "          v = "
     << loadExpr(Dt, Xp,
                 "((n * " + Lit(S.C) + " + g * " + Lit(S.cg()) + " + c) * " +
                     Lit(S.H) + " + ih) * " + Lit(S.W) + " + iw")
     << ";\n"
     << "      }\n"
     << "      As[kk][mm] = v;\n"
     << "    }\n"
     // The weight tile: consecutive threads take consecutive window
     // elements of one output channel, contiguous in [O, C/g, KH, KW].
     << "    for (int e = tid; e < " << T.BN * T.BK << "; e += " << T.threads()
     << ") {\n"
     << "      const int kk = e % " << T.BK << ", nn = e / " << T.BK << ";\n"
     << "      const " << IT << " k = k0 + kk, o = n0 + nn;\n"
     << "      Bs[kk][nn] = (k < " << Lit(K) << " && o < " << Lit(Og) << ") ? "
     << loadExpr(Dt, Wp, "(g * " + Lit(Og) + " + o) * " + Lit(K) + " + k")
     << " : 0.f;\n"
     << "    }\n"
     << "    __syncthreads();\n"
     << "#pragma unroll\n"
     << "    for (int kk = 0; kk < " << T.BK << "; ++kk) {\n"
     << "      float a[" << T.TM << "], b[" << T.TN << "];\n"
     << "#pragma unroll\n"
     << "      for (int i = 0; i < " << T.TM << "; ++i)\n"
     << "        a[i] = As[kk][tm + i * " << RowsPer << "];\n"
     << "#pragma unroll\n"
     << "      for (int j = 0; j < " << T.TN << "; ++j)\n"
     << "        b[j] = Bs[kk][tn + j * " << ColsPer << "];\n"
     << "#pragma unroll\n"
     << "      for (int i = 0; i < " << T.TM << "; ++i)\n"
     << "#pragma unroll\n"
     << "        for (int j = 0; j < " << T.TN << "; ++j)\n"
     << "          acc[i][j] += a[i] * b[j];\n"
     << "    }\n"
     << "    __syncthreads();\n"
     << "  }\n"
     << "  for (int i = 0; i < " << T.TM << "; ++i) {\n"
     << "    const " << IT << " m = m0 + tm + i * " << RowsPer << ";\n"
     << "    if (m >= " << Lit(M) << ")\n"
     << "      continue;\n"
     << "    const " << IT << " pix = m % " << Lit(S.HO * S.WO) << ", n = m / "
     << Lit(S.HO * S.WO) << ";\n"
     << "    for (int j = 0; j < " << T.TN << "; ++j) {\n"
     << "      const " << IT << " o = g * " << Lit(Og) << " + n0 + tn + j * "
     << ColsPer << ";\n"
     << "      if (n0 + tn + j * " << ColsPer << " >= " << Lit(Og) << ")\n"
     << "        continue;\n"
     << "      float v = acc[i][j];\n";
  if (S.Bias)
    OS << "      v += " << loadExpr(Dt, Params.name(N.getOperand(2)), "o")
       << ";\n";
  OS << "      " << Out << "[(n * " << Lit(S.O) << " + o) * "
     << Lit(S.HO * S.WO) << " + pix] = " << storeExpr(Dt, "v") << ";\n"
     << "    }\n"
     << "  }\n"
     << "}\n";

  return gridKernel(Fn, std::move(Src), Params, T.threads(), U->TilesM,
                    U->TilesN, S.Groups);
}

/// The tensor-core implicit-GEMM kernel of N (bf16 or f16) with tile T:
/// the im2col and weight tiles staged in shared memory as the operands'
/// 16-bit values (zeros outside the image and past the edges), each row of
/// the window padded by 8 elements so that a warp's fragment loads hit 32
/// distinct banks; each warp runs mma.sync m16n8k16 over its sub-tile into
/// fp32 accumulators; the bias is added before the one rounding.
llvm::Expected<KernelSource> mmaKernel(llvm::StringRef Name, const Node &N,
                                       const ConvShape &S, const MmaTile &T) {
  auto Err = [&](const llvm::Twine &Msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'%" + N.getName() + "': " + Msg);
  };
  DType Dt = N.getType().Dtype;
  if (Dt != DType::BF16 && Dt != DType::F16)
    return Err("conv2d's tensor-core tiles need bf16 or f16, not " +
               dtypeName(Dt));
  llvm::Expected<IgemmSetup> U = igemmSetup(Name, N, S, T.BM, T.BK, T.BN);
  if (!U)
    return U.takeError();
  int64_t M = U->M, K = U->K, Og = U->Og;
  const char *IT = U->IT;
  auto Lit = [&](int64_t V) { return U->lit(V); };
  const std::string &Fn = U->Fn, &Xp = U->Xp, &Wp = U->Wp, &Out = U->Out;
  ParamList &Params = U->Params;
  int Threads = 32 * T.Warps, Pad = T.BK + 8;
  int RowsPerWarp = T.BM / T.warpsM(), ColsPerWarp = T.BN / T.warpsN();
  const char *Mma = Dt == DType::BF16
                        ? "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
                        : "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";

  std::string Src;
  llvm::raw_string_ostream OS(Src);
  OS << kernelPrelude() << "\n// conv2d %" << N.getName()
     << ": implicit GEMM on the tensor cores (mma.sync m16n8k16), tile " << T.BM
     << "x" << T.BN << "x" << T.BK << " (output pixels x channels x window), "
     << T.Warps << " warps, fp32 accumulation\n"
     << "extern \"C\" __global__ void __launch_bounds__(" << Threads << ") "
     << Fn << "(" << Params.signature() << ") {\n"
     << "  __shared__ __align__(16) unsigned short As[" << T.BM << "][" << Pad
     << "];\n"
     << "  __shared__ __align__(16) unsigned short Bs[" << T.BN << "][" << Pad
     << "];\n"
     << "  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n"
     << "  const int wm = warp % " << T.warpsM() << ", wn = warp / "
     << T.warpsM() << ";\n"
     << "  const int gq = lane >> 2, tq = lane & 3;\n"
     << "  const " << IT << " m0 = (" << IT << ")blockIdx.x * " << T.BM << ";\n"
     << "  const " << IT << " n0 = (" << IT << ")blockIdx.y * " << T.BN << ";\n"
     << "  const " << IT << " g = blockIdx.z;\n"
     << "  float acc[" << T.fragsM() << "][" << T.fragsN() << "][4];\n"
     << "  for (int i = 0; i < " << T.fragsM() << "; ++i)\n"
     << "    for (int j = 0; j < " << T.fragsN() << "; ++j)\n"
     << "      for (int r = 0; r < 4; ++r)\n"
     << "        acc[i][j][r] = 0.f;\n"
     << "  for (" << IT << " k0 = 0; k0 < " << Lit(K) << "; k0 += " << T.BK
     << ") {\n"
     << "    for (int e = tid; e < " << T.BM * T.BK << "; e += " << Threads
     << ") {\n"
     << "      const int mm = e % " << T.BM << ", kk = e / " << T.BM << ";\n"
     << "      const " << IT << " m = m0 + mm, k = k0 + kk;\n"
     << "      unsigned short v = 0;\n"
     << "      if (m < " << Lit(M) << " && k < " << Lit(K) << ") {\n"
     << im2colWindow(S, IT, Lit) << "          v = " << Xp << "[((n * "
     << Lit(S.C) << " + g * " << Lit(S.cg()) << " + c) * " << Lit(S.H)
     << " + ih) * " << Lit(S.W) << " + iw];\n"
     << "      }\n"
     << "      As[mm][kk] = v;\n"
     << "    }\n"
     << "    for (int e = tid; e < " << T.BN * T.BK << "; e += " << Threads
     << ") {\n"
     << "      const int kk = e % " << T.BK << ", nn = e / " << T.BK << ";\n"
     << "      const " << IT << " k = k0 + kk, o = n0 + nn;\n"
     << "      Bs[nn][kk] = (k < " << Lit(K) << " && o < " << Lit(Og) << ") ? "
     << Wp << "[(g * " << Lit(Og) << " + o) * " << Lit(K)
     << " + k] : (unsigned short)0;\n"
     << "    }\n"
     << "    __syncthreads();\n"
     << "#pragma unroll\n"
     << "    for (int ks = 0; ks < " << T.BK << "; ks += 16) {\n"
     << "      unsigned a[" << T.fragsM() << "][4], b[" << T.fragsN()
     << "][2];\n"
     << "#pragma unroll\n"
     << "      for (int i = 0; i < " << T.fragsM() << "; ++i) {\n"
     << "        const int r = wm * " << RowsPerWarp << " + i * 16 + gq;\n"
     << "        a[i][0] = *(const unsigned *)&As[r][ks + 2 * tq];\n"
     << "        a[i][1] = *(const unsigned *)&As[r + 8][ks + 2 * tq];\n"
     << "        a[i][2] = *(const unsigned *)&As[r][ks + 2 * tq + 8];\n"
     << "        a[i][3] = *(const unsigned *)&As[r + 8][ks + 2 * tq + 8];\n"
     << "      }\n"
     << "#pragma unroll\n"
     << "      for (int j = 0; j < " << T.fragsN() << "; ++j) {\n"
     << "        const int c = wn * " << ColsPerWarp << " + j * 8 + gq;\n"
     << "        b[j][0] = *(const unsigned *)&Bs[c][ks + 2 * tq];\n"
     << "        b[j][1] = *(const unsigned *)&Bs[c][ks + 2 * tq + 8];\n"
     << "      }\n"
     << "#pragma unroll\n"
     << "      for (int i = 0; i < " << T.fragsM() << "; ++i)\n"
     << "#pragma unroll\n"
     << "        for (int j = 0; j < " << T.fragsN() << "; ++j)\n"
     << "          asm volatile(\"" << Mma
     << " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, "
        "%3};\\n\"\n"
     << "                       : \"+f\"(acc[i][j][0]), \"+f\"(acc[i][j][1]), "
        "\"+f\"(acc[i][j][2]), \"+f\"(acc[i][j][3])\n"
     << "                       : \"r\"(a[i][0]), \"r\"(a[i][1]), "
        "\"r\"(a[i][2]), \"r\"(a[i][3]), \"r\"(b[j][0]), \"r\"(b[j][1]));\n"
     << "    }\n"
     << "    __syncthreads();\n"
     << "  }\n"
     // Accumulator r of fragment (i, j): row gq (+ 8 for r >= 2), column
     // 2 * tq (+ 1 for odd r) of the fragment.
     << "  for (int i = 0; i < " << T.fragsM() << "; ++i)\n"
     << "    for (int h = 0; h < 2; ++h) {\n"
     << "      const " << IT << " m = m0 + wm * " << RowsPerWarp
     << " + i * 16 + gq + h * 8;\n"
     << "      if (m >= " << Lit(M) << ")\n"
     << "        continue;\n"
     << "      const " << IT << " pix = m % " << Lit(S.HO * S.WO)
     << ", n = m / " << Lit(S.HO * S.WO) << ";\n"
     << "      for (int j = 0; j < " << T.fragsN() << "; ++j)\n"
     << "        for (int l = 0; l < 2; ++l) {\n"
     << "          const " << IT << " ol = n0 + wn * " << ColsPerWarp
     << " + j * 8 + 2 * tq + l;\n"
     << "          if (ol >= " << Lit(Og) << ")\n"
     << "            continue;\n"
     << "          const " << IT << " o = g * " << Lit(Og) << " + ol;\n"
     << "          float v = acc[i][j][h * 2 + l];\n";
  if (S.Bias)
    OS << "          v += " << loadExpr(Dt, Params.name(N.getOperand(2)), "o")
       << ";\n";
  OS << "          " << Out << "[(n * " << Lit(S.O) << " + o) * "
     << Lit(S.HO * S.WO) << " + pix] = " << storeExpr(Dt, "v") << ";\n"
     << "        }\n"
     << "    }\n"
     << "}\n";

  return gridKernel(Fn, std::move(Src), Params, Threads, U->TilesM, U->TilesN,
                    S.Groups);
}

/// The kernel of a `buffer conv2d`, no choice made: the direct kernel for
/// one output channel per group, else the implicit GEMM's default tile.
llvm::Expected<KernelSource> kernel(llvm::StringRef Name, const Node &N) {
  llvm::Expected<ConvShape> SOr = shapeOf(N);
  if (!SOr)
    return SOr.takeError();
  if (SOr->og() == 1)
    return directKernel(Name, N, *SOr);
  return gemmKernel(Name, N, *SOr, defaultTile(*SOr));
}

/// The kernel of choice Choice of N.
llvm::Expected<KernelSource> choiceKernel(llvm::StringRef Name, const Node &N,
                                          llvm::StringRef Choice) {
  llvm::Expected<ConvShape> SOr = shapeOf(N);
  if (!SOr)
    return SOr.takeError();
  if (Choice == DirectChoice && SOr->og() == 1)
    return directKernel(Name, N, *SOr);
  if (std::optional<ConvTile> T = tileOf(Choice))
    return gemmKernel(Name, N, *SOr, *T);
  if (std::optional<MmaTile> T = mmaTileOf(Choice))
    return mmaKernel(Name, N, *SOr, *T);
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "'%" + N.getName() +
                                     "': conv2d has no kernel "
                                     "for choice '" +
                                     Choice + "'");
}

/// The cuDNN descriptors of one conv2d call. They live as long as the call
/// (the benchmarker's and the executor's copies share them) and go with it.
struct CudnnState {
  const cudnn::Api *A = nullptr;
  cudnn::TensorDesc X = nullptr, Y = nullptr, B = nullptr;
  cudnn::FilterDesc W = nullptr;
  cudnn::ConvDesc Conv = nullptr;
  int Algo = 0;
  size_t WorkBytes = 0;
  ~CudnnState() {
    for (cudnn::TensorDesc D : {X, Y, B})
      if (D)
        A->DestroyTensorDescriptor(D);
    if (W)
      A->DestroyFilterDescriptor(W);
    if (Conv)
      A->DestroyConvolutionDescriptor(Conv);
  }
};

/// cuDNN's convolution of N: its descriptors made now, its handle (per
/// stream) and algorithm (cuDNN's heuristic, the first that runs within a
/// GiB of workspace) when planned on a stream. Bias by cudnnAddTensor
/// after the convolution: one more rounding to the result's type than the
/// implicit GEMM, within the tolerances (docs/CUDA.md).
llvm::Expected<OpUnitExternCall> cudnnCall(const Node &N,
                                           llvm::StringRef Choice) {
  auto Err = [&](const llvm::Twine &Msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
  };
  if (Choice != CudnnChoice)
    return Err("conv2d has no library choice '" + Choice + "'");
  llvm::Expected<ConvShape> SOr = shapeOf(N);
  if (!SOr)
    return SOr.takeError();
  const ConvShape S = *SOr;
  for (int64_t V : {S.N, S.C, S.H, S.W, S.O, S.HO, S.WO, S.PH, S.PW, S.SH, S.SW,
                    S.DH, S.DW})
    if (V > std::numeric_limits<int>::max())
      return Err("a size of '%" + N.getName() + "' does not fit cuDNN's int");
  llvm::Expected<const cudnn::Api &> AOr = cudnn::load();
  if (!AOr)
    return AOr.takeError();
  const cudnn::Api &A = *AOr;
  DType Dt = N.getType().Dtype;
  int Type = Dt == DType::BF16  ? cudnn::DataBfloat16
             : Dt == DType::F16 ? cudnn::DataHalf
                                : cudnn::DataFloat;
  auto St = std::make_shared<CudnnState>();
  St->A = &A;
  auto Check = [&](cudnn::Status Status, const char *What) -> llvm::Error {
    if (Status == cudnn::StatusSuccess)
      return llvm::Error::success();
    return Err(llvm::Twine(What) + " failed: " + cudnn::statusText(A, Status));
  };
  if (llvm::Error E = Check(A.CreateTensorDescriptor(&St->X),
                            "cudnnCreateTensorDescriptor"))
    return std::move(E);
  if (llvm::Error E = Check(A.CreateTensorDescriptor(&St->Y),
                            "cudnnCreateTensorDescriptor"))
    return std::move(E);
  if (llvm::Error E = Check(A.CreateFilterDescriptor(&St->W),
                            "cudnnCreateFilterDescriptor"))
    return std::move(E);
  if (llvm::Error E = Check(A.CreateConvolutionDescriptor(&St->Conv),
                            "cudnnCreateConvolutionDescriptor"))
    return std::move(E);
  if (llvm::Error E =
          Check(A.SetTensor4dDescriptor(St->X, cudnn::TensorNchw, Type,
                                        int(S.N), int(S.C), int(S.H), int(S.W)),
                "cudnnSetTensor4dDescriptor (input)"))
    return std::move(E);
  if (llvm::Error E = Check(A.SetTensor4dDescriptor(St->Y, cudnn::TensorNchw,
                                                    Type, int(S.N), int(S.O),
                                                    int(S.HO), int(S.WO)),
                            "cudnnSetTensor4dDescriptor (result)"))
    return std::move(E);
  if (llvm::Error E = Check(
          A.SetFilter4dDescriptor(St->W, Type, cudnn::TensorNchw, int(S.O),
                                  int(S.cg()), int(S.KH), int(S.KW)),
          "cudnnSetFilter4dDescriptor"))
    return std::move(E);
  // torch's conv2d is a cross-correlation; the products summed in fp32.
  if (llvm::Error E = Check(A.SetConvolution2dDescriptor(
                                St->Conv, int(S.PH), int(S.PW), int(S.SH),
                                int(S.SW), int(S.DH), int(S.DW),
                                cudnn::CrossCorrelation, cudnn::DataFloat),
                            "cudnnSetConvolution2dDescriptor"))
    return std::move(E);
  if (llvm::Error E = Check(A.SetConvolutionGroupCount(St->Conv, int(S.Groups)),
                            "cudnnSetConvolutionGroupCount"))
    return std::move(E);
  // fp32 on the CUDA cores (no TF32, whose 10-bit mantissa would miss the
  // fp32 tolerance); 16-bit types on the tensor cores.
  if (llvm::Error E =
          Check(A.SetConvolutionMathType(St->Conv, Dt == DType::F32
                                                       ? cudnn::FmaMath
                                                       : cudnn::TensorOpMath),
                "cudnnSetConvolutionMathType"))
    return std::move(E);
  if (S.Bias) {
    if (llvm::Error E = Check(A.CreateTensorDescriptor(&St->B),
                              "cudnnCreateTensorDescriptor"))
      return std::move(E);
    if (llvm::Error E = Check(A.SetTensor4dDescriptor(St->B, cudnn::TensorNchw,
                                                      Type, 1, int(S.O), 1, 1),
                              "cudnnSetTensor4dDescriptor (bias)"))
      return std::move(E);
  }
  OpUnitExternCall Call;
  const cudnn::Api *Ap = &A;
  std::string Name = N.getName();
  Call.Plan = [Ap, St, Name](void *Stream) -> llvm::Expected<size_t> {
    const cudnn::Api &A = *Ap;
    llvm::Expected<cudnn::Handle> H = cudnn::handleFor(A, Stream);
    if (!H)
      return H.takeError();
    cudnn::FwdAlgoPerf Perf[8];
    int Returned = 0;
    if (cudnn::Status Status = A.GetConvolutionForwardAlgorithm_v7(
            *H, St->X, St->W, St->Conv, St->Y, 8, &Returned, Perf))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "cudnnGetConvolutionForwardAlgorithm_v7 failed: " +
              cudnn::statusText(A, Status));
    for (int I = 0; I < Returned; ++I) {
      if (Perf[I].St != cudnn::StatusSuccess)
        continue;
      size_t Bytes = 0;
      if (A.GetConvolutionForwardWorkspaceSize(*H, St->X, St->W, St->Conv,
                                               St->Y, Perf[I].Algo, &Bytes) ||
          Bytes > (size_t(1) << 30))
        continue;
      St->Algo = Perf[I].Algo;
      St->WorkBytes = Bytes;
      return Bytes;
    }
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cuDNN has no forward algorithm for '%" +
                                       Name + "' within 1 GiB of workspace");
  };
  Call.Run = [Ap, St, Bias = S.Bias](void *Stream,
                                     llvm::ArrayRef<void *> Operands,
                                     void *Result, void *Work) -> int {
    const cudnn::Api &A = *Ap;
    llvm::Expected<cudnn::Handle> H = cudnn::handleFor(A, Stream);
    if (!H) {
      llvm::consumeError(H.takeError());
      return -1;
    }
    float One = 1, Zero = 0;
    if (cudnn::Status Status = A.ConvolutionForward(
            *H, &One, St->X, Operands[0], St->W, Operands[1], St->Conv,
            St->Algo, Work, St->WorkBytes, &Zero, St->Y, Result))
      return Status;
    if (Bias)
      return A.AddTensor(*H, &One, St->B, Operands[2], &One, St->Y, Result);
    return 0;
  };
  return Call;
}

} // namespace

void mtsched::opunits::registerConv2d() {
  OpUnitInfo Info;
  Info.InferType = inferType;
  Info.Flops = flops;
  Info.Choices = choices;
  Info.OffersChoice = offersChoice;
  Info.ChoiceCost = choiceCost;
  registerOpUnitInfo(OpCode::Conv2d, Info);
  registerOpUnitReference(OpCode::Conv2d, interpret);
  registerOpUnitRowReference(OpCode::Conv2d, interpretRow);
  registerOpUnitKernel(OpCode::Conv2d, kernel);
  registerOpUnitChoiceKernel(OpCode::Conv2d, choiceKernel);
  registerOpUnitExtern(OpCode::Conv2d, cudnnCall);
}
