//===- Conv2dImpl.h - What conv2d's files share ------------------*- C++
//-*-===//
//
// Private to lib/OpUnits: conv2d's problem and tiles, and its kernels
// (Conv2dKernels.cpp) and cuDNN call (Conv2dCudnn.cpp), which Conv2d.cpp
// (the op: types, choices, costs, references) registers.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_OPUNITS_CONV2DIMPL_H
#define MTSCHED_LIB_OPUNITS_CONV2DIMPL_H

#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "mtsched/IR/Graph.h"
#include "llvm/Support/Error.h"
#include <cstdint>

namespace mtsched::opunits::conv2d {

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

/// The shape of N, or why it has none (a node the verifier let through
/// always has one).
llvm::Expected<ConvShape> shapeOf(const Node &N);

/// The direct kernel (one thread per output element) of a convolution
/// whose groups have one output channel each.
KernelSource directKernel(llvm::StringRef Name, const Node &N,
                          const ConvShape &S);
/// The implicit-GEMM kernel of tile T on the CUDA cores.
llvm::Expected<KernelSource> gemmKernel(llvm::StringRef Name, const Node &N,
                                        const ConvShape &S, const ConvTile &T);
/// The implicit-GEMM kernel of tensor-core tile T (bf16, f16).
llvm::Expected<KernelSource> mmaKernel(llvm::StringRef Name, const Node &N,
                                       const ConvShape &S, const MmaTile &T);

/// The library choice's name.
inline constexpr llvm::StringLiteral CudnnChoice = "extern.cudnn";

/// cuDNN's convolution of N as the library choice Choice.
llvm::Expected<OpUnitExternCall> cudnnCall(const Node &N,
                                           llvm::StringRef Choice);

} // namespace mtsched::opunits::conv2d

#endif
