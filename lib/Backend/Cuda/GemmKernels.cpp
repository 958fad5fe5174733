//===- GemmKernels.cpp - The mma.sync GEMM template and its epilogues -----===//
//
// The tensor-core (mma.sync) and SIMT GEMM templates, the epilogue code
// fused into them (and into the wgmma and SwiGLU templates), and the
// grouped rasterisation they share. The template is the same text for every
// tile; only the #defines change.
//
//===----------------------------------------------------------------------===//
#include "GemmCodegen.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <map>

using namespace mtsched;
using namespace mtsched::codegen;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

/// cp.async, ldmatrix and mma.sync m16n8k16 helpers (MMA_TYPE defined
/// first), between TensorCoreDefines and TensorCoreLoadTile in the GEMM
/// templates and alone in the attention kernels.
const char *const codegen::MmaHelpers =
    R"(__device__ __forceinline__ unsigned mt_smem_addr(const void *p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }"
      : "=r"(a) : "l"(p));
  return a;
}
// 16-byte asynchronous copy; src_bytes = 0 fills zeros (out of bounds).
__device__ __forceinline__ void mt_cp_async16(void *dst, const void *src,
                                              int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                   mt_smem_addr(dst)), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void mt_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
#define MT_CP_ASYNC_WAIT(n) asm volatile("cp.async.wait_group %0;\n" ::"n"(n))

__device__ __forceinline__ void mt_ldmatrix_x4(unsigned *r, const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(mt_smem_addr(p)));
}
__device__ __forceinline__ void mt_ldmatrix_x4_trans(unsigned *r,
                                                     const void *p) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(mt_smem_addr(p)));
}
__device__ __forceinline__ void mt_mma(float *d, const unsigned *a,
                                       const unsigned *b) {
  // Not volatile: registers only, so the compiler may overlap the next
  // fragments' ldmatrix with these MMAs.
  asm("mma.sync.aligned.m16n8k16.row.col.f32." MMA_TYPE "." MMA_TYPE
               ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]));
}

)";

/// Tensor-core main loop: cp.async multi-stage copy into padded shared
/// memory, ldmatrix into fragments, mma.sync m16n8k16 with fp32 accumulators.
static const char *const TensorCoreDefines =
    R"(
#define THREADS (WARPS_M * WARPS_N * 32)
#define WM (BM / WARPS_M) // warp tile rows
#define WN (BN / WARPS_N) // warp tile columns
#define MT (WM / 16)      // m16 fragments per warp
#define NT (WN / 8)       // n8 fragments per warp
#define AS (BK + 8)       // A row stride in shared memory (padded: no bank conflicts)
#define BS (BN + 8)       // B row stride in shared memory

)";

/// The copy of one k-tile of A and B into shared memory (after MmaHelpers).
static const char *const TensorCoreLoadTile =
    R"(// Copies k-tile kt of A (BM x BK) and B (BK x BN) into stage `stage`.
