//===- GroupedGemm.cpp - grouped_mm: all experts' GEMMs in one launch -----===//
//
// The kernel of `grouped_mm(%x, %w, %ids)` (lib/OpUnits/GroupedMm.cpp):
// out[t, a, :] = x[t, (a,) :] * w[ids[t, a]]^T for the T * A routed rows,
// one launch over every expert, no gathered weight ever written.
//
// Grid: x over the BN-column tiles of N, y over row tiles. The row tiles
// are the experts' row groups cut into BM rows, in expert order; their
// number depends on the ids, so y is launched at its bound, ceil(T*A / BM)
// + min(E, T*A) (each expert adds at most one partial tile), and the CTAs
// past the real count return at once. Each CTA finds its expert and rows
// on the device, from the ids alone, with no workspace and no second
// launch: (1) a shared-memory histogram of the ids (rows per expert);
// (2) an exclusive scan of the experts' tile counts, which names the
// expert and the first routed row (within the expert) of tile blockIdx.y;
// (3) a stable warp-ballot compaction of the ids, which lists the BM rows
// (t * A + a) of that tile in token order, -1 past the expert's last row.
// The T * A ids are a few hundred at decode and a few thousand at prefill,
// so every CTA repeating (1)-(3) costs less than a launch of its own.
//
// Main loop: the mma.sync template's pieces (GemmKernels.cpp: its tile
// defines, cp.async / ldmatrix / mma helpers and accumulators) with two
// loads of its own: A's rows gathered through the row list (x's row t,
// or (t, a) for a per-pick x), B straight from the expert's [N, K] matrix,
// K-major, so its fragments are plain (not transposed) ldmatrix loads.
// Rows past the expert's group are zero-filled and never stored; the
// epilogue scatters each row back to its (t, a) place in [T, A, N].
//
// 16-bit operands with K a multiple of 8 take the tensor cores; anything
// else (f32 graphs, the zoo's CPU sizes) a SIMT loop over the same
// schedule.
//
//===----------------------------------------------------------------------===//
#include "GemmCodegen.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "mtsched/IR/Graph.h"
#include "llvm/Support/raw_ostream.h"

using namespace mtsched;
using namespace mtsched::codegen;

std::string codegen::groupedMmChoiceName(const GroupedMmTile &T) {
  if (!T.TensorCores)
    return "gmm_simt";
  return "gmm_" + std::to_string(T.BM) + "x" + std::to_string(T.BN) + "x" +
         std::to_string(T.BK) + "_w" + std::to_string(T.Warps) + "_s" +
         std::to_string(T.Stages);
}

bool codegen::groupedMmWarps(const GroupedMmTile &T, int &WarpsM, int &WarpsN) {
  int Best = -1;
  for (int M = 1; M <= T.Warps; ++M) {
    if (T.Warps % M || T.BM % (16 * M) || T.BN % (16 * (T.Warps / M)))
      continue;
    int Skew = std::abs(T.BM / M - T.BN / (T.Warps / M));
    if (Best < 0 || Skew < Best) {
      Best = Skew;
      WarpsM = M;
      WarpsN = T.Warps / M;
    }
  }
  return Best >= 0;
}

std::optional<GroupedMmTile> codegen::groupedMmTileOf(llvm::StringRef Name) {
  GroupedMmTile T;
  if (Name == "gmm_simt") {
    T.TensorCores = false;
    return T;
  }
  int WM = 0, WN = 0;
  unsigned BM, BN, BK, W, S;
  llvm::StringRef Rest = Name;
  if (!Rest.consume_front("gmm_") || Rest.consumeInteger(10, BM) ||
      !Rest.consume_front("x") || Rest.consumeInteger(10, BN) ||
      !Rest.consume_front("x") || Rest.consumeInteger(10, BK) ||
      !Rest.consume_front("_w") || Rest.consumeInteger(10, W) ||
      !Rest.consume_front("_s") || Rest.consumeInteger(10, S) ||
      !Rest.empty() || BM == 0 || BM > 256 || BN > 256 || BK % 16 || BK == 0 ||
      BK > 128 || W == 0 || W > 16 || S < 2 || S > 8)
    return std::nullopt;
  T = {int(BM), int(BN), int(BK), int(W), int(S), true};
  if (!groupedMmWarps(T, WM, WN))
    return std::nullopt;
  return T;
}

