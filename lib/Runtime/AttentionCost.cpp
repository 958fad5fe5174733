//===- AttentionCost.cpp - Roofline times of the attention kernels --------===//
#include "mtsched/Runtime/AttentionCost.h"
#include "mtsched/IR/Types.h"
#include <algorithm>
#include <cmath>
#include <limits>

using namespace mtsched;

namespace {

constexpr double Inf = std::numeric_limits<double>::infinity();
// The same device constants as Roofline.cpp (H100/H200 class).
constexpr double HbmEfficiency = 0.90;
constexpr double SmemPerSMBytes = 228 * 1024;
constexpr double MaxThreadsPerSM = 2048;
constexpr double L2UsableFraction = 0.5;
/// Share of the fp32 peak the flash template's SIMT loops reach: every
/// multiply-add reads one shared-memory operand (the other is a broadcast),
/// so shared-memory bandwidth, not the FMA pipes, bounds it.
constexpr double FlashSimtEff = 0.3;
/// Share of the dense bf16 tensor-core peak the mma.sync template's two
/// products reach: one warp's 16 rows per k or v fragment loaded from
/// shared memory, and the softmax between them on the CUDA cores.
constexpr double MmaTensorEff = 0.35;
/// Share of the dense bf16 tensor-core peak the wgmma template's products
/// reach, and what each key tile costs besides (barriers, the output's
/// rescale, the wgmma waits). Fitted to an H200 (docs/BENCHMARKS.md,
/// 2026-11-29, causal 4096 prefill after k and v got their own `empty`
/// barriers: 128x128 366 us, overlapped 289, persistent 319, pingpong
/// 276, both 273, 128x64 overlapped 333, 128x176 360). With the overlap
/// the softmax hides under the products but for a sixteenth, with pingpong
/// but for a thirty-second; a CTA's fill and drain (q and the first tiles
/// loading, the last p v and the output stores) is hidden by a persistent
/// CTA only with pingpong: without it, the two consumers meet at every
/// query tile's end and a persistent CTA loses more than it hides.
constexpr double WgTensorEff = 0.65;
constexpr double WgTileUs = 0.2;
constexpr double WgPingPongTileUs = 0.05;
constexpr double WgCtaUs = 1.0;
constexpr double WgPersistentNoPingPongUs = 3.5;
/// What reading the additive mask adds per score: each element from global
/// memory by the consumers (on the critical path: the gallery's masked
/// prefill ran 987 us where its flops take about 170), or staged by the
/// producer's warps (1545 us with 64-key tiles), or copied by TMA (407 us
/// where the same shape without a mask took 154).
constexpr double WgMaskGlobalUsPerScore = 8e-4;
constexpr double WgMaskWarpsUsPerScore = 1.4e-3;
constexpr double WgMaskTmaUsPerScore = 2.4e-4;
/// CUDA-core operations per score of the mma template's online softmax
/// (scale, mask, max, exp2, sum, conversion to 16 bits), at FlashSimtEff.
constexpr double MmaSoftmaxOpsPerScore = 8;
/// L2-to-SM bandwidth as a multiple of HBM's: every CTA copies its tile's
/// keys and values into shared memory, so short tiles (many CTAs per kv
/// head) pay for the same keys many times even when L2 holds them.
constexpr double L2BandwidthFactor = 2.5;
/// The math kernel's dot products are warp-wide reductions over the head
/// dimension, and its p v loop reads p from global memory.
constexpr double MathSimtEff = 0.2;
/// One SM streams at most about twice its share of HBM bandwidth, so a
/// grid of few CTAs (a decode step) is bound by how much each must read.
constexpr double PerSMBandwidthShare = 2.0;

double hbmUs(const DeviceDesc &D, double Bytes) {
  return Bytes / (D.HbmGBps * 1e3 * HbmEfficiency);
}
double perCtaStreamUs(const DeviceDesc &D, double Bytes) {
  return Bytes / (D.HbmGBps * 1e3 * HbmEfficiency * PerSMBandwidthShare /
                  std::max(1, D.NumSMs));
}
double simtUs(const DeviceDesc &D, double Flops, double Eff) {
  return Flops / (D.PeakFp32Tflops * 1e6 * Eff);
}

bool validShape(const AttentionShape &S) {
  return S.B >= 0 && S.Hq >= 0 && S.Hkv > 0 && S.Sq >= 0 && S.Skv >= 0 &&
         S.D > 0 && S.Hq % S.Hkv == 0 && (!S.Causal || S.Sq <= S.Skv);
}

} // namespace

double mtsched::attentionFlops(const AttentionShape &S) {
  return 4.0 * S.B * S.Hq * double(S.visiblePairs()) * S.D;
}