__device__ __forceinline__ void mt_load_tile(unsigned short *sA,
                                             unsigned short *sB,
                                             const unsigned short *A,
                                             const unsigned short *B,
                                             long long m0, long long n0,
                                             int stage, int kt) {
  const int tid = threadIdx.x;
  const long long k0 = (long long)kt * BK;
  unsigned short *a = sA + stage * (BM * AS);
  unsigned short *b = sB + stage * (BK * BS);
#define A_RPP (THREADS / (BK / 8)) // rows of A copied per pass
#define B_RPP (THREADS / (BN / 8)) // rows of B copied per pass
#if ALIGNED8 && (THREADS % (BK / 8)) == 0 && (THREADS % (BN / 8)) == 0
  // Each thread copies the same 16-byte column in every pass: only its base
  // addresses depend on run-time values; bounds checks fold away when the
  // shape is a tile multiple.
  const int a_row = tid / (BK / 8), a_col = (tid % (BK / 8)) * 8;
  const unsigned short *ga = A + (m0 + a_row) * K_ + k0 + a_col;
  unsigned short *sa = a + a_row * AS + a_col;
  #pragma unroll
  for (int p = 0; p < (BM + A_RPP - 1) / A_RPP; ++p) {
    const int row = a_row + p * A_RPP;
    if (BM % A_RPP == 0 || row < BM) {
      const bool ok = (M_ % BM == 0 || m0 + row < M_) &&
                      (K_ % BK == 0 || k0 + a_col < K_);
      mt_cp_async16(sa + p * A_RPP * AS, ok ? ga + p * A_RPP * K_ : A,
                    ok ? 16 : 0);
    }
  }
  const int b_row = tid / (BN / 8), b_col = (tid % (BN / 8)) * 8;
  const unsigned short *gb = B + (k0 + b_row) * N_ + n0 + b_col;
  unsigned short *sb = b + b_row * BS + b_col;
  #pragma unroll
  for (int p = 0; p < (BK + B_RPP - 1) / B_RPP; ++p) {
    const int row = b_row + p * B_RPP;
    if (BK % B_RPP == 0 || row < BK) {
      const bool ok = (K_ % BK == 0 || k0 + row < K_) &&
                      (N_ % BN == 0 || n0 + b_col < N_);
      mt_cp_async16(sb + p * B_RPP * BS, ok ? gb + p * B_RPP * N_ : B,
                    ok ? 16 : 0);
    }
  }
#elif ALIGNED8
  #pragma unroll
  for (int ch = tid; ch < BM * BK / 8; ch += THREADS) {
    const int row = ch / (BK / 8), kc = (ch % (BK / 8)) * 8;
    const long long gm = m0 + row, gk = k0 + kc;
    const bool ok = gm < M_ && gk < K_;
    mt_cp_async16(a + row * AS + kc, ok ? A + gm * K_ + gk : A, ok ? 16 : 0);
  }
  #pragma unroll
  for (int ch = tid; ch < BK * BN / 8; ch += THREADS) {
    const int row = ch / (BN / 8), nc = (ch % (BN / 8)) * 8;
    const long long gk = k0 + row, gn = n0 + nc;
    const bool ok = gk < K_ && gn < N_;
    mt_cp_async16(b + row * BS + nc, ok ? B + gk * N_ + gn : B, ok ? 16 : 0);
  }
#else
  // Rows not 16-byte aligned: element-wise predicated copies.
  for (int e = tid; e < BM * BK; e += THREADS) {
    const int row = e / BK, kk = e % BK;
    const long long gm = m0 + row, gk = k0 + kk;
    a[row * AS + kk] = (gm < M_ && gk < K_) ? A[gm * K_ + gk] : (unsigned short)0;
  }
  for (int e = tid; e < BK * BN; e += THREADS) {
    const int row = e / BN, nn = e % BN;
    const long long gk = k0 + row, gn = n0 + nn;
    b[row * BS + nn] = (gk < K_ && gn < N_) ? B[gk * N_ + gn] : (unsigned short)0;
  }
#endif
}

)";

const char *const codegen::MmaSyncAccumulators = R"(  float acc[MT][NT][4];
  #pragma unroll
  for (int mt = 0; mt < MT; ++mt)
    #pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      #pragma unroll
      for (int i = 0; i < 4; ++i)
        acc[mt][nt][i] = 0.f;
  // This CTA's k-tiles: [kt0, kt0 + KT) of the KT_ALL of the row.
  const int KT_ALL = (int)((K_ + BK - 1) / BK);
  const int KT_SPLIT = (KT_ALL + SPLITK - 1) / SPLITK;
  const int kt0 = split * KT_SPLIT;
  const int KT = max(0, min(KT_ALL - kt0, KT_SPLIT));
)";

const char *const codegen::MmaSyncTileLoop = R"(  #pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT)
      mt_load_tile(sA, sB, A, B, m0, n0, s, kt0 + s);
    mt_cp_async_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    MT_CP_ASYNC_WAIT(STAGES - 2); // tile kt has landed
    __syncthreads();              // and everyone is done with tile kt-1
    const int next = kt + STAGES - 1;
    if (next < KT)
      mt_load_tile(sA, sB, A, B, m0, n0, next % STAGES, kt0 + next);
    mt_cp_async_commit();
#if PROLOGUE
    // The norm's weight on the landed A tile (A is x), before the MMA.
    pl_scale_tile(sA + (kt % STAGES) * (BM * AS), kt0 + kt, W);
    __syncthreads();