int64_t codegen::groupedMmSharedBytes(const GroupedMmTile &T) {
  if (!T.TensorCores)
    return 0;
  return int64_t(T.Stages) * (T.BM + T.BN) * (T.BK + 8) * 2;
}

/// Rows per expert decide the tile: at decode (a few rows per expert) a
/// 16-row tile streams the weights with the fewest wasted MMA rows; with
/// more rows a 64 x 128 tile reuses each weight tile across them.
GroupedMmTile codegen::defaultGroupedMmTile(int64_t Rows, int64_t Experts,
                                            int64_t K, DType Dt) {
  GroupedMmTile T;
  if ((Dt != DType::BF16 && Dt != DType::F16) || K % 8) {
    T.TensorCores = false;
    return T;
  }
  if (Rows <= 16 * Experts)
    return T;
  return {64, 128, 32, 4, 4, true};
}

/// The device-side routing: rows per expert, this CTA's expert and its BM
/// rows (`rows`, -1 past the group), or a return when the CTA has no tile.
static const char *const RouteRows = R"(  __shared__ int cnt[E_];
  __shared__ int rows[BM];
  __shared__ int s_e, s_lo, s_n, s_tiles, s_bad;
  // (1) Rows per expert: a histogram of the ids, and the rows whose id
  // names no expert.
  for (int e = tid; e < E_; e += THREADS)
    cnt[e] = 0;
  if (tid == 0)
    s_bad = 0;
  __syncthreads();
  for (long long r = tid; r < TA_; r += THREADS) {
    const long long e = ids[r];
    if (e >= 0 && e < E_)
      atomicAdd(&cnt[e], 1);
    else
      atomicAdd(&s_bad, 1);
  }
  __syncthreads();
  // (2) The exclusive scan of the experts' tile counts: tile blockIdx.y is
  // expert s_e's rows [s_lo, s_lo + s_n) of its group.
  if (tid == 0) {
    int tiles = 0, me = -1, lo = 0, n = 0;
    for (int e = 0; e < E_; ++e) {
      const int t = (cnt[e] + BM - 1) / BM;
      if (me < 0 && (int)blockIdx.y < tiles + t) {
        me = e;
        lo = ((int)blockIdx.y - tiles) * BM;
        n = min(BM, cnt[e] - lo);
      }
      tiles += t;
    }
    s_e = me;
    s_lo = lo;
    s_n = n;
    s_tiles = tiles;
  }
  __syncthreads();
  const int ex = s_e;
  const long long n0 = (long long)blockIdx.x * BN;
  if (ex < 0) { // past the real row tiles
    // A row whose id is outside [0, E) is in no tile: the first CTA past
    // them writes it NaN (as index_select's gather does), so that --run's
    // check reports it. With such a row the tiles are fewer than the grid's
    // bound, so that CTA exists.
    if (s_bad > 0 && (int)blockIdx.y == s_tiles) {
      for (long long i = tid; i < TA_ * BN; i += THREADS) {
        const long long r = i / BN, c = n0 + i % BN, e = ids[r];
        if (c < N_ && (e < 0 || e >= E_))
          MT_PUT_ROW(r, c, __int_as_float(0x7fc00000));
      }
#if COMBINE
      // The bad rows arrive at their tokens' counters like any other; the
      // token's sum is NaN, so its last arrival here writes NaN.
      __threadfence();
      __syncthreads();
      for (long long r = tid; r < TA_; r += THREADS) {
        const long long e = ids[r];
        if (e >= 0 && e < E_)
          continue;
        unsigned *k = MT_COUNT + (r / A_) * gridDim.x + blockIdx.x;
        if (atomicAdd(k, 1u) == A_ - 1) {
          *k = 0;
          for (long long c = n0; c < n0 + BN && c < N_; ++c)
            out[(r / A_) * N_ + c] = MT_STORE(__int_as_float(0x7fc00000));
        }
      }
#endif
    }
    return;
  }
  // (3) The tile's rows, in token order: a stable compaction by warp 0.
  if (warp == 0) {
    const int lo = s_lo;
    int seen = 0;
    for (long long base = 0; base < TA_ && seen < lo + BM; base += 32) {
      const long long r = base + lane;
      const bool hit = r < TA_ && ids[r] == ex;
      const unsigned m = __ballot_sync(0xffffffffu, hit);
      const int pos = seen + __popc(m & ((1u << lane) - 1u));
      if (hit && pos >= lo && pos < lo + BM)
        rows[pos - lo] = (int)r;
      seen += __popc(m);
    }
    for (int i = s_n + lane; i < BM; i += 32)
      rows[i] = -1;
  }
  __syncthreads();
  const mt_operand *Wx = w + (long long)ex * N_ * K_;
)";

