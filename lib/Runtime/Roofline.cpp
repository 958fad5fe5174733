//===- Roofline.cpp - Roofline times for the simulator --------------------===//
//
// Every formula is described in words in docs/SIMULATOR.md; keep the two in
// step. Units: bytes, flops, microseconds. GB/s * 1e3 = bytes/us and
// TFLOP/s * 1e6 = flops/us.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Runtime/Roofline.h"
#include "llvm/ADT/StringSwitch.h"
#include <algorithm>
#include <cmath>
#include <limits>

using namespace mtsched;

namespace {

constexpr double Inf = std::numeric_limits<double>::infinity();

//===----------------------------------------------------------------------===//
// The model's constants, all in one place. Device-specific numbers live in
// DeviceDesc; these are properties of the kernels and libraries.
//===----------------------------------------------------------------------===//

// Memory and pointwise work.
/// Share of peak HBM bandwidth a streaming kernel reaches (copy/STREAM-like
/// kernels on H100/H200 reach about 90%).
constexpr double HbmEfficiency = 0.90;
/// Share of the fp32 peak that elementwise epilogue code reaches: its ops
/// are not all fused multiply-adds and it waits on loads.
constexpr double VectorEfficiency = 0.5;
/// Share of the SMs that must be issuing loads to saturate HBM; fewer busy
/// SMs get proportionally less bandwidth (a 64-CTA GEMM is slower than the
/// bytes alone suggest, which is why libraries split K).
constexpr double BwSaturationSMFraction = 0.6;
/// Share of the L2 an operand may occupy and still be read from HBM only
/// once, however many CTAs re-read it.
constexpr double L2UsableFraction = 0.5;

// Hopper SM resources (CUDA C programming guide, compute capability 9.0).
constexpr double SmemPerSMBytes = 228 * 1024;
constexpr double SmemPerCTABytes = 227 * 1024;
constexpr double RegsPerSM = 65536;
constexpr double MaxRegsPerThread = 255;
constexpr int MaxThreadsPerSM = 2048;
constexpr int MaxThreadsPerCTA = 1024;
constexpr int MaxCTAsPerSM = 32;
/// Registers a GEMM thread needs besides its fp32 accumulators (addresses,
/// loop state, operand fragments): a Triton-style estimate.
constexpr double GemmRegOverhead = 40;

// GEMM template efficiency: Peak * TemplateMaxEff * f(intensity) * f(BK) *
// f(stages) * f(warps). TemplateMaxEff is chosen so Inductor's best large
// config (128x256x64, 8 warps, 3 stages) lands at ~0.78 of peak, which puts
// its fused bias+ReLU 4096^3 GEMM at ANCHORS.md's 194 us.
constexpr double TemplateMaxEff = 0.96;
/// Tile arithmetic intensity (flops per operand byte loaded into shared
/// memory) at which a bf16 tile reaches half the efficiency; it scales with
/// the compute peak the tile has to feed.
constexpr double IntensityHalfBf16 = 8;
/// BK at which the per-iteration overhead of the K loop halves efficiency.
constexpr double BkHalf = 4;
/// Fraction of the K loop a single-stage pipeline loses to exposed loads;
/// S stages expose 1/S^2 of that.
constexpr double StageLoss = 0.5;
/// Output elements per warp below which a warp's tensor-core MMA tiles
/// (m16n8) are partly empty.
constexpr double MinOutputsPerWarp = 128;
/// Warps needed to use all four tensor-core sub-partitions of an SM.
constexpr double WarpsForFullSM = 4;
/// silu(g) * u per output element of the merged gate+up GEMM: exp, add,
/// divide (silu, as Workload counts it) and the multiply.
constexpr double SwiGluFlopsPerElement = 5;

// The wgmma template (gemm_wg_*): TMA fills the stages without the threads'
// help and each consumer warpgroup issues 64 x BN MMAs straight from shared
// memory, as the library's kernels do; its main loop reaches this share of
// the library's efficiency for the same tile intensity (measured on H200:
// 128x256x64 with 4 stages 197 us at 4096^3 against cuBLAS's 173 us).
constexpr double WgmmaShareOfExtern = 0.9;

// Extern (cuBLAS-like) GEMM: its best large tile's main loop runs at
// ExternEff of peak, calibrated to cuBLAS at 4096^3 bf16 on H200 in
// ANCHORS.md (175 us = 786 TFLOP/s, output write and launch included).
// Smaller tiles lose in proportion to their intensity factor, as the
// templates do.
constexpr double ExternEff = 0.87;
/// Split-K factors the library considers; it keeps at least
/// ExternMinKPerSplit of K per split.
constexpr int ExternSplitKs[] = {1, 2, 4, 8, 16};
constexpr int64_t ExternMinKPerSplit = 256;

// Collectives, 2-rank fits to ANCHORS.md (H200, NVLink4, NCCL 2.28).
/// NCCL's protocols, as in NCCL's own tuning model: a fixed base latency, a
/// per-step latency in units of the device's link latency, and the share of
/// link bandwidth the protocol's data reaches. NCCL picks the fastest per
/// call. LL (flag-per-8-bytes) fits the nccl-tests all_reduce and all_gather
/// curves up to 1 MB (118 GB/s, 6.6 us at 8 KB); Simple fits 4-256 MB
/// (324 GB/s bus bandwidth, 850 us at 256 MB).
struct NcclProtocol {
  double BaseUs;
  double StepLatencyLinks;
  double LinkEfficiency;
};
constexpr NcclProtocol NcclLL = {2.67, 1.46, 0.262};
constexpr NcclProtocol NcclSimple = {12.5, 9.0, 0.72};
/// Share of link bandwidth SM-driven peer loads reach in the one-shot
/// kernel: every thread waits on remote loads, so it is latency-bound
/// (PyTorch symm-mem one-shot: 1449 us at 256 MB).
constexpr double OneShotLinkEfficiency = 0.45;
/// Share of link bandwidth the two-shot kernel's peer traffic reaches: each
/// rank moves only 2(n-1)/n of the message and its accesses are well
/// pipelined (symm-mem two-shot: 815 us at 256 MB).
constexpr double TwoShotLinkEfficiency = 0.83;
/// Direct peer copies (p2p all_gather / reduce_scatter / all_to_all): as
/// pipelined as the two-shot kernel.
constexpr double P2PLinkEfficiency = 0.83;
/// Share of the network link's bandwidth a ring across hosts reaches
/// (RDMA with large messages; an assumption, not yet measured).
constexpr double NetLinkEfficiency = 0.85;

//===----------------------------------------------------------------------===//

double bytesPerUs(double GBps) { return GBps * 1e3; }
double flopsPerUs(double Tflops) { return Tflops * 1e6; }

double hbmUs(const DeviceDesc &D, double Bytes, double BwFraction = 1) {
  return Bytes / (bytesPerUs(D.HbmGBps) * HbmEfficiency * BwFraction);
}

double vectorUs(const DeviceDesc &D, double Flops) {
  return Flops / (flopsPerUs(D.PeakFp32Tflops) * VectorEfficiency);
}

double linkUs(const DeviceDesc &D, double Bytes, double Efficiency) {
  return Bytes / (bytesPerUs(D.LinkGBps) * Efficiency);
}

/// Tensor-core peak for the dtype: bf16/fp16 use the tensor cores; fp32 and
/// integers are modelled on the CUDA cores (no TF32), as Inductor defaults.
/// fp8 operands count at the 16-bit rate: the template widens them to f16
/// in shared memory and runs the f16 MMA.
double gemmPeakTflops(const DeviceDesc &D, DType T) {
  return (T == DType::BF16 || T == DType::F16 || isFp8DType(T))
             ? D.PeakBf16Tflops
             : D.PeakFp32Tflops;
}

double epilogueFlops(const EpilogueDesc &E) {
  return double(E.Elements) * E.FlopsPerElement;
}

/// An epilogue executed inside another kernel: its arithmetic and its extra
/// inputs, but no launch and no re-read or re-write of the producer's
/// output, which is still in registers. Its arithmetic and its loads add
/// up: they run after the host kernel's own work, on the same threads, so
/// every extra op costs something.
double fusedEpilogueUs(const DeviceDesc &D, const EpilogueDesc &E,
                       double BwFraction = 1) {
  if (E.NumOps == 0)
    return 0;
  double ExtraWriteBytes =
      double(E.Elements) * dtypeBytes(E.Dtype) * E.ExtraWrites;
  return vectorUs(D, epilogueFlops(E)) +
         hbmUs(D, double(E.ExtraInputBytes) + ExtraWriteBytes, BwFraction);
}

double ceilDiv(double A, double B) { return std::ceil(A / B); }

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
      T.Stages <= 0 || T.Wgmma)
    return Inf;
  if (Fused.NumOps > 0 && Fused.RowReduction && P.N > T.BN)
    return Inf;
  if (emptyProblem(P))
    return D.LaunchUs;
  // The mma.sync template's kernel over the concatenated weights.
  GemmProblem Merged = P;
  Merged.N = 2 * P.N;
  GemmTile Wide = T;
  Wide.BN = 2 * T.BN;
  double StageFactor = 1 - StageLoss / (double(T.Stages) * T.Stages);
  double BkFactor = T.BK / (T.BK + BkHalf);
  double WarpFactor =
      std::min(1.0, T.Warps / WarpsForFullSM) *
      std::min(1.0, double(T.BM) * Wide.BN / T.Warps / MinOutputsPerWarp);
  double Eff = TemplateMaxEff * intensityFactor(D, T.BM, Wide.BN, P.Dtype) *
               BkFactor * StageFactor * WarpFactor;
  GemmKernel K{T.BM, Wide.BN, T.BK, T.Warps, T.Stages, 1, Eff, 0.5};
  // silu(g) * u per output element, in registers: its arithmetic only.
  EpilogueDesc Epi = Fused;
  Epi.Dtype = P.Dtype;
  Epi.Elements = P.Batch * P.M * P.N;
  Epi.FlopsPerElement += SwiGluFlopsPerElement;
  Epi.NumOps += 1;
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

