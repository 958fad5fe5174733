//===- SwiGluCodegenTest.cpp - The merged gate+up GEMM compiles -----------===//
//
// generateSwiGluKernel for every default swiglu tile on ragged, decode and
// prefill shapes, bf16 and f16, compiled with NVRTC for sm_90 wherever
// libnvrtc can be opened (skips and says why elsewhere).
//
//===----------------------------------------------------------------------===//
#include "CompileAll.h"
#include "IRTestUtils.h"
#include "LowerAndFuse.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Lowering/Lowering.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "gtest/gtest.h"
#include <mutex>

using namespace mtsched;

namespace {

using test::Parsed;

/// `%gu = swiglu(%h, %wg, %wu)` over [M, K] x [K, N], lowered.
std::unique_ptr<Parsed> swiglu(const char *Ty, int64_t M, int64_t K,
                               int64_t N) {
  std::string T(Ty);
  auto Shape = [&](int64_t A, int64_t B) {
    return T + "[" + std::to_string(A) + "," + std::to_string(B) + "]";
  };
  std::string Src = "graph @s(%h: " + Shape(M, K) + ", %wg: " + Shape(K, N) +
                    ", %wu: " + Shape(K, N) +
                    ") {\n  %gu = swiglu(%h, %wg, %wu) : " + Shape(M, N) +
                    "\n  return %gu\n}\n";
  return test::lowered(Src, "s.mir");
}

const MultiTemplateBufferNode &node(const Parsed &P) {
  return test::firstNode(P);
}

} // namespace

TEST(SwiGluCodegen, LoweringOffersMergedTiles) {
  auto P = swiglu("bf16", 16, 4096, 7168);
  ASSERT_TRUE(P);
  const MultiTemplateBufferNode &N = node(*P);
  ASSERT_FALSE(N.getChoices().empty());
  for (const Choice &C : N.getChoices()) {
    std::optional<GemmTileConfig> T = swigluTileOf(C);
    ASSERT_TRUE(T) << C.Name;
    // Decode: only tiles no taller than the 16 rows.
    EXPECT_LE(T->BM, 16) << C.Name;
    EXPECT_EQ(swigluChoiceName(*T), C.Name);
  }
  // f32 has no merged template: no choices (fuse-swiglu adds nothing).
  EXPECT_TRUE(
      ChoiceConfig::getDefault().swigluChoices(16, 64, 64, DType::F32).empty());
}

TEST(SwiGluCodegen, KernelShape) {
  auto P = swiglu("bf16", 100, 200, 76);
  ASSERT_TRUE(P);
  GemmTileConfig T{64, 64, 64, 4, 4};
  llvm::Expected<KernelSource> K = generateSwiGluKernel(node(*P), T);
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  // Reads h and both weights, writes N columns once.
  ASSERT_EQ(K->Inputs.size(), 3u);
  ASSERT_EQ(K->Outputs.size(), 1u);
  EXPECT_EQ(K->Outputs[0]->getName(), "gu");
  EXPECT_EQ(K->GridX, 2u);
  EXPECT_EQ(K->GridY, 2u);
  EXPECT_EQ(K->BlockX, 128u);
  // Two B stages per k-tile: 4 * (64 * 72 + 2 * 64 * 72) * 2 bytes.
  EXPECT_EQ(K->SharedBytes, 4u * (64 * 72 + 2 * 64 * 72) * 2);
  EXPECT_NE(K->Source.find("#define ALIGNED8 0"), std::string::npos);
  // A size hint changes the rows only.
  llvm::Expected<KernelSource> H = generateSwiGluKernel(node(*P), T, 300);
  ASSERT_TRUE(bool(H));
  EXPECT_EQ(H->GridY, 5u);
  // Tiles the template cannot split are refused with a reason.
  llvm::Expected<KernelSource> Bad =
      generateSwiGluKernel(node(*P), GemmTileConfig{16, 16, 16, 8, 2});
  ASSERT_FALSE(bool(Bad));
  EXPECT_NE(llvm::toString(Bad.takeError()).find("warp tiles"),
            std::string::npos);
}

