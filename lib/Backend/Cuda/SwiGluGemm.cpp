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

/// Registers of one SM, all of them one CTA's, and the dynamic shared memory
/// one CTA may opt into on sm_90 (227 KB), as in WgmmaGemm.cpp.
static constexpr int RegsPerSM = 65536;
static constexpr int64_t MaxSharedBytes = 227 * 1024;
/// Registers a consumer needs besides its two accumulator sets.
static constexpr int ConsumerOverheadRegs = 40;

/// Four 8x8 matrices of 16-bit elements from shared memory (a 32-bit
/// shared address per lane), as the m16n8k16 A fragment.
static const char *LdsmHelper = R"(
__device__ __forceinline__ void mt_ldsm_x4(unsigned *r, unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr) : "memory");
}
)";

/// One k-tile of a consumer warpgroup, its A fragments in AF: the
/// fragments read from shared memory once for both MMAs (two shared-memory
/// A operands read A twice, and shared memory's bandwidth, which the TMA
/// copies and wgmma share, limited the tile: Llama-3-70B's prefill SwiGLU
/// took 2875 us so on an H200, 2704 from registers), in the m16n8k16
/// layout per warp from the 128-byte swizzled rows; then the gate's and the
/// up's wgmma per k16 step; one k-tile stays in flight and the stage of the one
/// before is freed.
static const char *SwiGluWgKStep = R"(
#define MT_SW_KSTEP(KT_, AF)                                                   \
  {                                                                            \
    const int s = (KT_) % STAGES;                                              \
    mt_mbar_wait(full + 8 * s, ((KT_) / STAGES) & 1);                          \
    const unsigned a = sA + s * A_STAGE + cw * 64 * 128;                       \
    const unsigned g = sG + s * B_STAGE, u = sU + s * B_STAGE;                 \
    _Pragma("unroll") for (int kk = 0; kk < BK / 16; ++kk) {                   \
      const int row = warp * 16 + (lane & 15), chunk = kk * 2 + (lane >> 4);   \
      mt_ldsm_x4(AF[kk], a + row * 128 + ((chunk ^ (row & 7)) << 4));          \
    }                                                                          \
    mt_wgmma_fence();                                                          \
    /* B: the GEMM template's descriptors (WgmmaGemm.cpp). */                  \
    _Pragma("unroll") for (int kk = 0; kk < BK / 16; ++kk) {                   \
      mt_wgmma_ra(acc, AF[kk], mt_desc(g + kk * 2048, B_BOX, 1024));           \
      mt_wgmma_ra(up, AF[kk], mt_desc(u + kk * 2048, B_BOX, 1024));            \
    }                                                                          \
    mt_wgmma_commit();                                                         \
    MT_WGMMA_WAIT(1);                                                          \
    if ((KT_) > 0 && tid % 128 == 0)                                           \
      mt_mbar_arrive(empty + 8 * (((KT_) - 1) % STAGES));                      \
  }
)";

