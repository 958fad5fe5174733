//===- RooflineGemm.cpp - Roofline times of GEMM kernels ------------------===//
//
// The Triton-style templates (gemm_*, gemm_wg_*, the merged SwiGLU GEMM) and
// the extern (cuBLAS-like) library. Formulas in docs/SIMULATOR.md; the
// constants are in RooflineImpl.h.
//
//===----------------------------------------------------------------------===//
#include "RooflineImpl.h"
#include "mtsched/Runtime/Roofline.h"
#include <algorithm>
#include <cmath>
#include <limits>

using namespace mtsched;
using namespace mtsched::roofline;

namespace {

/// Tensor-core peak for the dtype: bf16/fp16 use the tensor cores; fp32 and
/// integers are modelled on the CUDA cores (no TF32), as Inductor defaults.
/// fp8 operands count at the 16-bit rate: the template widens them to f16
/// in shared memory and runs the f16 MMA.
double gemmPeakTflops(const DeviceDesc &D, DType T) {
  return (T == DType::BF16 || T == DType::F16 || isFp8DType(T))
             ? D.PeakBf16Tflops
             : D.PeakFp32Tflops;
}

/// The pieces of a GEMM kernel's time the templates and the library share.
struct GemmKernel {
  int BM, BN, BK, Warps, Stages;
  int SplitK = 1;
  /// Fraction of the tensor-core peak the main loop reaches.
  double Efficiency;
  /// Output columns written per accumulator column (1/2 for SwiGLU's
  /// merged gate+up GEMM).
  double OutFraction = 1;
};

/// CTAs of K that fit on one SM at once, or 0 if the CTA does not fit.
int ctasPerSM(const GemmKernel &K, DType T) {
  double Threads = double(K.Warps) * 32;
  if (K.Warps <= 0 || Threads > MaxThreadsPerCTA)
    return 0;
  double Smem = double(K.BM * int64_t(K.BK) + int64_t(K.BK) * K.BN) *
                dtypeBytes(T) * K.Stages;
  if (Smem > SmemPerCTABytes)
    return 0;
  double Regs = double(K.BM) * K.BN / Threads + GemmRegOverhead;
  if (Regs > MaxRegsPerThread)
    return 0;
  double BySmem = std::floor(SmemPerSMBytes / Smem);
  double ByThreads = std::floor(MaxThreadsPerSM / Threads);
  double ByRegs = std::floor(RegsPerSM / (Regs * Threads));
  double N = std::min({BySmem, ByThreads, ByRegs, double(MaxCTAsPerSM)});
  return N < 1 ? 0 : int(N);
}

/// Flops per operand byte a tile does per K step, and the efficiency factor
/// it earns: small tiles starve the tensor cores on shared-memory traffic.
double intensityFactor(const DeviceDesc &D, int BM, int BN, DType T) {
  double Intensity = 2.0 * BM * BN / ((double(BM) + BN) * dtypeBytes(T));
  double Half = IntensityHalfBf16 * gemmPeakTflops(D, T) /
                std::max(1.0, D.PeakBf16Tflops);
  return Intensity / (Intensity + Half);
}

/// The time of a GEMM kernel with K's tile and split, with Fused in its
/// per-tile epilogue, launch included; +inf if the tile does not fit.
double gemmKernelUs(const DeviceDesc &D, const GemmProblem &P,
                    const GemmKernel &K, const EpilogueDesc &Fused) {
  DType In = P.operandDtype();
  int CPS = ctasPerSM(K, In);
  if (CPS == 0 || K.Efficiency <= 0)
    return Inf;
  double E = dtypeBytes(In);
  double SMs = D.NumSMs;

  // Tile and wave quantisation: every CTA computes a full BM x BN x K tile,
  // and the last wave of CTAs may leave SMs idle.
  double GridM = ceilDiv(double(P.M), K.BM);
  double GridN = ceilDiv(double(P.N), K.BN);
  double KPerSplit = ceilDiv(double(P.K), K.SplitK);
  double KQuantised = ceilDiv(KPerSplit, K.BK) * K.BK;
  double CTAs = double(P.Batch) * GridM * GridN * K.SplitK;
  double TileFlops = 2.0 * K.BM * K.BN * KQuantised;
  double PerSM = flopsPerUs(gemmPeakTflops(D, In)) / SMs;
  double TileUs = TileFlops / (PerSM * K.Efficiency);
  double Slots = SMs * CPS;
  double FullWaves = std::floor(CTAs / Slots);
  double Rest = CTAs - FullWaves * Slots;
  // An SM running CPS CTAs at once shares its tensor cores among them.
  double ComputeUs = (FullWaves * CPS + std::ceil(Rest / SMs)) * TileUs;

  // Operand traffic. The CTAs resident at once cover about a square block
  // of the output (grouped launch order) and share their operand tiles
  // through L2, so A is streamed from HBM once per block column of the
  // grid and B once per block row; an operand that fits in L2 is read once.
  double Resident = std::max(1.0, std::min(GridM * GridN, Slots / K.SplitK));
  double WN = std::clamp(std::round(std::sqrt(Resident)), 1.0, GridN);
  double WM = std::clamp(std::floor(Resident / WN), 1.0, GridM);
  double ABytes = double(P.M) * P.K * E, BBytes = double(P.K) * P.N * E;
  double L2Bytes = D.L2MB * 1024 * 1024 * L2UsableFraction;
  double ReadsA = ABytes <= L2Bytes ? 1 : ceilDiv(GridN, WN);
  double ReadsB = BBytes <= L2Bytes ? 1 : ceilDiv(GridM, WM);
  double OperandBytes = double(P.Batch) * (ABytes * ReadsA + BBytes * ReadsB);
  double BusySMs = std::min(CTAs, SMs);
  double BwFraction = std::min(1.0, BusySMs / (SMs * BwSaturationSMFraction));
  double MemUs = hbmUs(D, OperandBytes, BwFraction);

  // The per-tile epilogue after the main loop: write C (and the fp32
  // partial sums of a split K), plus a fused epilogue's work. Other
  // resident CTAs keep the tensor cores busy meanwhile, so a compute-bound
  // kernel hides 1 - 1/CPS of it; a memory-bound one hides none.
  double OutBytes =
      double(P.Batch) * P.M * P.N * dtypeBytes(P.Dtype) * K.OutFraction;
  if (K.SplitK > 1)
    OutBytes += 2.0 * K.SplitK * P.Batch * P.M * P.N * 4;
  double TailUs =
      hbmUs(D, OutBytes, BwFraction) + fusedEpilogueUs(D, Fused, BwFraction);
  return D.LaunchUs + std::max(ComputeUs + TailUs / CPS, MemUs + TailUs);
}

bool validProblem(const GemmProblem &P) {
  return P.Batch >= 0 && P.M >= 0 && P.N >= 0 && P.K >= 0;
}

bool emptyProblem(const GemmProblem &P) {
  return P.Batch == 0 || P.M == 0 || P.N == 0 || P.K == 0;
}

} // namespace

