//===- WgmmaHelpers.cpp - Device code the wgmma templates share -----------===//
//
// The pieces of kernel text and the launch arithmetic that the Hopper
// templates share (GemmCodegen.h): the barrier, TMA, descriptor and wgmma
// helpers (the GEMM's and the merged SwiGLU's, WgmmaGemm.cpp and
// SwiGluGemm.cpp, and the attention template's), the accumulator walks of
// a wgmma tile, the wgmma instruction of a tile width, the TMA maps, and
// the registers setmaxnreg can give the consumers.
//
//===----------------------------------------------------------------------===//
#include "GemmCodegen.h"

using namespace mtsched;
using namespace mtsched::codegen;

/// Registers of one SM, all of them one CTA's.
static constexpr int RegsPerSM = 65536;
/// What the producer keeps: it only computes coordinates.
static constexpr int ProducerRegs = WgmmaProducerRegs;

/// Barriers, TMA, descriptors and wgmma fences (also the attention
/// template's, AttentionWgKernels.cpp).
const char *const codegen::WgmmaHelpers = R"(

// A CUtensorMap, filled in by the launcher (cuTensorMapEncodeTiled).
struct __align__(64) mt_tensor_map {
  unsigned long long opaque[16];
};

__device__ __forceinline__ unsigned mt_smem_addr(const void *p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }"
      : "=r"(a) : "l"(p));
  return a;
}
__device__ __forceinline__ void mt_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar),
               "r"(count));
}
// Arrives and makes the current phase also wait for `bytes` of copies.
__device__ __forceinline__ void mt_mbar_expect(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                   bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mt_mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar)
               : "memory");
}
// Returns once the phase of parity `parity` has completed; the phase before
// the first counts as completed with parity 1.
__device__ __forceinline__ void mt_mbar_wait(unsigned bar, unsigned parity) {
  asm volatile("{\n"
               ".reg .pred done;\n"
               "MT_WAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra MT_WAIT;\n"
               "}\n" ::"r"(bar), "r"(parity) : "memory");
}
// One box of a 3-d tensor map into shared memory; completes on `bar`.
__device__ __forceinline__ void mt_tma_load(unsigned dst,
                                            const mt_tensor_map &map,
                                            unsigned bar, int x, int y,
                                            int z) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::"
      "complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(dst),
      "l"(&map), "r"(bar), "r"(x), "r"(y), "r"(z) : "memory");
}
// wgmma shared-memory matrix descriptor with 128-byte swizzle: start
// address, leading and stride byte offsets, each in 16-byte units.
__device__ __forceinline__ unsigned long long mt_desc(unsigned addr,
                                                      unsigned lbo,
                                                      unsigned sbo) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) |
         ((unsigned long long)(lbo >> 4) << 16) |
         ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void mt_wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void mt_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
#define MT_WGMMA_WAIT(n) \
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(n) : "memory")
// Keeps the compiler from touching an accumulator across a wgmma wait.
__device__ __forceinline__ void mt_fence_acc(float &x) {
  asm volatile("" : "+f"(x)::"memory");
}
)";

/// The accumulator walks of a wgmma tile (FOR_EACH_ACC and its kin, the
/// row slots) over `acc` (BN / 2 per thread), `cw`, `warp`, `lane`, `bz`,
/// `m0`, `n0` and INTERIOR: the GEMM template's and the merged SwiGLU's.
const char *const codegen::WgmmaAccMacros = R"(
// Accumulator j*4 + i of this thread sits at row rl (below), column
// n0 + j*8 + 2*(lane%4) + i%2: the m16n8 fragment layout, repeated.
#define FOR_EACH_ACC(STMT)                                                     \
  _Pragma("unroll") for (int j = 0; j < BN / 8; ++j)                           \
  _Pragma("unroll") for (int i = 0; i < 4; ++i) {                              \
    const int rl = cw * 64 + warp * 16 + (lane >> 2) + ((i & 2) ? 8 : 0);      \
    const long long r = bz * M_ + m0 + rl;                                     \
    const long long c = n0 + j * 8 + (lane & 3) * 2 + (i & 1);                 \
    float &v = acc[j * 4 + i];                                                 \
    (void)rl; (void)r; (void)c; (void)v;                                       \
    if (INTERIOR || m0 + rl < M_) STMT                                         \
  }
#define FOR_EACH_ACC_PAIR(STMT)                                                \
  _Pragma("unroll") for (int j = 0; j < BN / 8; ++j)                           \
  _Pragma("unroll") for (int i = 0; i < 4; i += 2) {                           \
    const int rl = cw * 64 + warp * 16 + (lane >> 2) + ((i & 2) ? 8 : 0);      \
    const long long r = bz * M_ + m0 + rl;                                     \
    const long long c = n0 + j * 8 + (lane & 3) * 2;                           \
    const float v0 = acc[j * 4 + i], v1 = acc[j * 4 + i + 1];                  \
    if (INTERIOR || m0 + rl < M_) STMT                                         \
  }