/// The wgmma tile's main loop: the producer warpgroup's first thread streams
/// k-tiles of A and of both weights into the stages, one full barrier
/// counting all three; each consumer warpgroup runs MT_SW_KSTEP per k-tile
/// into its two accumulator sets (gate and up).
/// $PRODUCER and $CONSUMER are the setmaxnreg lines (empty with one
/// consumer warpgroup).
static const char *SwiGluWgLoop = R"(  if (tid < 128) {
$PRODUCER    if (tid == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(&tm_a) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(&tm_g) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(&tm_u) : "memory");
      for (int kt = 0; kt < KT; ++kt) {
        const int s = kt % STAGES;
        // Wait until every consumer has freed the stage (the first lap
        // passes at once).
        mt_mbar_wait(empty + 8 * s, ((kt / STAGES) & 1) ^ 1);
        // Out-of-bounds parts of a box are zero-filled and still counted.
        mt_mbar_expect(full + 8 * s, A_STAGE + 2 * B_STAGE);
        mt_tma_load(sA + s * A_STAGE, tm_a, full + 8 * s, kt * BK, (int)m0,
                    (int)bz);
        #pragma unroll
        for (int j = 0; j < BN / 64; ++j) {
          mt_tma_load(sG + s * B_STAGE + j * B_BOX, tm_g, full + 8 * s,
                      (int)n0 + j * 64, kt * BK, (int)bz);
          mt_tma_load(sU + s * B_STAGE + j * B_BOX, tm_u, full + 8 * s,
                      (int)n0 + j * 64, kt * BK, (int)bz);
        }
      }
    }
  } else {
$CONSUMER    const int cw = tid / 128 - 1, warp = (tid / 32) % 4, lane = tid % 32;
    float acc[BN / 2], up[BN / 2];
    #pragma unroll
    for (int i = 0; i < BN / 2; ++i)
      acc[i] = up[i] = 0.f;
    // Two sets of A fragments, alternate k-tiles: a k-tile's MMAs are still
    // in flight while the next one's fragments are loaded, and a wgmma's
    // A registers may not be written before it completes.
    unsigned afa[BK / 16][4], afb[BK / 16][4];
    for (int kt = 0; kt < KT; kt += 2) {
      MT_SW_KSTEP(kt, afa)
      if (kt + 1 < KT)
        MT_SW_KSTEP(kt + 1, afb)
    }
    MT_WGMMA_WAIT(0);
    #pragma unroll
    for (int i = 0; i < BN / 2; ++i) {
      mt_fence_acc(acc[i]);
      mt_fence_acc(up[i]);
    }
    // silu(g) * u in f32: the store rounds once.
    #pragma unroll
    for (int i = 0; i < BN / 2; ++i) {
      const float gv = acc[i];
      acc[i] = gv / (1.f + expf(-gv)) * up[i];
    }
)";

/// `swiglu_wg_BMxBNxBK_sS`: the Hopper GEMM template (WgmmaGemm.cpp) with a
/// second B operand, sm_90a. BM / 64 consumer warpgroups of 64 rows each
/// hold BN fp32 accumulators per thread (gate and up), so BN is half the
/// GEMM tile's for the same registers; the epilogue is the GEMM's store.
/// With Batch > 1 the weights are one [K, N] per batch of M rows of h
/// (MoE experts): blockIdx.z is the batch, the third TMA coordinate.
/// What a swiglu_wg tile needs of the node (K, N) and the device: its
/// consumer warpgroups, their registers and the CTA's shared memory, or why
/// the tile cannot run.
struct SwiGluWgLayout {
  int Consumers = 0, ConsumerRegs = 0;
  int64_t Smem = 0;
};

static llvm::Expected<SwiGluWgLayout> swigluWgLayout(const GemmTileConfig &T,
                                                     int64_t Kd, int64_t Nn) {
  SwiGluWgLayout L;
  std::string Name = swigluChoiceName(T);
  if (T.BK != 64)
    return err("tile " + Name +
               ": the wgmma template needs BK = 64 (one 128-byte swizzled "
               "row of 16-bit elements)");
  if (T.BM % 64 || T.BM > 256 || T.BN % 64 || T.BN > 256)
    return err("tile " + Name +
               ": the wgmma template needs BM and BN multiples of 64 up to "
               "256");
  if (T.Stages < 2)
    return err("tile " + Name + ": the wgmma template needs at least 2 stages");
  if (T.Persistent || T.SplitK > 1 || T.Cluster > 1)
    return err("tile " + Name +
               ": the plain merged gate+up wgmma tile is neither persistent, "
               "split-K nor clustered");
  if (Kd % 8 || Nn % 8)
    return err("the wgmma template needs K and N multiples of 8 (TMA row "
               "strides are multiples of 16 bytes), got K = " +
               llvm::Twine(Kd) + ", N = " + llvm::Twine(Nn));
  const int Consumers = L.Consumers = T.BM / 64;
  const int Threads = (Consumers + 1) * 128;
  // Two accumulator sets: BN fp32 registers per consumer thread.
  const int ConsumerRegs = L.ConsumerRegs =
      Consumers > 1 ? wgmmaConsumerRegs(Consumers)
                    : std::min(255, RegsPerSM / Threads);
  if (T.BN + ConsumerOverheadRegs > ConsumerRegs)
    return err("tile " + Name + ": " + llvm::Twine(T.BN) +
               " accumulators per thread (gate and up) do not fit in the " +
               llvm::Twine(ConsumerRegs) + " registers of " +
               llvm::Twine(Consumers) + " consumer warpgroups");
  const int64_t Smem = L.Smem =
      1024 + int64_t(T.Stages) * (T.BM + 2 * T.BN) * T.BK * 2 + 16 * T.Stages;
  if (Smem > MaxSharedBytes)
    return err("tile " + Name + ": " + llvm::Twine(T.Stages) + " stages take " +
               llvm::Twine(Smem) +
               " bytes of shared memory, more than the 227 KB of an sm_90 "
               "CTA");

  return L;
}