TEST(SwiGluCodegen, WgmmaTileNamesRoundTrip) {
  // swiglu_wg_BMxBNxBK_sS: the wgmma GEMM's spelling after the prefix.
  for (const char *Name :
       {"swiglu_wg_128x128x64_s4", "swiglu_wg_64x128x64_s5",
        "swiglu_wg_128x64x64_s6", "swiglu_wg_128x128x64_s4_p",
        "swiglu_wg_128x128x64_s4_p_c2", "swiglu_wg_128x128x64_s4_p_d"}) {
    std::optional<GemmTileConfig> T = swigluTileOf(Choice{Name, {}, {}});
    ASSERT_TRUE(T) << Name;
    EXPECT_EQ(T->Template, GemmTemplate::Wgmma) << Name;
    EXPECT_EQ(swigluChoiceName(*T), Name);
  }
  std::optional<GemmTileConfig> T =
      swigluTileOf(Choice{"swiglu_wg_128x128x64_s4", {}, {}});
  EXPECT_EQ(T->BM, 128);
  EXPECT_EQ(T->BN, 128);
  EXPECT_EQ(T->Stages, 4);
  EXPECT_EQ(T->Warps, 12); // a producer and two consumer warpgroups
  EXPECT_FALSE(T->Persistent);
  std::optional<GemmTileConfig> P =
      swigluTileOf(Choice{"swiglu_wg_128x128x64_s4_p_c2", {}, {}});
  ASSERT_TRUE(P);
  EXPECT_TRUE(P->Persistent);
  EXPECT_EQ(P->Cluster, 2);
  // No merged tile splits K; a clustered tile is persistent; a GEMM's name
  // is not a merged tile.
  for (const char *Name :
       {"swiglu_wg_128x128x64_s4_k2", "swiglu_wg_128x128x64_s4_c2",
        "gemm_wg_128x128x64_s4", "swiglu_wg_128x128x64"})
    EXPECT_FALSE(swigluTileOf(Choice{Name, {}, {}})) << Name;
}

TEST(SwiGluCodegen, WgmmaTilesAtPrefillOnly) {
  ChoiceConfig C = ChoiceConfig::getDefault();
  auto Names = [](const std::vector<Choice> &Cs) {
    std::vector<std::string> Out;
    for (const Choice &Ch : Cs)
      Out.push_back(Ch.Name);
    return Out;
  };
  std::vector<std::string> Prefill =
      Names(C.swigluChoices(2048, 14336, 4096, DType::BF16));
  for (const char *Name :
       {"swiglu_wg_128x128x64_s4", "swiglu_wg_128x64x64_s6",
        "swiglu_wg_64x128x64_s5", "swiglu_wg_128x128x64_s4_p"})
    EXPECT_TRUE(llvm::is_contained(Prefill, Name)) << Name;
  // Not at decode (taller than the rows) nor where TMA cannot copy rows.
  for (const std::string &N :
       Names(C.swigluChoices(16, 14336, 4096, DType::BF16)))
    EXPECT_EQ(N.find("swiglu_wg_"), std::string::npos) << N;
  for (const std::string &N :
       Names(C.swigluChoices(2048, 14340, 4096, DType::BF16)))
    EXPECT_EQ(N.find("swiglu_wg_"), std::string::npos) << N;
  // The fallback of a tiny problem is an mma.sync tile (runs anywhere).
  std::vector<std::string> Tiny = Names(C.swigluChoices(4, 4, 4, DType::BF16));
  ASSERT_EQ(Tiny.size(), 1u);
  EXPECT_EQ(Tiny[0].find("swiglu_wg_"), std::string::npos);
}

