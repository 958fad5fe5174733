//===- PrologueCostTest.cpp - The roofline price of a GEMM prologue -------===//
//
// TimePredictor::prologueUs (docs/SIMULATOR.md): every CTA of an mma.sync
// tile rereads its rows of x from L2; other templates run no prologue.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Autotune/TimePredictor.h"
#include "mtsched/Lowering/ChoiceConfig.h"
#include "gtest/gtest.h"
#include <cmath>

using namespace mtsched;

namespace {

Workload gemm(int64_t M, int64_t N, int64_t K) {
  Workload W;
  W.K = Workload::Kind::Gemm;
  W.Gemm.M = M;
  W.Gemm.N = N;
  W.Gemm.K = K;
  W.Gemm.Dtype = DType::BF16;
  return W;
}

Choice tile(const GemmTileConfig &T) {
  return Choice{gemmChoiceName(T), {}, {}};
}

} // namespace

TEST(PrologueCost, RowsRereadFromL2PerCta) {
  DeviceDesc D; // H200 defaults
  std::unique_ptr<TimePredictor> P = createRooflinePredictor(D);
  GemmTileConfig T{16, 64, 64, 4, 8};
  T.SplitK = 2;
  // M = 16, N = 14336: 224 column tiles x 2 slices, 16 rows of 4096 bf16
  // each, at 3x HBM's 4800 GB/s.
  double Us = P->prologueUs(gemm(16, 14336, 4096), tile(T));
  EXPECT_NEAR(Us, 448.0 * 16 * 4096 * 2 / (3 * 4800e3), 1e-9);
  // One row at M = 1: a sixteenth of it.
  EXPECT_NEAR(P->prologueUs(gemm(1, 14336, 4096), tile(T)), Us / 16, 1e-9);
  // Without split-K, half the CTAs.
  GemmTileConfig U{16, 64, 64, 4, 8};
  EXPECT_NEAR(P->prologueUs(gemm(16, 14336, 4096), tile(U)), Us / 2, 1e-9);
  // Prefill costs far more than a norm kernel's pass over x.
  GemmTileConfig Big{128, 128, 64, 4, 3};
  EXPECT_GT(P->prologueUs(gemm(2048, 4096, 4096), tile(Big)), 30.0);
}

TEST(PrologueCost, OnlyMmaSyncAndSwiGluTilesRunAPrologue) {
  DeviceDesc D;
  std::unique_ptr<TimePredictor> P = createRooflinePredictor(D);
  Workload W = gemm(16, 4096, 4096);
  EXPECT_TRUE(std::isinf(P->prologueUs(W, tile(wgmmaTile(64, 128, 64, 4)))));
  EXPECT_TRUE(std::isinf(P->prologueUs(W, Choice{"extern.cublas", {}, {}})));
  Workload A = W;
  A.K = Workload::Kind::Attention;
  EXPECT_TRUE(
      std::isinf(P->prologueUs(A, tile(GemmTileConfig{16, 64, 64, 4, 8}))));
  // SwiGLU's merged GEMM: a swiglu tile, a CTA per output tile.
  Workload S = gemm(16, 7168, 4096);
  S.K = Workload::Kind::SwiGlu;
  GemmTileConfig U{16, 64, 64, 4, 4};
  EXPECT_NEAR(P->prologueUs(S, Choice{swigluChoiceName(U), {}, {}}),
              112.0 * 16 * 4096 * 2 / (3 * 4800e3), 1e-9);
  EXPECT_TRUE(std::isinf(P->prologueUs(S, tile(U))));
}