/// The prelude, the kernel's comment line and the shape #defines (M_ to BK)
/// of a wgmma SwiGLU kernel over Batch products of M rows.
static void emitSwiGluWgHead(llvm::raw_ostream &OS,
                             const MultiTemplateBufferNode &N,
                             const GemmTileConfig &T, int64_t M,
                             int64_t Batch) {
  int64_t Kd = N.getOperand(0)->getType().innerDim(),
          Nn = N.getOperand(1)->getType().innerDim();
  OS << Prelude << "\n// SwiGLU %" << N.getName() << ": silu([" << M << " x "
     << Kd << "] * [" << Kd << " x " << Nn << "]) * ([" << M << " x " << Kd
     << "] * [" << Kd << " x " << Nn << "])"
     << (Batch > 1 ? " batch " + std::to_string(Batch) : std::string())
     << ", tile " << swigluChoiceName(T) << "\n";
  OS << "#define M_ " << M << "LL\n#define N_ " << Nn << "LL\n#define K_ " << Kd
     << "LL\n#define ROWS " << M * Batch << "LL // M_ * batch\n#define BM "
     << T.BM << "\n#define BN " << T.BN << "\n#define BK " << T.BK << "\n";
}

/// The merged tiles' parameters, h, gate and up in that order then the
/// result, and their epilogue writing that result.
static void swigluWgParams(const MultiTemplateBufferNode &N, ParamList &P,
                           EpilogueCode &E) {
  for (unsigned I = 0; I < 3; ++I)
    P.Inputs.insert(N.getOperand(I));
  P.Outputs.push_back(N.getResult());
  E.P = &P;
  E.Result = N.getResult();
}

/// `swiglu_wg_BMxBNxBK_sS_p` (and `_p_c2`): the persistent wgmma GEMM
/// template itself (emitWgmmaGemm, WgmmaGemm.cpp) with a B stage of both
/// weights' BN columns, gate then up. One wgmma 2 * BN wide per k16 step
/// reads the A tile once for both, from shared memory (the plain tile
/// below issues two, and reads A into registers to spare shared memory's
/// bandwidth); the CTAs walk the output tiles in the grouped raster, the
/// producer fills the next tile's stages while the consumers' epilogue
/// (silu(g) * u, then the TMA store) runs; in clusters of two, each CTA
/// multicasts half of the shared weight boxes.
static llvm::Expected<KernelSource>
generateSwiGluWgPersistent(const MultiTemplateBufferNode &N,
                           const GemmTileConfig &T, int64_t M, int64_t Batch) {
  const Value *HV = N.getOperand(0), *GV = N.getOperand(1);
  ParamList P;
  EpilogueCode E;
  swigluWgParams(N, P, E);
  int64_t Kd = HV->getType().innerDim(), Nn = GV->getType().innerDim();
  KernelSource K;
  K.Name = sanitizeIdentifier(N.getName() + "_" + swigluChoiceName(T));
  std::string S;
  llvm::raw_string_ostream OS(S);
  emitSwiGluWgHead(OS, N, T, M, Batch);
  GemmSetup Setup{T,
                  M,
                  Nn,
                  Kd,
                  Batch,
                  /*BatchedB=*/Batch > 1,
                  HV->getType().Dtype,
                  &P,
                  &E,
                  P.name(N.getResult()) + "_out",
                  N.getType().Dtype};
  Setup.SwiGlu = true;
  if (llvm::Error Err = emitWgmmaGemm(OS, K, Setup))
    return std::move(Err);
  K.Source = OS.str();
  K.Inputs.assign(P.Inputs.begin(), P.Inputs.end());
  K.Outputs = P.Outputs;
  setGemmGrid(K, T, M, Nn, Batch);
  return K;
}

