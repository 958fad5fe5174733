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
#include "Conv2dImpl.h"
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
using namespace mtsched::opunits::conv2d;

namespace {

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

} // namespace

/// The shape of verified node N; an error if it is not a well-formed
/// conv2d.
llvm::Expected<ConvShape> opunits::conv2d::shapeOf(const Node &N) {
  bool Bad = false;
  std::optional<ConvShape> S =
      convShapeOf(N, [&](llvm::SMLoc, const llvm::Twine &) { Bad = true; });
  if (!S || Bad)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'%" + N.getName() +
                                       "' is not a well-formed 'conv2d'");
  return *S;
}

namespace {

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