namespace {

/// pointwiseTimeUs on byte counts kept as doubles: sums and products of
/// sizes near 2^63 stay finite there, where converting them back to int64
/// would overflow (undefined behaviour; UBSan found it in epilogueTimeUs).
double memoryBoundUs(const DeviceDesc &D, double BytesRead, double BytesWritten,
                     double Flops) {
  if (!(BytesRead >= 0) || !(BytesWritten >= 0) || !(Flops >= 0))
    return Inf;
  return D.LaunchUs +
         std::max(hbmUs(D, BytesRead + BytesWritten), vectorUs(D, Flops));
}

} // namespace

double mtsched::opUnitChoiceTimeUs(const DeviceDesc &D,
                                   const OpUnitChoiceCost &C) {
  if (!(C.Flops >= 0) || !(C.Bytes >= 0) || !(C.Efficiency > 0))
    return Inf;
  double Peak = C.TensorCores ? D.PeakBf16Tflops : D.PeakFp32Tflops;
  // The busiest SM sets the time: a grid that does not fill every SM's
  // slots spreads over the SMs as evenly as it can; a larger one runs in
  // waves of every slot, the last one partly idle.
  double Waves = 1;
  if (C.Ctas > 0) {
    double Ctas = double(C.Ctas), SMs = double(D.NumSMs);
    double Slots = SMs * std::max(1, C.CtasPerSm);
    Waves = Ctas <= Slots ? ceilDiv(Ctas, SMs) * SMs / Ctas
                          : ceilDiv(Ctas, Slots) * Slots / Ctas;
  }
  double Compute = C.Flops * Waves / (flopsPerUs(Peak) * C.Efficiency);
  return D.LaunchUs + std::max(hbmUs(D, C.Bytes), Compute);
}

