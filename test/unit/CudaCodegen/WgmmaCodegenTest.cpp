//===- WgmmaCodegenTest.cpp - The wgmma GEMM template's code generator ----===//
//
// The Hopper GEMM template's tiles: what they need (sm_90a, TMA-legal
// shapes), the persistent, clustered and dynamic-order forms and their
// names, and the epilogue's loads; each generated kernel is compiled by
// NVRTC where libnvrtc can be opened.
//
//===----------------------------------------------------------------------===//

#include "CompileAll.h"
#include "LowerAndFuse.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/IR/Ops.h"
#include "llvm/Support/FormatVariadic.h"
#include "gtest/gtest.h"

using namespace mtsched;
using test::lowerAndFuse;
using test::named;

TEST(CudaCodegen, WgmmaTemplateNeedsHopperAndTmaShapes) {
  auto P = lowerAndFuse(R"(
graph @g(%x: bf16[300,200], %w: bf16[200,264], %b: bf16[264]) {
  %y = matmul(%x, %w) : bf16[300,264]
  %z = add(%y, %b) : bf16[300,264]
  %o = relu(%z) : bf16[300,264]
  return %o
}
graph @f(%x: f32[64,64], %w: f32[64,64]) {
  %y = matmul(%x, %w) : f32[64,64]
  return %y
}
graph @k(%x: bf16[64,60], %w: bf16[60,64]) {
  %y = matmul(%x, %w) : bf16[64,64]
  return %y
}
)",
                        "wg.mir");
  ASSERT_TRUE(P);
  auto Mtb = [&](int I) {
    return llvm::cast<MultiTemplateBufferNode>(
        P->M->getGraphs()[I]->getNodes()[0].get());
  };
  GemmTileConfig T = wgmmaTile(128, 256, 64, 4);
  EXPECT_EQ(gemmChoiceName(T), "gemm_wg_128x256x64_s4");
  EXPECT_EQ(T.Warps, 12); // a producer and two consumer warpgroups
  std::optional<GemmTileConfig> Back =
      gemmTileOf(named("gemm_wg_128x256x64_s4"));
  ASSERT_TRUE(Back.has_value());
  EXPECT_EQ(Back->Template, GemmTemplate::Wgmma);
  EXPECT_FALSE(gemmTileOf(named("gemm_wg_128x256x64_w4_s4")).has_value());

  auto K = generateGemmKernel(*Mtb(0), T, /*Fused=*/true);
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  EXPECT_TRUE(K->NeedsSm90a);
  EXPECT_EQ(K->BlockX, 384u);
  ASSERT_EQ(K->TensorMaps.size(), 2u);
  // A is [1][300][200], B is [1][200][264]; boxes of 64 columns.
  EXPECT_EQ(K->TensorMaps[0].Dims[0], 200u);
  EXPECT_EQ(K->TensorMaps[0].Dims[1], 300u);
  EXPECT_EQ(K->TensorMaps[0].Box[1], 128u);
  EXPECT_EQ(K->TensorMaps[1].Dims[0], 264u);
  EXPECT_EQ(K->TensorMaps[1].Strides[0], 264u * 2);
  for (const char *S : {"wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16",
                        "cp.async.bulk.tensor.3d", "setmaxnreg.inc",
                        "// %z = add", "// %o = relu"})
    EXPECT_NE(K->Source.find(S), std::string::npos) << S;

  auto F32 = generateGemmKernel(*Mtb(1), wgmmaTile(64, 64, 64, 2), false);
  ASSERT_FALSE(bool(F32));
  EXPECT_NE(llvm::toString(F32.takeError()).find("bf16 or f16"),
            std::string::npos);
  auto OddK = generateGemmKernel(*Mtb(2), wgmmaTile(64, 64, 64, 2), false);
  ASSERT_FALSE(bool(OddK));
  EXPECT_NE(llvm::toString(OddK.takeError()).find("multiples of 8"),
            std::string::npos);
  auto BK32 = generateGemmKernel(*Mtb(0), wgmmaTile(64, 64, 32, 2), false);
  ASSERT_FALSE(bool(BK32));
  EXPECT_NE(llvm::toString(BK32.takeError()).find("BK = 64"),
            std::string::npos);

  // setmaxnreg can only hand the consumers what the producer gives back
  // from the launch allocation (65536 / threads, in units of 8, per
  // thread): asking for more blocks the consumers forever. 384 threads
  // start with 168 registers, 512 with 128, 640 with 96; the producer keeps
  // 40.
  for (auto [BM, BN, Consumer] :
       {std::tuple{128, 256, 232}, std::tuple{192, 128, 152},
        std::tuple{256, 128, 104}}) {
    auto W = generateGemmKernel(*Mtb(0), wgmmaTile(BM, BN, 64, 3), false);
    ASSERT_TRUE(bool(W)) << BM << ": " << llvm::toString(W.takeError());
    int Threads = int(W->BlockX), Launch = 65536 / Threads / 8 * 8;
    EXPECT_LE(128 * 40 + (Threads - 128) * Consumer, Threads * Launch) << BM;
    EXPECT_NE(W->Source.find("setmaxnreg.inc.sync.aligned.u32 " +
                             std::to_string(Consumer) + ";"),
              std::string::npos)
        << BM;
  }
  // A 256-row tile of 256 columns needs 128 accumulators a thread: more
  // than its consumers can get.
  auto Wide = generateGemmKernel(*Mtb(0), wgmmaTile(256, 256, 64, 2), false);
  ASSERT_FALSE(bool(Wide));
  EXPECT_NE(llvm::toString(Wide.takeError()).find("do not fit"),
            std::string::npos);
}