/// The tensor-core body: the gathered-row loads, the pipeline over K and
/// the k-step with K-major B fragments.
static const char *const MmaLoad =
    R"(// k-tile kt of the tile's gathered A rows (BM x BK) and of the expert's
// weight rows n0.. (BN x BK, K-major) into stage `stage`.
__device__ __forceinline__ void mt_grouped_load(
    unsigned short *sA, unsigned short *sB, const unsigned short *X,
    const unsigned short *W, const int *rows, long long n0, int stage,
    int kt) {
  const long long k0 = (long long)kt * BK;
  unsigned short *a = sA + stage * (BM * AS);
  unsigned short *b = sB + stage * (BN * AS);
  #pragma unroll
  for (int ch = threadIdx.x; ch < BM * (BK / 8); ch += THREADS) {
    const int row = ch / (BK / 8), kc = (ch % (BK / 8)) * 8;
    const int r = rows[row];
    const bool ok = r >= 0 && (K_ % BK == 0 || k0 + kc < K_);
    const long long xr = XA ? (long long)r : (long long)r / A_;
    mt_cp_async16(a + row * AS + kc, ok ? X + xr * K_ + k0 + kc : X,
                  ok ? 16 : 0);
  }
  #pragma unroll
  for (int ch = threadIdx.x; ch < BN * (BK / 8); ch += THREADS) {
    const int row = ch / (BK / 8), kc = (ch % (BK / 8)) * 8;
    const bool ok = (N_ % BN == 0 || n0 + row < N_) &&
                    (K_ % BK == 0 || k0 + kc < K_);
    mt_cp_async16(b + row * AS + kc, ok ? W + (n0 + row) * K_ + k0 + kc : W,
                  ok ? 16 : 0);
  }
}

)";

static const char *const MmaLoop = R"(  const int split = 0;
  (void)split;
)";

