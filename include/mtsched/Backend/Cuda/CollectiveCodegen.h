//===- CollectiveCodegen.h - Peer-memory collective kernels -----*- C++ -*-===//
//
// CUDA C++ for collectives that read and write peers' buffers directly over
// NVLink (CUDA peer access), compiled with NVRTC like every other kernel:
//   * all_reduce `one_shot`: every rank reads every peer's input and reduces
//     the whole tensor;
//   * all_reduce `two_shot`: rank r reduces chunk r (reduce-scatter) and
//     writes it into every rank's output (all-gather);
//   * all_gather and reduce_scatter `p2p`: direct peer reads.
// Ranks synchronise through flags in peer-visible memory: each block writes
// the call's epoch into a slot of every peer's flag array with a system-
// scope release store and spins (acquire loads, bounded by a clock timeout)
// until every peer has written it too; once before touching peer data and
// once after, so no rank reuses a buffer a peer still reads.
//
// one_shot and two_shot all_reduce can carry an epilogue: bias and/or
// residual add, then relu or gelu, or a residual add then rmsnorm over the
// last dimension (one block per row; one kernel). The value after the adds
// (the residual sum a Llama layer reads again) can be written as a second
// output beside the last; two_shot writes both into every rank's buffers.
//
// `hier` (NCCL calls, CudaHier.cpp) has one kernel: its fused all_reduce
// runs the epilogue on the rank's reduced shard between NCCL's inter-host
// all_reduce and its intra-host all_gather. It is the one_shot body over one
// "rank" (ins, outs and sums p[0] the shard's places, the residual pointer
// at the shard's offset, rank 0) without barriers; the shard must be whole
// rows.
//
// The epoch is one more than a per-block counter in the rank's own flag
// memory (the kernel bumps it), so launches can be captured in a CUDA graph
// and replayed.
//
// Kernel parameters, in order: MtPtrs ins, MtPtrs outs, MtPtrs flags,
// unsigned rank, const T *bias, const T *residual, const T *gamma,
// MtPtrs sums (the second output; unused ones may be null); MtPtrs is a
// struct of 8 device pointers passed by value (one per rank).
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_BACKEND_CUDA_COLLECTIVECODEGEN_H
#define MTSCHED_BACKEND_CUDA_COLLECTIVECODEGEN_H

#include "mtsched/IR/Ops.h"
#include "mtsched/IR/Types.h"
#include "mtsched/Runtime/Roofline.h"
#include "llvm/Support/Error.h"
#include <optional>
#include <string>
#include <vector>

namespace mtsched {

class Graph;
class Module;
class MultiTemplateBufferNode;
class Value;
struct KernelSource;

/// The most ranks a peer-memory kernel handles, and the most blocks it runs.
constexpr int MaxCollectiveRanks = 8;
constexpr int MaxCollectiveBlocks = 256;
/// Bytes of each rank's flag array.
/// Bytes of each rank's flag memory (zeroed once): two barrier phases of
/// per-block, per-peer slots, then one epoch counter per block.
constexpr size_t CollectiveFlagBytes =
    3 * MaxCollectiveBlocks * MaxCollectiveRanks * sizeof(unsigned);

struct CollectiveEpilogue {
  bool Bias = false;     // + bias[col] (a row vector of Cols)
  bool Residual = false; // + residual[i] (a full tensor)
  /// A unary pointwise op of the op table applied after the adds (relu,
  /// gelu, ...): its CUDA expression and fp64 reference are the table's.
  std::optional<OpCode> Activation;
  bool RmsNorm = false; // rmsnorm(x, gamma) over rows of Cols, after the adds
  double Eps = 1e-5;
  /// Also write the value after the adds (before the activation or the
  /// rmsnorm) to `sums`: the IR's `writes [%sum]`.
  bool WriteSum = false;
  bool empty() const { return !Bias && !Residual && !Activation && !RmsNorm; }
  /// "bias_residual_relu", "residual_rmsnorm", "residual_sum_rmsnorm"
  /// (writing the sum too), ...
  std::string name() const;
};

struct CollectiveKernelSpec {
  CollectiveKind Kind = CollectiveKind::AllReduce;
  CollectiveAlgo Algo = CollectiveAlgo::OneShot;
  DType Dtype = DType::BF16;
  int Ranks = 2;
  /// Elements of each rank's input; for Hier, of the rank's shard (the
  /// input over the ranks of a host), which the epilogue covers.
  int64_t Elems = 0;
  /// Elements of a row (the last dimension), for bias and rmsnorm.
  int64_t Cols = 0;
  /// SMs of the device (bounds the grid).
  int SMs = 132;
  CollectiveEpilogue Epilogue;
};

struct CollectiveKernel {
  std::string Name;
  std::string Source;
  unsigned GridX = 1, BlockX = 1;
};

/// Fails (saying why) for an algorithm that does not implement the kind,
/// more than MaxCollectiveRanks ranks, an integer dtype or an epilogue the
/// algorithm cannot carry; for Hier, without an epilogue (NCCL calls only),
/// or for a shard that is not whole rows.
llvm::Expected<CollectiveKernel>
generateCollectiveKernel(const CollectiveKernelSpec &S);

/// N's epilogue as peer kernels fuse it (bias and residual adds, relu or
/// gelu, rmsnorm), with the values each part reads, or why it cannot be. A
/// `writes` member must be the value after the adds (WriteSum).
llvm::Expected<CollectiveEpilogue>
collectiveEpilogueOf(const MultiTemplateBufferNode &N, const Value *&BiasV,
                     const Value *&ResV, const Value *&GammaV);

/// The peer-memory kernel of every decided collective of G (in M, which
/// holds the process groups) whose decision
/// is one (one_shot, two_shot, p2p; NCCL has none), with its epilogue if
/// fused, for ranks of its group on a GPU with SMs multiprocessors. Kernels
/// that cannot be generated are reported in Errors, one line each.
std::vector<KernelSource>
generateGraphCollectiveKernels(const Module &M, const Graph &G,
                               std::vector<std::string> &Errors, int SMs = 132);

} // namespace mtsched

#endif // MTSCHED_BACKEND_CUDA_COLLECTIVECODEGEN_H
