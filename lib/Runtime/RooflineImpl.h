//===- RooflineImpl.h - Shared parts of the roofline model ---*- C++ -*-===//
//
// Private to lib/Runtime: the model's constants and the memory, vector and
// link helpers that Roofline.cpp (pointwise, reductions, epilogues, noise),
// RooflineGemm.cpp (GEMM templates and the library) and
// RooflineCollectives.cpp share. Units as in Roofline.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_RUNTIME_ROOFLINEIMPL_H
#define MTSCHED_LIB_RUNTIME_ROOFLINEIMPL_H

#include "mtsched/Runtime/Roofline.h"
#include <cmath>
#include <cstdint>
#include <limits>

namespace mtsched {
namespace roofline {

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
// Helpers the three files share.
//===----------------------------------------------------------------------===//

inline double bytesPerUs(double GBps) { return GBps * 1e3; }
inline double flopsPerUs(double Tflops) { return Tflops * 1e6; }

inline double hbmUs(const DeviceDesc &D, double Bytes, double BwFraction = 1) {
  return Bytes / (bytesPerUs(D.HbmGBps) * HbmEfficiency * BwFraction);
}

inline double vectorUs(const DeviceDesc &D, double Flops) {
  return Flops / (flopsPerUs(D.PeakFp32Tflops) * VectorEfficiency);
}

inline double linkUs(const DeviceDesc &D, double Bytes, double Efficiency) {
  return Bytes / (bytesPerUs(D.LinkGBps) * Efficiency);
}

inline double epilogueFlops(const EpilogueDesc &E) {
  return double(E.Elements) * E.FlopsPerElement;
}

/// An epilogue executed inside another kernel: its arithmetic and its extra
/// inputs, but no launch and no re-read or re-write of the producer's
/// output, which is still in registers. Its arithmetic and its loads add
/// up: they run after the host kernel's own work, on the same threads, so
/// every extra op costs something.
inline double fusedEpilogueUs(const DeviceDesc &D, const EpilogueDesc &E,
                              double BwFraction = 1) {
  if (E.NumOps == 0)
    return 0;
  double ExtraWriteBytes =
      double(E.Elements) * dtypeBytes(E.Dtype) * E.ExtraWrites;
  return vectorUs(D, epilogueFlops(E)) +
         hbmUs(D, double(E.ExtraInputBytes) + ExtraWriteBytes, BwFraction);
}

inline double ceilDiv(double A, double B) { return std::ceil(A / B); }

} // namespace roofline
} // namespace mtsched

#endif // MTSCHED_LIB_RUNTIME_ROOFLINEIMPL_H