double mtsched::flashAttentionTimeUs(const DeviceDesc &Dev,
                                     const AttentionShape &S, int BQ, int BKV,
                                     int Warps, int Splits, bool Mma,
                                     int Stages) {
  if (!validShape(S) || BQ <= 0 || BKV <= 0 || Warps <= 0 || Splits <= 0)
    return Inf;
  if (Mma && !mmaAttentionSupports(S, BQ, BKV, Warps, Stages))
    return Inf;
  double Smem =
      double(Mma ? mmaAttentionSharedBytes(BQ, BKV, Warps, S.D, Stages)
                 : flashAttentionSharedBytes(BQ, BKV, S.D));
  if (Smem > FlashAttentionMaxSharedBytes)
    return Inf;
  if (S.B * S.Hq * S.Sq == 0)
    return Dev.LaunchUs;
  double E = dtypeBytes(S.Dtype);
  double Threads = 32.0 * Warps;
  double CPS = std::max(1.0, std::min(std::floor(SmemPerSMBytes / Smem),
                                      std::floor(MaxThreadsPerSM / Threads)));
  // A tensor-core tile whose warps split the keys streams a stage of
  // KeyWarps x BKV keys at a time.
  if (Mma)
    BKV *= mmaAttentionKeyWarps(BQ, Warps);
  // Rows are padded to whole tiles and keys to whole BKV tiles; a causal
  // tile stops at the last key its last row sees.
  double Rows = double(S.group()) * S.Sq;
  double QTiles = std::ceil(Rows / BQ);
  double Visible = double(S.visiblePairs()) / std::max<int64_t>(1, S.Sq);
  double KeysPerTile =
      std::min(double(S.Skv), std::ceil(Visible / BKV) * BKV +
                                  (S.Causal && S.Sq > 1 ? BKV : 0));
  // Split-KV: each split sees its share of the tile's keys.
  KeysPerTile =
      std::min(KeysPerTile, std::ceil(KeysPerTile / BKV / Splits) * BKV);
  double CTAs = double(S.B) * S.Hkv * QTiles * Splits;
  double CtaFlops = 4.0 * BQ * KeysPerTile * S.D;
  double PerSMFlops = Dev.PeakFp32Tflops * 1e6 * FlashSimtEff / Dev.NumSMs;
  double CtaUs = CtaFlops / PerSMFlops;
  if (Mma) {
    double PerSMTensor = Dev.PeakBf16Tflops * 1e6 * MmaTensorEff / Dev.NumSMs;
    CtaUs = CtaFlops / PerSMTensor +
            MmaSoftmaxOpsPerScore * BQ * KeysPerTile / PerSMFlops;
  }
  double Slots = Dev.NumSMs * CPS;
  double FullWaves = std::floor(CTAs / Slots);
  double Rest = CTAs - FullWaves * Slots;
  double ComputeUs = (FullWaves * CPS + std::ceil(Rest / Dev.NumSMs)) * CtaUs;
  // q and the output once; each kv head's keys and values once if they
  // stay in L2 while its query tiles run, else once per query tile.
  double QOBytes = 2.0 * S.B * S.Hq * S.Sq * S.D * E;
  double KVBytes = 2.0 * S.B * S.Hkv * S.Skv * S.D * E;
  double L2Bytes = Dev.L2MB * 1024 * 1024 * L2UsableFraction;
  double KVReads = KVBytes <= L2Bytes ? 1 : QTiles;
  // Split-KV partials: written by every split, read back by the last.
  double PartialBytes =
      Splits > 1 ? 2.0 * CTAs * (double(BQ) * S.D + 2.0 * BQ) * 4 : 0;
  // An additive mask: read from HBM once (it is at most as large as the
  // scores, and broadcast rows stay in L2), but each CTA reads the mask
  // element of every score it computes.
  double MaskE = S.HasMask ? dtypeBytes(S.MaskDtype) : 0;
  double MaskBytes = double(S.maskElements()) * MaskE;
  double CtaMaskBytes = double(BQ) * KeysPerTile * MaskE;
  double MemUs =
      hbmUs(Dev, QOBytes + KVBytes * KVReads + PartialBytes + MaskBytes);
  double StreamUs =
      perCtaStreamUs(Dev, 2.0 * KeysPerTile * S.D * E + CtaMaskBytes);
  double L2Us = CTAs * (2.0 * KeysPerTile * S.D * E + CtaMaskBytes) /
                (Dev.HbmGBps * 1e3 * L2BandwidthFactor);
  return Dev.LaunchUs + std::max({ComputeUs, MemUs, StreamUs, L2Us});
}