TEST(SwiGluCodegen, WgmmaKernelShape) {
  auto P = swiglu("bf16", 300, 256, 320);
  ASSERT_TRUE(P);
  GemmTileConfig T = wgmmaTile(128, 128, 64, 4);
  llvm::Expected<KernelSource> K = generateSwiGluKernel(node(*P), T);
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  EXPECT_TRUE(K->NeedsSm90a);
  EXPECT_EQ(K->GridX, 3u);
  EXPECT_EQ(K->GridY, 3u);
  EXPECT_EQ(K->BlockX, 384u); // a producer and two consumer warpgroups
  // 1024 bytes of alignment slack, 4 stages of A and both weights, the
  // stages' two mbarriers.
  EXPECT_EQ(K->SharedBytes, 1024u + 4 * (128 + 2 * 128) * 64 * 2 + 16 * 4);
  // TMA maps of h (K x M in 64 x BM boxes) and both weights (N x K, 64 x 64).
  ASSERT_EQ(K->TensorMaps.size(), 3u);
  EXPECT_EQ(K->TensorMaps[0].Input, 0u);
  EXPECT_EQ(K->TensorMaps[0].Dims[0], 256u);
  EXPECT_EQ(K->TensorMaps[0].Dims[1], 300u);
  EXPECT_EQ(K->TensorMaps[0].Box[1], 128u);
  EXPECT_EQ(K->TensorMaps[1].Input, 1u);
  EXPECT_EQ(K->TensorMaps[2].Input, 2u);
  EXPECT_EQ(K->TensorMaps[2].Dims[0], 320u);
  EXPECT_EQ(K->TensorMaps[2].Dims[1], 256u);
  // One full barrier counts all three copies.
  EXPECT_NE(K->Source.find("A_STAGE + 2 * B_STAGE"), std::string::npos);
  // Refused with a reason: 256 accumulators per thread, too much shared
  // memory, a BK other than 64.
  for (GemmTileConfig Bad :
       {wgmmaTile(128, 256, 64, 2), wgmmaTile(64, 128, 64, 8),
        wgmmaTile(128, 128, 32, 4)}) {
    llvm::Expected<KernelSource> E = generateSwiGluKernel(node(*P), Bad);
    ASSERT_FALSE(bool(E)) << swigluChoiceName(Bad);
    EXPECT_NE(llvm::toString(E.takeError()).find("tile swiglu_wg_"),
              std::string::npos);
  }
}

/// A persistent tile (`_p`, optionally in clusters of two).
static GemmTileConfig persistent(int BM, int BN, int Stages, int Cluster = 1) {
  GemmTileConfig T = wgmmaTile(BM, BN, 64, Stages);
  T.Persistent = true;
  T.Cluster = Cluster;
  return T;
}

