//===- SwiGluGemm.cpp - The merged gate+up GEMM of SwiGLU -----------------===//
//
// One mma.sync kernel for `%gu = swiglu(%h, %wg, %wu)`: the main loop of the
// GEMM template with a second B operand. Each stage holds the A tile and
// the BK x BN tiles of wg and wu for the CTA's columns; every warp keeps two
// accumulator sets (gate and up) for the same output elements, and the
// epilogue writes silu(g) * u through the shared GEMM epilogue tail. The
// weights are the logical concatenation [wg | wu]: nothing is copied.
//
//===----------------------------------------------------------------------===//
#include "GemmCodegen.h"

using namespace mtsched;
using namespace mtsched::codegen;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

/// Copies k-tile kt of the up weights into its own stage buffers; the A
/// tile and the gate weights go through mt_load_tile.
static const char *UpTileLoad = R"(
// Copies k-tile kt of the up weights (BK x BN) into stage `stage` of sU.
__device__ __forceinline__ void sw_load_up(unsigned short *sU,
                                           const unsigned short *Bu,
                                           long long n0, int stage, int kt) {
  const int tid = threadIdx.x;
  const long long k0 = (long long)kt * BK;
  unsigned short *b = sU + stage * (BK * BS);
#if ALIGNED8
  #pragma unroll
  for (int ch = tid; ch < BK * BN / 8; ch += THREADS) {
    const int row = ch / (BN / 8), nc = (ch % (BN / 8)) * 8;
    const long long gk = k0 + row, gn = n0 + nc;
    const bool ok = (K_ % BK == 0 || gk < K_) && (N_ % BN == 0 || gn < N_);
    mt_cp_async16(b + row * BS + nc, ok ? Bu + gk * N_ + gn : Bu, ok ? 16 : 0);
  }
#else
  for (int e = tid; e < BK * BN; e += THREADS) {
    const int row = e / BN, nn = e % BN;
    const long long gk = k0 + row, gn = n0 + nn;
    b[row * BS + nn] = (gk < K_ && gn < N_) ? Bu[gk * N_ + gn] : (unsigned short)0;
  }
#endif
}

// Accumulator (mt, nt, i) of this thread sits at row
// wm*WM + mt*16 + lane/4 + 8*(i/2), column wn*WN + nt*8 + 2*(lane%4) + i%2.
#define FOR_EACH_ACC(STMT)                                                     \
  _Pragma("unroll") for (int mt = 0; mt < MT; ++mt)                            \
  _Pragma("unroll") for (int nt = 0; nt < NT; ++nt)                            \
  _Pragma("unroll") for (int i = 0; i < 4; ++i) {                              \
    const int rl = wm * WM + mt * 16 + (lane >> 2) + ((i & 2) ? 8 : 0);        \
    const long long r = m0 + rl;                                               \
    const long long c = n0 + wn * WN + nt * 8 + (lane & 3) * 2 + (i & 1);      \
    float &v = acc[mt][nt][i];                                                 \
    (void)rl; (void)r; (void)c; (void)v;                                       \
    if (m0 + rl < M_) STMT                                                     \
  }
#define ROW_SLOTS (MT * 2)
#define ROW_SLOT (mt * 2 + (i >> 1))
#define FOR_EACH_ROW_SLOT(STMT)                                                \
  _Pragma("unroll") for (int h = 0; h < ROW_SLOTS; ++h) {                      \
    const int rl = wm * WM + (h >> 1) * 16 + (lane >> 2) + (h & 1) * 8;        \
    STMT                                                                       \
  }
)";

/// The kernel body after the signature: both main loops share A's
/// fragments; the gate's accumulators become the output.
static const char *SwiGluBody = R"(  float acc[MT][NT][4], up[MT][NT][4];
  #pragma unroll
  for (int mt = 0; mt < MT; ++mt)
    #pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      #pragma unroll
      for (int i = 0; i < 4; ++i)
        acc[mt][nt][i] = up[mt][nt][i] = 0.f;
  const int KT = (int)((K_ + BK - 1) / BK);
  // Prologue: STAGES-1 tiles in flight.
  #pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) {
      mt_load_tile(sA, sG, A, Bg, m0, n0, s, s);
      sw_load_up(sU, Bu, n0, s, s);
    }
    mt_cp_async_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    MT_CP_ASYNC_WAIT(STAGES - 2); // tile kt has landed
    __syncthreads();              // and everyone is done with tile kt-1
    const int next = kt + STAGES - 1;
    if (next < KT) {
      mt_load_tile(sA, sG, A, Bg, m0, n0, next % STAGES, next);
      sw_load_up(sU, Bu, n0, next % STAGES, next);
    }
    mt_cp_async_commit();