static llvm::Expected<KernelSource>
generateSwiGluWgKernel(const MultiTemplateBufferNode &N,
                       const GemmTileConfig &T, int64_t M, int64_t Batch) {
  if (T.Persistent)
    return generateSwiGluWgPersistent(N, T, M, Batch);
  const Value *HV = N.getOperand(0), *GV = N.getOperand(1),
              *UV = N.getOperand(2);
  const TensorType &H = HV->getType(), &Wg = GV->getType();
  DType Dt = H.Dtype;
  std::string Name = swigluChoiceName(T);
  int64_t Kd = H.innerDim(), Nn = Wg.innerDim();
  llvm::Expected<SwiGluWgLayout> L = swigluWgLayout(T, Kd, Nn);
  if (!L)
    return L.takeError();
  const int Consumers = L->Consumers, ConsumerRegs = L->ConsumerRegs;
  const int Threads = (Consumers + 1) * 128;
  const int64_t Smem = L->Smem;

  ParamList P;
  EpilogueCode E;
  swigluWgParams(N, P, E);
  auto Index = [&](const Value *V) {
    return unsigned(llvm::find(P.Inputs, V) - P.Inputs.begin());
  };

  KernelSource K;
  K.Name = sanitizeIdentifier(N.getName() + "_" + Name);
  const char *Type = Dt == DType::BF16 ? "bf16" : "f16";
  std::string S;
  llvm::raw_string_ostream OS(S);
  emitSwiGluWgHead(OS, N, T, M, Batch);
  OS << "#define STAGES " << T.Stages << "\n#define CONSUMERS " << Consumers
     << " // consumer warpgroups, 64 rows each\n"
     << "#define THREADS ((CONSUMERS + 1) * 128)\n"
     << "#define A_STAGE (BM * BK * 2)     // bytes of one A stage\n"
     << "#define B_BOX (BK * 128)          // bytes of one 64-column box\n"
     << "#define B_STAGE (BN / 64 * B_BOX) // bytes of one weight's stage\n"
     << WgmmaHelpers
     << wgmmaFunction(T.BN, Type, "mt_wgmma_ra", /*TransB=*/true,
                      /*RegisterA=*/true)
     << LdsmHelper << SwiGluWgKStep << WgmmaAccMacros;
  OS << "extern \"C\" __global__ void __launch_bounds__(THREADS, 1) " << K.Name
     << "(\n    const __grid_constant__ mt_tensor_map tm_a,\n"
     << "    const __grid_constant__ mt_tensor_map tm_g,\n"
     << "    const __grid_constant__ mt_tensor_map tm_u, " << P.signature()
     << ") {\n"
     << "  extern __shared__ __align__(1024) unsigned char mt_smem[];\n"
     << "  // 128-byte swizzled stages start at 1024-byte boundaries.\n"
     << "  const unsigned sA = (mt_smem_addr(mt_smem) + 1023) & ~1023u;\n"
     << "  const unsigned sG = sA + STAGES * A_STAGE; // gate weights\n"
     << "  const unsigned sU = sG + STAGES * B_STAGE; // up weights\n"
     << "  const unsigned full = sU + STAGES * B_STAGE; // 8-byte mbarriers\n"
     << "  const unsigned empty = full + 8 * STAGES;\n"
     << "  const int tid = threadIdx.x;\n"
     << "  const long long bz = blockIdx.z; // the batch\n";
  emitGroupedRaster(OS);
  OS << R"(  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mt_mbar_init(full + 8 * s, 1);
      mt_mbar_init(empty + 8 * s, CONSUMERS);
    }
    // Make the initialised barriers visible to the TMA unit.
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int KT = (int)((K_ + BK - 1) / BK);
)";
  std::string Loop = SwiGluWgLoop;
  auto Replace = [&](llvm::StringRef From, const std::string &To) {
    size_t At = Loop.find(From.str());
    Loop.replace(At, From.size(), To);
  };
  Replace("$PRODUCER",
          Consumers > 1
              ? "    asm volatile(\"setmaxnreg.dec.sync.aligned.u32 " +
                    std::to_string(WgmmaProducerRegs) + ";\");\n"
              : std::string());
  Replace("$CONSUMER",
          Consumers > 1
              ? "    asm volatile(\"setmaxnreg.inc.sync.aligned.u32 " +
                    std::to_string(ConsumerRegs) + ";\");\n"
              : std::string());
  OS << Loop;
  EpilogueThreads Th;
  Th.Sync = "asm volatile(\"bar.sync 1, " + std::to_string(Consumers * 128) +
            ";\" ::: \"memory\")";
  Th.Tid = "(tid - 128)";
  Th.Count = "(CONSUMERS * 128)";
  Th.InBounds = "INTERIOR || (r < ROWS && c < N_)";
  Th.PairStores = true;
  Th.QuadRowSums = true;
  Th.ClampedAcc = true;
  emitInteriorAndEdgeTails(OS, E, P.name(N.getResult()) + "_out",
                           N.getType().Dtype, Th);
  OS << "  }\n}\n";
  K.Source = OS.str();
  K.Inputs.assign(P.Inputs.begin(), P.Inputs.end());
  K.Outputs = P.Outputs;
  K.GridX = unsigned((Nn + T.BN - 1) / T.BN);
  K.GridY = unsigned((M + T.BM - 1) / T.BM);
  K.GridZ = unsigned(Batch);
  K.BlockX = unsigned(Threads);
  K.SharedBytes = unsigned(Smem);
  K.NeedsSm90a = true;
  // A as [batch][M][K], the weights as [batch][K][N] in 64 x 64 boxes
  // (batch 1: all of h's rows, the one [K, N]).
  K.TensorMaps = {wgmmaTensorMap(Index(HV), Kd, M, Batch, 64, uint32_t(T.BM)),
                  wgmmaTensorMap(Index(GV), Nn, Kd, Batch, 64, uint32_t(T.BK)),
                  wgmmaTensorMap(Index(UV), Nn, Kd, Batch, 64, uint32_t(T.BK))};
  return K;
}