TEST(CudaCodegen, PersistentWgmmaTilesWalkEveryTile) {
  auto P = lowerAndFuse(R"(
graph @g(%x: bf16[3,700,512], %w: bf16[3,512,1000], %b: bf16[1000]) {
  %y = matmul(%x, %w) : bf16[3,700,1000]
  %z = add(%y, %b) : bf16[3,700,1000]
  return %z
}
graph @n(%x: bf16[2000,256], %w: bf16[256,128], %r: bf16[2000,128], %g: bf16[128]) {
  %y = matmul(%x, %w) : bf16[2000,128]
  %s = add(%y, %r) : bf16[2000,128]
  %o = rmsnorm(%s, %g) : bf16[2000,128]
  return %o
}
)",
                        "persistent.mir");
  ASSERT_TRUE(P);
  GemmTileConfig T = wgmmaTile(128, 128, 64, 4);
  T.Persistent = true;
  EXPECT_EQ(gemmChoiceName(T), "gemm_wg_128x128x64_s4_p");
  std::optional<GemmTileConfig> Back =
      gemmTileOf(named("gemm_wg_128x128x64_s4_p"));
  ASSERT_TRUE(Back.has_value());
  EXPECT_TRUE(Back->Persistent);
  EXPECT_EQ(Back->Stages, 4);
  EXPECT_FALSE(gemmTileOf(named("gemm_wg_128x128x64_s4"))->Persistent);
  // Only wgmma tiles are persistent.
  EXPECT_FALSE(gemmTileOf(named("gemm_128x128x64_w4_s4_p")).has_value());

  auto Mtb = [&](int I) {
    return llvm::cast<MultiTemplateBufferNode>(
        P->M->getGraphs()[I]->getNodes()[0].get());
  };
  auto K = generateGemmKernel(*Mtb(0), T, /*Fused=*/true);
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  // Every tile of every batch along x (6 x 8 x 3); the launcher caps the
  // CTAs at one per SM.
  EXPECT_TRUE(K->Persistent);
  EXPECT_EQ(K->GridX, 6u * 8 * 3);
  EXPECT_EQ(K->GridY, 1u);
  EXPECT_EQ(K->GridZ, 1u);
  EXPECT_EQ(launchGridX(*K, 132), 132u);
  EXPECT_EQ(launchGridX(*K, 200), 144u);
  for (const char *S :
       {"#define BATCH 3",
        "for (int tile = blockIdx.x / CLUSTER; tile < TILES;\n"
        "         tile += gridDim.x / CLUSTER)",
        "#define CLUSTER 1", "MT_TILE(tile);",
        "mt_mbar_wait(empty + 8 * s, ((it / STAGES) & 1) ^ 1)",
        // The tile's last stage is given back before the epilogue.
        "if (KT > 0 && tid % 128 == 0)"})
    EXPECT_NE(K->Source.find(S), std::string::npos) << S;
  // The row reduction's scratch lies after the stages and barriers.
  auto N = generateGemmKernel(*Mtb(1), T, /*Fused=*/true);
  ASSERT_TRUE(bool(N)) << llvm::toString(N.takeError());
  EXPECT_NE(N->Source.find("float *row_a = (float *)mt_scratch;"),
            std::string::npos);
  auto Plain = generateGemmKernel(*Mtb(1), wgmmaTile(128, 128, 64, 4), true);
  ASSERT_TRUE(bool(Plain)) << llvm::toString(Plain.takeError());
  // Also the epilogue's staging for the TMA store: 64 x 128 bf16 for each
  // of the two consumer warpgroups.
  EXPECT_EQ(N->SharedBytes,
            Plain->SharedBytes + 2 * 128 * 4 + 2 * 64 * 128 * 2);
  EXPECT_NE(N->Source.find("MT_TILE_STORE("), std::string::npos);
  EXPECT_EQ(Plain->Source.find("MT_TILE_STORE("), std::string::npos);
  EXPECT_FALSE(Plain->Persistent);
  // A persistent tile does not also split K.
  T.SplitK = 2;
  auto Split = generateGemmKernel(*Mtb(0), T, false);
  ASSERT_FALSE(bool(Split));
  EXPECT_NE(llvm::toString(Split.takeError()).find("cannot also split K"),
            std::string::npos);
}

