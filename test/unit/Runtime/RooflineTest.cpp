#include "mtsched/Runtime/Roofline.h"
#include "gtest/gtest.h"
#include <cmath>
#include <limits>

using namespace mtsched;

namespace {

constexpr int64_t KB = 1024, MB = 1024 * 1024;

DeviceDesc h200() { return cantFail(getBuiltinDevice("h200")); }
DeviceDesc h100() { return cantFail(getBuiltinDevice("h100")); }

GemmProblem gemm(int64_t M, int64_t N, int64_t K) {
  return GemmProblem{1, M, N, K, DType::BF16, {}};
}

const GemmTile Big{128, 256, 64, 8, 3};
const GemmTile Mid{128, 128, 64, 4, 3};
const EpilogueDesc NoEpilogue{};

/// bias add + relu on an M x N bf16 output.
EpilogueDesc biasRelu(int64_t M, int64_t N) {
  EpilogueDesc E;
  E.Elements = M * N;
  E.ExtraInputBytes = N * 2;
  E.FlopsPerElement = 2;
  E.NumOps = 2;
  return E;
}

/// residual add + rmsnorm on an M x N bf16 output.
EpilogueDesc residualRmsNorm(int64_t M, int64_t N) {
  EpilogueDesc E;
  E.Elements = M * N;
  E.ExtraInputBytes = M * N * 2 + N * 2;
  E.FlopsPerElement = 5;
  E.RowReduction = true;
  E.NumOps = 2;
  return E;
}

double allReduce(CollectiveAlgo A, int64_t Bytes, int Ranks = 2,
                 const EpilogueDesc &E = NoEpilogue) {
  return collectiveTimeUs(h200(), CollectiveKind::AllReduce, A, Bytes, Ranks,
                          E);
}

TEST(RooflineTest, GemmIsMonotonicInSize) {
  DeviceDesc D = h200();
  double Prev = 0;
  for (int64_t S : {256, 512, 1024, 2048, 4096, 8192}) {
    double T = gemmTimeUs(D, gemm(S, S, S), Big, NoEpilogue);
    EXPECT_GT(T, Prev) << S;
    Prev = T;
  }
  Prev = 0;
  for (int64_t M : {1, 16, 64, 256, 1024, 4096, 16384}) {
    double T = externGemmTimeUs(D, gemm(M, 4096, 4096));
    EXPECT_GE(T, Prev) << M;
    Prev = T;
  }
  // Batches add up.
  GemmProblem P = gemm(1024, 1024, 1024);
  double One = gemmTimeUs(D, P, Big, NoEpilogue);
  // 1024^3 fills only 32 of the 132 SMs, so eight of them cost more than
  // one but far less than eight.
  P.Batch = 8;
  double Eight = gemmTimeUs(D, P, Big, NoEpilogue);
  EXPECT_GT(Eight, 1.5 * One);
  EXPECT_LT(Eight, 8 * One);
}

TEST(RooflineTest, GemmTileQuantisationIsVisible) {
  DeviceDesc D = h200();
  auto T = [&](int64_t M, int64_t K) {
    return gemmTimeUs(D, gemm(M, 256 * 11, K), Big, NoEpilogue);
  };
  // One row more than 12 tiles of 128 costs a 13th row of tiles: nearly as
  // much as a problem padded to 13 * 128 rows (only the operand reads and
  // the output write stay exact), and it needs a second wave.
  EXPECT_NEAR(T(128 * 12 + 1, 8192), T(128 * 13, 8192),
              0.01 * T(128 * 13, 8192));
  EXPECT_GT(T(128 * 12 + 1, 8192), 1.5 * T(128 * 12, 8192));
  // K is padded to a multiple of BK the same way.
  EXPECT_NEAR(T(128 * 12, 8192 + 1), T(128 * 12, 8192 + 64),
              0.01 * T(128 * 12, 8192 + 64));
  EXPECT_GT(T(128 * 12, 8192 + 1), T(128 * 12, 8192));
  // A 16-row problem computes a whole 128-row tile.
  double Rows16 = gemmTimeUs(D, gemm(16, 4096, 8192), Big, NoEpilogue);
  double Rows128 = gemmTimeUs(D, gemm(128, 4096, 8192), Big, NoEpilogue);
  EXPECT_GT(Rows16, 0.9 * Rows128);
}

TEST(RooflineTest, GemmWaveQuantisationIsVisible) {
  DeviceDesc D = h200();
  // 128x256x64 with 3 stages fits one CTA per SM: 132 CTAs are one wave,
  // 133 are two, and the second wave costs nearly as much as the first.
  const int64_t K = 8192;
  GemmProblem OneWave = gemm(128 * 12, 256 * 11, K); // 132 CTAs
  GemmProblem TwoWaves = gemm(128 * 19, 256 * 7, K); // 133 CTAs
  double T1 = gemmTimeUs(D, OneWave, Big, NoEpilogue) - D.LaunchUs;
  double T2 = gemmTimeUs(D, TwoWaves, Big, NoEpilogue) - D.LaunchUs;
  // Useful work grew by less than 1%.
  EXPECT_GT(T2, 1.7 * T1);
}

TEST(RooflineTest, GemmEfficiencyFollowsTileAndPipeline) {
  DeviceDesc D = h200();
  GemmProblem P = gemm(8192, 8192, 8192);
  auto T = [&](GemmTile Tile) { return gemmTimeUs(D, P, Tile, NoEpilogue); };
  // Bigger tiles and deeper pipelines approach peak...
  EXPECT_LT(T({128, 128, 64, 4, 3}), T({64, 64, 64, 4, 3}));
  EXPECT_LT(T({64, 64, 64, 4, 3}), T({32, 32, 32, 4, 3}));
  EXPECT_LT(T({128, 128, 64, 4, 3}), T({128, 128, 64, 4, 2}));
  EXPECT_LT(T({128, 128, 64, 4, 2}), T({128, 128, 64, 4, 1}));
  // Fewer than four warps leave tensor-core sub-partitions idle.
  EXPECT_LT(T({64, 64, 64, 4, 3}), T({64, 64, 64, 1, 3}));
  // ...but never beyond it.
  double PeakUs = 2.0 * 8192 * 8192 * 8192 / (D.PeakBf16Tflops * 1e6);
  EXPECT_GT(T(Big), PeakUs);
  // Tiny tiles re-read their operands and fall far behind.
  EXPECT_GT(T({16, 16, 16, 4, 2}), 3 * T(Big));
}

TEST(RooflineTest, GemmOutOfResourcesIsInfinite) {
  DeviceDesc D = h200();
  GemmProblem P = gemm(4096, 4096, 4096);
  // 256x256x128 bf16 with 4 stages needs 512 KB of shared memory.
  EXPECT_TRUE(std::isinf(gemmTimeUs(D, P, {256, 256, 128, 8, 4}, NoEpilogue)));
  // 256 accumulators per thread do not fit in 255 registers.
  EXPECT_TRUE(std::isinf(gemmTimeUs(D, P, {256, 128, 32, 4, 2}, NoEpilogue)));
  // More than 1024 threads.
  EXPECT_TRUE(std::isinf(gemmTimeUs(D, P, {128, 128, 32, 64, 2}, NoEpilogue)));
  EXPECT_TRUE(std::isinf(gemmTimeUs(D, P, {0, 128, 32, 4, 2}, NoEpilogue)));
  EXPECT_TRUE(std::isinf(gemmTimeUs(D, gemm(-1, 8, 8), Big, NoEpilogue)));
}

TEST(RooflineTest, ExternGemmMatchesAnchor) {
  // ANCHORS.md: cuBLAS 4096^3 bf16 on H200, 174.8 us.
  double T = externGemmTimeUs(h200(), gemm(4096, 4096, 4096));
  EXPECT_NEAR(T, 174.8, 0.2 * 174.8);
  // And it is not far behind peak, nor ahead of it.
  double PeakUs = 2.0 * 4096 * 4096 * 4096 / (989 * 1e6);
  EXPECT_GT(T, PeakUs);
  EXPECT_LT(T, PeakUs / 0.7);
}

TEST(RooflineTest, WgmmaTemplateMatchesMeasurement) {
  DeviceDesc D = h200();
  GemmTile Wg{128, 256, 64, 12, 4, /*Wgmma=*/true};
  // docs/BENCHMARKS.md: 197 us at 4096^3 on H200, 88% of cuBLAS.
  double T = gemmTimeUs(D, gemm(4096, 4096, 4096), Wg, NoEpilogue);
  EXPECT_NEAR(T, 197, 0.1 * 197);
  EXPECT_GT(T, externGemmTimeUs(D, gemm(4096, 4096, 4096)));
  // Deeper pipelines and larger tiles help, as for the other templates.
  GemmTile Shallow = Wg;
  Shallow.Stages = 2;
  EXPECT_LT(T, gemmTimeUs(D, gemm(4096, 4096, 4096), Shallow, NoEpilogue));
  GemmTile Narrow{64, 128, 64, 8, 4, true};
  EXPECT_LT(T, gemmTimeUs(D, gemm(4096, 4096, 4096), Narrow, NoEpilogue));
}

TEST(RooflineTest, ExternGemmIsGoodAtSmallM) {
  DeviceDesc D = h200();
  for (int64_t M : {16, 64, 256}) {
    double Extern = externGemmTimeUs(D, gemm(M, 4096, 4096));
    // Reading the 32 MB weight bounds it from below; the library comes
    // within 2x of that where a big template tile is far off.
    double WeightUs = 4096.0 * 4096 * 2 / (D.HbmGBps * 1e3);
    EXPECT_GT(Extern, WeightUs) << M;
    EXPECT_LT(Extern, 2 * WeightUs + D.LaunchUs) << M;
    EXPECT_LT(Extern, gemmTimeUs(D, gemm(M, 4096, 4096), Big, NoEpilogue));
  }
  // ANCHORS.md: 10.0 / 9.0 / 15.7 us; the model stays within 30%.
  EXPECT_NEAR(externGemmTimeUs(D, gemm(16, 4096, 4096)), 10.0, 3.0);
  EXPECT_NEAR(externGemmTimeUs(D, gemm(256, 4096, 4096)), 15.7, 4.7);
}

TEST(RooflineTest, H100IsSlowerWhereMemoryBound) {
  GemmProblem Skinny = gemm(16, 4096, 4096);
  EXPECT_GT(externGemmTimeUs(h100(), Skinny),
            1.2 * externGemmTimeUs(h200(), Skinny));
  EXPECT_GT(pointwiseTimeUs(h100(), 256 * MB, 256 * MB, 0),
            1.3 * pointwiseTimeUs(h200(), 256 * MB, 256 * MB, 0));
}

TEST(RooflineTest, FusedPointwiseEpilogueBeatsSeparateKernel) {
  DeviceDesc D = h200();
  for (int64_t M : {16, 256, 4096}) {
    GemmProblem P = gemm(M, 4096, 4096);
    EpilogueDesc E = biasRelu(M, 4096);
    for (GemmTile T : {Big, Mid, GemmTile{16, 64, 128, 4, 5}}) {
      double Unfused = gemmTimeUs(D, P, T, NoEpilogue);
      double Fused = gemmTimeUs(D, P, T, E);
      EXPECT_GE(Fused, Unfused) << M;
      EXPECT_LT(Fused, Unfused + epilogueTimeUs(D, E)) << M;
    }
  }
}

TEST(RooflineTest, RowReductionFusesOnlyWhenTheTileCoversTheRow) {
  DeviceDesc D = h200();
  EpilogueDesc Wide = residualRmsNorm(4096, 4096);
  EXPECT_TRUE(std::isinf(gemmTimeUs(D, gemm(4096, 4096, 4096), Big, Wide)));
  EpilogueDesc Narrow = residualRmsNorm(4096, 256);
  double Fused = gemmTimeUs(D, gemm(4096, 256, 4096), Big, Narrow);
  EXPECT_TRUE(std::isfinite(Fused));
  EXPECT_LT(Fused, gemmTimeUs(D, gemm(4096, 256, 4096), Big, NoEpilogue) +
                       epilogueTimeUs(D, Narrow));
}

TEST(RooflineTest, SizesNearTheInt64LimitStayFinite) {
  // The largest tensors the parser accepts (2^63-1 bytes) and sums of
  // them: as doubles these round up to 2^63 and beyond, which used to be
  // converted back to int64 (undefined behaviour; the ASan+UBSan build
  // runs this test).
  DeviceDesc D = h200();
  const int64_t Max = std::numeric_limits<int64_t>::max();
  EpilogueDesc E;
  E.Elements = Max / 4;
  E.Dtype = DType::F32;
  E.ExtraInputBytes = Max;
  E.FlopsPerElement = 8;
  E.NumOps = 3;
  double Epi = epilogueTimeUs(D, E);
  EXPECT_TRUE(std::isfinite(Epi));
  EXPECT_GT(Epi, 1e12);
  EXPECT_TRUE(std::isfinite(reductionTimeUs(D, Max, Max, DType::I64, 4)));
  EXPECT_TRUE(std::isfinite(pointwiseTimeUs(D, Max, Max, 1e300)));
  GemmProblem P{1, 1, Max / 4, 1, DType::F32, {}};
  EXPECT_TRUE(std::isfinite(gemmTimeUs(D, P, Mid, E)));
  EXPECT_TRUE(std::isfinite(externGemmTimeUs(D, P)));
  EXPECT_TRUE(std::isfinite(collectiveTimeUs(
      D, CollectiveKind::AllReduce, CollectiveAlgo::TwoShot, Max, 8, E)));
}

TEST(RooflineTest, MemoryBoundKernels) {
  DeviceDesc D = h200();
  // Launch-bound when tiny, bandwidth-bound when large.
  EXPECT_NEAR(pointwiseTimeUs(D, 4 * KB, 4 * KB, 1024), D.LaunchUs, 0.1);
  double Big = pointwiseTimeUs(D, 512 * MB, 512 * MB, 0);
  EXPECT_GT(Big, 1024.0 * MB / (D.HbmGBps * 1e3));
  EXPECT_LT(Big, 1.25 * 1024.0 * MB / (D.HbmGBps * 1e3) + D.LaunchUs);
  double Prev = 0;
  for (int64_t B : {1 * KB, 1 * MB, 16 * MB, 256 * MB}) {
    double T = pointwiseTimeUs(D, B, B, 0);
    EXPECT_GT(T, Prev);
    Prev = T;
  }
  EXPECT_LT(reductionTimeUs(D, 4096, 4096, DType::BF16),
            reductionTimeUs(D, 8192, 4096, DType::BF16));
  EXPECT_LT(reductionTimeUs(D, 4096, 4096, DType::BF16),
            reductionTimeUs(D, 4096, 4096, DType::F32));
  EXPECT_TRUE(std::isinf(pointwiseTimeUs(D, -1, 0, 0)));
  EXPECT_EQ(epilogueTimeUs(D, NoEpilogue), 0);
  EXPECT_GT(epilogueTimeUs(D, residualRmsNorm(4096, 4096)),
            epilogueTimeUs(D, biasRelu(4096, 4096)));
}

TEST(RooflineTest, AllReduceCrossoversOnTwoH200s) {
  // ANCHORS.md: one-shot wins small messages, two-shot large ones, NCCL
  // comes close to two-shot at 256 MB.
  EXPECT_LT(allReduce(CollectiveAlgo::OneShot, 8 * KB),
            allReduce(CollectiveAlgo::Nccl, 8 * KB));
  EXPECT_LT(allReduce(CollectiveAlgo::OneShot, 8 * KB),
            allReduce(CollectiveAlgo::TwoShot, 8 * KB));
  EXPECT_LT(allReduce(CollectiveAlgo::OneShot, 64 * KB),
            allReduce(CollectiveAlgo::TwoShot, 64 * KB));
  for (int64_t B : {1 * MB, 4 * MB, 16 * MB, 64 * MB, 256 * MB}) {
    EXPECT_LT(allReduce(CollectiveAlgo::TwoShot, B),
              allReduce(CollectiveAlgo::OneShot, B))
        << B;
    EXPECT_LT(allReduce(CollectiveAlgo::TwoShot, B),
              allReduce(CollectiveAlgo::Nccl, B))
        << B;
  }
  double Nccl = allReduce(CollectiveAlgo::Nccl, 256 * MB);
  double Two = allReduce(CollectiveAlgo::TwoShot, 256 * MB);
  EXPECT_LT(Nccl / Two, 1.15);
  // The alpha-beta fit lands near the measured endpoints (6.7 / 849.5 us).
  EXPECT_NEAR(allReduce(CollectiveAlgo::Nccl, 8 * KB), 6.7, 1.0);
  EXPECT_NEAR(Nccl, 849.5, 85);
}

TEST(RooflineTest, CollectivesAreMonotonic) {
  for (CollectiveAlgo A : {CollectiveAlgo::Nccl, CollectiveAlgo::OneShot,
                           CollectiveAlgo::TwoShot}) {
    double Prev = 0;
    for (int64_t B = 1 * KB; B <= 1024 * MB; B *= 4) {
      double T = allReduce(A, B);
      EXPECT_GT(T, Prev) << collectiveAlgoName(A).str() << " " << B;
      Prev = T;
    }
    // More ranks never make a fixed-size all_reduce cheaper.
    EXPECT_LE(allReduce(A, 16 * MB, 2), allReduce(A, 16 * MB, 4));
    EXPECT_LE(allReduce(A, 16 * MB, 4), allReduce(A, 16 * MB, 8));
  }
}

TEST(RooflineTest, CollectiveAlgorithmsThatDoNotExist) {
  DeviceDesc D = h200();
  for (CollectiveKind K :
       {CollectiveKind::AllGather, CollectiveKind::ReduceScatter,
        CollectiveKind::AllToAll}) {
    EXPECT_TRUE(std::isinf(collectiveTimeUs(D, K, CollectiveAlgo::OneShot,
                                            1 * MB, 2, NoEpilogue)));
    EXPECT_TRUE(std::isinf(collectiveTimeUs(D, K, CollectiveAlgo::TwoShot,
                                            1 * MB, 2, NoEpilogue)));
    EXPECT_TRUE(std::isfinite(
        collectiveTimeUs(D, K, CollectiveAlgo::P2P, 1 * MB, 2, NoEpilogue)));
    EXPECT_TRUE(std::isfinite(
        collectiveTimeUs(D, K, CollectiveAlgo::Nccl, 1 * MB, 2, NoEpilogue)));
  }
  EXPECT_TRUE(std::isinf(allReduce(CollectiveAlgo::P2P, 1 * MB)));
  EXPECT_TRUE(std::isinf(collectiveTimeUs(
      D, CollectiveKind::None, CollectiveAlgo::Nccl, 1 * MB, 2, NoEpilogue)));
  EXPECT_TRUE(std::isinf(allReduce(CollectiveAlgo::Nccl, 1 * MB, 0)));
  EXPECT_TRUE(std::isinf(allReduce(CollectiveAlgo::Nccl, -1, 2)));
  EXPECT_EQ(parseCollectiveAlgo("two_shot"), CollectiveAlgo::TwoShot);
  EXPECT_EQ(parseCollectiveAlgo("three_shot"), std::nullopt);
  EXPECT_EQ(collectiveAlgoName(CollectiveAlgo::P2P), "p2p");
}

TEST(RooflineTest, OneRankIsACopy) {
  DeviceDesc D = h200();
  for (CollectiveAlgo A : {CollectiveAlgo::Nccl, CollectiveAlgo::OneShot,
                           CollectiveAlgo::TwoShot}) {
    double T = allReduce(A, 8 * KB, 1);
    EXPECT_LT(T, allReduce(A, 8 * KB, 2));
    EXPECT_NEAR(T, D.LaunchUs, 0.5);
  }
  // Still no one-shot all_gather, even alone.
  EXPECT_TRUE(std::isinf(collectiveTimeUs(D, CollectiveKind::AllGather,
                                          CollectiveAlgo::OneShot, 8 * KB, 1,
                                          NoEpilogue)));
}

TEST(RooflineTest, CollectiveEpilogueFusion) {
  DeviceDesc D = h200();
  int64_t Rows = 1024, Cols = 4096;
  int64_t Bytes = Rows * Cols * 2;
  EpilogueDesc E = residualRmsNorm(Rows, Cols);
  // NCCL's kernels are closed.
  EXPECT_TRUE(std::isinf(allReduce(CollectiveAlgo::Nccl, Bytes, 2, E)));
  EXPECT_TRUE(std::isinf(collectiveTimeUs(D, CollectiveKind::AllGather,
                                          CollectiveAlgo::Nccl, Bytes, 2, E)));
  // The peer-memory kernels fuse, and fusing saves the epilogue's launch and
  // its pass over the output.
  for (CollectiveAlgo A : {CollectiveAlgo::OneShot, CollectiveAlgo::TwoShot}) {
    double Fused = allReduce(A, Bytes, 2, E);
    double Plain = allReduce(A, Bytes, 2);
    EXPECT_GT(Fused, Plain);
    EXPECT_LT(Fused, Plain + epilogueTimeUs(D, E));
  }
}

TEST(RooflineTest, NoiseIsDeterministicAndBounded) {
  NoiseSource A(42, 0, 5), B(42, 0, 5), OtherRank(42, 1, 5),
      OtherSeed(43, 0, 5);
  bool RankDiffers = false, SeedDiffers = false;
  for (int I = 0; I < 1000; ++I) {
    double X = A.apply(100);
    EXPECT_EQ(X, B.apply(100));
    EXPECT_GE(X, 95);
    EXPECT_LE(X, 105);
    RankDiffers |= OtherRank.apply(100) != X;
    SeedDiffers |= OtherSeed.apply(100) != X;
  }
  EXPECT_TRUE(RankDiffers);
  EXPECT_TRUE(SeedDiffers);

  NoiseSource Quiet(42, 0, 0);
  EXPECT_EQ(Quiet.apply(12.345), 12.345);
  NoiseSource Loud(1, 0, 50);
  EXPECT_TRUE(std::isinf(Loud.apply(INFINITY)));

  // The generator is self-contained (splitmix64), so these are the same on
  // every platform; a change here changes every simulated measurement.
  // (Checked against an independent splitmix64 in Python.)
  NoiseSource Golden(0, 0, 10);
  EXPECT_EQ(Golden.next(), 0x568a9b0b1a2c05ecULL);
  NoiseSource Golden2(7, 1, 10);
  EXPECT_EQ(Golden2.apply(100), 105.95966444732366);
}

} // namespace