double mtsched::wgAttentionTimeUs(const DeviceDesc &Dev,
                                  const AttentionShape &S, int BQ, int BKV,
                                  int Stages, bool Overlap, bool PingPong,
                                  bool Persistent) {
  if (!validShape(S) || !wgAttentionSupports(S, BQ, BKV, Stages))
    return Inf;
  if (S.B * S.Hq * S.Sq == 0)
    return Dev.LaunchUs;
  double E = dtypeBytes(S.Dtype);
  // One CTA per SM (its stages take most of shared memory); rows padded to
  // whole tiles, keys to whole BKV tiles, a causal tile stopping at the
  // last key its last row sees.
  double Rows = double(S.group()) * S.Sq;
  double QTiles = std::ceil(Rows / BQ);
  double Visible = double(S.visiblePairs()) / std::max<int64_t>(1, S.Sq);
  double KeysPerTile =
      std::min(double(S.Skv), std::ceil(Visible / BKV) * BKV +
                                  (S.Causal && S.Sq > 1 ? BKV : 0));
  double CTAs = double(S.B) * S.Hkv * QTiles;
  double CtaFlops = 4.0 * BQ * KeysPerTile * S.D;
  // wgmma from shared memory reaches most of the peak; the softmax runs
  // between the two products of each tile (the other consumer warpgroup's
  // products hide half of it), or with Overlap while the previous tile's
  // p v is in flight.
  double PerSMTensor = Dev.PeakBf16Tflops * 1e6 * WgTensorEff / Dev.NumSMs;
  double PerSMFlops = Dev.PeakFp32Tflops * 1e6 * FlashSimtEff / Dev.NumSMs;
  double KeyTiles = std::ceil(KeysPerTile / BKV);
  double CtaUs = CtaFlops / PerSMTensor +
                 MmaSoftmaxOpsPerScore * BQ * KeysPerTile / PerSMFlops /
                     (PingPong  ? 32
                      : Overlap ? 16
                                : 2) +
                 (PingPong ? WgPingPongTileUs : WgTileUs) * KeyTiles +
                 (!Persistent ? WgCtaUs
                  : PingPong  ? 0
                              : WgPersistentNoPingPongUs);
  if (S.HasMask)
    CtaUs +=
        BQ * KeysPerTile *
        (wgAttentionMaskByTma(S, BQ, BKV, Stages)    ? WgMaskTmaUsPerScore
         : wgAttentionStagesMask(S, BQ, BKV, Stages) ? WgMaskWarpsUsPerScore
                                                     : WgMaskGlobalUsPerScore);
  // Heavy (causal) tiles start first, so the waves even out: the CTAs'
  // work spread over the SMs, plus one tile's time of tail.
  double ComputeUs =
      CTAs * CtaUs / Dev.NumSMs + (CTAs > Dev.NumSMs ? CtaUs / 2 : CtaUs);
  double QOBytes = 2.0 * S.B * S.Hq * S.Sq * S.D * E;
  double KVBytes = 2.0 * S.B * S.Hkv * S.Skv * S.D * E;
  double L2Bytes = Dev.L2MB * 1024 * 1024 * L2UsableFraction;
  double KVReads = KVBytes <= L2Bytes ? 1 : QTiles;
  double MaskE = S.HasMask ? dtypeBytes(S.MaskDtype) : 0;
  double MaskBytes = double(S.maskElements()) * MaskE;
  double CtaMaskBytes = double(BQ) * KeysPerTile * MaskE;
  double MemUs = hbmUs(Dev, QOBytes + KVBytes * KVReads + MaskBytes);
  double L2Us = CTAs * (2.0 * KeysPerTile * S.D * E + CtaMaskBytes) /
                (Dev.HbmGBps * 1e3 * L2BandwidthFactor);
  return Dev.LaunchUs + std::max({ComputeUs, MemUs, L2Us});
}

double mtsched::mathAttentionTimeUs(const DeviceDesc &Dev,
                                    const AttentionShape &S) {
  if (!validShape(S))
    return Inf;
  if (S.B * S.Hq * S.Sq == 0)
    return Dev.LaunchUs;
  double E = dtypeBytes(S.Dtype);
  // One CTA per query row: the scores row is written, read back and
  // rewritten as probabilities, then read once more by p v.
  double ScoreBytes = 4.0 * S.B * S.Hq * double(S.visiblePairs());
  double QOBytes = 2.0 * S.B * S.Hq * S.Sq * S.D * E;
  double KVBytes = 2.0 * S.B * S.Hkv * S.Skv * S.D * E;
  double L2Bytes = Dev.L2MB * 1024 * 1024 * L2UsableFraction;
  // Every query row streams its head's keys and values; they come from
  // HBM once while they fit in L2.
  double KVReads = KVBytes <= L2Bytes ? 1 : double(S.group()) * S.Sq;
  // An additive mask: once from HBM, a mask element per score per row.
  double MaskE = S.HasMask ? dtypeBytes(S.MaskDtype) : 0;
  double MaskBytes = double(S.maskElements()) * MaskE;
  double MemUs =
      hbmUs(Dev, QOBytes + KVBytes * KVReads + 4 * ScoreBytes + MaskBytes);
  double ComputeUs = simtUs(Dev, attentionFlops(S), MathSimtEff);
  // A grid of few rows (a decode step) is bound by what one CTA does.
  double KeysPerRow = double(S.visiblePairs()) / S.Sq;
  double StreamUs =
      perCtaStreamUs(Dev, KeysPerRow * (2.0 * S.D * E + 16 + MaskE));
  double PerSMFlops = Dev.PeakFp32Tflops * 1e6 * MathSimtEff / Dev.NumSMs;
  double RowUs = 4.0 * KeysPerRow * S.D / PerSMFlops;
  return Dev.LaunchUs + std::max({ComputeUs, MemUs, StreamUs, RowUs});
}