TEST(CudaCodegen, ClusteredWgmmaTilesShareB) {
  // gemm_wg_..._p_c2: two CTAs per cluster take tiles side by side down M
  // and each multicasts half of B's boxes to both; every stage is freed by
  // the consumers of both CTAs; the result leaves through TMA stores.
  auto P = lowerAndFuse(R"(
graph @g(%x: bf16[3,600,512], %w: bf16[3,512,1000]) {
  %y = matmul(%x, %w) : bf16[3,600,1000]
  return %y
}
)",
                        "cluster.mir");
  ASSERT_TRUE(P);
  GemmTileConfig T = wgmmaTile(128, 256, 64, 4);
  T.Persistent = true;
  T.Cluster = 2;
  EXPECT_EQ(gemmChoiceName(T), "gemm_wg_128x256x64_s4_p_c2");
  std::optional<GemmTileConfig> Back =
      gemmTileOf(named("gemm_wg_128x256x64_s4_p_c2"));
  ASSERT_TRUE(Back.has_value());
  EXPECT_TRUE(Back->Persistent);
  EXPECT_EQ(Back->Cluster, 2);
  EXPECT_EQ(Back->Stages, 4);
  EXPECT_EQ(gemmTileOf(named("gemm_wg_128x256x64_s4_p"))->Cluster, 1);
  // Only persistent tiles cluster, and a cluster has 2 or more CTAs.
  for (const char *Bad :
       {"gemm_wg_128x256x64_s4_c2", "gemm_wg_128x256x64_s4_p_c1",
        "gemm_wg_128x256x64_s4_p_c", "gemm_128x128x64_w4_s4_p_c2"})
    EXPECT_FALSE(gemmTileOf(named(Bad)).has_value()) << Bad;

  const auto *Mtb = llvm::cast<MultiTemplateBufferNode>(
      P->M->getGraphs()[0]->getNodes()[0].get());
  auto K = generateGemmKernel(*Mtb, T, /*Fused=*/false);
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  // 5 tile rows a batch make 3 cluster tiles down M, 4 across N, 3
  // batches, 2 CTAs each; launched in whole clusters, one CTA per SM.
  EXPECT_EQ(K->ClusterX, 2u);
  EXPECT_EQ(K->GridX, 3u * 4 * 3 * 2);
  EXPECT_EQ(launchGridX(*K, 132), 72u);
  EXPECT_EQ(launchGridX(*K, 33), 32u);
  // A, B, then the result for the TMA store (the last pointer parameter).
  ASSERT_EQ(K->TensorMaps.size(), 3u);
  EXPECT_EQ(K->TensorMaps[2].Input, 2u);
  EXPECT_EQ(K->TensorMaps[2].Dims[1], 600u);
  EXPECT_EQ(K->TensorMaps[2].Dims[2], 3u);
  for (const char *S : {"#define CLUSTER 2",
                        "mt_mbar_init(empty + 8 * s, CONSUMERS * CLUSTER);",
                        "for (int j = MT_RANK; j < BN / 64; j += CLUSTER)",
                        "mt_tma_load_multicast(", "mapa.shared::cluster.u32",
                        "MT_TILE_STORE(", "cp.async.bulk.wait_group 0;"})
    EXPECT_NE(K->Source.find(S), std::string::npos) << S;
  // Both CTAs wait for each other after setting up their barriers and
  // before leaving.
  size_t First = K->Source.find("  mt_cluster_sync();");
  ASSERT_NE(First, std::string::npos);
  EXPECT_NE(K->Source.find("  mt_cluster_sync();", First + 1),
            std::string::npos);

  // A cluster needs a persistent tile, and B boxes to split evenly.
  GemmTileConfig NotPersistent = T;
  NotPersistent.Persistent = false;
  auto E1 = generateGemmKernel(*Mtb, NotPersistent, false);
  ASSERT_FALSE(bool(E1));
  EXPECT_NE(llvm::toString(E1.takeError()).find("only a persistent"),
            std::string::npos);
  GemmTileConfig Narrow = wgmmaTile(128, 64, 64, 4);
  Narrow.Persistent = true;
  Narrow.Cluster = 2;
  auto E2 = generateGemmKernel(*Mtb, Narrow, false);
  ASSERT_FALSE(bool(E2));
  EXPECT_NE(llvm::toString(E2.takeError()).find("64-column boxes"),
            std::string::npos);
}

