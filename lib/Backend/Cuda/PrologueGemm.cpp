//===- PrologueGemm.cpp - A GEMM that normalises A while loading it -------===//
//
// Prologue fusion (select-prologue, mtsched/Autotune/PrologueSelect.h):
// C = rmsnorm(x, w) * B as one mma.sync kernel. Since
// rmsnorm(x, w)[r, k] = x[r, k] * inv[r] * w[k] with inv[r] = 1 / rms(x[r]),
// C[r, c] = inv[r] * sum_k (x[r, k] * w[k]) * B[k, c]:
//  1. each CTA first sums the squares of its BM rows of x over all of K
//     (a warp per row, 16-byte loads) and keeps inv[r] in shared memory;
//  2. the main loop is the GEMM template's, A = x, and each staged A tile
//     is scaled by w[k] in shared memory once it has landed, before the
//     MMA reads it (a second barrier per k-tile);
//  3. each accumulator row is scaled by inv[r] before the split-K
//     reduction (linear, so the partial tiles may be scaled) and the store.
// At decode the GEMM is bound by reading B; the CTA's pass over its rows of
// x comes from L2 after the first CTA, so the norm's own launch, its write
// of the normalised rows and the GEMM's reread of them are what is saved.
// The rounding differs from the unfused pair's in one place: x * w is
// rounded to the operand type before the MMA (the unfused norm rounds
// x * inv * w); both are checked against the fp64 interpreter.
//
//===----------------------------------------------------------------------===//
#include "GemmCodegen.h"
#include "mtsched/Autotune/PrologueSelect.h"
#include "mtsched/Backend/Cuda/OpUnitKernels.h"

using namespace mtsched;
using namespace mtsched::codegen;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

/// The prologue's device functions (after the main loop's #defines; need
/// PL_TO_F32, PL_EPS and PL_FROM_F32): 1/rms of the CTA's BM rows of x
/// into inv (a warp per row, 16-byte loads when ALIGNED8; 0 outside x,
/// whose accumulators are never stored), and x * w of a landed A tile in
/// place (the copies in flight go to other stages; columns past K were
/// zero-filled and stay zero).
const char *const codegen::PrologueHelpers = R"(
__device__ __forceinline__ float pl_load(const unsigned short *p, long long i) {
  return PL_TO_F32(p[i]);
}
__device__ __forceinline__ void pl_row_scales(const unsigned short *X,
                                              long long m0, float *inv) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int rl = warp; rl < BM; rl += THREADS / 32) {
    const long long r = m0 + rl;
    float s = 0.f;
    if (r < M_) {
      const unsigned short *row = X + r * K_;
#if ALIGNED8
      #pragma unroll 4
      for (long long k = (long long)lane * 8; k < K_; k += 32 * 8) {
        const uint4 q = *(const uint4 *)(row + k);
        const unsigned w4[4] = {q.x, q.y, q.z, q.w};
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float lo = PL_TO_F32((unsigned short)(w4[j] & 0xffffu));
          const float hi = PL_TO_F32((unsigned short)(w4[j] >> 16));
          s += lo * lo + hi * hi;
        }
      }
#else
      for (long long k = lane; k < K_; k += 32) {
        const float v = pl_load(row, k);
        s += v * v;
      }
#endif
    }
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0)
      inv[rl] = r < M_ ? rsqrtf(s / (float)K_ + PL_EPS) : 0.f;
  }
}
__device__ __forceinline__ void pl_scale_tile(unsigned short *a, int kt,
                                              const unsigned short *W) {
  const long long k0 = (long long)kt * BK;
  for (int e = threadIdx.x; e < BM * BK; e += THREADS) {
    const int rr = e / BK, kk = e % BK;
    if (k0 + kk < K_)
      a[rr * AS + kk] = PL_FROM_F32(PL_TO_F32(a[rr * AS + kk]) * pl_load(W, k0 + kk));
  }
}
)";

/// 3. (After MmaSyncTileLoop, 2., and the k-step:) each accumulator row times
/// its 1/rms (pl_inv), before the split-K reduction (linear, so the partial
/// tiles may be scaled) and the store.
const char *const codegen::PrologueScaleAcc = R"(  #pragma unroll
  for (int mt = 0; mt < MT; ++mt)
    #pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      #pragma unroll
      for (int i = 0; i < 4; ++i)
        acc[mt][nt][i] *=
            pl_inv[wm * WM + mt * 16 + (lane >> 2) + ((i & 2) ? 8 : 0)];
)";

llvm::Error codegen::checkPrologueNorm(const Node &Norm, const Value *A,
                                       const llvm::Twine &What) {
  if (Norm.getOp() != OpCode::RmsNorm || Norm.getNumOperands() != 2 ||
      Norm.getResult() != A)
    return err("'%" + Norm.getName() +
               "' is not an rmsnorm with a weight defining " + What);
  const TensorType &X = Norm.getOperand(0)->getType();
  const TensorType &WT = Norm.getOperand(1)->getType();
  if (!(X.Dtype == DType::BF16 || X.Dtype == DType::F16))
    return err("the prologue GEMM needs bf16 or f16 operands, got " +
               dtypeName(X.Dtype));
  if (X != A->getType() || WT.rank() != 1 || WT.Dtype != X.Dtype ||
      WT.Shape[0] != X.innerDim())
    return err("the weight of '%" + Norm.getName() + "' is not a " +
               dtypeName(X.Dtype) + "[" + llvm::Twine(X.innerDim()) +
               "] vector");
  return llvm::Error::success();
}