double mtsched::pointwiseTimeUs(const DeviceDesc &D, int64_t BytesRead,
                                int64_t BytesWritten, double Flops) {
  return memoryBoundUs(D, double(BytesRead), double(BytesWritten), Flops);
}

double mtsched::reductionTimeUs(const DeviceDesc &D, int64_t Rows,
                                int64_t RowLength, DType Dtype, int NumOps) {
  if (Rows < 0 || RowLength < 0 || NumOps < 0)
    return Inf;
  double Elements = double(Rows) * RowLength;
  double E = dtypeBytes(Dtype);
  return memoryBoundUs(D, Elements * E, double(Rows) * E,
                       Elements * std::max(1, NumOps));
}

double mtsched::epilogueTimeUs(const DeviceDesc &D, const EpilogueDesc &E) {
  if (E.NumOps == 0)
    return 0;
  if (E.Elements < 0 || E.ExtraInputBytes < 0)
    return Inf;
  // One pass: a row reduction keeps its row on chip, so it reads the input
  // once like a pointwise chain does.
  double Bytes = double(E.Elements) * dtypeBytes(E.Dtype);
  return memoryBoundUs(D, Bytes + double(E.ExtraInputBytes),
                       Bytes * (1 + E.ExtraWrites), epilogueFlops(E));
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

llvm::StringRef mtsched::collectiveAlgoName(CollectiveAlgo A) {
  switch (A) {
  case CollectiveAlgo::Nccl:
    return "nccl";
  case CollectiveAlgo::OneShot:
    return "one_shot";
  case CollectiveAlgo::TwoShot:
    return "two_shot";
  case CollectiveAlgo::P2P:
    return "p2p";
  case CollectiveAlgo::Hier:
    return "hier";
  }
  return "nccl";
}

std::optional<CollectiveAlgo>
mtsched::parseCollectiveAlgo(llvm::StringRef Name) {
  return llvm::StringSwitch<std::optional<CollectiveAlgo>>(Name)
      .Case("nccl", CollectiveAlgo::Nccl)
      .Case("one_shot", CollectiveAlgo::OneShot)
      .Case("two_shot", CollectiveAlgo::TwoShot)
      .Case("p2p", CollectiveAlgo::P2P)
      .Cases("hier", "hierarchical", CollectiveAlgo::Hier)
      .Default(std::nullopt);
}

bool mtsched::collectiveAlgoSupports(CollectiveAlgo Algo, CollectiveKind Kind) {
  bool Known =
      Kind == CollectiveKind::AllReduce || Kind == CollectiveKind::AllGather ||
      Kind == CollectiveKind::ReduceScatter || Kind == CollectiveKind::AllToAll;
  if (!Known)
    return false;
  switch (Algo) {
  case CollectiveAlgo::Nccl:
    return true;
  case CollectiveAlgo::OneShot:
  case CollectiveAlgo::TwoShot:
    return Kind == CollectiveKind::AllReduce;
  case CollectiveAlgo::P2P:
    return Kind != CollectiveKind::AllReduce;
  case CollectiveAlgo::Hier:
    return Kind != CollectiveKind::AllToAll;
  }
  return false;
}

namespace {

/// NCCL: a ring (all_to_all: one round of grouped sends) under the fastest
/// protocol. Steps and StepBytes are per rank.
double ncclUs(const DeviceDesc &D, double Steps, double LinkBytes) {
  double Best = Inf;
  for (const NcclProtocol &P : {NcclLL, NcclSimple}) {
    double Us = P.BaseUs + Steps * P.StepLatencyLinks * D.LinkLatencyUs +
                linkUs(D, LinkBytes, P.LinkEfficiency);
    Best = std::min(Best, Us);
  }
  return D.LaunchUs + Best;
}

} // namespace

double mtsched::collectiveTimeUs(const DeviceDesc &D, CollectiveKind Kind,
                                 CollectiveAlgo Algo, int64_t Bytes, int Ranks,
                                 const EpilogueDesc &Fused) {
  if (Ranks < 1 || Bytes < 0 || !collectiveAlgoSupports(Algo, Kind))
    return Inf;
  bool HasEpilogue = Fused.NumOps > 0;
  // NCCL's kernels are closed: nothing can be appended to them.
  if (HasEpilogue && Algo == CollectiveAlgo::Nccl)
    return Inf;
  double EpiUs = fusedEpilogueUs(D, Fused);
  double B = double(Bytes);
  // One rank: every collective is a copy of the input to the output.
  if (Ranks == 1)
    return pointwiseTimeUs(D, Bytes, Bytes, 0) + EpiUs;

  double N = Ranks;
  switch (Algo) {
  case CollectiveAlgo::Nccl:
    switch (Kind) {
    case CollectiveKind::AllReduce:
      // Ring reduce-scatter then all-gather: 2(n-1) steps of Bytes/n.
      return ncclUs(D, 2 * (N - 1), 2 * (N - 1) * B / N);
    case CollectiveKind::AllGather:
      // n-1 steps, each forwarding one rank's shard.
      return ncclUs(D, N - 1, (N - 1) * B);
    case CollectiveKind::ReduceScatter:
      // n-1 steps of Bytes/n.
      return ncclUs(D, N - 1, (N - 1) * B / N);
    case CollectiveKind::AllToAll:
      // One round of grouped sends: (n-1)/n of the input leaves each rank.
      return ncclUs(D, 1, (N - 1) * B / N);
    default:
      return Inf;
    }

  case CollectiveAlgo::OneShot:
    // One barrier (are all peers' inputs ready?), then every rank loads all
    // n-1 peers' full buffers over the link and reduces them with its own
    // input: reads Bytes and writes Bytes of HBM.
    return D.LaunchUs + D.BarrierUs + D.LinkLatencyUs +
           linkUs(D, (N - 1) * B, OneShotLinkEfficiency) + hbmUs(D, 2 * B) +
           EpiUs;

  case CollectiveAlgo::TwoShot: {
    // Phase 1 reduce-scatter: each rank loads its 1/n chunk from the n-1
    // peers and reduces it; phase 2 all-gather: it loads the peers' reduced
    // chunks. A barrier precedes each phase; the second finds the ranks
    // already aligned, so it costs one link latency rather than BarrierUs.
    // HBM: read the own chunk, write it, write the n-1 gathered chunks. An
    // epilogue runs on the own chunk only, before it is gathered.
    double Fixed = D.LaunchUs + D.BarrierUs + 3 * D.LinkLatencyUs;
    return Fixed + linkUs(D, 2 * (N - 1) * B / N, TwoShotLinkEfficiency) +
           hbmUs(D, (N + 1) * B / N) + EpiUs / N;
  }

  case CollectiveAlgo::P2P: {
    // Direct peer copies after one barrier.
    double Fixed = D.LaunchUs + D.BarrierUs + D.LinkLatencyUs;
    double LinkBytes = 0, HbmBytes = 0;
    switch (Kind) {
    case CollectiveKind::AllGather:
      // Write the own shard to n-1 peers; n shards land in the output.
      LinkBytes = (N - 1) * B;
      HbmBytes = B + N * B;
      break;
    case CollectiveKind::ReduceScatter:
      // Load the own 1/n chunk from n-1 peers, reduce with the local one.
      LinkBytes = (N - 1) * B / N;
      HbmBytes = 2 * B / N;
      break;
    case CollectiveKind::AllToAll:
      // Send (n-1)/n of the input; read it all, write it all.
      LinkBytes = (N - 1) * B / N;
      HbmBytes = 2 * B;
      break;
    default:
      return Inf;
    }
    return Fixed + linkUs(D, LinkBytes, P2PLinkEfficiency) +
           hbmUs(D, HbmBytes) + EpiUs;
  }

  case CollectiveAlgo::Hier:
    // The shape of the group is not in Ranks: hierCollectiveTimeUs.
    return Inf;
  }
  return Inf;
}

namespace {

/// A peer-memory step inside one host of P ranks (one barrier, then peer
/// copies): LinkBytes leave each rank, HbmBytes are read and written.
double intraHostUs(const DeviceDesc &D, int P, double LinkBytes,
                   double HbmBytes) {
  if (P <= 1)
    return 0;
  return D.LaunchUs + D.BarrierUs + D.LinkLatencyUs +
         linkUs(D, LinkBytes, P2PLinkEfficiency) + hbmUs(D, HbmBytes);
}

/// A ring across H hosts over the network: Steps messages, NetBytes leaving
/// each rank in all.
double interHostUs(const DeviceDesc &D, int H, double Steps, double NetBytes) {
  if (H <= 1)
    return 0;
  return D.LaunchUs + Steps * D.NetLatencyUs +
         NetBytes / (bytesPerUs(D.NetGBps) * NetLinkEfficiency);
}

} // namespace

double mtsched::hierCollectiveTimeUs(const DeviceDesc &D, CollectiveKind Kind,
                                     int64_t Bytes, int Hosts, int PerHost,
                                     const EpilogueDesc &Fused) {
  if (Hosts < 1 || PerHost < 1 || Bytes < 0 ||
      !collectiveAlgoSupports(CollectiveAlgo::Hier, Kind))
    return Inf;
  bool HasEpilogue = Fused.NumOps > 0;
  double B = double(Bytes), H = Hosts, P = PerHost;
  switch (Kind) {
  case CollectiveKind::AllReduce: {
    // Reduce-scatter inside: each rank ends with B/P reduced over its host.
    double Shard = B / P;
    double Us = intraHostUs(D, PerHost, (P - 1) * Shard, 2 * Shard);
    // All-reduce of the shard across hosts (ring: 2(H-1) steps of 1/H).
    Us += interHostUs(D, Hosts, 2 * (H - 1), 2 * (H - 1) * Shard / H);
    // All-gather inside.
    double Gather = intraHostUs(D, PerHost, (P - 1) * Shard, Shard + B);
    Us += Gather;
    if (!HasEpilogue)
      return Us;
    // Fused: the steps are NCCL calls, so the epilogue is a kernel of its
    // own on the rank's shard (1/P of the rows, and of the residual it
    // reads; the row-long bias and weights are small beside it) before the
    // gather; a second output (`writes`) is gathered too, in the same NCCL
    // group: its bytes, not another launch and barrier.
    EpilogueDesc OnShard = Fused;
    OnShard.Elements = Fused.Elements / PerHost;
    OnShard.ExtraInputBytes = Fused.ExtraInputBytes / PerHost;
    double GatherBytesUs = PerHost > 1
                               ? linkUs(D, (P - 1) * Shard, P2PLinkEfficiency) +
                                     hbmUs(D, Shard + B)
                               : 0;
    return Us + epilogueTimeUs(D, OnShard) + Fused.ExtraWrites * GatherBytesUs;
  }
  case CollectiveKind::AllGather:
    // Across hosts among the ranks of one local index (H-1 shards each),
    // then inside each host the H shards gathered so far. Both steps are
    // NCCL calls: no epilogue fuses.
    if (HasEpilogue)
      return Inf;
    return interHostUs(D, Hosts, H - 1, (H - 1) * B) +
           intraHostUs(D, PerHost, (P - 1) * H * B, H * B + H * P * B);
  case CollectiveKind::ReduceScatter: {
    // Reduce-scatter inside, then across hosts on the host's 1/P; NCCL
    // calls, so no epilogue fuses.
    if (HasEpilogue)
      return Inf;
    double Shard = B / P;
    return intraHostUs(D, PerHost, (P - 1) * Shard, 2 * Shard) +
           interHostUs(D, Hosts, H - 1, (H - 1) * Shard / H);
  }
  default:
    return Inf;
  }
}

//===----------------------------------------------------------------------===//
// Noise
//===----------------------------------------------------------------------===//

namespace {

/// splitmix64's output function (Steele, Lea, Flood 2014): a bijective
/// mixer, also used to derive the per-rank seed.
uint64_t mix64(uint64_t Z) {
  Z = (Z ^ (Z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  Z = (Z ^ (Z >> 27)) * 0x94d049bb133111ebULL;
  return Z ^ (Z >> 31);
}

constexpr uint64_t Golden = 0x9e3779b97f4a7c15ULL;

} // namespace

NoiseSource::NoiseSource(uint64_t Seed, unsigned Rank, double Pct)
    : State(mix64(Seed ^ mix64(uint64_t(Rank) + Golden))), Pct(Pct) {}

uint64_t NoiseSource::next() {
  State += Golden;
  return mix64(State);
}

double NoiseSource::apply(double Us) {
  if (Pct == 0 || !std::isfinite(Us))
    return Us;
  // 53 random bits give a double in [0, 1) exactly. One operation per
  // statement, so no compiler contracts them into a fused multiply-add,
  // which would round differently on targets that have one.
  double U = double(next() >> 11) * 0x1.0p-53;
  double Signed = 2 * U;
  Signed -= 1;
  double Scale = Pct / 100;
  Scale *= Signed;
  double Factor = 1 + Scale;
  return Us * Factor;
}

std::optional<CollectiveAlgo> mtsched::collectiveAlgoOf(llvm::StringRef Name) {
  std::string Lower = Name.lower();
  llvm::StringRef L(Lower);
  if (L.contains("nccl"))
    return CollectiveAlgo::Nccl;
  if (L.contains("one_shot") || L.contains("oneshot"))
    return CollectiveAlgo::OneShot;
  if (L.contains("two_shot") || L.contains("twoshot"))
    return CollectiveAlgo::TwoShot;
  if (L.contains("p2p"))
    return CollectiveAlgo::P2P;
  if (L.contains("hier"))
    return CollectiveAlgo::Hier;
  return std::nullopt;
}