// Every accumulator, with (r, c) clamped into the output outside it (the
// epilogue's loads then need no branch; INTERIOR tiles need no clamp).
#define FOR_EACH_ACC_CLAMPED(STMT)                                             \
  _Pragma("unroll") for (int j = 0; j < BN / 8; ++j)                           \
  _Pragma("unroll") for (int i = 0; i < 4; ++i) {                              \
    const int rl = cw * 64 + warp * 16 + (lane >> 2) + ((i & 2) ? 8 : 0);      \
    const long long r =                                                        \
        bz * M_ + (INTERIOR ? m0 + rl : min(m0 + rl, M_ - 1));                 \
    const long long c0 = n0 + j * 8 + (lane & 3) * 2 + (i & 1);                \
    const long long c = INTERIOR ? c0 : min(c0, N_ - 1);                       \
    float &v = acc[j * 4 + i];                                                 \
    (void)rl; (void)r; (void)c; (void)v;                                       \
    STMT                                                                       \
  }
// Every accumulator, in range or not, with e its element of the BM x BN
// tile (split-K partials).
#define FOR_EACH_TILE_ACC(STMT)                                                \
  _Pragma("unroll") for (int j = 0; j < BN / 8; ++j)                           \
  _Pragma("unroll") for (int i = 0; i < 4; ++i) {                              \
    const int e = (cw * 64 + warp * 16 + (lane >> 2) + ((i & 2) ? 8 : 0)) *    \
                      BN +                                                     \
                  j * 8 + (lane & 3) * 2 + (i & 1);                            \
    float &v = acc[j * 4 + i];                                                 \
    STMT                                                                       \
  }
// Rows rl and rl + 8 of this thread are its row slots 0 and 1.
#define ROW_SLOTS 2
#define ROW_SLOT (i >> 1)
#define FOR_EACH_ROW_SLOT(STMT)                                                \
  _Pragma("unroll") for (int h = 0; h < 2; ++h) {                              \
    const int rl = cw * 64 + warp * 16 + (lane >> 2) + h * 8;                  \
    STMT                                                                       \
  }

)";

std::string codegen::wgmmaFunction(int N, const char *Type,
                                   llvm::StringRef Name, bool TransB,
                                   bool RegisterA) {
  int Regs = N / 2;
  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << "__device__ __forceinline__ void " << Name << "(float *d, "
     << (RegisterA ? "const unsigned *a" : "unsigned long long a") << ",\n"
     << "    unsigned long long b) {\n"
     << "  asm volatile(\"wgmma.mma_async.sync.aligned.m64n" << N << "k16.f32."
     << Type << "." << Type << " {\"\n";
  for (int I = 0; I < Regs; I += 8) {
    OS << "               \"";
    for (int J = I; J < I + 8 && J < Regs; ++J)
      OS << "%" << J << (J + 1 < Regs ? ", " : "");
    OS << "\"\n";
  }
  // scale-d 1 (accumulate), A and B scales 1, then (A from shared memory
  // only) A K-major, and B MN-major ("transposed") or K-major.
  int B = Regs + (RegisterA ? 4 : 1);
  if (RegisterA)
    OS << "               \"}, {%" << Regs << ", %" << Regs + 1 << ", %"
       << Regs + 2 << ", %" << Regs + 3 << "}, %" << B << ", 1, 1, 1, "
       << (TransB ? 1 : 0) << ";\"\n               : ";
  else
    OS << "               \"}, %" << Regs << ", %" << B << ", 1, 1, 1, 0, "
       << (TransB ? 1 : 0) << ";\"\n               : ";
  for (int I = 0; I < Regs; ++I)
    OS << "\"+f\"(d[" << I << "])" << (I + 1 < Regs ? ", " : "")
       << ((I + 1) % 6 == 0 && I + 1 < Regs ? "\n                 " : "");
  if (RegisterA)
    OS << "\n               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), "
          "\"r\"(a[3]), \"l\"(b));\n}\n";
  else
    OS << "\n               : \"l\"(a), \"l\"(b));\n}\n";
  return OS.str();
}

TensorMapParam codegen::wgmmaTensorMap(unsigned Param, int64_t Inner,
                                       int64_t Rows, int64_t Batch,
                                       uint32_t BoxInner, uint32_t BoxRows) {
  TensorMapParam M;
  M.Input = Param;
  M.Dims[0] = uint64_t(Inner);
  M.Dims[1] = uint64_t(Rows);
  M.Dims[2] = uint64_t(Batch);
  M.Strides[0] = uint64_t(Inner) * 2;
  M.Strides[1] = uint64_t(Rows) * Inner * 2;
  M.Box[0] = BoxInner;
  M.Box[1] = BoxRows;
  return M;
}

int codegen::wgmmaConsumerRegs(int Consumers) {
  // setmaxnreg only moves registers within the CTA's launch allocation:
  // every thread starts with RegsPerSM / THREADS, rounded down to the
  // allocation unit of 8 (the kernel is bounded to one CTA per SM), the
  // producer gives back what it does not keep, and the consumers can take
  // only that. A consumer asking for more waits forever: 256-row tiles
  // (640 threads, 96 registers each at launch) asked for 112 and hung.
  int Threads = (Consumers + 1) * 128;
  int LaunchRegs = std::min(255, RegsPerSM / Threads) / 8 * 8;
  int Pool = Threads * LaunchRegs - 128 * ProducerRegs;
  return std::min(256, Pool / (128 * Consumers) / 8 * 8);
}