TEST(RooflineTest, SwiGluIsOneGemmOfTwiceTheColumnsWritingHalf) {
  DeviceDesc D = h200();
  EpilogueDesc None;
  GemmTile T{64, 64, 64, 4, 4};
  GemmTile Wide{64, 128, 64, 4, 4};
  for (int64_t M : {16, 4096}) {
    GemmProblem P{1, M, 7168, 4096, DType::BF16, {}};
    GemmProblem P2 = P;
    P2.N = 2 * P.N;
    double Merged = swigluTimeUs(D, P, T, None);
    ASSERT_TRUE(std::isfinite(Merged));
    // The kernel of the GEMM over [wg | wu], minus half its output, plus
    // silu * mul in registers: never slower than that GEMM by more than the
    // epilogue's arithmetic, and cheaper than two GEMMs plus a kernel.
    double Concat = gemmTimeUs(D, P2, Wide, None);
    EXPECT_LT(Merged, Concat * 1.05) << M;
    EpilogueDesc SiluMul;
    SiluMul.Elements = M * P.N;
    SiluMul.ExtraInputBytes = M * P.N * 2;
    SiluMul.FlopsPerElement = 5;
    SiluMul.NumOps = 2;
    double Split = 2 * gemmTimeUs(D, P, T, None) + epilogueTimeUs(D, SiluMul);
    EXPECT_LT(Merged, Split) << M;
  }
  // The wgmma merged tile (swiglu_wg_*): the wgmma GEMM over [wg | wu]
  // with a BM x 2BN tile, cheaper than the two wgmma GEMMs at prefill.
  GemmProblem Pre{1, 2048, 14336, 4096, DType::BF16, {}};
  GemmProblem Pre2 = Pre;
  Pre2.N = 2 * Pre.N;
  GemmTile Wg{128, 128, 64, 12, 4, true};
  double MergedWg = swigluTimeUs(D, Pre, Wg, None);
  ASSERT_TRUE(std::isfinite(MergedWg));
  EXPECT_LT(MergedWg,
            gemmTimeUs(D, Pre2, GemmTile{128, 256, 64, 12, 4, true}, None) *
                1.05);
  EXPECT_LT(MergedWg, 2 * gemmTimeUs(D, Pre, Wg, None));
  // A row reduction needs the whole row.
  GemmProblem P{1, 16, 7168, 4096, DType::BF16, {}};
  EpilogueDesc Norm;
  Norm.NumOps = 1;
  Norm.RowReduction = true;
  EXPECT_TRUE(std::isinf(swigluTimeUs(D, P, T, Norm)));
}