#endif
    const unsigned short *a = sA + (kt % STAGES) * (BM * AS);
    const unsigned short *b = sB + (kt % STAGES) * (BK * BS);
)";

const char *const codegen::MmaSyncTileAccMacro = R"(
#define FOR_EACH_TILE_ACC(STMT)                                                \
  _Pragma("unroll") for (int mt = 0; mt < MT; ++mt)                            \
  _Pragma("unroll") for (int nt = 0; nt < NT; ++nt)                            \
  _Pragma("unroll") for (int i = 0; i < 4; ++i) {                              \
    const int e = (wm * WM + mt * 16 + (lane >> 2) + ((i & 2) ? 8 : 0)) * BN + \
                  wn * WN + nt * 8 + (lane & 3) * 2 + (i & 1);                 \
    float &v = acc[mt][nt][i];                                                 \
    STMT                                                                       \
  }
)";

std::string codegen::mmaSyncTileStore(llvm::StringRef Out,
                                      llvm::StringRef Store) {
  return (R"(  // Accumulator (mt, nt, i) sits at row wm*WM + mt*16 + lane/4 + 8*(i/2),
  // column wn*WN + nt*8 + 2*(lane%4) + i%2 of the tile.
  #pragma unroll
  for (int mt = 0; mt < MT; ++mt)
    #pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      #pragma unroll
      for (int i = 0; i < 4; ++i) {
        const long long r = m0 + wm * WM + mt * 16 + (lane >> 2) + ((i & 2) ? 8 : 0);
        const long long c = n0 + wn * WN + nt * 8 + (lane & 3) * 2 + (i & 1);
        if (r < M_ && c < N_)
          )" +
          Out + "[r * N_ + c] = " + Store + R"((acc[mt][nt][i]);
      }
}
)")
      .str();
}

const char *const codegen::MmaSyncKStep = R"(    #pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned af[MT][4], bf[NT][2];
      #pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        mt_ldmatrix_x4(af[mt], a + (wm * WM + mt * 16 + (lane & 15)) * AS +
                                   kk + (lane >> 4) * 8);
      #pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        unsigned t[4];
        mt_ldmatrix_x4_trans(t, b + (kk + (lane & 15)) * BS + wn * WN +
                                    np * 16 + (lane >> 4) * 8);
        bf[2 * np][0] = t[0];
        bf[2 * np][1] = t[1];
        bf[2 * np + 1][0] = t[2];
        bf[2 * np + 1][1] = t[3];
      }
      #pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        #pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          mt_mma(acc[mt][nt], af[mt], bf[nt]);
    }
  }
  MT_CP_ASYNC_WAIT(0);
)";

void codegen::emitTensorCoreMainLoop(llvm::raw_ostream &OS) {
  OS << TensorCoreDefines << MmaHelpers << TensorCoreLoadTile;
}

void codegen::setGemmGrid(KernelSource &K, const GemmTileConfig &T, int64_t M,
                          int64_t N, int64_t Batch, int Split) {
  K.GridX = unsigned((N + T.BN - 1) / T.BN);
  K.GridY = unsigned((M + T.BM - 1) / T.BM);
  K.GridZ = unsigned(Batch * Split);
  if (T.Persistent) {
    // Every tile along x (a cluster's CTAs take the tiles side by side down
    // M): the launcher starts at most one CTA per SM.
    unsigned C = std::max(1, T.Cluster);
    K.GridX = K.GridX * ((K.GridY + C - 1) / C) * K.GridZ * C;
    K.GridY = K.GridZ = 1;
    K.Persistent = true;
  }
}

void codegen::emitGroupedRaster(llvm::raw_ostream &OS) {
  OS << "  // Grouped raster: GROUP_M consecutive CTAs walk down a column of\n"
     << "  // tiles, so the B tiles they share stay in L2.\n"
     << "  const int tiles_n = gridDim.x, tiles_m = gridDim.y, GROUP_M = "
     << GroupedRasterRows << ";\n"
     << "  const int pid = blockIdx.y * tiles_n + blockIdx.x;\n"
     << "  const int first_m = (pid / (GROUP_M * tiles_n)) * GROUP_M;\n"
     << "  const int group_m = min(tiles_m - first_m, GROUP_M);\n"
     << "  const int in_group = pid % (GROUP_M * tiles_n);\n"
     << "  const long long m0 = (long long)(first_m + in_group % group_m) * "
        "BM;\n"
     << "  const long long n0 = (long long)(in_group / group_m) * BN;\n";
}