void codegen::emitPrologueDefines(llvm::raw_ostream &OS, const Node &Norm) {
  bool Bf = Norm.getType().Dtype == DType::BF16;
  OS << "#define PL_EPS " << flt(epsOf(Norm)) << "\n#define PL_TO_F32(h) "
     << (Bf ? "mt_bf16_to_f32" : "mt_f16_to_f32")
     << "(h)\n#define PL_FROM_F32(f) "
     << (Bf ? "mt_f32_to_bf16" : "mt_f32_to_f16") << "(f)\n";
}

/// The kernel's head: 1. 1/rms of the CTA's rows.
static const char *RowScales = R"(
extern "C" __global__ void __launch_bounds__(THREADS) PL_NAME(PL_SIGNATURE) {
  extern __shared__ __align__(16) unsigned char mt_smem[];
  __shared__ float pl_inv[BM];
  const long long m0 = (long long)blockIdx.y * BM;
  const long long n0 = (long long)blockIdx.x * BN;
  const int split = blockIdx.z; // the slice of K (split-K)
  (void)split;
  unsigned short *sA = (unsigned short *)mt_smem;
  unsigned short *sB = sA + STAGES * BM * AS;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  (void)tid;
  const unsigned short *A = (const unsigned short *)PL_X;
  const unsigned short *B = (const unsigned short *)PL_B;
  const unsigned short *W = (const unsigned short *)PL_W;
  pl_row_scales(A, m0, pl_inv);
  __syncthreads();
)";