static llvm::Expected<KernelSource>
generateSwiGluKernelText(const MultiTemplateBufferNode &N,
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
  bool Batched = Wg.rank() > 2;
  if (UV->getType() != Wg || (Batched && Wg.rank() != H.rank()))
    return err("the merged gate+up GEMM needs two equally shaped weights, "
               "[K, N] or one per batch of its input");
  if (T.Template == GemmTemplate::Wgmma) {
    if (Norm)
      return err("tile " + swigluChoiceName(T) +
                 ": the wgmma template takes no norm prologue");
    if (!Batched)
      return generateSwiGluWgKernel(N, T, MArg > 0 ? MArg : rowsOf(H), 1);
    int64_t M = H.Shape[H.rank() - 2];
    if (MArg > 0 && MArg != rowsOf(H))
      return err("size hints are not supported for batched weights");
    return generateSwiGluWgKernel(N, T, M, rowsOf(H) / std::max<int64_t>(1, M));
  }
  if (Batched)
    return err("tile " + swigluChoiceName(T) +
               ": batched weights take a swiglu_wg tile (the mma.sync merged "
               "template reads one [K, N])");
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

llvm::Expected<KernelSource>
mtsched::generateSwiGluKernel(const MultiTemplateBufferNode &N,
                              const GemmTileConfig &T, int64_t MArg,
                              const Node *Norm) {
  // Two products: the gate's and the up's.
  return withProgrammaticWait(generateSwiGluKernelText(N, T, MArg, Norm),
                              2 * gemmFlops(N, MArg));
}