void codegen::emitSplitKReduce(llvm::raw_ostream &OS,
                               const EpilogueThreads &T) {
  OS << R"(#if SPLITK > 1
  // Each slice writes its fp32 partial tile to the workspace; the last of
  // the tile's SPLITK CTAs to finish (a counter per tile, left at zero
  // again for the next launch) adds the partials in slice order, so the
  // sum does not depend on which finished last, and runs the epilogue.
  {
    const long long tile =
        ((long long)blockIdx.z / SPLITK * gridDim.y + blockIdx.y) * gridDim.x +
        blockIdx.x;
    float *part = mt_ws + (tile * SPLITK + split) * (BM * BN);
    FOR_EACH_TILE_ACC({ part[e] = v; });
    __threadfence();
    )"
     << T.Sync << R"(;
    __shared__ int mt_last;
    unsigned *count =
        (unsigned *)(mt_ws + (long long)gridDim.x * gridDim.y * gridDim.z *
                                 (BM * BN)) +
        tile;
    if ()"
     << T.Tid << R"( == 0) {
      mt_last = atomicAdd(count, 1u) == SPLITK - 1;
      if (mt_last)
        *count = 0;
    }
    )"
     << T.Sync << R"(;
    if (!mt_last)
      return;
    __threadfence();
    const volatile float *parts = mt_ws + tile * SPLITK * (BM * BN);
    FOR_EACH_TILE_ACC({
      // The own partial from a scalar: selecting the accumulator by a
      // run-time slice index would put the array on the stack.
      const float own = v;
      float s = 0.f;
      _Pragma("unroll") for (int z = 0; z < SPLITK; ++z)
        s += z == split ? own : parts[z * (BM * BN) + e];
      v = s;
    });
  }
#endif
)";
}

/// Picks WARPS_M x WARPS_N for a tile: warp tiles of at least 16x16, as
/// square as possible.
bool codegen::warpLayout(const GemmTileConfig &T, int &WarpsM, int &WarpsN) {
  int Best = -1;
  for (int Wm = 1; Wm <= T.Warps; Wm *= 2) {
    if (T.Warps % Wm)
      continue;
    int Wn = T.Warps / Wm;
    if (T.BM % (16 * Wm) || T.BN % (16 * Wn))
      continue;
    int Diff = std::abs(T.BM / Wm - T.BN / Wn);
    if (Best < 0 || Diff < Best || (Diff == Best && Wm > WarpsM)) {
      Best = Diff;
      WarpsM = Wm;
      WarpsN = Wn;
    }
  }
  return Best >= 0;
}

