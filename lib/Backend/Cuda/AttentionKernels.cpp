//===- AttentionKernels.cpp - CUDA kernels of the attention op ------------===//
//
// The CUDA-core flash template, attn_math, and what the tensor-core
// template (AttentionMmaKernels.cpp) shares with the flash one: the
// header, the split-KV combine and the kernel set-up (AttentionCodegenImpl.h).
// The templates read the shape from #defines, so one source text serves
// every tile: the flash kernel's thread mappings are fixed by the tile (a
// thread owns score columns j = tid % BKV and output columns d = tid % D,
// with rows strided by the threads left over) and fall back to a flat
// element loop where D does not divide the block.
//
//===----------------------------------------------------------------------===//
#include "AttentionCodegenImpl.h"
#include "GemmCodegen.h"
#include "mtsched/Backend/Cuda/AttentionCodegen.h"
#include "mtsched/IR/Attention.h"
#include "llvm/Support/Format.h"

using namespace mtsched;
using namespace mtsched::codegen;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

/// Name(x), a macro that converts one stored element of type T to float.
static std::string loadMacro(DType T, llvm::StringRef Name = "LOAD") {
  switch (T) {
  case DType::BF16:
    return ("#define " + Name + "(x) mt_bf16_to_f32(x)\n").str();
  case DType::F16:
    return ("#define " + Name + "(x) mt_f16_to_f32(x)\n").str();
  default:
    return ("#define " + Name + "(x) ((float)(x))\n").str();
  }
}

/// The additive mask of a masked attention: MASK_AT(b, h, i, j) is the
/// mask of batch b, query head h, query i and key j in log2 units (the
/// scores are, so that the softmax can use exp2f), read through the
/// broadcast strides. -inf stays -inf; a finite mask as low as
/// finfo(f32).min is kept finite (its product with log2(e) would round to
/// -inf), so that a row masked by it everywhere is uniform, as in PyTorch.
static const char *const MaskHelper =
    R"(__device__ __forceinline__ float mt_mask_log2(float m) {
  return m == -__int_as_float(0x7f800000)
             ? m
             : fmaxf(m * 1.4426950408889634f, -3.402823466e38f);
}
#define MASK_AT(b, h, i, j)                                                    \
  mt_mask_log2(MLOAD(mask[(b) * MASK_SB + (h) * MASK_SH + (i) * MASK_SQ + (j)]))
#define MASK_ROW(b, h, i) (mask + (b) * MASK_SB + (h) * MASK_SH + (i) * MASK_SQ)
// Keys j and j + 1 (j even) of a mask row, log2 units, or 0 past the row's
// last key `last` (the caller masks those). With MASK_VEC (an even row
// length) and `vec` (the mask's address aligned to two elements) one
// 8- or 4-byte load reads both: a warp's loads then fill whole sectors.
__device__ __forceinline__ void mt_mask_pair(const MASK_T *row, long long j,
                                             long long last, bool vec,
                                             float &x, float &y) {
  x = y = 0.f;
  if (j > last)
    return;
#if MASK_VEC
  if (vec) {
#if MASK_F32
    const unsigned long long p = *(const unsigned long long *)(row + j);
    x = mt_mask_log2(__uint_as_float((unsigned)p));
    y = mt_mask_log2(__uint_as_float((unsigned)(p >> 32)));
#else
    const unsigned p = *(const unsigned *)(row + j);
    x = mt_mask_log2(MLOAD((MASK_T)(p & 0xffffu)));
    y = mt_mask_log2(MLOAD((MASK_T)(p >> 16)));
#endif
    return;
  }
#endif
  x = mt_mask_log2(MLOAD(row[j]));
  if (j + 1 <= last)
    y = mt_mask_log2(MLOAD(row[j + 1]));
}
)";