double mtsched::gemmTimeUs(const DeviceDesc &D, const GemmProblem &P,
                           const GemmTile &T, const EpilogueDesc &Fused) {
  if (!validProblem(P) || T.BM <= 0 || T.BN <= 0 || T.BK <= 0 || T.Warps <= 0 ||
      T.Stages <= 0)
    return Inf;
  // A row reduction needs every element of a row in one CTA.
  if (Fused.NumOps > 0 && Fused.RowReduction && P.N > T.BN)
    return Inf;
  if (emptyProblem(P))
    return D.LaunchUs;
  double StageFactor = 1 - StageLoss / (double(T.Stages) * T.Stages);
  if (T.Wgmma) {
    double Eff = ExternEff * WgmmaShareOfExtern * StageFactor *
                 intensityFactor(D, T.BM, T.BN, P.operandDtype()) /
                 intensityFactor(D, 256, 128, P.operandDtype());
    GemmKernel K{T.BM, T.BN, T.BK, T.Warps, T.Stages, std::max(1, T.SplitK),
                 Eff};
    return gemmKernelUs(D, P, K, Fused);
  }
  double BkFactor = T.BK / (T.BK + BkHalf);
  double WarpFactor =
      std::min(1.0, T.Warps / WarpsForFullSM) *
      std::min(1.0, double(T.BM) * T.BN / T.Warps / MinOutputsPerWarp);
  double Eff = TemplateMaxEff *
               intensityFactor(D, T.BM, T.BN, P.operandDtype()) * BkFactor *
               StageFactor * WarpFactor;
  GemmKernel K{T.BM, T.BN, T.BK, T.Warps, T.Stages, std::max(1, T.SplitK), Eff};
  return gemmKernelUs(D, P, K, Fused);
}