static const char *const MmaPipeline = R"(  #pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT)
      mt_grouped_load(sA, sB, x, Wx, rows, n0, s, s);
    mt_cp_async_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    MT_CP_ASYNC_WAIT(STAGES - 2); // tile kt has landed
    __syncthreads();              // and everyone is done with tile kt-1
    const int next = kt + STAGES - 1;
    if (next < KT)
      mt_grouped_load(sA, sB, x, Wx, rows, n0, next % STAGES, next);
    mt_cp_async_commit();
    const unsigned short *a = sA + (kt % STAGES) * (BM * AS);
    const unsigned short *b = sB + (kt % STAGES) * (BN * AS);
    #pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned af[MT][4], bf[NT][2];
      #pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        mt_ldmatrix_x4(af[mt], a + (wm * WM + mt * 16 + (lane & 15)) * AS +
                                   kk + (lane >> 4) * 8);
      // B is K-major ([n][k] in shared memory): matrix j of the x4 load
      // is columns +8*(j/2), k +8*(j%2), the m16n8k16 B fragment as is.
      #pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        unsigned t[4];
        const int mi = lane >> 3;
        mt_ldmatrix_x4(t, b + (wn * WN + np * 16 + (mi >> 1) * 8 + (lane & 7)) *
                                  AS + kk + (mi & 1) * 8);
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
  // Each accumulator row back to its (t, a) place; pairs of columns as one
  // 32-bit store.
  #pragma unroll
  for (int mt = 0; mt < MT; ++mt)
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = rows[wm * WM + mt * 16 + (lane >> 2) + h * 8];
      if (r < 0)
        continue;
      const float sc = MT_ROW_SCALE(r);
      #pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const long long c = n0 + wn * WN + nt * 8 + (lane & 3) * 2;
        const float v0 = acc[mt][nt][2 * h] * sc,
                    v1 = acc[mt][nt][2 * h + 1] * sc;
        if (COMBINE) {
          if (c < N_)
            MT_PUT_ROW(r, c, v0);
          if (c + 1 < N_)
            MT_PUT_ROW(r, c + 1, v1);
        } else if (N_ % 2 == 0 && c + 1 < N_) {
          const unsigned pk = (unsigned)MT_STORE(v0) |
                              ((unsigned)MT_STORE(v1) << 16);
          *(unsigned *)(out + (long long)r * N_ + c) = pk;
        } else {
          if (c < N_)
            MT_PUT_ROW(r, c, v0);
          if (c + 1 < N_)
            MT_PUT_ROW(r, c + 1, v1);
        }
      }
    }
)";

/// The SIMT body: one output element per thread and step, a dot product
/// over K.
static const char *const SimtBody =
    R"(  for (int e = tid; e < BM * BN; e += THREADS) {
    const int rl = e / BN;
    const long long c = n0 + e % BN;
    const int r = rows[rl];
    if (r < 0 || c >= N_)
      continue;
    const long long xr = XA ? (long long)r : (long long)r / A_;
    float acc = 0.f;
    for (long long k = 0; k < K_; ++k)
      acc += MT_LOAD_X(xr * K_ + k) * MT_LOAD_W(c * K_ + k);
    MT_PUT_ROW(r, c, acc * MT_ROW_SCALE(r));
  }
)";

/// The combine form's end: the token's rows summed over its picks, by the
/// CTA whose row arrives last.
static const char *const CombineTail = R"(#if COMBINE
  // Each routed row's scaled fp32 product is in the workspace; the last of
  // a token's A rows to arrive (a counter per token and column tile, left
  // at zero again for the next launch) adds the token's rows in pick order,
  // so the sum does not depend on which expert's tile finished last.
  __shared__ int mt_tok[BM];
  __threadfence();
  __syncthreads();
  for (int i = tid; i < BM; i += THREADS) {
    const int r = rows[i];
    int tok = -1;
    if (r >= 0) {
      unsigned *k = MT_COUNT + (r / A_) * gridDim.x + blockIdx.x;
      if (atomicAdd(k, 1u) == A_ - 1) {
        *k = 0;
        tok = (int)(r / A_);
      }
    }
    mt_tok[i] = tok;
  }
  __syncthreads();
  __threadfence();
  for (int e = tid; e < BM * BN; e += THREADS) {
    const int t = mt_tok[e / BN];
    const long long c = n0 + e % BN;
    if (t < 0 || c >= N_)
      continue;
    const volatile float *p = mt_ws + (long long)t * A_ * N_ + c;
    float sum = 0.f;
    for (int a = 0; a < A_; ++a)
      sum += p[a * N_];
    out[(long long)t * N_ + c] = MT_STORE(sum);
  }
#endif
}
)";

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