/// The end of a split-KV CTA (`#if SPLITS > 1`), after it has written its
/// partial accumulators `part[row * D_ + d]`, running max (log2 units; -inf
/// for a row that saw no key) and sum to the workspace: the last split of
/// the tile to finish (a counter per tile, left at zero again) combines
///   out = sum_s acc_s 2^(m_s - M) / sum_s l_s 2^(m_s - M), M = max_s m_s.
/// Each row's weights 2^(m_s - M) / L are worked out once, into shared
/// memory; the partials are then read 4 floats at a time where the layout
/// allows, with independent loads per split (L2 latency, not bandwidth,
/// bounds a one-warp CTA's combine). Loads bypass L1 (`__ldcg`): other
/// CTAs wrote the partials. Both templates emit it (emitWithCombine)
/// between the pieces of their bodies.
const char *const codegen::SplitCombine =
    R"(    __threadfence();
    __syncthreads();
    __shared__ int mt_last;
    __shared__ float mt_w[BQ * SPLITS];
    unsigned *count = (unsigned *)(ws + (long long)gridDim.x * gridDim.y *
                                            SPLITS * (BQ * D_ + 2 * BQ)) +
                      tile;
    if (tid == 0)
      mt_last = atomicAdd(count, 1u) == SPLITS - 1;
    __syncthreads();
    if (!mt_last)
      return;
    __threadfence();
#define PSTRIDE (BQ * D_ + 2 * BQ) // floats of one split's partials
    const float *parts = ws + tile * SPLITS * PSTRIDE;
    for (int i = tid; i < BQ; i += THREADS) {
      float M = MT_NEG_INF;
#pragma unroll
      for (int z = 0; z < SPLITS; ++z)
        M = fmaxf(M, __ldcg(parts + z * PSTRIDE + BQ * D_ + i));
      float L = 0.f;
#pragma unroll
      for (int z = 0; z < SPLITS; ++z) {
        const float m = __ldcg(parts + z * PSTRIDE + BQ * D_ + i);
        // A split that saw no key of this row adds nothing.
        const float w = m == MT_NEG_INF ? 0.f : exp2f(m - M);
        mt_w[i * SPLITS + z] = w;
        L += __ldcg(parts + z * PSTRIDE + BQ * D_ + BQ + i) * w;
      }
      const float inv = L > 0.f ? 1.f / L : MT_EMPTY_ROW;
#pragma unroll
      for (int z = 0; z < SPLITS; ++z)
        mt_w[i * SPLITS + z] *= inv;
    }
    __syncthreads();
#if D_ % 4 == 0 && BQ % 2 == 0
#define CV 4 // PSTRIDE and every row start are multiples of 4 floats
#else
#define CV 1
#endif
    for (int e = tid * CV; e < BQ * D_; e += THREADS * CV) {
      const int i = e / D_, d = e % D_;
      const long long r = r0 + i;
      if (r >= ROWS)
        continue;
      float o[CV];
#pragma unroll
      for (int c = 0; c < CV; ++c)
        o[c] = 0.f;
#pragma unroll
      for (int z = 0; z < SPLITS; ++z) {
        const float w = mt_w[i * SPLITS + z];
#if CV == 4
        const float4 p = __ldcg((const float4 *)(parts + z * PSTRIDE + e));
        o[0] += p.x * w;
        o[1] += p.y * w;
        o[2] += p.z * w;
        o[3] += p.w * w;
#else
        o[0] += __ldcg(parts + z * PSTRIDE + e) * w;
#endif
      }
      const long long h = hk * GROUP + r / SQ;
#pragma unroll
      for (int c = 0; c < CV; ++c)
        out[((b * HQ + h) * SQ + r % SQ) * D_ + d + c] = STORE(o[c]);
    }
    if (tid == 0)
      *count = 0u;
  }
)";

/// The keys [kvBegin, kvEnd) of its (batch, kv head) a flash CTA sees for
/// query tile rows [r0, r0 + bq): up to the last key its last row sees (a
/// causal tile stops there), then split z's share of whole steps of `step`
/// keys. Both flash templates call it; the shape's #defines come first.
const char *const codegen::KeyRange =
    R"(__device__ __forceinline__ void mt_key_range(long long r0, int bq,
                                             int step, int splits, int z,
                                             long long &kvBegin,
                                             long long &kvEnd) {
  kvEnd = SKV;
#if CAUSAL
  const long long rl = (r0 + bq < ROWS ? r0 + bq : ROWS) - 1;
  const long long qmax = (r0 / SQ != rl / SQ) ? SQ - 1 : rl % SQ;
  kvEnd = SKV - SQ + qmax + 1;
#endif
  kvBegin = 0;
  if (splits > 1) {
    const long long tiles = (kvEnd + step - 1) / step;
    const long long per = (tiles + splits - 1) / splits;
    kvBegin = z * per * step;
    kvEnd = kvEnd < kvBegin + per * step ? kvEnd : kvBegin + per * step;
  }
}
)";