TEST(SwiGluCodegen, PersistentWgmmaKernelShape) {
  auto P = swiglu("bf16", 300, 256, 320);
  ASSERT_TRUE(P);
  llvm::Expected<KernelSource> K =
      generateSwiGluKernel(node(*P), persistent(128, 128, 4));
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  EXPECT_EQ(K->Name, "gu_swiglu_wg_128x128x64_s4_p");
  EXPECT_TRUE(K->NeedsSm90a);
  // Every output tile along x (3 x 3), walked by at most one CTA per SM.
  EXPECT_TRUE(K->Persistent);
  EXPECT_EQ(K->GridX, 9u);
  EXPECT_EQ(K->GridY, 1u);
  EXPECT_EQ(K->BlockX, 384u);
  // The GEMM template's 128x256 tile: 4 stages of A and both weights' 128
  // columns, the mbarriers, the row scratch, then the TMA store's staging
  // (64 x 128 bf16 per consumer warpgroup).
  EXPECT_EQ(K->SharedBytes, 1024u + 4 * (128 + 256) * 64 * 2 + 16 * 4 +
                                2 * 128 * 4 + 2 * 64 * 128 * 2);
  // Maps of h, both weights, then the result (64 x 64 boxes).
  ASSERT_EQ(K->TensorMaps.size(), 4u);
  EXPECT_EQ(K->TensorMaps[1].Input, 1u);
  EXPECT_EQ(K->TensorMaps[2].Input, 2u);
  EXPECT_EQ(K->TensorMaps[2].Dims[0], 320u);
  EXPECT_EQ(K->TensorMaps[2].Dims[1], 256u);
  EXPECT_EQ(K->TensorMaps[3].Input, 3u);
  EXPECT_EQ(K->TensorMaps[3].Dims[0], 320u);
  EXPECT_EQ(K->TensorMaps[3].Dims[1], 300u);
  // One wgmma 256 wide reads A once for gate and up; silu(g) * u pairs
  // accumulator i with i + BN / 2.
  EXPECT_NE(K->Source.find("wgmma.mma_async.sync.aligned.m64n256k16"),
            std::string::npos);
  EXPECT_NE(K->Source.find("#define B_STAGE (2 * BN / 64 * B_BOX)"),
            std::string::npos);
  EXPECT_NE(K->Source.find("acc[BN / 2 + i]"), std::string::npos);
  EXPECT_NE(K->Source.find("MT_TILE_STORE("), std::string::npos);
  // In clusters of two: the tile rows in pairs, each CTA multicasting
  // every other weight box.
  llvm::Expected<KernelSource> C =
      generateSwiGluKernel(node(*P), persistent(128, 128, 4, 2));
  ASSERT_TRUE(bool(C)) << llvm::toString(C.takeError());
  EXPECT_EQ(C->ClusterX, 2u);
  EXPECT_EQ(C->GridX, 3u * 2 * 2);
  EXPECT_NE(C->Source.find("j < BN / 64 ? tm_b : tm_u"), std::string::npos);
  // Claiming its tiles from a counter: the 8-byte workspace after the
  // output, the tile ring after the row scratch.
  GemmTileConfig Dyn = persistent(128, 128, 4);
  Dyn.Dynamic = true;
  llvm::Expected<KernelSource> D = generateSwiGluKernel(node(*P), Dyn);
  ASSERT_TRUE(bool(D)) << llvm::toString(D.takeError());
  EXPECT_EQ(D->Name, "gu_swiglu_wg_128x128x64_s4_p_d");
  EXPECT_EQ(D->WorkspaceBytes, 8u);
  EXPECT_EQ(D->SharedBytes, K->SharedBytes + 40);
  EXPECT_NE(D->Source.find("atomicAdd(mt_sched, 1u)"), std::string::npos);
  // Refused with a reason: a wgmma wider than 256, too much shared memory,
  // a split K.
  GemmTileConfig Split = persistent(128, 128, 4);
  Split.SplitK = 2;
  for (GemmTileConfig Bad :
       {persistent(128, 256, 2), persistent(128, 128, 5), Split}) {
    llvm::Expected<KernelSource> E = generateSwiGluKernel(node(*P), Bad);
    ASSERT_FALSE(bool(E)) << swigluChoiceName(Bad);
    EXPECT_NE(llvm::toString(E.takeError()).find("tile swiglu_wg_"),
              std::string::npos);
  }
}