static llvm::Expected<KernelSource>
generateGemmKernelText(const MultiTemplateBufferNode &N,
                       const GemmTileConfig &T, bool Fused, int64_t MArg) {
  bool Fp8 = N.getNumOperands() == 4;
  if (N.getOp() != OpCode::MatMul || (N.getNumOperands() != 2 && !Fp8))
    return err("'%" + N.getName() + "' is not a matmul");
  const Value *AV = N.getOperand(0), *BV = N.getOperand(1);
  const TensorType &A = AV->getType(), &B = BV->getType();
  DType Dt = A.Dtype;
  if (Fp8 ? !isFp8DType(A.Dtype) || !isFp8DType(B.Dtype)
          : B.Dtype != Dt ||
                !(Dt == DType::BF16 || Dt == DType::F16 || Dt == DType::F32))
    return err("the GEMM template needs bf16, f16 or f32 operands, or fp8 "
               "ones with their scales, got " +
               dtypeName(A.Dtype) + " and " + dtypeName(B.Dtype));
  if (Fp8 && T.Template != GemmTemplate::MmaSync)
    return err("tile " + gemmChoiceName(T) +
               " cannot take fp8 operands: only the mma.sync template widens "
               "them");
  if (T.BM <= 0 || T.BN <= 0 || T.BK <= 0 || T.Warps <= 0 || T.Stages <= 0)
    return err("tile sizes must be positive");
  int64_t Kd = A.innerDim(), Nn = B.innerDim();
  int64_t Batch = 1, M = rowsOf(A);
  bool BatchedB = B.rank() > 2;
  if (BatchedB) {
    M = A.Shape[A.rank() - 2];
    Batch = rowsOf(A) / M;
  }
  bool Resized = false;
  if (MArg > 0 && MArg != M * Batch) {
    if (BatchedB)
      return err("size hints are not supported for batched matmuls");
    M = MArg;
    Resized = true;
  }
  int64_t Rows = M * Batch;
  ParamList P;
  P.Inputs.insert(AV);
  P.Inputs.insert(BV);
  if (Fp8) {
    P.Inputs.insert(N.getOperand(2));
    P.Inputs.insert(N.getOperand(3));
  }
  llvm::Expected<EpilogueCode> Epi =
      buildEpilogue(N, Fused, P, Rows, Nn, Resized);
  if (!Epi)
    return Epi.takeError();
  bool RowScales = Fp8 && (N.getOperand(2)->getType().numElements() != 1 ||
                           N.getOperand(3)->getType().numElements() != 1);
  if (Fp8 && !RowScales)
    // Before the epilogue: the per-tensor scales (mt_ab_scale, read once
    // per thread at the start of the kernel).
    Epi->Pre = "        v = v * mt_ab_scale; // scales %" +
               N.getOperand(2)->getName() + " * %" +
               N.getOperand(3)->getName() + "\n" + Epi->Pre;
  else if (Fp8)
    // Rowwise: A's scale of the row, B's of the column (2-D operands, so
    // r and c index them directly).
    Epi->Pre = "        v = v * " + P.name(N.getOperand(2)) +
               (N.getOperand(2)->getType().numElements() != 1 ? "[r]" : "[0]") +
               " * " + P.name(N.getOperand(3)) +
               (N.getOperand(3)->getType().numElements() != 1 ? "[c]" : "[0]") +
               "; // scales %" + N.getOperand(2)->getName() + " * %" +
               N.getOperand(3)->getName() + "\n" + Epi->Pre;
  if (Epi->RowNode && Nn > T.BN)
    return err("a row reduction needs the whole row in one CTA, but N = " +
               llvm::Twine(Nn) + " > BN = " + llvm::Twine(T.BN));
  P.Outputs.push_back(Epi->Result);
  DType OutType = Epi->Result->getType().Dtype;

  KernelSource K;
  K.Name = sanitizeIdentifier(N.getName() + "_" + gemmChoiceName(T) +
                              (Fused ? "_fused" : ""));
  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << Prelude << "\n// GEMM %" << N.getName() << ": [" << Rows << " x " << Kd
     << "] * [" << Kd << " x " << Nn << "]"
     << (Batch > 1 ? " batch " + std::to_string(Batch) : std::string())
     << ", tile " << gemmChoiceName(T) << (Fused ? ", epilogue fused" : "")
     << "\n";
  OS << "#define M_ " << M << "LL\n#define N_ " << Nn << "LL\n#define K_ " << Kd
     << "LL\n#define ROWS " << Rows << "LL // M_ * batch\n#define BM " << T.BM
     << "\n#define BN " << T.BN << "\n#define BK " << T.BK << "\n";
  std::string AName = P.name(AV), BName = P.name(BV);
  std::string OutName = P.name(Epi->Result) + "_out";
  bool TensorCores = Dt != DType::F32;
  if (T.SplitK > 1 && !TensorCores)
    return err("split-K tile " + gemmChoiceName(T) +
               " needs bf16, f16 or fp8 operands");
  int Split = std::max(1, T.SplitK);
  if (T.Template == GemmTemplate::Wgmma) {
    GemmSetup Setup{T,  M,  Nn,    Kd,      Batch,  BatchedB,
                    Dt, &P, &*Epi, OutName, OutType};
    if (llvm::Error E = emitWgmmaGemm(OS, K, Setup))
      return std::move(E);
  } else if (TensorCores) {
    int WarpsM = 0, WarpsN = 0;
    if (T.BK % 16 || !warpLayout(T, WarpsM, WarpsN))
      return err("tile " + gemmChoiceName(T) +
                 " does not split into 16x16 warp tiles with " +
                 llvm::Twine(T.Warps) + " warps");
    // fp8 widens tile kt + 1 while tile kt + STAGES - 1 is copied: three
    // raw stages at least.
    int Stages = std::max(Fp8 ? 3 : 2, T.Stages);
    bool Aligned = Kd % 8 == 0 && Nn % 8 == 0;
    // 16-bit operands: STAGES padded tiles. fp8: two padded f16 tiles plus
    // STAGES raw ones.
    int64_t Padded =
        (int64_t(T.BM) * (T.BK + 8) + int64_t(T.BK) * (T.BN + 8)) * 2;
    int64_t Smem = Fp8 ? 2 * Padded + int64_t(Stages) * (int64_t(T.BM) * T.BK +
                                                         int64_t(T.BK) * T.BN)
                       : Stages * Padded;
    Smem = std::max<int64_t>(Smem, int64_t(T.BM) * 8);
    if (Fp8 && T.BN % 16)
      return err("tile " + gemmChoiceName(T) +
                 " cannot take fp8 operands: BN must be a multiple of 16");
    OS << "#define WARPS_M " << WarpsM << "\n#define WARPS_N " << WarpsN
       << "\n#define STAGES " << Stages << "\n#define ALIGNED8 "
       << (Aligned ? 1 : 0) << " // K and N multiples of 8: 16-byte copies\n"
       << "#define MMA_TYPE \"" << (Dt == DType::BF16 ? "bf16" : "f16")
       << "\"\n#define SPLITK " << Split
       << " // CTAs per output tile, each over a slice of K\n"
       << "#define FP8 " << (Fp8 ? 1 : 0) << "\n";
    if (Fp8)
      OS << "#define ALIGNED16 " << (Kd % 16 == 0 && Nn % 16 == 0 ? 1 : 0)
         << " // K and N multiples of 16: 16-byte fp8 copies\n"
         << "#define MT_WIDEN_A mt_widen4_" << dtypeName(A.Dtype)
         << "\n#define MT_WIDEN_B mt_widen4_" << dtypeName(B.Dtype) << "\n";
    emitTensorCoreMainLoop(OS);
    OS << Fp8TileCopy;
    OS << R"(
// Accumulator (mt, nt, i) of this thread sits at row
// wm*WM + mt*16 + lane/4 + 8*(i/2), column wn*WN + nt*8 + 2*(lane%4) + i%2.
#define FOR_EACH_ACC(STMT)                                                     \
  _Pragma("unroll") for (int mt = 0; mt < MT; ++mt)                            \
  _Pragma("unroll") for (int nt = 0; nt < NT; ++nt)                            \
  _Pragma("unroll") for (int i = 0; i < 4; ++i) {                              \
    const int rl = wm * WM + mt * 16 + (lane >> 2) + ((i & 2) ? 8 : 0);        \
    const long long r = bz * M_ + m0 + rl;                                     \
    const long long c = n0 + wn * WN + nt * 8 + (lane & 3) * 2 + (i & 1);      \
    float &v = acc[mt][nt][i];                                                 \
    (void)rl; (void)r; (void)c; (void)v;                                       \
    if (m0 + rl < M_) STMT                                                     \
  }
// Row slot h = mt*2 + (i/2) of this thread is row rl below.
#define ROW_SLOTS (MT * 2)
#define ROW_SLOT (mt * 2 + (i >> 1))
#define FOR_EACH_ROW_SLOT(STMT)                                                \
  _Pragma("unroll") for (int h = 0; h < ROW_SLOTS; ++h) {                      \
    const int rl = wm * WM + (h >> 1) * 16 + (lane >> 2) + (h & 1) * 8;        \
    STMT                                                                       \
  }

)";
    // FOR_EACH_TILE_ACC: every accumulator, in range or not, with e its
    // element of the BM x BN tile (split-K partials), as the horizontal
    // and prologue tiles have it.
    OS << MmaSyncTileAccMacro << "\n";
    OS << "extern \"C\" __global__ void __launch_bounds__(THREADS) " << K.Name
       << "(" << P.signature()
       << (Split > 1 ? ", float *__restrict__ mt_ws" : "") << ") {\n"
       << "  extern __shared__ __align__(16) unsigned char mt_smem[];\n"
       << "  unsigned short *sA = (unsigned short *)mt_smem;\n"
       << "#if FP8\n"
       << "  // Two f16 tiles (A then B each), then the raw stages.\n"
       << "  unsigned short *sB = sA + BM * AS;\n"
       << "  unsigned char *rA = (unsigned char *)(sA + 2 * (BM * AS + BK * "
          "BS));\n"
       << "  unsigned char *rB = rA + STAGES * BM * BK;\n"
       << "#else\n"
       << "  unsigned short *sB = sA + STAGES * BM * AS;\n"
       << "#endif\n"
       << "  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n"
       << "  const int wm = warp / WARPS_N, wn = warp % WARPS_N;\n"
       << "  // blockIdx.z: the batch, then the slice of K (SPLITK per "
          "batch).\n"
       << "  const long long bz = blockIdx.z / SPLITK;\n"
       << "  const int split = blockIdx.z % SPLITK;\n"
       << "  (void)split;\n";
    emitGroupedRaster(OS);
    OS << "  const mt_operand *A = (const mt_operand *)" << AName
       << " + bz * M_ * K_;\n"
       << "  const mt_operand *B = (const mt_operand *)" << BName
       << (BatchedB ? " + bz * K_ * N_;\n" : ";\n");
    if (Fp8 && !RowScales)
      OS << "  const float mt_ab_scale = " << P.name(N.getOperand(2))
         << "[0] * " << P.name(N.getOperand(3)) << "[0];\n";
    OS << MmaSyncAccumulators << R"(  // Prologue: STAGES-1 tiles in flight.
  #pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT)
      MT_LOAD(s, kt0 + s);
    mt_cp_async_commit();
  }