/// The kernel's shape and form as defines: sizes, tile, element types,
/// the row scale and where a row's product goes (out, or the combine's
/// workspace).
static void emitDefines(llvm::raw_ostream &OS, const Node &N,
                        const GroupedMmTile &Tl, int WarpsM, int WarpsN,
                        bool Combine) {
  const Value *X = N.getOperand(0), *W = N.getOperand(1);
  const Value *Scale = N.getNumOperands() == 4 ? N.getOperand(3) : nullptr;
  const TensorType &IdsT = N.getOperand(2)->getType();
  int64_t T = IdsT.Shape[0], A = IdsT.Shape[1], Nn = W->getType().Shape[1];
  int64_t E = W->getType().Shape[0], K = W->getType().Shape[2];
  DType Dt = X->getType().Dtype;
  OS << "\n// grouped_mm %" << N.getName() << ": " << T << " x " << A
     << " routed rows of K = " << K << " times one of " << E << " experts' ["
     << Nn << ", " << K << "] weights"
     << (Combine ? ", summed over the picks" : "") << "\n"
     << "#define T_ " << T << "LL\n#define A_ " << A << "LL\n#define TA_ "
     << T * A << "LL\n#define E_ " << E << "\n#define N_ " << Nn
     << "LL\n#define K_ " << K << "LL\n#define M_ TA_\n#define XA "
     << (X->getType().rank() == 3 ? 1 : 0)
     << " // x has a row per (t, a), else per t\n#define BM " << Tl.BM
     << "\n#define BN " << Tl.BN << "\n#define BK " << Tl.BK
     << "\n#define WARPS_M " << WarpsM << "\n#define WARPS_N " << WarpsN
     << "\n#define STAGES " << Tl.Stages << "\n#define SPLITK 1\n"
     << "#define MT_STORE(v) " << storeExpr(Dt, "(v)") << "\n"
     << "#define MT_ROW_SCALE(r) "
     << (Scale ? loadExpr(Scale->getType().Dtype, "scale", "(r)")
               : std::string("1.f"))
     << " // each routed row's weight, applied before rounding\n"
     << "#define COMBINE " << (Combine ? 1 : 0) << "\n";
  if (Combine)
    OS << "// A routed row's fp32 product, then the counters per token and "
          "column tile.\n"
       << "#define MT_PUT_ROW(r, c, v) mt_ws[(long long)(r) * N_ + (c)] = "
          "(v)\n"
       << "#define MT_COUNT ((unsigned *)(mt_ws + TA_ * N_))\n";
  else
    OS << "#define MT_PUT_ROW(r, c, v) out[(long long)(r) * N_ + (c)] = "
          "MT_STORE(v)\n";
}