TEST(SwiGluCodegen, BatchedWeightsTakeWgmmaTiles) {
  // MoE experts: h [E, M, K], one [K, N] gate and up weight per expert.
  std::string Src = "graph @e(%h: bf16[4,200,136], %wg: bf16[4,136,320], "
                    "%wu: bf16[4,136,320]) {\n  %gu = swiglu(%h, %wg, %wu) : "
                    "bf16[4,200,320]\n  return %gu\n}\n";
  Parsed P;
  P.M = test::parseAndVerify(P.SM, Src, "e.mir");
  ASSERT_TRUE(P.M);
  ASSERT_FALSE(
      bool(createLowerPass(LoweringOptions())->run(*P.M->getGraphs()[0])));
  const MultiTemplateBufferNode &N = node(P);
  // Only wgmma tiles, sized to one expert's 200 rows.
  ASSERT_FALSE(N.getChoices().empty());
  for (const Choice &C : N.getChoices())
    EXPECT_EQ(C.Name.rfind("swiglu_wg_", 0), 0u) << C.Name;
  llvm::Expected<KernelSource> K =
      generateSwiGluKernel(N, wgmmaTile(128, 128, 64, 4));
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  EXPECT_EQ(K->GridX, 3u);
  EXPECT_EQ(K->GridY, 2u); // 200 rows of one expert
  EXPECT_EQ(K->GridZ, 4u); // the experts
  // [E][M][K] and [E][K][N] maps: the batch is the third dimension.
  ASSERT_EQ(K->TensorMaps.size(), 3u);
  EXPECT_EQ(K->TensorMaps[0].Dims[1], 200u);
  EXPECT_EQ(K->TensorMaps[0].Dims[2], 4u);
  EXPECT_EQ(K->TensorMaps[1].Dims[2], 4u);
  EXPECT_EQ(K->TensorMaps[2].Dims[1], 136u);
  EXPECT_NE(K->Source.find("#define ROWS 800LL"), std::string::npos);
  expectKernelCompiles(*K);
  // Persistent: the experts' tiles one sequence, the batch the maps' third
  // dimension (the result's too).
  llvm::Expected<KernelSource> Pk =
      generateSwiGluKernel(N, persistent(128, 128, 4));
  ASSERT_TRUE(bool(Pk)) << llvm::toString(Pk.takeError());
  EXPECT_EQ(Pk->GridX, 3u * 2 * 4);
  ASSERT_EQ(Pk->TensorMaps.size(), 4u);
  EXPECT_EQ(Pk->TensorMaps[3].Dims[1], 200u);
  EXPECT_EQ(Pk->TensorMaps[3].Dims[2], 4u);
  EXPECT_NE(Pk->Source.find("#define BATCH 4"), std::string::npos);
  expectKernelCompiles(*Pk);
  // The mma.sync merged template reads one [K, N]: refused with a reason.
  llvm::Expected<KernelSource> Mma =
      generateSwiGluKernel(N, GemmTileConfig{64, 64, 64, 4, 4});
  ASSERT_FALSE(bool(Mma));
  EXPECT_NE(llvm::toString(Mma.takeError()).find("batched weights"),
            std::string::npos);
}

TEST(SwiGluCodegen, EveryTileCompilesWithNvrtc) {
  llvm::Expected<const cuda::NvrtcApi &> Nv = cuda::loadNvrtc();
  if (!Nv)
    GTEST_SKIP() << "NVRTC not available, merged kernels not compiled: "
                 << llvm::toString(Nv.takeError());
  struct Shape {
    const char *Ty;
    int64_t M, K, N;
  };
  // Ragged (element-wise copies), decode and prefill of Llama-3-8B at TP=2.
  const Shape Shapes[] = {{"bf16", 100, 200, 76},
                          {"f16", 33, 136, 200},
                          {"bf16", 16, 4096, 7168},
                          {"bf16", 4096, 4096, 7168}};
  // The defaults, and the persistent tiles not offered by default (timed
  // on the GPU beside them: bench/device/swiglu-p.sh).
  std::vector<GemmTileConfig> Tiles = ChoiceConfig::getDefault().SwiGluTiles;
  GemmTileConfig Dynamic = persistent(128, 128, 4);
  Dynamic.Dynamic = true;
  for (GemmTileConfig T : {persistent(128, 128, 4, 2), persistent(128, 64, 6),
                           persistent(128, 64, 6, 2), Dynamic})
    if (llvm::none_of(Tiles, [&](const GemmTileConfig &D) {
          return swigluChoiceName(D) == swigluChoiceName(T);
        }))
      Tiles.push_back(T);
  std::vector<std::unique_ptr<Parsed>> Keep;
  std::vector<KernelSource> Work;
  for (const Shape &S : Shapes) {
    auto P = swiglu(S.Ty, S.M, S.K, S.N);
    ASSERT_TRUE(P);
    for (const GemmTileConfig &T : Tiles) {
      llvm::Expected<KernelSource> K = generateSwiGluKernel(node(*P), T);
      // The wgmma tiles' TMA rows need K and N multiples of 8.
      if (T.Template == GemmTemplate::Wgmma && (S.K % 8 || S.N % 8)) {
        ASSERT_FALSE(bool(K)) << swigluChoiceName(T);
        EXPECT_NE(llvm::toString(K.takeError()).find("multiples of 8"),
                  std::string::npos);
        continue;
      }
      ASSERT_TRUE(bool(K)) << swigluChoiceName(T) << ": "
                           << llvm::toString(K.takeError());
      Work.push_back(std::move(*K));
    }
    Keep.push_back(std::move(P));
  }
  expectEveryKernelCompiles(Work, 8);
}