#if FP8
  // Raw tile 0 widened before the loop; iteration kt widens tile kt + 1
  // into the other f16 tile while its MMAs read tile kt.
  MT_CP_ASYNC_WAIT(STAGES - 2);
  __syncthreads();
  if (KT > 0)
    mt_widen_tile8(sA, sB, rA, rB, 0);
#endif
  for (int kt = 0; kt < KT; ++kt) {
#if FP8
    MT_CP_ASYNC_WAIT(STAGES - 3); // raw tile kt + 1 has landed
#else
    MT_CP_ASYNC_WAIT(STAGES - 2); // tile kt has landed
#endif
    __syncthreads();              // and everyone is done with tile kt-1
    const int next = kt + STAGES - 1;
    if (next < KT)
      MT_LOAD(next % STAGES, kt0 + next);
    mt_cp_async_commit();
#if FP8
    const unsigned short *a = sA + (kt & 1) * (BM * AS + BK * BS);
    const unsigned short *b = a + BM * AS;
    if (kt + 1 < KT)
      mt_widen_tile8(sA + ((kt + 1) & 1) * (BM * AS + BK * BS),
                     sA + ((kt + 1) & 1) * (BM * AS + BK * BS) + BM * AS, rA,
                     rB, (kt + 1) % STAGES);
#else
    const unsigned short *a = sA + (kt % STAGES) * (BM * AS);
    const unsigned short *b = sB + (kt % STAGES) * (BK * BS);
#endif
)" << MmaSyncKStep;
    EpilogueThreads Threads;
    Threads.QuadRowSums = true;
    emitSplitKReduce(OS, Threads);
    emitEpilogueTail(OS, *Epi, OutName, OutType, Threads);
    OS << "}\n";
    K.BlockX = WarpsM * WarpsN * 32;
    K.SharedBytes = unsigned(Smem);
  } else {
    // fp32: CUDA cores, one shared-memory stage; thread t owns outputs
    // t, t + THREADS, ... of the BM x BN tile.
    int Threads = T.Warps * 32;
    if ((T.BM * T.BN) % Threads)
      return err("tile " + gemmChoiceName(T) + " does not split over " +
                 llvm::Twine(Threads) + " threads");
    int64_t Smem = (int64_t(T.BM) * (T.BK + 1) + int64_t(T.BK) * T.BN) * 4;
    Smem = std::max<int64_t>(Smem, int64_t(T.BM) * 8);
    OS << "#define THREADS " << Threads << "\n#define PER_THREAD "
       << (T.BM * T.BN / Threads) << "\n"
       << R"(
#define FOR_EACH_ACC(STMT)                                                     \
  _Pragma("unroll") for (int e = 0; e < PER_THREAD; ++e) {                     \
    const int rl = (threadIdx.x + e * THREADS) / BN;                           \
    const long long r = bz * M_ + m0 + rl;                                     \
    const long long c = n0 + (threadIdx.x + e * THREADS) % BN;                 \
    float &v = acc[e];                                                         \
    (void)rl; (void)r; (void)c; (void)v;                                       \
    if (m0 + rl < M_) STMT                                                     \
  }

)";
    OS << "extern \"C\" __global__ void __launch_bounds__(THREADS) " << K.Name
       << "(" << P.signature() << ") {\n"
       << "  extern __shared__ __align__(16) unsigned char mt_smem[];\n"
       << "  float *sA = (float *)mt_smem;          // BM x (BK + 1)\n"
       << "  float *sB = sA + BM * (BK + 1);         // BK x BN\n"
       << "  const long long bz = blockIdx.z;\n"
       << "  const long long m0 = (long long)blockIdx.y * BM;\n"
       << "  const long long n0 = (long long)blockIdx.x * BN;\n"
       << "  const float *A = " << AName << " + bz * M_ * K_;\n"
       << "  const float *B = " << BName
       << (BatchedB ? " + bz * K_ * N_;\n" : ";\n")
       << R"(  float acc[PER_THREAD];
  #pragma unroll
  for (int e = 0; e < PER_THREAD; ++e)
    acc[e] = 0.f;
  for (long long k0 = 0; k0 < K_; k0 += BK) {
    __syncthreads();
    for (int e = threadIdx.x; e < BM * BK; e += THREADS) {
      const int row = e / BK, kk = e % BK;
      const long long gm = m0 + row, gk = k0 + kk;
      sA[row * (BK + 1) + kk] = (gm < M_ && gk < K_) ? A[gm * K_ + gk] : 0.f;
    }
    for (int e = threadIdx.x; e < BK * BN; e += THREADS) {
      const int row = e / BN, nn = e % BN;
      const long long gk = k0 + row, gn = n0 + nn;
      sB[row * BN + nn] = (gk < K_ && gn < N_) ? B[gk * N_ + gn] : 0.f;
    }
    __syncthreads();
    #pragma unroll 4
    for (int kk = 0; kk < BK; ++kk)
      #pragma unroll
      for (int e = 0; e < PER_THREAD; ++e) {
        const int idx = threadIdx.x + e * THREADS;
        acc[e] += sA[(idx / BN) * (BK + 1) + kk] * sB[kk * BN + idx % BN];
      }
  }
)";
    emitEpilogueTail(OS, *Epi, OutName, OutType);
    OS << "}\n";
    K.BlockX = Threads;
    K.SharedBytes = unsigned(Smem);
  }
  K.Source = OS.str();
  K.Inputs.assign(P.Inputs.begin(), P.Inputs.end());
  K.Outputs = P.Outputs;
  setGemmGrid(K, T, M, Nn, Batch, Split);
  if (Split > 1)
    // Per CTA its fp32 partial tile, per output tile a counter.
    K.WorkspaceBytes = uint64_t(K.GridX) * K.GridY * K.GridZ * T.BM * T.BN * 4 +
                       uint64_t(K.GridX) * K.GridY * Batch * 4;
  return K;
}

llvm::Expected<KernelSource>
mtsched::generateGemmKernel(const MultiTemplateBufferNode &N,
                            const GemmTileConfig &T, bool Fused, int64_t MArg) {
  return withProgrammaticWait(generateGemmKernelText(N, T, Fused, MArg),
                              gemmFlops(N, MArg));
}