double mtsched::swigluTimeUs(const DeviceDesc &D, const GemmProblem &P,
                             const GemmTile &T, const EpilogueDesc &Fused) {
  if (!validProblem(P) || T.BM <= 0 || T.BN <= 0 || T.BK <= 0 || T.Warps <= 0 ||
      T.Stages <= 0)
    return Inf;
  if (Fused.NumOps > 0 && Fused.RowReduction && P.N > T.BN)
    return Inf;
  if (emptyProblem(P))
    return D.LaunchUs;
  // The template's kernel over the concatenated weights.
  GemmProblem Merged = P;
  Merged.N = 2 * P.N;
  GemmTile Wide = T;
  Wide.BN = 2 * T.BN;
  double StageFactor = 1 - StageLoss / (double(T.Stages) * T.Stages);
  // silu(g) * u per output element, in registers: its arithmetic only.
  EpilogueDesc Epi = Fused;
  Epi.Dtype = P.Dtype;
  Epi.Elements = P.Batch * P.M * P.N;
  Epi.FlopsPerElement += SwiGluFlopsPerElement;
  Epi.NumOps += 1;
  if (T.Wgmma) {
    // The wgmma GEMM's efficiency (gemmTimeUs) for the BM x 2BN tile.
    double Eff = ExternEff * WgmmaShareOfExtern * StageFactor *
                 intensityFactor(D, T.BM, Wide.BN, P.operandDtype()) /
                 intensityFactor(D, 256, 128, P.operandDtype());
    GemmKernel K{T.BM, Wide.BN, T.BK, T.Warps, T.Stages, 1, Eff, 0.5};
    return gemmKernelUs(D, Merged, K, Epi);
  }
  double BkFactor = T.BK / (T.BK + BkHalf);
  double WarpFactor =
      std::min(1.0, T.Warps / WarpsForFullSM) *
      std::min(1.0, double(T.BM) * Wide.BN / T.Warps / MinOutputsPerWarp);
  double Eff = TemplateMaxEff * intensityFactor(D, T.BM, Wide.BN, P.Dtype) *
               BkFactor * StageFactor * WarpFactor;
  GemmKernel K{T.BM, Wide.BN, T.BK, T.Warps, T.Stages, 1, Eff, 0.5};
  return gemmKernelUs(D, Merged, K, Epi);
}

double mtsched::externGemmTimeUs(const DeviceDesc &D, const GemmProblem &P) {
  if (!validProblem(P))
    return Inf;
  if (emptyProblem(P))
    return D.LaunchUs;
  // The library's kernels: well-tuned tiles at the top of the efficiency
  // curve, of which its heuristics pick the fastest for the shape.
  static const GemmTile Tiles[] = {
      {256, 128, 64, 8, 3}, {128, 256, 64, 8, 3}, {128, 128, 64, 4, 4},
      {128, 64, 64, 4, 4},  {64, 128, 64, 4, 4},  {64, 64, 64, 4, 4},
  };
  double Best = Inf;
  double Reference = intensityFactor(D, 256, 128, P.operandDtype());
  EpilogueDesc None;
  for (const GemmTile &T : Tiles)
    for (int Split : ExternSplitKs) {
      if (Split > 1 && P.K / Split < ExternMinKPerSplit)
        break;
      double Eff = ExternEff *
                   intensityFactor(D, T.BM, T.BN, P.operandDtype()) / Reference;
      GemmKernel K{T.BM, T.BN, T.BK, T.Warps, T.Stages, Split, Eff};
      Best = std::min(Best, gemmKernelUs(D, P, K, None));
    }
  return Best;
}
