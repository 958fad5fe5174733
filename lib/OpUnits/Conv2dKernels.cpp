//===- Conv2dKernels.cpp - conv2d's CUDA kernels --------------------------===//
//
// The direct kernel and the implicit-GEMM kernels (CUDA-core and
// tensor-core tiles) of conv2d's choices; Conv2d.cpp says what each
// computes.
//
//===----------------------------------------------------------------------===//
#include "Conv2dImpl.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"
#include <algorithm>

using namespace mtsched;
using namespace mtsched::codegen;
using namespace mtsched::opunits::conv2d;

/// The kernel of a convolution whose groups have one output channel each
/// (depthwise): the GEMM would be one column wide, so one thread computes
/// one output element, neighbouring threads neighbouring pixels, summing
/// its window in the GEMM's order.
KernelSource opunits::conv2d::directKernel(llvm::StringRef Name, const Node &N,
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

namespace {

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

} // namespace

/// The implicit-GEMM kernel of N with tile T.
llvm::Expected<KernelSource> opunits::conv2d::gemmKernel(llvm::StringRef Name,
                                                         const Node &N,
                                                         const ConvShape &S,
                                                         const ConvTile &T) {
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
llvm::Expected<KernelSource> opunits::conv2d::mmaKernel(llvm::StringRef Name,
                                                        const Node &N,
                                                        const ConvShape &S,
                                                        const MmaTile &T) {
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
