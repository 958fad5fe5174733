//===- CudaCodegen.h - CUDA C++ source for templates and groups -*- C++ -*-===//
//
// Generates self-contained CUDA C++ (no toolkit headers) for
//   * a GEMM choice `gemm_BMxBNxBK_wW_sS`: bf16/f16 on tensor cores
//     (mma.sync m16n8k16, ldmatrix, cp.async with S stages), f32 on CUDA
//     cores; or `gemm_wg_BMxBNxBK_sS`: bf16/f16 on Hopper (sm_90a: wgmma fed
//     by TMA through S stages, a producer warpgroup and one consumer
//     warpgroup per 64 rows); optionally with its epilogue chain fused, a
//     row reduction (rmsnorm, softmax) included when BN covers the row;
//   * a fused kernel group of pointwise ops and reductions over the last
//     dimension (sum, max, softmax, rmsnorm), one kernel per group.
// Every kernel is `extern "C" __global__`, specialised to its shapes, and
// takes its inputs then its outputs as pointers, in the order of
// KernelSource::Inputs and KernelSource::Outputs.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_BACKEND_CUDA_CUDACODEGEN_H
#define MTSCHED_BACKEND_CUDA_CUDACODEGEN_H

#include "mtsched/IR/Graph.h"
#include "mtsched/Lowering/ChoiceConfig.h"
#include "llvm/Support/Error.h"
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace mtsched {

/// A TMA tensor map (CUtensorMap) over one pointer parameter of 2-byte (or
/// ElementBytes = 4) elements, 128-byte swizzle, zeros out of bounds (an
/// output's map stores tiles, clipped to its bounds). The launcher encodes
/// it with the parameter's device address and passes it by value.
struct TensorMapParam {
  /// Index into the kernel's pointer parameters: KernelSource::Inputs, then
  /// KernelSource::Outputs.
  unsigned Input = 0;
  /// Sizes in elements, innermost first.
  uint64_t Dims[3] = {1, 1, 1};
  /// Byte strides of dimensions 1 and 2.
  uint64_t Strides[2] = {0, 0};
  /// Elements copied per request, innermost first.
  uint32_t Box[3] = {1, 1, 1};
  /// Bytes of one element: 2 (16-bit data) or 4 (copied as 32-bit words).
  unsigned ElementBytes = 2;
  /// The bytes each request promotes into L2: 0 (none), 64, 128 or 256.
  unsigned L2PromotionBytes = 256;
};

struct KernelSource {
  /// The entry point's name (also used for the dumped file's name).
  std::string Name;
  std::string Source;
  /// Values read, in parameter order.
  std::vector<const Value *> Inputs;
  /// Values written, in parameter order after the inputs.
  std::vector<const Value *> Outputs;
  unsigned GridX = 1, GridY = 1, GridZ = 1;
  unsigned BlockX = 1;
  /// Dynamic shared memory in bytes.
  unsigned SharedBytes = 0;
  /// Kernel parameters before the inputs' pointers.
  std::vector<TensorMapParam> TensorMaps;
  /// Compiled for sm_90a (wgmma, setmaxnreg, TMA): runs on sm_90 GPUs only.
  bool NeedsSm90a = false;
  /// GridX counts work items that the kernel walks in strides of gridDim.x:
  /// the launcher starts at most one CTA per SM (launchGridX).
  bool Persistent = false;
  /// CTAs per thread block cluster along x (sm_90): launched with
  /// cuLaunchKernelEx; GridX is then a multiple of it.
  unsigned ClusterX = 1;
  /// The kernel runs `griddepcontrol.wait` (sm_90) before its first access
  /// to global memory: it is launched with programmatic stream
  /// serialization (PDL), so its launch and set-up (barriers, tensor maps)
  /// overlap the tail of the kernel before it in the stream, whose results
  /// the wait still orders before every read and write.
  bool ProgrammaticWait = false;
  /// Bytes of global scratch memory the kernel needs (attn_math's scores,
  /// split-KV partial results), passed as the last pointer, after the
  /// outputs. The launcher zero-fills it before the kernel's first launch;
  /// a kernel that keeps counters there must leave them at zero.
  uint64_t WorkspaceBytes = 0;
};

/// The CTAs K is launched with along x on a GPU of SMs multiprocessors:
/// GridX, or for a persistent kernel (which walks its GridX work items in
/// strides of gridDim.x) one per SM at most, in whole clusters.
inline unsigned launchGridX(const KernelSource &K, int SMs) {
  if (!K.Persistent || SMs <= 0)
    return K.GridX;
  unsigned Cluster = std::max(1u, K.ClusterX);
  return std::min(K.GridX, std::max(1u, unsigned(SMs) / Cluster) * Cluster);
}

/// Rows of a tensor seen as [rows, inner dim].
int64_t rowsOf(const TensorType &T);

/// The GEMM work (2 * M * N * K summed over a kernel's products) from which
/// a kernel takes no part in PDL. PDL hides a kernel's launch latency, a
/// few microseconds, which decode's short kernels feel (3-13% of a decode
/// layer). In long kernels it saves nothing measurable, and at prefill the
/// early trigger cost: the Llama-3-70B MLP (9.6e11 flops a GEMM) ran
/// 4215-4293 us a call with it, 4212-4217 without, on one H200, and up to
/// 2.4% slower on another (docs/CUDA.md). 2^37 flops is about 170 us at
/// 800 TFLOP/s: there a few microseconds are noise.
constexpr double LongKernelFlops = double(uint64_t(1) << 37);

/// K (one `extern "C" __global__` function) beginning with
/// `griddepcontrol.wait` then `griddepcontrol.launch_dependents` (compiled
/// where __CUDA_ARCH__ >= 900), and ProgrammaticWait set: on sm_90 and
/// later it is launched with PDL, its launch overlapping the tail of the
/// kernel before it, and the kernel after it may launch once it runs.
/// A kernel of GEMM work Flops at or over LongKernelFlops passes unchanged
/// (launched plainly, its dependents launch as it ends) unless
/// MTSCHED_PDL=all is in the environment (a diagnostic). A failure, a
/// source of several kernels and one that already waits pass unchanged.
/// The generators of group, layout and GEMM kernels return their kernels
/// through it.
llvm::Expected<KernelSource>
withProgrammaticWait(llvm::Expected<KernelSource> K, double Flops = 0);

/// MTSCHED_PDL's value in the environment, read once ("" when unset): `all`
/// here (withProgrammaticWait), `0` and `skip:TEXT` at launch (CudaDevice).
llvm::StringRef pdlEnvironment();

/// 2 * M * N * K of matmul-like node N (A its operand 0, B its operand 1),
/// A's rows M overridden by MArg when positive.
double gemmFlops(const MultiTemplateBufferNode &N, int64_t MArg = 0);

/// The GEMM of matmul node N with tile T, with N's epilogue chain fused if
/// Fused. Fused, its outputs are N.getFusedOutputs(): each value of the
/// epilogue's `writes` list, stored where the chain computes it, then the
/// chain's last value. M overrides the number of rows of A (a size hint; 0:
/// N's own). Fails for a tile the template cannot run (the message says
/// why).
llvm::Expected<KernelSource>
generateGemmKernel(const MultiTemplateBufferNode &N, const GemmTileConfig &T,
                   bool Fused, int64_t M = 0);

/// The merged gate+up GEMM of `swiglu` node N (operands %h, %wg, %wu) with
/// mma.sync tile T: each CTA computes the BM x BN tiles of h * wg and h * wu
/// for the same columns, reading both weights (their concatenation is
/// logical, never materialised), and writes silu(g) * u once. bf16/f16
/// only. M overrides the rows of %h (a size hint; 0: N's own). With Norm
/// (the rmsnorm defining %h, select-prologue), the kernel reads the norm's
/// x and w and runs the norm in its prologue (both accumulators scaled by
/// 1/rms before silu).
llvm::Expected<KernelSource>
generateSwiGluKernel(const MultiTemplateBufferNode &N, const GemmTileConfig &T,
                     int64_t M = 0, const Node *Norm = nullptr);

/// The merged GEMM of a horizontal group (select-horizontal): Members, two
/// or more bf16/f16 matmuls reading one A, each with a rank-2 weight and no
/// fused epilogue, as one mma.sync launch with tile T (no split-K). The
/// grid's tile columns are the members' in order; each CTA runs its
/// member's GEMM on that member's weight and writes that member's output,
/// so nothing is sliced and no weight is concatenated. With Norm (the
/// rmsnorm defining A, select-prologue), the kernel reads the norm's x and
/// w instead of A and runs the norm in its prologue, as
/// generatePrologueGemmKernel does.
llvm::Expected<KernelSource> generateHorizontalGemmKernel(
    llvm::StringRef Name,
    llvm::ArrayRef<const MultiTemplateBufferNode *> Members,
    const GemmTileConfig &T, const Node *Norm = nullptr);
/// The merged GEMM of the group Leader leads in decided graph G (its
/// `horizontal` members, its `horizontal_tile`), named after Leader.
llvm::Expected<KernelSource>
generateHorizontalGroupKernel(const Graph &G,
                              const MultiTemplateBufferNode &Leader);

/// The GEMM C = rmsnorm(x, w) * B of matmul Gemm whose A operand is
/// rmsnorm node Norm's result, the norm run in its prologue
/// (select-prologue): each CTA computes its rows' 1 / rms(x) first, scales
/// the A tiles by w in shared memory and the accumulator rows by 1 / rms.
/// bf16/f16, an mma.sync tile T (split-K or not), no fused epilogue.
llvm::Expected<KernelSource>
generatePrologueGemmKernel(llvm::StringRef Name, const Node &Norm,
                           const MultiTemplateBufferNode &Gemm,
                           const GemmTileConfig &T);
/// The prologue GEMM of decided matmul or swiglu Gemm of G (its `prologue`
/// attribute names the norm that defines its A), with its decided tile.
llvm::Expected<KernelSource>
generatePrologueKernel(const Graph &G, const MultiTemplateBufferNode &Gemm);

/// One kernel computing Nodes (buffers of one fused group, in program
/// order). Outputs are the nodes whose value is used outside the group or
/// returned (see OutputsOf); Rows overrides the rows of the iteration space.
llvm::Expected<KernelSource>
generateGroupKernel(llvm::StringRef Name, llvm::ArrayRef<const Node *> Nodes,
                    llvm::ArrayRef<const Value *> Outputs, int64_t Rows = 0);

/// The gather kernel of layout node N (expand, transpose, slice, concat;
/// IR/Layout.h). reshape is a view: it has no kernel, and asking for one is
/// an error.
llvm::Expected<KernelSource> generateLayoutKernel(llvm::StringRef Name,
                                                  const Node &N);

/// An uneven all_to_all (three operands) at one rank: the rows its send
/// count names, then zeros up to the capacity; counts the interpreter
/// rejects make the output NaN.
llvm::Expected<KernelSource> generateRaggedCopyKernel(llvm::StringRef Name,
                                                      const Node &N);

/// N's epilogue chain as its own kernel.
llvm::Expected<KernelSource>
generateEpilogueKernel(const MultiTemplateBufferNode &N, int64_t Rows = 0);

/// Every kernel of a scheduled graph: each buffer kernel group, and each
/// GEMM choice of each matmul (decided: the decided choice, fused if so;
/// undecided: every choice, unfused and fused). Kernels that cannot be
/// generated are reported in Errors, one line each.
std::vector<KernelSource>
generateGraphKernels(const Graph &G, std::vector<std::string> &Errors);

/// Writes each kernel to Dir/<name>.cu.
llvm::Error dumpKernels(llvm::ArrayRef<KernelSource> Kernels,
                        llvm::StringRef Dir);

/// A C identifier derived from S.
std::string sanitizeIdentifier(llvm::StringRef S);

} // namespace mtsched

#endif // MTSCHED_BACKEND_CUDA_CUDACODEGEN_H
