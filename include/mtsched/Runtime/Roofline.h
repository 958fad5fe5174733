//===- Roofline.h - Roofline times for the simulator ------------*- C++ -*-===//
//
// The simulator backend's predictions: pure functions of a DeviceDesc that
// give the time of a GEMM tile configuration, an extern (cuBLAS-like) GEMM,
// memory-bound kernels, epilogues and collectives. Every time is in
// microseconds; a choice that cannot run (out of resources, an algorithm
// that does not exist for a collective, an epilogue that cannot fuse) is
// +inf, never an error, because failures are data in the autotuner.
//
// The formulas and the origin of each constant are in docs/SIMULATOR.md.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_RUNTIME_ROOFLINE_H
#define MTSCHED_RUNTIME_ROOFLINE_H

#include "mtsched/IR/OpUnit.h"
#include "mtsched/IR/Ops.h"
#include "mtsched/IR/Types.h"
#include "mtsched/Runtime/DeviceDesc.h"
#include "llvm/ADT/StringRef.h"
#include <cstdint>
#include <optional>

namespace mtsched {

/// C[Batch, M, N] = A[Batch, M, K] x B[Batch, K, N], all in Dtype, or A and
/// B in OperandDtype where it is set (fp8 operands, C in Dtype).
struct GemmProblem {
  int64_t Batch = 1, M = 0, N = 0, K = 0;
  DType Dtype = DType::BF16;
  std::optional<DType> OperandDtype;
  /// fp8: a scale per row of A and/or per column of B rather than one per
  /// tensor (the same cost; a different kernel to check).
  bool RowwiseScales = false;

