//===- GemmCodegen.h - Pieces the GEMM templates share ----------*- C++ -*-===//
//
// Internal to lib/Backend/Cuda: the mma.sync template (CudaCodegen.cpp) and the
// Hopper wgmma template (WgmmaGemm.cpp) share the prelude, the fused
// epilogue and the grouped CTA raster. The pieces op units use too (the
// kernel's parameter list, loads and stores) are in OpUnitKernels.h.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_BACKEND_CUDA_GEMMCODEGEN_H
#define MTSCHED_LIB_BACKEND_CUDA_GEMMCODEGEN_H

#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/raw_ostream.h"
#include <string>

namespace mtsched {
namespace codegen {

/// Conversions and reductions every kernel may use; no toolkit header.
extern const char *const Prelude;

/// mt_pow, the `pow` op's device function, in every prelude (also the
/// peer-memory collectives', whose epilogue activation may be a pow). The
/// kernels build with --use_fast_math, under which powf(a, b) is
/// exp2(b * log2(a)): NaN for a negative base even with an integral
/// exponent, where PyTorch's pow is the real power (GPT-2's and Phi's GELU
/// take x ** 3). So the sign is taken apart for integral exponents, the
/// common small ones are products, and 0 ** 0 is 1; a negative base with a
/// fractional exponent stays NaN, as in PyTorch.
/// (Plain literals: a raw string cannot span the lines of a macro in g++.)
#define MTSCHED_CUDA_POW_HELPER                                                \
  "__device__ __forceinline__ float mt_pow(float a, float b) {\n"              \
  "  if (b == 0.f) return 1.f;\n"                                              \
  "  if (b == 1.f) return a;\n"                                                \
  "  if (b == 2.f) return a * a;\n"                                            \
  "  if (b == 3.f) return a * a * a;\n"                                        \
  "  if (a == 0.f) return b > 0.f ? 0.f : __int_as_float(0x7f800000);\n"       \
  "  float m = exp2f(b * log2f(fabsf(a)));\n"                                  \
  "  if (a < 0.f) {\n"                                                         \
  "    if (b != truncf(b)) return __int_as_float(0x7fc00000);\n"               \
  "    if (fmodf(b, 2.f) != 0.f) m = -m;\n"                                    \
  "  }\n"                                                                      \
  "  return m;\n"                                                              \
  "}\n"

/// A row reduction's `eps` attribute (1e-6 if absent).
double epsOf(const Node &N);
/// The expression of pointwise node N over operand expressions Ops (the op
/// table's CUDA expression).
llvm::Expected<std::string> pointwiseExpr(const Node &N,
                                          llvm::ArrayRef<std::string> Ops);
/// The element index of a value of type Op broadcast to the iteration space
/// [Rows, Inner] (row r, column c); see CudaCodegen.cpp.
llvm::Expected<std::string> indexFor(const TensorType &Op, int64_t Rows,
                                     int64_t Inner, const TensorType *Iter);
/// The nodes of N's epilogue chain, in order.
std::vector<const Node *> epilogueNodes(const MultiTemplateBufferNode &N);

/// Where a sum or max node reduces its operand: the dimension ('dim',
/// negative from the back, default the last), the elements after it in the
/// operand (the stride of one step along it) and its length.
struct ReducedDim {
  int64_t Dim = 0, After = 1, Len = 1;
};
inline ReducedDim reducedDimOf(const Node &N) {
  const TensorType &IT = N.getOperand(0)->getType();
  ReducedDim R;
  R.Dim = IT.rank() - 1;
  if (const Attribute *D = N.getAttrs().get("dim"))
    R.Dim = D->getInt() < 0 ? D->getInt() + IT.rank() : D->getInt();
  for (unsigned D = R.Dim + 1; D < IT.rank(); ++D)
    R.After *= IT.Shape[D];
  R.Len = IT.Shape[R.Dim];
  return R;
}

/// A fused group read through (LayoutGroupKernels.cpp): layout ops, or
/// sum/max over a dimension other than the last; one thread per element
/// of Outputs (all of one shape), each value computed at the index its
/// reader needs, a sum/max by a loop over its dimension.
/// The statements computing V, the value of one of the layout members
/// Layout (read through, values outside them loaded through P), at flat
/// index Flat, each line starting with Indent; Var is set to the float
/// variable holding it. How a rows kernel reads the layout ops before its
/// reduction.
llvm::Expected<std::string> readThroughAt(llvm::ArrayRef<const Node *> Layout,
                                          const Value *V,
                                          const std::string &Flat, ParamList &P,
                                          const std::string &Indent,
                                          std::string &Var);
llvm::Expected<KernelSource>
generateLayoutGroupKernel(llvm::StringRef Name,
                          llvm::ArrayRef<const Node *> Nodes,
                          llvm::ArrayRef<const Value *> Outputs);

/// The fused epilogue of a GEMM, applied to accumulator `v` at (r, c).
struct EpilogueCode {
  ParamList *P;
  /// Pointwise statements ending in `v = ...;`.
  std::string Pre;
  /// The final row reduction, if any.
  const Node *RowNode = nullptr;
  std::string RowWeight; // rmsnorm / layernorm weight load expression
  std::string RowBias;   // layernorm bias load expression, if any
  const Value *Result = nullptr;
  /// Pre stores members read after the kernel (the `writes` list), so it
  /// must run only on accumulators inside the output.
  bool PreStores = false;
  /// The epilogue continues through layout ops (reshape, transpose): the
  /// flat index, in r and c, where the element at (r, c) lands in the
  /// result; empty when it is r * N_ + c.
  std::string StoreIndex;
  /// StoreIndex is not r * N_ + c (a transpose is in the chain): the tile
  /// is not a box of the result, so no pair or TMA tile stores.
  bool Permuted = false;
};

/// How the threads that hold the accumulators cooperate in the epilogue.
struct EpilogueThreads {
  /// A statement synchronising exactly those threads.
  std::string Sync = "__syncthreads()";
  /// This thread's index among them, and their number.
  std::string Tid = "threadIdx.x", Count = "THREADS";
  /// The condition under which FOR_EACH_ACC's (r, c) is inside the output.
  std::string InBounds = "r < ROWS && c < N_";
  /// The template defines FOR_EACH_ACC_PAIR(stmt), binding `v0` and `v1` to
  /// the accumulators of columns c and c + 1 (c even): a 16-bit output is
  /// then stored one 32-bit word per pair.
  bool PairStores = false;
  /// The accumulators have the mma fragment layout (the four lanes of a quad
  /// share rows) and the template defines ROW_SLOTS (rows per thread),
  /// ROW_SLOT (the row slot of FOR_EACH_ACC's element) and
  /// FOR_EACH_ROW_SLOT(stmt) (binding `h` and `rl`; every lane runs it):
  /// row sums and maxima are then reduced per thread and per quad before
  /// one shared-memory atomic per row.
  bool QuadRowSums = false;
  /// The template defines FOR_EACH_ACC_CLAMPED(stmt): every accumulator,
  /// with `r` and `c` clamped into the output. A chain without stores runs
  /// there without a branch per element: branches kept each element's
  /// operand loads apart, one memory latency after another (a 64 x 128
  /// wgmma tile at M = 16 spent 3.8 us on a bias + ReLU), and what is
  /// computed outside the output is never stored.
  bool ClampedAcc = false;
  /// Shared memory of at least 2 * BM floats for the row reduction.
  std::string Scratch = "mt_smem";
  /// The template defines MT_TILE_STORE(PACK), storing the whole tile from
  /// the accumulators given PACK, the 32-bit word of a pair (`v0`, `v1`) of
  /// a 16-bit output; the template clips it to the output.
  bool TileStore = false;
};

/// N's epilogue as code over accumulator `v` at (r, c) when Fused (else
/// only the store of N's result), adding its inputs and outputs to P; Rows
/// x Inner is the iteration space, Resized when a size hint changed it
/// (GemmEpilogue.cpp).
llvm::Expected<EpilogueCode> buildEpilogue(const MultiTemplateBufferNode &N,
                                           bool Fused, ParamList &P,
                                           int64_t Rows, int64_t Inner,
                                           bool Resized);

/// The pointwise chain, the row reduction and the store. The template
/// defines FOR_EACH_ACC(stmt) binding `v` (by reference), `r` (global row),
/// `rl` (row within the tile) and `c`; `mt_smem` is its shared memory.
void emitEpilogueTail(llvm::raw_ostream &OS, const EpilogueCode &E,
                      const std::string &OutName, DType OutType,
                      const EpilogueThreads &T = EpilogueThreads());

/// emitEpilogueTail twice, indented into the branches of
/// `if (m0 + BM <= M_ && n0 + BN <= N_) {...} else {...}`: a tile inside the
/// output stores without bounds checks (INTERIOR 1), so that the epilogue's
/// loads are not each behind a branch; an edge tile checks them. The wgmma
/// templates (WgmmaGemm.cpp, SwiGluGemm.cpp) write their tails this way.
void emitInteriorAndEdgeTails(llvm::raw_ostream &OS, const EpilogueCode &E,
                              const std::string &OutName, DType OutType,
                              const EpilogueThreads &T);

/// The mma.sync template's main-loop pieces: the tile #defines it derives
/// (THREADS, WM, WN, MT, NT, AS, BS), cp.async / ldmatrix / mma helpers and
/// mt_load_tile. Needs M_, N_, K_, BM, BN, BK, WARPS_M, WARPS_N, STAGES,
/// ALIGNED8 and MMA_TYPE defined first.
void emitTensorCoreMainLoop(llvm::raw_ostream &OS);
/// The cp.async / ldmatrix / mma.sync helpers of the main loop alone, for
/// other tensor-core kernels (attention); needs MMA_TYPE defined first.
extern const char *const MmaHelpers;
/// The mma.sync template's zeroed accumulators acc[MT][NT][4] and this
/// CTA's slice of the k-tiles (kt0, KT; needs `split`, K_ and SPLITK), and
/// its k-step over the staged tiles `a` and `b` closing the k-loop and
/// waiting for the copies: the GEMM template and the horizontal group's
/// tiles share them, between their own prologue and loop head.
extern const char *const MmaSyncAccumulators;
extern const char *const MmaSyncKStep;
/// FOR_EACH_TILE_ACC(STMT): every accumulator of the mma.sync tile, in
/// range or not, with e its element of the BM x BN tile (what the split-K
/// reduction, emitSplitKReduce, walks).
extern const char *const MmaSyncTileAccMacro;
/// Between MmaSyncAccumulators and MmaSyncKStep in the tile kernels that
/// load through mt_load_tile (the horizontal group's and the prologue
/// GEMM's): the pipeline's prologue and the k-loop's head; with PROLOGUE
/// defined 1, each landed A tile scaled by the norm's weight W first.
extern const char *const MmaSyncTileLoop;
/// The end of a mma.sync tile kernel: each accumulator in range stored to
/// Out[r * N_ + c] through the macro Store, and the kernel's closing brace.
std::string mmaSyncTileStore(llvm::StringRef Out, llvm::StringRef Store);
/// After emitTensorCoreMainLoop in the GEMM template: with FP8 defined 1, the
/// raw fp8 tile copy (needs ALIGNED16, MT_WIDEN_A, MT_WIDEN_B) and widening
/// to f16 (Fp8Tiles.cpp); MT_LOAD(stage, kt) and mt_operand either way.
extern const char *const Fp8TileCopy;

/// The split-K reduction of the GEMM templates (`#if SPLITK > 1`): each
/// CTA writes its partial tile to the workspace `mt_ws`, the last of a
/// tile's SPLITK CTAs (a per-tile counter; T.Sync and T.Tid are the
/// threads holding accumulators) adds the partials in slice order. The
/// template defines SPLITK, `split` and FOR_EACH_TILE_ACC(stmt), binding
/// `v` (by reference) and `e` (its element of the BM x BN tile) for every
/// accumulator.
void emitSplitKReduce(llvm::raw_ostream &OS, const EpilogueThreads &T);

/// The RMSNorm prologue of the mma.sync GEMM templates (PrologueGemm.cpp,
/// select-prologue): emitPrologueDefines (PL_EPS and the conversions of
/// Norm's dtype), then after emitTensorCoreMainLoop PrologueHelpers:
/// pl_row_scales(x, m0, inv) (1/rms of the CTA's BM rows into shared inv;
/// every thread calls it, a barrier after) and pl_scale_tile(a, kt, w) (a
/// landed A tile times w in place; a barrier after); PrologueScaleAcc
/// multiplies each accumulator row by its `pl_inv` before the split-K
/// reduction.
void emitPrologueDefines(llvm::raw_ostream &OS, const Node &Norm);
/// An error unless Norm is an rmsnorm(x, w) of bf16/f16 x whose result is
/// A (What names A in the message) and w a vector over x's last dimension.
llvm::Error checkPrologueNorm(const Node &Norm, const Value *A,
                              const llvm::Twine &What);
extern const char *const PrologueHelpers;
extern const char *const PrologueScaleAcc;

/// Registers per thread the wgmma template's consumer warpgroups take with
/// setmaxnreg when there are Consumers of them (more than one) beside the
/// producer: what the producer gives back from the CTA's launch allocation.
int wgmmaConsumerRegs(int Consumers);
/// Registers the wgmma template's producer warpgroup keeps (setmaxnreg).
inline constexpr int WgmmaProducerRegs = 40;
/// The wgmma kernels' device helpers (WgmmaHelpers.cpp): mt_tensor_map (a
/// CUtensorMap parameter), mbarriers, TMA loads, 128-byte-swizzle
/// descriptors (mt_desc), wgmma fence/commit/wait and mt_fence_acc.
extern const char *const WgmmaHelpers;
/// The wgmma tile's accumulator walks (FOR_EACH_ACC, FOR_EACH_ACC_PAIR,
/// FOR_EACH_ACC_CLAMPED, FOR_EACH_TILE_ACC, the row slots) over `acc`, BN /
/// 2 fp32 per consumer thread; they need `cw`, `warp`, `lane`, `bz`, `m0`,
/// `n0` and INTERIOR (WgmmaHelpers.cpp; the GEMM's and the merged SwiGLU's).
extern const char *const WgmmaAccMacros;
/// Name(d, a, b): d (N / 2 fp32 accumulators) += A (64 x 16) * B (16 x N)
/// with `wgmma.mma_async.m64nNk16` on Type ("bf16"/"f16") operands. A is
/// a K-major shared-memory descriptor, or with RegisterA four 32-bit
/// registers in the m16n8k16 A-fragment layout per warp; B is a descriptor,
/// MN-major ("transposed", a row-major [K][N] tile) if TransB, else
/// K-major (a row-major [N][K] tile).
std::string wgmmaFunction(int N, const char *Type,
                          llvm::StringRef Name = "mt_wgmma", bool TransB = true,
                          bool RegisterA = false);
/// The TMA map of pointer parameter Param, a [Batch][Rows][Inner] tensor of
/// 2-byte elements, copied in boxes of BoxInner x BoxRows.
TensorMapParam wgmmaTensorMap(unsigned Param, int64_t Inner, int64_t Rows,
                              int64_t Batch, uint32_t BoxInner,
                              uint32_t BoxRows);

/// Picks WARPS_M x WARPS_N for an mma.sync tile: warp tiles of at least
/// 16x16, as square as possible; false if none exists.
bool warpLayout(const GemmTileConfig &T, int &WarpsM, int &WarpsN);

/// Declares m0, n0 (the CTA's first row and column): GROUP_M consecutive
/// CTAs walk down a column of tiles so that the B tiles they share stay in
/// L2.
void emitGroupedRaster(llvm::raw_ostream &OS);
/// The tile rows a grouped raster walks down each column before the next
/// (GROUP_M), shared by emitGroupedRaster and the persistent wgmma tiles.
inline constexpr int GroupedRasterRows = 8;

/// What generateGemmKernel has worked out before a template emits its body.
struct GemmSetup {
  GemmTileConfig T;
  int64_t M, N, K, Batch;
  bool BatchedB;
  DType Dt;
  const ParamList *P;
  const EpilogueCode *Epi;
  std::string OutName;
  DType OutType;
  /// SwiGLU's merged gate+up GEMM (SwiGluGemm.cpp, persistent tiles only):
  /// pointer parameters 0, 1 and 2 are %h, %wg and %wu; each stage holds
  /// both weights' BN columns, one wgmma 2 * BN wide accumulates gate then
  /// up, and the epilogue starts from silu(g) * u. BN counts output columns.
  bool SwiGlu = false;
};

/// The wgmma + TMA template (sm_90a): appends the kernel to OS, after the
/// shape #defines, and fills K's launch fields, tensor maps and target.
llvm::Error emitWgmmaGemm(llvm::raw_ostream &OS, KernelSource &K,
                          const GemmSetup &S);

/// K's grid for tile T over Batch products of M x N, Split CTAs per output
/// tile: one CTA per tile, or for a persistent tile every tile (in whole
/// clusters down M) along x, walked by at most one CTA per SM.
void setGemmGrid(KernelSource &K, const GemmTileConfig &T, int64_t M, int64_t N,
                 int64_t Batch, int Split = 1);

} // namespace codegen
} // namespace mtsched

#endif // MTSCHED_LIB_BACKEND_CUDA_GEMMCODEGEN_H