/// Emits Pieces with the split-KV combine between consecutive ones (each
/// piece but the last ends where a `#if SPLITS > 1` branch has written its
/// partials).
void codegen::emitWithCombine(llvm::raw_ostream &OS,
                              llvm::ArrayRef<const char *> Pieces) {
  for (size_t I = 0; I < Pieces.size(); ++I)
    OS << (I ? SplitCombine : "") << Pieces[I];
}

static const char *const FlashBody[] = {R"(
#define NW (THREADS / 32)
#define KS (D_ + 1)   // padded key row: lanes read different keys
#define SS (BKV + 1)  // padded score row
#define SC_RG (THREADS / BKV)
#define SC_R (BQ / SC_RG)
#define MT_NEG_INF (-__int_as_float(0x7f800000))
#if THREADS % D_ == 0 && BQ % (THREADS / D_) == 0
#define PV_SPLIT 1    // a thread owns column tid % D_ of rows strided by PV_RG
#define PV_RG (THREADS / D_)
#define PV_N (BQ / PV_RG)
#else
#define PV_SPLIT 0    // a thread owns elements tid + n * THREADS of the tile
#define PV_N ((BQ * D_ + THREADS - 1) / THREADS)
#endif
  extern __shared__ __align__(16) float mt_smem[];
  float *sQ = mt_smem;          // [BQ][D_], scaled by SCALE_LOG2
  float *sK = sQ + BQ * D_;     // [BKV][KS]
  float *sV = sK + BKV * KS;    // [BKV][D_]
  float *sS = sV + BKV * D_;    // [BQ][SS] scores, then probabilities
  float *sM = sS + BQ * SS;     // running max (log2 units)
  float *sL = sM + BQ;          // running sum
  float *sA = sL + BQ;          // this tile's rescale factor
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const long long b = blockIdx.y / HKV, hk = blockIdx.y % HKV;
  const long long r0 = (long long)blockIdx.x * BQ;
  const long long kvBase = (b * HKV + hk) * (long long)SKV * D_;
  // Packed row r is query r % SQ of query head hk * GROUP + r / SQ.
  for (int e = tid; e < BQ * D_; e += THREADS) {
    const long long r = r0 + e / D_;
    float x = 0.f;
    if (r < ROWS) {
      const long long h = hk * GROUP + r / SQ;
      x = LOAD(q[((b * HQ + h) * SQ + r % SQ) * D_ + e % D_]) * SCALE_LOG2;
    }
    sQ[e] = x;
  }
  for (int i = tid; i < BQ; i += THREADS) {
    sM[i] = MT_NEG_INF;
    sL[i] = 0.f;
  }
  long long kvBegin, kvEnd;
  mt_key_range(r0, BQ, BKV, SPLITS, blockIdx.z, kvBegin, kvEnd);
  float acc[PV_N];
#pragma unroll
  for (int n = 0; n < PV_N; ++n)
    acc[n] = 0.f;
  const int sj = tid % BKV, sg = tid / BKV;
  for (long long j0 = kvBegin; j0 < kvEnd; j0 += BKV) {
    __syncthreads(); // the previous tile is consumed
    for (int e = tid; e < BKV * D_; e += THREADS) {
      const int j = e / D_, d = e % D_;
      float kx = 0.f, vx = 0.f;
      if (j0 + j < SKV) {
        kx = LOAD(k[kvBase + (j0 + j) * D_ + d]);
        vx = LOAD(v[kvBase + (j0 + j) * D_ + d]);
      }
      sK[j * KS + d] = kx;
      sV[j * D_ + d] = vx;
    }
    __syncthreads();
    {
      float s[SC_R];
#pragma unroll
      for (int t = 0; t < SC_R; ++t)
        s[t] = 0.f;
      for (int d = 0; d < D_; ++d) {
        const float kd = sK[sj * KS + d];
#pragma unroll
        for (int t = 0; t < SC_R; ++t)
          s[t] += sQ[(sg + t * SC_RG) * D_ + d] * kd;
      }
      const long long jj = j0 + sj;
#pragma unroll
      for (int t = 0; t < SC_R; ++t) {
        const int i = sg + t * SC_RG;
        const long long r = r0 + i;
        bool ok = r < ROWS && jj < SKV;
#if CAUSAL
        ok = ok && jj <= SKV - SQ + r % SQ;
#endif
#if HAS_MASK
        float x = MT_NEG_INF;
        if (ok)
          x = s[t] + MASK_AT(b, hk * GROUP + r / SQ, r % SQ, jj);
        sS[i * SS + sj] = x;
#else
        sS[i * SS + sj] = ok ? s[t] : MT_NEG_INF;
#endif
      }
    }
    __syncthreads();
    // Online softmax, a warp per row: rescale what was summed so far by
    // 2^(old max - new max).
    for (int i = warp; i < BQ; i += NW) {
      float mx = MT_NEG_INF;
      for (int j = lane; j < BKV; j += 32)
        mx = fmaxf(mx, sS[i * SS + j]);
      mx = mt_warp_max(mx);
      const float mold = sM[i], mnew = fmaxf(mold, mx);
      // A row that has seen no key yet has nothing to rescale.
      const float alpha = mnew == MT_NEG_INF ? 1.f : exp2f(mold - mnew);
      float sum = 0.f;
      for (int j = lane; j < BKV; j += 32) {
        const float x = sS[i * SS + j];
        const float p = x == MT_NEG_INF ? 0.f : exp2f(x - mnew);
        sS[i * SS + j] = p;
        sum += p;
      }
      sum = mt_warp_sum(sum);
      if (lane == 0) {
        sM[i] = mnew;
        sL[i] = sL[i] * alpha + sum;
        sA[i] = alpha;
      }
    }
    __syncthreads();
#if PV_SPLIT
    {
      const int d = tid % D_, g = tid / D_;
#pragma unroll
      for (int n = 0; n < PV_N; ++n)
        acc[n] *= sA[g + n * PV_RG];
      for (int j = 0; j < BKV; ++j) {
        const float vx = sV[j * D_ + d];
#pragma unroll
        for (int n = 0; n < PV_N; ++n)
          acc[n] += sS[(g + n * PV_RG) * SS + j] * vx;
      }
    }
#else
#pragma unroll
    for (int n = 0; n < PV_N; ++n) {
      const int e = tid + n * THREADS;
      if (e < BQ * D_) {
        const int i = e / D_, d = e % D_;
        float a = acc[n] * sA[i];
        for (int j = 0; j < BKV; ++j)
          a += sS[i * SS + j] * sV[j * D_ + d];
        acc[n] = a;
      }
    }
#endif
  }
  __syncthreads();
#if SPLITS > 1
  // Each split writes its unnormalised accumulators, running max and sum
  // to the workspace; the last split of the tile to finish (a counter per
  // tile, left at zero again) combines them:
  //   out = sum_s acc_s 2^(m_s - M) / sum_s l_s 2^(m_s - M), M = max_s m_s.
  {
    const long long tile = (long long)blockIdx.y * gridDim.x + blockIdx.x;
    float *part = ws + (tile * SPLITS + blockIdx.z) * (BQ * D_ + 2 * BQ);
#pragma unroll
    for (int n = 0; n < PV_N; ++n) {
#if PV_SPLIT
      part[(tid / D_ + n * PV_RG) * D_ + tid % D_] = acc[n];
#else
      if (tid + n * THREADS < BQ * D_)
        part[tid + n * THREADS] = acc[n];
#endif
    }
    for (int i = tid; i < BQ; i += THREADS) {
      part[BQ * D_ + i] = sM[i];
      part[BQ * D_ + BQ + i] = sL[i];
    }
)",
                                        R"(#else
#pragma unroll
  for (int n = 0; n < PV_N; ++n) {
#if PV_SPLIT
    const int i = tid / D_ + n * PV_RG, d = tid % D_;
#else
    const int e = tid + n * THREADS;
    if (e >= BQ * D_)
      continue;
    const int i = e / D_, d = e % D_;
#endif
    const long long r = r0 + i;
    if (r < ROWS) {
      const long long h = hk * GROUP + r / SQ;
      const float l = sL[i];
      out[((b * HQ + h) * SQ + r % SQ) * D_ + d] =
          STORE(l > 0.f ? acc[n] / l : MT_EMPTY_ROW);
    }
  }
#endif
}
)"};