#if PROLOGUE
    // The norm's weight on the landed A tile (A is x), before the MMA.
    pl_scale_tile(sA + (kt % STAGES) * (BM * AS), kt, W);
    __syncthreads();
#endif
    const unsigned short *a = sA + (kt % STAGES) * (BM * AS);
    const unsigned short *bg = sG + (kt % STAGES) * (BK * BS);
    const unsigned short *bu = sU + (kt % STAGES) * (BK * BS);
    #pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned af[MT][4], gf[NT][2], uf[NT][2];
      #pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        mt_ldmatrix_x4(af[mt], a + (wm * WM + mt * 16 + (lane & 15)) * AS +
                                   kk + (lane >> 4) * 8);
      #pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        const int off = (kk + (lane & 15)) * BS + wn * WN + np * 16 +
                        (lane >> 4) * 8;
        unsigned t[4];
        mt_ldmatrix_x4_trans(t, bg + off);
        gf[2 * np][0] = t[0];
        gf[2 * np][1] = t[1];
        gf[2 * np + 1][0] = t[2];
        gf[2 * np + 1][1] = t[3];
        mt_ldmatrix_x4_trans(t, bu + off);
        uf[2 * np][0] = t[0];
        uf[2 * np][1] = t[1];
        uf[2 * np + 1][0] = t[2];
        uf[2 * np + 1][1] = t[3];
      }
      #pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        #pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          mt_mma(acc[mt][nt], af[mt], gf[nt]);
          mt_mma(up[mt][nt], af[mt], uf[nt]);
        }
    }
  }
  MT_CP_ASYNC_WAIT(0);
#if PROLOGUE
  // 1/rms per row on both accumulators, before silu (not linear).
  #pragma unroll
  for (int mt = 0; mt < MT; ++mt)
    #pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      #pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float s = pl_inv[wm * WM + mt * 16 + (lane >> 2) + ((i & 2) ? 8 : 0)];
        acc[mt][nt][i] *= s;
        up[mt][nt][i] *= s;
      }
#endif
  // silu(g) * u, in registers: the only columns written are the N outputs.
  #pragma unroll
  for (int mt = 0; mt < MT; ++mt)
    #pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      #pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float g = acc[mt][nt][i];
        acc[mt][nt][i] = g / (1.f + expf(-g)) * up[mt][nt][i];
      }
)";