static llvm::Expected<KernelSource>
generatePrologueGemmKernelText(llvm::StringRef Name, const Node &Norm,
                               const MultiTemplateBufferNode &Gemm,
                               const GemmTileConfig &T) {
  if (Norm.getOp() != OpCode::RmsNorm || Norm.getNumOperands() != 2)
    return err("'%" + Norm.getName() +
               "' is not an rmsnorm with a weight, the prologue this GEMM "
               "template runs");
  if (Gemm.getOp() != OpCode::MatMul || Gemm.getNumOperands() != 2)
    return err("'%" + Gemm.getName() + "' is not a plain matmul");
  if (Gemm.getOperand(0) != Norm.getResult())
    return err("'%" + Gemm.getName() + "' does not read '%" + Norm.getName() +
               "' as its A operand");
  if (Gemm.isEpilogueFused())
    return err("'%" + Gemm.getName() +
               "' has a fused epilogue, which the prologue GEMM cannot run");
  const Value *X = Norm.getOperand(0), *Wt = Norm.getOperand(1),
              *BV = Gemm.getOperand(1);
  const TensorType &XT = X->getType();
  DType Dt = XT.Dtype;
  if (!(Dt == DType::BF16 || Dt == DType::F16))
    return err("the prologue GEMM needs bf16 or f16 operands, got " +
               dtypeName(Dt));
  int64_t Kd = XT.innerDim(), M = rowsOf(XT);
  const TensorType &WT = Wt->getType(), &BT = BV->getType();
  if (WT.rank() != 1 || WT.Dtype != Dt || WT.Shape[0] != Kd)
    return err("the weight of '%" + Norm.getName() + "' is not a " +
               dtypeName(Dt) + "[" + llvm::Twine(Kd) + "] vector");
  if (BT.rank() != 2 || BT.Dtype != Dt || BT.Shape[0] != Kd ||
      Gemm.getType().Dtype != Dt)
    return err("the weight of '%" + Gemm.getName() + "' is not a " +
               dtypeName(Dt) + "[" + llvm::Twine(Kd) + ", N] matrix");
  if (T.Template != GemmTemplate::MmaSync || T.Persistent)
    return err("the prologue GEMM has an mma.sync template only");
  if (T.BM <= 0 || T.BN <= 0 || T.BK <= 0 || T.Warps <= 0 || T.Stages <= 0)
    return err("tile sizes must be positive");
  int WarpsM = 0, WarpsN = 0;
  if (T.BK % 16 || !warpLayout(T, WarpsM, WarpsN))
    return err("tile " + gemmChoiceName(T) +
               " does not split into 16x16 warp tiles with " +
               llvm::Twine(T.Warps) + " warps");
  int64_t N = Gemm.getType().innerDim();
  int Split = std::max(1, T.SplitK);
  int Stages = std::max(2, T.Stages);
  bool Aligned = Kd % 8 == 0 && N % 8 == 0;
  int64_t Smem = int64_t(Stages) *
                 (int64_t(T.BM) * (T.BK + 8) + int64_t(T.BK) * (T.BN + 8)) * 2;

  ParamList P;
  P.Inputs.insert(X);
  P.Inputs.insert(Wt);
  P.Inputs.insert(BV);
  P.Outputs.push_back(Gemm.getResult());

  KernelSource K;
  K.Name = sanitizeIdentifier(Name.str() + "_" + gemmChoiceName(T));
  bool Bf = Dt == DType::BF16;
  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << Prelude << "\n// Prologue GEMM: %" << Gemm.getName() << " = rmsnorm(%"
     << X->getName() << ", %" << Wt->getName() << ") [" << M << " x " << Kd
     << "] * %" << BV->getName() << " [" << N << "], tile " << gemmChoiceName(T)
     << "\n#define M_ " << M << "LL\n#define N_ " << N << "LL\n#define K_ "
     << Kd << "LL\n#define ROWS M_\n#define BM " << T.BM << "\n#define BN "
     << T.BN << "\n#define BK " << T.BK << "\n#define WARPS_M " << WarpsM
     << "\n#define WARPS_N " << WarpsN << "\n#define STAGES " << Stages
     << "\n#define ALIGNED8 " << (Aligned ? 1 : 0)
     << " // K and N multiples of 8: 16-byte copies\n"
     << "#define MMA_TYPE \"" << (Bf ? "bf16" : "f16") << "\"\n#define SPLITK "
     << Split << "\n#define PL_STORE(v) " << storeExpr(Dt, "(v)")
     << "\n#define PL_NAME " << K.Name << "\n#define PL_SIGNATURE "
     << P.signature() << (Split > 1 ? ", float *__restrict__ mt_ws" : "")
     << "\n#define PL_X " << P.name(X) << "\n#define PL_W " << P.name(Wt)
     << "\n#define PL_B " << P.name(BV) << "\n#define PL_C "
     << P.name(Gemm.getResult()) << "_out\n#define PROLOGUE 1\n"
     << MmaSyncTileAccMacro;
  emitPrologueDefines(OS, Norm);
  emitTensorCoreMainLoop(OS);
  OS << PrologueHelpers << RowScales << MmaSyncAccumulators << MmaSyncTileLoop
     << MmaSyncKStep << PrologueScaleAcc;
  emitSplitKReduce(OS, EpilogueThreads());
  // After the split-K reduction: the store.
  OS << mmaSyncTileStore("PL_C", "PL_STORE");
  K.Source = OS.str();
  K.Inputs.assign(P.Inputs.begin(), P.Inputs.end());
  K.Outputs = P.Outputs;
  K.GridX = unsigned((N + T.BN - 1) / T.BN);
  K.GridY = unsigned((M + T.BM - 1) / T.BM);
  K.GridZ = unsigned(Split);
  K.BlockX = WarpsM * WarpsN * 32;
  K.SharedBytes = unsigned(Smem);
  if (Split > 1)
    // Per CTA its fp32 partial tile, per output tile a counter.
    K.WorkspaceBytes = uint64_t(K.GridX) * K.GridY * Split * T.BM * T.BN * 4 +
                       uint64_t(K.GridX) * K.GridY * 4;
  return K;
}

llvm::Expected<KernelSource>
mtsched::generatePrologueKernel(const Graph &G,
                                const MultiTemplateBufferNode &Gemm) {
  std::optional<llvm::StringRef> NormName =
      Gemm.getAttrs().getString(PrologueAttr);
  if (!NormName)
    return err("'%" + Gemm.getName() + "' runs no prologue");
  const Node *Norm = Gemm.getOperand(0)->getDef();
  if (!Norm || Norm->getName() != *NormName)
    return err("'%" + Gemm.getName() + "' names prologue '%" + *NormName +
               "', which is not its A operand's node");
  const Choice *C = Gemm.findChoice(Gemm.getDecision());
  if (Gemm.getOp() == OpCode::SwiGlu) {
    // SwiGLU's merged gate+up GEMM runs the same prologue.
    std::optional<GemmTileConfig> T = C ? swigluTileOf(*C) : std::nullopt;
    if (!T)
      return err("'%" + Gemm.getName() + "': decision '" + Gemm.getDecision() +
                 "' is not a swiglu tile");
    return generateSwiGluKernel(Gemm, *T, 0, Norm);
  }
  std::optional<GemmTileConfig> T = C ? gemmTileOf(*C) : std::nullopt;
  if (!T)
    return err("'%" + Gemm.getName() + "': decision '" + Gemm.getDecision() +
               "' is not a GEMM tile");
  return generatePrologueGemmKernel(
      G.getName() + "_" + Gemm.getName() + "_prologue", *Norm, Gemm, *T);
}

llvm::Expected<KernelSource>
mtsched::generatePrologueGemmKernel(llvm::StringRef Name, const Node &Norm,
                                    const MultiTemplateBufferNode &Gemm,
                                    const GemmTileConfig &T) {
  return withProgrammaticWait(
      generatePrologueGemmKernelText(Name, Norm, Gemm, T), gemmFlops(Gemm));
}