static const char *MathBody = R"(
#define NW (THREADS / 32)
#define MT_NEG_INF (-__int_as_float(0x7f800000))
  __shared__ float sq[D_];
  __shared__ float red[NW];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const long long R = blockIdx.x; // a row of [B, HQ, SQ]
  const long long qi = R % SQ, h = (R / SQ) % HQ, b = R / (SQ * HQ);
  const long long kvBase = (b * HKV + h / GROUP) * (long long)SKV * D_;
  float *w = ws + R * (long long)SKV;
  for (int d = tid; d < D_; d += THREADS)
    sq[d] = LOAD(q[R * D_ + d]) * SCALE_LOG2;
  __syncthreads();
#if CAUSAL
  const long long last = SKV - SQ + qi;
#else
  const long long last = SKV - 1;
#endif
  (void)qi;
  (void)b;
  // Scores, a warp per key: lanes read consecutive elements of its row.
  float mx = MT_NEG_INF;
  for (long long j = warp; j <= last; j += NW) {
    float p = 0.f;
    for (int d = lane; d < D_; d += 32)
      p += sq[d] * LOAD(k[kvBase + j * D_ + d]);
    p = mt_warp_sum(p);
#if HAS_MASK
    p += MASK_AT(b, h, qi, j);
#endif
    if (lane == 0)
      w[j] = p;
    mx = fmaxf(mx, p);
  }
  mx = mt_block_max(mx, red);
  float sum = 0.f;
  for (long long j = tid; j <= last; j += THREADS) {
    // A masked key (-inf) weighs 0; so do all of a row masked everywhere
    // (mx = -inf), whose sum 0 makes its results NaN, as in PyTorch.
    const float p = w[j] == MT_NEG_INF ? 0.f : exp2f(w[j] - mx);
    w[j] = p;
    sum += p;
  }
  // Its barriers also make the probabilities visible to the whole block.
  sum = mt_block_sum(sum, red);
  const float inv = sum > 0.f ? 1.f / sum : MT_EMPTY_ROW;
  for (int d = tid; d < D_; d += THREADS) {
    float a = 0.f;
    for (long long j = 0; j <= last; ++j)
      a += w[j] * LOAD(v[kvBase + j * D_ + d]);
    out[R * D_ + d] = STORE(a * inv);
  }
}
)";