llvm::Expected<KernelSource>
mtsched::generateSwiGluKernel(const MultiTemplateBufferNode &N,
                              const GemmTileConfig &T, int64_t MArg,
                              const Node *Norm) {
  if (N.getOp() != OpCode::SwiGlu || N.getNumOperands() != 3)
    return err("'%" + N.getName() + "' is not a swiglu");
  const Value *HV = N.getOperand(0), *GV = N.getOperand(1),
              *UV = N.getOperand(2);
  const TensorType &H = HV->getType(), &Wg = GV->getType();
  DType Dt = H.Dtype;
  // The GEMM reads the norm's x and w instead of its result.
  if (Norm)
    if (llvm::Error E =
            checkPrologueNorm(*Norm, HV, "'%" + N.getName() + "''s input"))
      return std::move(E);
  if (!(Dt == DType::BF16 || Dt == DType::F16) || Wg.Dtype != Dt ||
      UV->getType().Dtype != Dt)
    return err("the merged gate+up GEMM needs bf16 or f16 operands, got " +
               dtypeName(Dt));
  if (Wg.rank() != 2 || UV->getType() != Wg)
    return err("the merged gate+up GEMM needs two equally shaped rank-2 "
               "weights");
  if (T.Template != GemmTemplate::MmaSync)
    return err("the merged gate+up GEMM has an mma.sync template only");
  if (T.BM <= 0 || T.BN <= 0 || T.BK <= 0 || T.Warps <= 0 || T.Stages <= 0)
    return err("tile sizes must be positive");
  int WarpsM = 0, WarpsN = 0;
  if (T.BK % 16 || !warpLayout(T, WarpsM, WarpsN))
    return err("tile " + swigluChoiceName(T) +
               " does not split into 16x16 warp tiles with " +
               llvm::Twine(T.Warps) + " warps");
  int64_t Kd = H.innerDim(), Nn = Wg.Shape[1];
  int64_t M = MArg > 0 ? MArg : rowsOf(H);
  int Stages = std::max(2, T.Stages);
  bool Aligned = Kd % 8 == 0 && Nn % 8 == 0;
  int64_t Smem = int64_t(Stages) *
                 (int64_t(T.BM) * (T.BK + 8) + 2 * int64_t(T.BK) * (T.BN + 8)) *
                 2;

  ParamList P;
  const Value *XV = Norm ? Norm->getOperand(0) : HV;
  P.Inputs.insert(XV);
  if (Norm)
    P.Inputs.insert(Norm->getOperand(1));
  P.Inputs.insert(GV);
  P.Inputs.insert(UV);
  P.Outputs.push_back(N.getResult());
  EpilogueCode E;
  E.P = &P;
  E.Result = N.getResult();

  KernelSource K;
  K.Name = sanitizeIdentifier(N.getName() + "_" + swigluChoiceName(T));
  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << Prelude << "\n// SwiGLU %" << N.getName() << ": silu([" << M << " x "
     << Kd << "] * [" << Kd << " x " << Nn << "]) * ([" << M << " x " << Kd
     << "] * [" << Kd << " x " << Nn << "]), tile " << swigluChoiceName(T)
     << "\n";
  OS << "#define M_ " << M << "LL\n#define N_ " << Nn << "LL\n#define K_ " << Kd
     << "LL\n#define ROWS M_\n#define BM " << T.BM << "\n#define BN " << T.BN
     << "\n#define BK " << T.BK << "\n#define WARPS_M " << WarpsM
     << "\n#define WARPS_N " << WarpsN << "\n#define STAGES " << Stages
     << "\n#define ALIGNED8 " << (Aligned ? 1 : 0)
     << " // K and N multiples of 8: 16-byte copies\n"
     << "#define MMA_TYPE \"" << (Dt == DType::BF16 ? "bf16" : "f16")
     << "\"\n#define PROLOGUE " << (Norm ? 1 : 0) << "\n";
  if (Norm)
    emitPrologueDefines(OS, *Norm);
  emitTensorCoreMainLoop(OS);
  if (Norm)
    OS << PrologueHelpers;
  OS << UpTileLoad;
  OS << "extern \"C\" __global__ void __launch_bounds__(THREADS) " << K.Name
     << "(" << P.signature() << ") {\n"
     << "  extern __shared__ __align__(16) unsigned char mt_smem[];\n"
     << "  unsigned short *sA = (unsigned short *)mt_smem;\n"
     << "  unsigned short *sG = sA + STAGES * BM * AS; // gate weights\n"
     << "  unsigned short *sU = sG + STAGES * BK * BS; // up weights\n"
     << "  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n"
     << "  const int wm = warp / WARPS_N, wn = warp % WARPS_N;\n"
     << "  (void)tid;\n";
  emitGroupedRaster(OS);
  OS << "  const unsigned short *A = (const unsigned short *)" << P.name(XV)
     << ";\n"
     << "  const unsigned short *Bg = (const unsigned short *)" << P.name(GV)
     << ";\n"
     << "  const unsigned short *Bu = (const unsigned short *)" << P.name(UV)
     << ";\n";
  if (Norm)
    // The norm (select-prologue): 1/rms of the CTA's rows of x first.
    OS << "  __shared__ float pl_inv[BM];\n"
       << "  const unsigned short *W = (const unsigned short *)"
       << P.name(Norm->getOperand(1)) << ";\n"
       << "  pl_row_scales(A, m0, pl_inv);\n  __syncthreads();\n";
  OS << SwiGluBody;
  EpilogueThreads Threads;
  Threads.QuadRowSums = true;
  emitEpilogueTail(OS, E, P.name(N.getResult()) + "_out", N.getType().Dtype,
                   Threads);
  OS << "}\n";
  K.Source = OS.str();
  K.Inputs.assign(P.Inputs.begin(), P.Inputs.end());
  K.Outputs = P.Outputs;
  K.GridX = unsigned((Nn + T.BN - 1) / T.BN);
  K.GridY = unsigned((M + T.BM - 1) / T.BM);
  K.BlockX = WarpsM * WarpsN * 32;
  K.SharedBytes = unsigned(Smem);
  return K;
}