  DType operandDtype() const { return OperandDtype.value_or(Dtype); }
};

/// One template configuration: the CTA tile, warps per CTA and the depth of
/// the shared-memory software pipeline.
struct GemmTile {
  int BM, BN, BK, Warps, Stages;
  /// The Hopper template (wgmma fed by TMA) rather than mma.sync.
  bool Wgmma = false;
  /// CTAs per output tile, each over a slice of K (mma.sync only).
  int SplitK = 1;
};

/// The pointwise / row-reduction chain that follows a producer. An empty
/// epilogue has NumOps == 0.
struct EpilogueDesc {
  /// Elements of the producer's output the epilogue consumes (and writes).
  int64_t Elements = 0;
  /// Bytes of other inputs it reads: bias, residual, norm weights.
  int64_t ExtraInputBytes = 0;
  DType Dtype = DType::BF16;
  /// Arithmetic per output element, summed over the chain.
  double FlopsPerElement = 0;
  /// rmsnorm / softmax: a CTA must see a full row.
  bool RowReduction = false;
  int NumOps = 0;
  /// Intermediate values written besides the output (`writes [...]`), each
  /// of Elements elements.
  int ExtraWrites = 0;
};

/// Predicted time of a GEMM template with tile T, with Fused appended to its
/// per-tile epilogue (pass an EpilogueDesc with NumOps == 0 for none). +inf
/// when the tile does not fit in shared memory or registers, or when Fused
/// is a row reduction and BN does not cover a whole row (N > BN): a CTA
/// would only see part of each row, so the norm cannot be computed there.
double gemmTimeUs(const DeviceDesc &D, const GemmProblem &P, const GemmTile &T,
                  const EpilogueDesc &Fused);

/// Predicted time of the merged gate+up GEMM of SwiGLU with tile T: one
/// GEMM of P.N output columns computed from 2 * P.N accumulator columns (a
/// CTA holds BN gate and BN up columns: the kernel of a GEMM with N' = 2N
/// and BN' = 2BN), whose epilogue computes silu(g) * u and writes P.N
/// columns. Fused is a further epilogue on that result.
double swigluTimeUs(const DeviceDesc &D, const GemmProblem &P,
                    const GemmTile &T, const EpilogueDesc &Fused);

/// Predicted time of the vendor library (cuBLAS-like) call: it picks its
/// own tile and split-K, and runs near the best tile's efficiency. It never
/// fuses an epilogue.
double externGemmTimeUs(const DeviceDesc &D, const GemmProblem &P);

/// Predicted time of an op unit's kernel choice from its terms
/// (IR/OpUnit.h): one launch plus the larger of its HBM traffic and its
/// arithmetic at its efficiency of the tensor-core or CUDA-core peak, the
/// arithmetic stretched by the last wave's idle SMs.
double opUnitChoiceTimeUs(const DeviceDesc &D, const OpUnitChoiceCost &C);

/// A memory-bound kernel: one launch plus the larger of its HBM traffic and
/// its arithmetic on the CUDA cores.
double pointwiseTimeUs(const DeviceDesc &D, int64_t BytesRead,
                       int64_t BytesWritten, double Flops);

/// A reduction of Rows rows of RowLength elements to one value per row, with
/// NumOps elementwise ops fused into it (sum, max, or a chain ending in one).
double reductionTimeUs(const DeviceDesc &D, int64_t Rows, int64_t RowLength,
                       DType Dtype, int NumOps = 1);

/// The epilogue as its own kernel: reads the producer's output and
/// ExtraInputBytes, writes its output, one launch. 0 for an empty epilogue.
double epilogueTimeUs(const DeviceDesc &D, const EpilogueDesc &E);

/// Hier: the hierarchical collective of a group spanning hosts (a step
/// inside each host over NVLink, one across hosts over the network).
enum class CollectiveAlgo { Nccl, OneShot, TwoShot, P2P, Hier };

/// The collective algorithm a choice name stands for: `nccl`, `one_shot`,
/// `two_shot`, `p2p`, also inside custom config names.
std::optional<CollectiveAlgo> collectiveAlgoOf(llvm::StringRef ChoiceName);

llvm::StringRef collectiveAlgoName(CollectiveAlgo A);
/// "nccl", "one_shot", "two_shot", "p2p".
std::optional<CollectiveAlgo> parseCollectiveAlgo(llvm::StringRef Name);
/// Whether the model has a formula for Algo running Kind (NCCL runs every
/// kind; one_shot and two_shot only all_reduce; p2p all but all_reduce).
bool collectiveAlgoSupports(CollectiveAlgo Algo, CollectiveKind Kind);

/// Predicted time of a hierarchical collective over Hosts hosts of PerHost
/// GPUs each (all_reduce: reduce-scatter inside each host, all_reduce of
/// the shards across hosts, all_gather inside; all_gather: across, then
/// inside; reduce_scatter: inside, then across). Bytes as for
/// collectiveTimeUs. The steps are NCCL calls: a fused all_reduce runs its
/// epilogue as a kernel of its own on the rank's shard before the gather
/// (and gathers a second output too); all_gather and reduce_scatter do not
/// fuse (+inf with an epilogue). +inf for all_to_all, Hosts or PerHost < 1.
double hierCollectiveTimeUs(const DeviceDesc &D, CollectiveKind Kind,
                            int64_t Bytes, int Hosts, int PerHost,
                            const EpilogueDesc &Fused);

/// Predicted time of one collective over Ranks GPUs of one NVLink domain
/// (+inf for Hier, which needs the hosts: hierCollectiveTimeUs).
/// Bytes is the per-rank input message size: the full tensor for
/// all_reduce, reduce_scatter and all_to_all, one rank's shard for
/// all_gather. Fused is an epilogue run inside the collective kernel
/// (NumOps == 0 for none); NCCL cannot fuse and gives +inf. +inf as well
/// for algorithm/kind pairs that do not exist, Ranks < 1 or Bytes < 0.
double collectiveTimeUs(const DeviceDesc &D, CollectiveKind Kind,
                        CollectiveAlgo Algo, int64_t Bytes, int Ranks,
                        const EpilogueDesc &Fused);

/// Deterministic multiplicative noise for simulated measurements: each
/// apply() scales its input by a factor drawn uniformly from
/// [1 - Pct/100, 1 + Pct/100]. The stream depends only on (Seed, Rank), and
/// the generator is self-contained (splitmix64), so every platform and
/// standard library produces the same numbers.
class NoiseSource {
public:
  NoiseSource(uint64_t Seed, unsigned Rank, double Pct);

  /// Us with noise applied; Us itself when Pct is 0 or Us is not finite.
  double apply(double Us);
  /// The next raw 64-bit value of the stream.
  uint64_t next();

  double getPct() const { return Pct; }

private:
  uint64_t State;
  double Pct;
};

} // namespace mtsched

#endif // MTSCHED_RUNTIME_ROOFLINE_H