llvm::Expected<AttentionShape> codegen::emitAttentionHeader(
    llvm::raw_ostream &OS, const MultiTemplateBufferNode &N,
    llvm::StringRef Name, llvm::StringRef Choice, int Threads, bool Workspace,
    llvm::StringRef Helpers, llvm::StringRef LeadingParams, int MinBlocks) {
  std::optional<AttentionShape> S = attentionShapeOf(N);
  if (!S)
    return err("'%" + N.getName() + "' is not a well-formed attention");
  DType Dt = S->Dtype;
  if (Dt != DType::BF16 && Dt != DType::F16 && Dt != DType::F32)
    return err("attention kernels need bf16, f16 or f32, got " + dtypeName(Dt));
  const char *T = storageType(Dt);
  OS << Prelude << "\n// attention %" << N.getName() << ": q [" << S->B << ", "
     << S->Hq << ", " << S->Sq << ", " << S->D << "], k/v [" << S->B << ", "
     << S->Hkv << ", " << S->Skv << ", " << S->D << "]"
     << (S->Causal ? ", causal" : "") << (S->HasMask ? ", masked" : "")
     << ", choice " << Choice << "\n";
  OS << "#define HQ " << S->Hq << "LL\n#define HKV " << S->Hkv
     << "LL\n#define SQ " << S->Sq << "LL\n#define SKV " << S->Skv
     << "LL\n#define D_ " << S->D << "\n#define GROUP " << S->group()
     << "LL\n#define ROWS (GROUP * SQ) // packed query rows per kv head\n"
     << "#define CAUSAL " << (S->Causal ? 1 : 0) << "\n#define THREADS "
     << Threads << "\n"
     << "#define SCALE_LOG2 "
     << llvm::format("%.9ef", S->Scale * 1.4426950408889634)
     << " // scale * log2(e): softmax with exp2f\n"
     << loadMacro(Dt) << "#define STORE(x) " << storeExpr(Dt, "(x)") << "\n"
     << "#define HAS_MASK " << (S->HasMask ? 1 : 0)
     << "\n"
     // A row masked everywhere: NaN, as PyTorch's softmax (without a mask
     // every row sees a key).
     << "#define MT_EMPTY_ROW "
     << (S->HasMask ? "__int_as_float(0x7fc00000)" : "0.f") << "\n";
  if (S->HasMask) {
    // Element strides of the mask's batch, head and query dimensions: 0
    // where it broadcasts.
    int64_t SQ = S->MaskSq == 1 ? 0 : S->Skv;
    int64_t SH = S->MaskH == 1 ? 0 : S->MaskSq * S->Skv;
    int64_t SB = S->MaskB == 1 ? 0 : S->MaskH * S->MaskSq * S->Skv;
    OS << "// mask [" << S->MaskB << ", " << S->MaskH << ", " << S->MaskSq
       << ", " << S->Skv << "] " << dtypeName(S->MaskDtype) << "\n"
       << "#define MASK_SB " << SB << "LL\n#define MASK_SH " << SH
       << "LL\n#define MASK_SQ " << SQ << "LL\n#define MASK_T "
       << storageType(S->MaskDtype) << "\n#define MASK_F32 "
       << (S->MaskDtype == DType::F32 ? 1 : 0) << "\n#define MASK_VEC "
       << (S->Skv % 2 == 0 ? 1 : 0) << "\n"
       << loadMacro(S->MaskDtype, "MLOAD") << MaskHelper;
  }
  OS << Helpers;
  // A kernel with leading (tensor map) parameters runs MinBlocks CTAs per
  // SM.
  OS << "extern \"C\" __global__ void __launch_bounds__(THREADS"
     << (LeadingParams.empty() ? ""
                               : ", " + std::to_string(std::max(1, MinBlocks)))
     << ") " << Name << "(" << LeadingParams << "const " << T
     << " *__restrict__ q, const " << T << " *__restrict__ k, const " << T
     << " *__restrict__ v, ";
  if (S->HasMask)
    OS << "const " << storageType(S->MaskDtype) << " *__restrict__ mask, ";
  OS << T << " *__restrict__ out"
     << (Workspace ? ", float *__restrict__ ws" : "") << ") {\n";
  return *S;
}

