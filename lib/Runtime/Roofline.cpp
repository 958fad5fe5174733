//===- Roofline.cpp - Roofline times for the simulator --------------------===//
//
// Every formula is described in words in docs/SIMULATOR.md; keep the two in
// step. Units: bytes, flops, microseconds. GB/s * 1e3 = bytes/us and
// TFLOP/s * 1e6 = flops/us.
//
// This file: memory-bound kernels (pointwise, reductions, epilogues, the
// op-unit choices) and the noise model. GEMMs are in RooflineGemm.cpp,
// collectives in RooflineCollectives.cpp; the constants and the shared
// helpers in RooflineImpl.h.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Runtime/Roofline.h"
#include "RooflineImpl.h"
#include <algorithm>
#include <cmath>
#include <limits>

using namespace mtsched;
using namespace mtsched::roofline;

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