TEST(CudaCodegen, DynamicWgmmaTilesClaimTiles) {
  // gemm_wg_..._p_d: each CTA claims its next tile from a global counter
  // (the kernel's 8-byte workspace) and hands it to its consumers through
  // a two-slot ring; the last CTA done resets the counters.
  auto P = lowerAndFuse(R"(
graph @g(%x: bf16[3,600,512], %w: bf16[3,512,1000]) {
  %y = matmul(%x, %w) : bf16[3,600,1000]
  return %y
}
)",
                        "dynamic.mir");
  ASSERT_TRUE(P);
  GemmTileConfig T = wgmmaTile(128, 256, 64, 4);
  T.Persistent = T.Dynamic = true;
  EXPECT_EQ(gemmChoiceName(T), "gemm_wg_128x256x64_s4_p_d");
  std::optional<GemmTileConfig> Back =
      gemmTileOf(named("gemm_wg_128x256x64_s4_p_d"));
  ASSERT_TRUE(Back.has_value());
  EXPECT_TRUE(Back->Persistent && Back->Dynamic);
  EXPECT_FALSE(gemmTileOf(named("gemm_wg_128x256x64_s4_p"))->Dynamic);
  // Only a persistent tile without a cluster claims its tiles.
  for (const char *Bad :
       {"gemm_wg_128x256x64_s4_d", "gemm_wg_128x256x64_s4_p_d_c2",
        "gemm_128x128x64_w4_s4_p_d"})
    EXPECT_FALSE(gemmTileOf(named(Bad)).has_value()) << Bad;
  const auto *Mtb = llvm::cast<MultiTemplateBufferNode>(
      P->M->getGraphs()[0]->getNodes()[0].get());
  auto K = generateGemmKernel(*Mtb, T, /*Fused=*/false);
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  EXPECT_TRUE(K->Persistent);
  EXPECT_EQ(K->GridX, 5u * 4 * 3);
  EXPECT_EQ(K->WorkspaceBytes, 8u);
  for (const char *S :
       {"unsigned *__restrict__ mt_sched)", "atomicAdd(mt_sched, 1u)",
        "mt_mbar_init(tempty + 8 * n, CONSUMERS * 128);",
        "atomicAdd(mt_sched + 1, 1u) == gridDim.x - 1", "MT_TILE_STORE("})
    EXPECT_NE(K->Source.find(S), std::string::npos) << S;
  expectKernelCompiles(*K);
  GemmTileConfig Clustered = T;
  Clustered.Cluster = 2;
  auto E = generateGemmKernel(*Mtb, Clustered, false);
  ASSERT_FALSE(bool(E));
  EXPECT_NE(llvm::toString(E.takeError()).find("dynamically"),
            std::string::npos);
}

TEST(CudaCodegen, WgmmaEpilogueLoadsNeedNoBranch) {
  // The chain of a wgmma tile runs on every accumulator at indices clamped
  // into the output, so its operand loads are not each behind a branch; a
  // chain that stores a member read later keeps the bounds check.
  auto P = lowerAndFuse(R"(
graph @g(%x: bf16[16,4096], %w: bf16[4096,4096], %b: bf16[4096]) {
  %y = matmul(%x, %w) : bf16[16,4096]
  %z = add(%y, %b) : bf16[16,4096]
  %o = relu(%z) : bf16[16,4096]
  return %o
}
)",
                        "clamped.mir");
  ASSERT_TRUE(P);
  auto *N = llvm::cast<MultiTemplateBufferNode>(
      P->M->getGraphs()[0]->getNodes()[0].get());
  auto K = generateGemmKernel(*N, wgmmaTile(64, 128, 64, 8), /*Fused=*/true);
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  size_t Chain = K->Source.find("FOR_EACH_ACC_CLAMPED({\n");
  ASSERT_NE(Chain, std::string::npos);
  llvm::StringRef Body = llvm::StringRef(K->Source).substr(Chain);
  Body = Body.take_until([](char C) { return C == '}'; });
  EXPECT_TRUE(Body.contains("v = (v + ")) << Body.str();
  EXPECT_FALSE(Body.contains("if (")) << Body.str();
  EXPECT_NE(K->Source.find("min(c0, N_ - 1)"), std::string::npos);
  // mma.sync tiles keep the guarded chain.
  auto M = generateGemmKernel(*N, GemmTileConfig{16, 64, 64, 4, 4}, true);
  ASSERT_TRUE(bool(M)) << llvm::toString(M.takeError());
  EXPECT_EQ(M->Source.find("FOR_EACH_ACC_CLAMPED"), std::string::npos);
}