llvm::Expected<KernelSource> codegen::buildFlashKernel(
    const MultiTemplateBufferNode &N, const AttentionTile &T,
    const AttentionShape &S, int Threads, int64_t Smem, llvm::StringRef Helpers,
    llvm::StringRef Defines, llvm::ArrayRef<const char *> Body) {
  std::string ChoiceName = attentionChoiceName(T);
  if (Smem > FlashAttentionMaxSharedBytes)
    return err("tile " + ChoiceName + " needs " + llvm::Twine(Smem) +
               " bytes of shared memory at head dimension " + llvm::Twine(S.D) +
               ", more than a CTA may use");
  int64_t Tiles = (S.group() * S.Sq + T.BQ - 1) / T.BQ;
  if (Tiles > 0x7fffffff || S.B * S.Hkv > 65535)
    return err("the flash grid exceeds CUDA's limits");
  KernelSource K;
  K.Name = sanitizeIdentifier(N.getName() + "_" + ChoiceName);
  std::string Src;
  llvm::raw_string_ostream OS(Src);
  llvm::Expected<AttentionShape> Header =
      emitAttentionHeader(OS, N, K.Name, ChoiceName, Threads, T.Splits > 1,
                          (KeyRange + Helpers).str());
  if (!Header)
    return Header.takeError();
  OS << "#define BQ " << T.BQ << "\n#define BKV " << T.BKV
     << "\n#define SPLITS " << T.Splits << "\n"
     << Defines;
  emitWithCombine(OS, Body);
  K.Source = OS.str();
  K.Inputs = {N.getOperand(0), N.getOperand(1), N.getOperand(2)};
  if (S.HasMask)
    K.Inputs.push_back(N.getOperand(3));
  K.Outputs = {N.getResult()};
  K.GridX = unsigned(std::max<int64_t>(1, Tiles));
  K.GridY = unsigned(std::max<int64_t>(1, S.B * S.Hkv));
  K.GridZ = unsigned(T.Splits);
  if (T.Splits > 1) {
    // Per CTA its accumulators, running max and sum; per tile a counter.
    uint64_t TilesXY = uint64_t(K.GridX) * K.GridY;
    K.WorkspaceBytes =
        TilesXY * T.Splits * (uint64_t(T.BQ) * S.D + 2 * T.BQ) * 4 +
        TilesXY * 4;
  }
  K.BlockX = Threads;
  K.SharedBytes = unsigned(Smem);
  return K;
}

