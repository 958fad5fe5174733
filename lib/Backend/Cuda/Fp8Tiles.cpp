//===- Fp8Tiles.cpp - fp8 operands of the mma.sync GEMM template ---------===//
//
// The copy and widening of fp8 k-tiles (f8e4m3, f8e5m2) for the mma.sync
// template: raw tiles land in shared memory by cp.async, and each is
// widened (exactly, sm_89+ conversions) into an f16 tile the f16 MMAs read.
// Appended after the tensor-core main loop (emitTensorCoreMainLoop); it defines
// MT_LOAD and mt_operand for both forms of the template.
//
//===----------------------------------------------------------------------===//
#include "GemmCodegen.h"

using namespace mtsched;

const char *const codegen::Fp8TileCopy = R"(#if FP8
// fp8 operands: STAGES raw k-tiles (BM x BK of A, BK x BN of B, a byte an
// element) land by cp.async; each is then widened (exactly) into one of
// two f16 tiles, which the MMAs read.
__device__ __forceinline__ void mt_load_tile8(unsigned char *rA,
                                              unsigned char *rB,
                                              const unsigned char *A,
                                              const unsigned char *B,
                                              long long m0, long long n0,
                                              int stage, int kt) {
  const int tid = threadIdx.x;
  const long long k0 = (long long)kt * BK;
  unsigned char *a = rA + stage * (BM * BK);
  unsigned char *b = rB + stage * (BK * BN);
#if ALIGNED16
  #pragma unroll
  for (int ch = tid; ch < BM * BK / 16; ch += THREADS) {
    const int row = ch / (BK / 16), kc = (ch % (BK / 16)) * 16;
    const long long gm = m0 + row, gk = k0 + kc;
    const bool ok = gm < M_ && gk < K_;
    mt_cp_async16(a + row * BK + kc, ok ? A + gm * K_ + gk : A, ok ? 16 : 0);
  }
  #pragma unroll
  for (int ch = tid; ch < BK * BN / 16; ch += THREADS) {
    const int row = ch / (BN / 16), nc = (ch % (BN / 16)) * 16;
    const long long gk = k0 + row, gn = n0 + nc;
    const bool ok = gk < K_ && gn < N_;
    mt_cp_async16(b + row * BN + nc, ok ? B + gk * N_ + gn : B, ok ? 16 : 0);
  }
#else
  // Rows not 16-byte aligned: element-wise predicated copies.
  for (int e = tid; e < BM * BK; e += THREADS) {
    const int row = e / BK, kk = e % BK;
    const long long gm = m0 + row, gk = k0 + kk;
    a[e] = (gm < M_ && gk < K_) ? A[gm * K_ + gk] : (unsigned char)0;
  }
  for (int e = tid; e < BK * BN; e += THREADS) {
    const int row = e / BN, nn = e % BN;
    const long long gk = k0 + row, gn = n0 + nn;
    b[e] = (gk < K_ && gn < N_) ? B[gk * N_ + gn] : (unsigned char)0;
  }
#endif
}

// Four fp8 bytes of x as four halves, exactly (lo: bytes 0 and 1, hi: 2
// and 3): the sm_89+ conversion, two elements an instruction.
#if __CUDA_ARCH__ < 890
#error "fp8 GEMM tiles need sm_89 or newer: cvt.rn.f16x2.e4m3x2"
#endif
__device__ __forceinline__ void mt_widen4_f8e4m3(unsigned x, unsigned &lo,
                                                 unsigned &hi) {
  asm("{ .reg .b16 l, h;\n  mov.b32 {l, h}, %2;\n"
      "  cvt.rn.f16x2.e4m3x2 %0, l;\n  cvt.rn.f16x2.e4m3x2 %1, h;\n}"
      : "=r"(lo), "=r"(hi) : "r"(x));
}
__device__ __forceinline__ void mt_widen4_f8e5m2(unsigned x, unsigned &lo,
                                                 unsigned &hi) {
  asm("{ .reg .b16 l, h;\n  mov.b32 {l, h}, %2;\n"
      "  cvt.rn.f16x2.e5m2x2 %0, l;\n  cvt.rn.f16x2.e5m2x2 %1, h;\n}"
      : "=r"(lo), "=r"(hi) : "r"(x));
}

// Widens raw stage `stage` into the f16 tiles sA (BM x AS) and sB (BK x BS),
// eight elements (16 bytes of halves) per step.
__device__ __forceinline__ void mt_widen_tile8(unsigned short *sA,
                                               unsigned short *sB,
                                               const unsigned char *rA,
                                               const unsigned char *rB,
                                               int stage) {
  const int tid = threadIdx.x;
  const unsigned char *a = rA + stage * (BM * BK);
  const unsigned char *b = rB + stage * (BK * BN);
  // Trip counts known at compile time, so the loops unroll: every thread
  // issues all its shared-memory loads before the first conversion waits
  // on one (a few warps per SM must hide the latency themselves).
#define A_CH (BM * BK / 8)
#define B_CH (BK * BN / 8)
  uint2 xa[(A_CH + THREADS - 1) / THREADS], xb[(B_CH + THREADS - 1) / THREADS];
  #pragma unroll
  for (int it = 0; it < (A_CH + THREADS - 1) / THREADS; ++it) {
    const int ch = tid + it * THREADS;
    if (A_CH % THREADS == 0 || ch < A_CH)
      xa[it] = *(const uint2 *)(a + ch * 8);
  }
  #pragma unroll
  for (int it = 0; it < (B_CH + THREADS - 1) / THREADS; ++it) {
    const int ch = tid + it * THREADS;
    if (B_CH % THREADS == 0 || ch < B_CH)
      xb[it] = *(const uint2 *)(b + ch * 8);
  }
  #pragma unroll
  for (int it = 0; it < (A_CH + THREADS - 1) / THREADS; ++it) {
    const int ch = tid + it * THREADS;
    if (A_CH % THREADS == 0 || ch < A_CH) {
      const int row = ch / (BK / 8), kc = (ch % (BK / 8)) * 8;
      uint4 h;
      MT_WIDEN_A(xa[it].x, h.x, h.y);
      MT_WIDEN_A(xa[it].y, h.z, h.w);
      *(uint4 *)(sA + row * AS + kc) = h;
    }
  }
  #pragma unroll
  for (int it = 0; it < (B_CH + THREADS - 1) / THREADS; ++it) {
    const int ch = tid + it * THREADS;
    if (B_CH % THREADS == 0 || ch < B_CH) {
      const int row = ch / (BN / 8), nc = (ch % (BN / 8)) * 8;
      uint4 h;
      MT_WIDEN_B(xb[it].x, h.x, h.y);
      MT_WIDEN_B(xb[it].y, h.z, h.w);
      *(uint4 *)(sB + row * BS + nc) = h;
    }
  }
#undef A_CH
#undef B_CH
}
#define MT_LOAD(s, kt) mt_load_tile8(rA, rB, A, B, m0, n0, (s), (kt))
typedef unsigned char mt_operand;
#else
#define MT_LOAD(s, kt) mt_load_tile(sA, sB, A, B, m0, n0, (s), (kt))
typedef unsigned short mt_operand;
#endif
)";