llvm::Expected<KernelSource>
codegen::generateGroupedMmKernel(llvm::StringRef Name, const Node &N,
                                 std::optional<GroupedMmTile> Tile) {
  const Attribute *CombineAttr = N.getAttrs().get("combine");
  bool Combine = CombineAttr && CombineAttr->getBool();
  if (N.getNumOperands() < 3 || N.getNumOperands() > 4 ||
      N.getType().rank() != (Combine ? 2u : 3u) ||
      N.getOperand(1)->getType().rank() != 3 ||
      N.getOperand(2)->getType().rank() != 2 ||
      (Combine && N.getNumOperands() != 4))
    return err("'%" + N.getName() + "' is not a well-formed 'grouped_mm'");
  const Value *X = N.getOperand(0), *W = N.getOperand(1),
              *Ids = N.getOperand(2);
  const Value *Scale = N.getNumOperands() == 4 ? N.getOperand(3) : nullptr;
  int64_t T = Ids->getType().Shape[0], A = Ids->getType().Shape[1];
  int64_t Nn = W->getType().Shape[1];
  int64_t E = W->getType().Shape[0], K = W->getType().Shape[2];
  DType Dt = X->getType().Dtype;
  if (T * A == 0 || Nn == 0)
    return err("'%" + N.getName() + "': grouped_mm of no rows");
  if (E > 4096)
    return err("'%" + N.getName() +
               "': more than 4096 experts (the kernel keeps a shared-memory "
               "count per expert)");
  GroupedMmTile Tl = Tile ? *Tile : defaultGroupedMmTile(T * A, E, K, Dt);
  int WarpsM = 1, WarpsN = 4;
  if (Tl.TensorCores && ((Dt != DType::BF16 && Dt != DType::F16) || K % 8 ||
                         !groupedMmWarps(Tl, WarpsM, WarpsN)))
    return err("'%" + N.getName() + "': tile " + groupedMmChoiceName(Tl) +
               " needs bf16/f16 operands, K a multiple of 8 and 16 x 16 warp "
               "tiles");
  if (!Tl.TensorCores)
    Tl = {16, 64, 16, 4, 1, false};

  KernelSource Ks;
  Ks.Name = sanitizeIdentifier(Name);
  std::string Src;
  llvm::raw_string_ostream OS(Src);
  OS << kernelPrelude();
  emitDefines(OS, N, Tl, WarpsM, WarpsN, Combine);
  int64_t Smem = groupedMmSharedBytes(Tl);
  if (Tl.TensorCores) {
    OS << "#define ALIGNED8 1\n#define MMA_TYPE \""
       << (Dt == DType::BF16 ? "bf16" : "f16") << "\"\n";
    emitTensorCoreMainLoop(OS);
    OS << "typedef unsigned short mt_operand;\n" << MmaLoad;
  } else {
    OS << "#define THREADS (WARPS_M * WARPS_N * 32)\n"
       << "typedef " << storageType(Dt) << " mt_operand;\n"
       << "#define MT_LOAD_X(i) " << loadExpr(Dt, "x", "(i)") << "\n"
       << "#define MT_LOAD_W(i) " << loadExpr(Dt, "Wx", "(i)") << "\n";
  }
  OS << "extern \"C\" __global__ void __launch_bounds__(THREADS) " << Ks.Name
     << "(const mt_operand *__restrict__ x, const mt_operand *__restrict__ w, "
     << "const " << storageType(Ids->getType().Dtype) << " *__restrict__ ids, "
     << (Scale ? std::string("const ") + storageType(Scale->getType().Dtype) +
                     " *__restrict__ scale, "
               : std::string())
     << storageType(Dt) << " *__restrict__ out"
     << (Combine ? ", float *__restrict__ mt_ws" : "") << ") {\n"
     << "  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n"
     << "  (void)lane;\n"
     << RouteRows;
  if (Tl.TensorCores)
    OS << "  extern __shared__ __align__(16) unsigned char mt_smem[];\n"
       << "  unsigned short *sA = (unsigned short *)mt_smem;\n"
       << "  unsigned short *sB = sA + STAGES * BM * AS;\n"
       << "  const int wm = warp / WARPS_N, wn = warp % WARPS_N;\n"
       << MmaLoop << MmaSyncAccumulators << MmaPipeline;
  else
    OS << SimtBody;
  OS << CombineTail;

  Ks.Source = OS.str();
  Ks.Inputs = {X, W, Ids};
  if (Scale)
    Ks.Inputs.push_back(Scale);
  Ks.Outputs = {N.getResult()};
  Ks.BlockX = WarpsM * WarpsN * 32;
  Ks.GridX = unsigned((Nn + Tl.BN - 1) / Tl.BN);
  Ks.GridY = unsigned((T * A + Tl.BM - 1) / Tl.BM + std::min(E, T * A));
  Ks.SharedBytes = unsigned(Smem);
  // The combine's workspace: each routed row's fp32 product, then a
  // counter per token and column tile (zeroed once, left at zero).
  if (Combine)
    Ks.WorkspaceBytes = uint64_t(T * A * Nn) * 4 + uint64_t(T) * Ks.GridX * 4;
  return Ks;
}