llvm::Expected<KernelSource>
mtsched::generateFlashAttentionKernel(const MultiTemplateBufferNode &N,
                                      const AttentionTile &T) {
  if (T.Wg)
    return generateWgAttentionKernel(N, T);
  if (T.Dec)
    return generateDecAttentionKernel(N, T);
  if (T.Mma)
    return generateMmaAttentionKernel(N, T);
  int Threads = 32 * T.Warps;
  if (T.Warps <= 0 || T.Warps > 32 || T.BQ <= 0 || T.BKV <= 0 ||
      T.Splits <= 0 || T.Splits > 1024 || Threads % T.BKV ||
      T.BQ % (Threads / T.BKV))
    return err("tile " + attentionChoiceName(T) +
               " cannot run: BKV must divide the block's threads and the "
               "threads left over must divide BQ");
  std::optional<AttentionShape> S = attentionShapeOf(N);
  if (!S)
    return err("'%" + N.getName() + "' is not a well-formed attention");
  return buildFlashKernel(N, T, *S, Threads,
                          flashAttentionSharedBytes(T.BQ, T.BKV, S->D), "", "",
                          FlashBody);
}

llvm::Expected<KernelSource>
mtsched::generateMathAttentionKernel(const MultiTemplateBufferNode &N) {
  KernelSource K;
  K.Name = sanitizeIdentifier(N.getName() + "_" + AttentionMathChoice.str());
  std::string Src;
  llvm::raw_string_ostream OS(Src);
  constexpr int Threads = 128;
  llvm::Expected<AttentionShape> S = emitAttentionHeader(
      OS, N, K.Name, AttentionMathChoice, Threads, /*Workspace=*/true);
  if (!S)
    return S.takeError();
  int64_t Rows = S->B * S->Hq * S->Sq;
  if (Rows > 0x7fffffff)
    return err("attn_math runs a CTA per query row; " + llvm::Twine(Rows) +
               " rows exceed CUDA's grid");
  if (S->D * 4 > 32 * 1024)
    return err("attn_math keeps a query row in shared memory; head "
               "dimension " +
               llvm::Twine(S->D) + " is too large");
  OS << MathBody;
  K.Source = OS.str();
  K.Inputs = {N.getOperand(0), N.getOperand(1), N.getOperand(2)};
  if (S->HasMask)
    K.Inputs.push_back(N.getOperand(3));
  K.Outputs = {N.getResult()};
  K.GridX = unsigned(std::max<int64_t>(1, Rows));
  K.BlockX = Threads;
  K.WorkspaceBytes = uint64_t(std::max<int64_t>(1, Rows)) *
                     uint64_t(std::max<int64_t>(1, S->Skv)) * 4;
  return K;
}

llvm::Expected<KernelSource>
mtsched::generateAttentionKernel(const MultiTemplateBufferNode &N,
                                 const Choice &C) {
  if (std::optional<AttentionTile> T = attentionTileOf(C))
    return generateFlashAttentionKernel(N, *T);
  if (C.Name == AttentionMathChoice)
    return generateMathAttentionKernel(N);
  return err("'" + C.Name + "' is not an attention choice");
}
