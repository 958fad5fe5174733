//===- CodegenTest.cpp - Generated CUDA C++ compiles with NVRTC -----------===//
//
// Every kernel generated for the examples and the lit inputs (all GEMM
// choices, unfused and fused, and every fused group) is compiled with NVRTC
// for sm_90 wherever libnvrtc can be opened, so a codegen bug fails CI even
// without a GPU. Without NVRTC the compile tests skip and say why.
//
//===----------------------------------------------------------------------===//
#include "CompileAll.h"
#include "IRTestUtils.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "mtsched/IR/OpUnit.h"
#include "mtsched/IR/Ops.h"
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/Passes/Pass.h"
#include "mtsched/Reference/OpUnitReference.h"
#include "mtsched/Schedule/Fusion.h"
#include "mtsched/Support/Diagnostics.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"
#include <chrono>
#include <iostream>
#include <mutex>
#include <tuple>

using namespace mtsched;

#ifndef MTSCHED_SOURCE_DIR
#error "MTSCHED_SOURCE_DIR must be defined"
#endif

namespace {

struct Parsed {
  llvm::SourceMgr SM;
  std::unique_ptr<Module> M;
};

/// Parses, verifies, lowers and fuses Text; null if it is not a valid graph
/// (lit inputs include negative tests).
std::unique_ptr<Parsed> lowerAndFuse(llvm::StringRef Text,
                                     llvm::StringRef Name) {
  auto P = std::make_unique<Parsed>();
  P->SM.setDiagHandler([](const llvm::SMDiagnostic &, void *) {});
  P->M = test::parseAndVerify(P->SM, Text, Name);
  if (!P->M)
    return nullptr;
  LoweringOptions LO;
  FusionOptions FO;
  // A case lowering refuses (a batched swiglu has no template on the
  // default target) reports through these, silenced by the handler above,
  // and is left out of the corpus.
  Diagnostics Diags(P->SM);
  PassContext Ctx;
  Ctx.M = P->M.get();
  Ctx.Diags = &Diags;
  for (auto &G : P->M->getGraphs()) {
    auto Lower = createLowerPass(LO);
    auto Fuse = createFusePass(FO);
    Lower->setContext(Ctx);
    Fuse->setContext(Ctx);
    if (llvm::Error E = Lower->run(*G)) {
      llvm::consumeError(std::move(E));
      return nullptr;
    }
    if (llvm::Error E = Fuse->run(*G)) {
      llvm::consumeError(std::move(E));
      return nullptr;
    }
  }
  return P;
}

/// Every .mir file of examples/ and test/lit/ (Inputs included), each
/// `// -----` case on its own. examples/gallery/ (imported PyTorch layers)
/// is left out: its GEMMs and groups are the same templates at model sizes,
/// several hundred more kernels that would add minutes of NVRTC time.
std::vector<std::pair<std::string, std::string>> corpus() {
  std::vector<std::pair<std::string, std::string>> Cases;
  for (const char *Dir : {"examples", "test/lit"}) {
    llvm::SmallString<256> Root(MTSCHED_SOURCE_DIR);
    llvm::sys::path::append(Root, Dir);
    std::error_code EC;
    std::vector<std::string> Files;
    for (llvm::sys::fs::recursive_directory_iterator I(Root, EC), E;
         I != E && !EC; I.increment(EC))
      // The gallery and the real layers repeat the templates of the other
      // inputs at many more shapes; compiling them all would triple this
      // test's time (their kernels run in the GPU scripts).
      if (llvm::sys::path::extension(I->path()) == ".mir" &&
          I->path().find("gallery") == std::string::npos &&
          I->path().find("layers") == std::string::npos)
        Files.push_back(I->path());
    llvm::sort(Files);
    for (const std::string &F : Files) {
      auto Buf = llvm::MemoryBuffer::getFile(F);
      if (!Buf)
        continue;
      llvm::SmallVector<llvm::StringRef, 8> Parts;
      (*Buf)->getBuffer().split(Parts, "// -----");
      for (size_t I = 0; I < Parts.size(); ++I)
        // A negative case (verify-diagnostics) holds a schedule that is
        // wrong on purpose, such as an attention with a fused epilogue:
        // it has no kernels to generate.
        if (!Parts[I].contains("expected-error"))
          Cases.emplace_back(F + "#" + std::to_string(I), Parts[I].str());
    }
  }
  return Cases;
}

} // namespace

/// A choice that has only a name, for gemmTileOf.
static Choice named(const char *Name) {
  Choice C;
  C.Name = Name;
  return C;
}

TEST(CudaCodegen, GeneratesKernelsForExample) {
  llvm::SmallString<256> Path(MTSCHED_SOURCE_DIR);
  llvm::sys::path::append(Path, "examples", "tp_mlp.mir");
  auto Buf = llvm::MemoryBuffer::getFile(Path);
  ASSERT_TRUE(bool(Buf));
  auto P = lowerAndFuse((*Buf)->getBuffer(), Path);
  ASSERT_TRUE(P);
  std::vector<std::string> Errors;
  std::vector<KernelSource> Ks =
      generateGraphKernels(*P->M->getGraphs()[0], Errors);
  EXPECT_TRUE(Errors.empty()) << Errors.front();
  // 15 tiles (10 mma.sync, 5 wgmma) x 2 matmuls (no epilogue: all_reduce
  // consumes them) + 2 groups.
  EXPECT_EQ(Ks.size(), 32u);
  for (const KernelSource &K : Ks) {
    EXPECT_EQ(K.Source.find("#include"), std::string::npos) << K.Name;
    EXPECT_NE(K.Source.find("extern \"C\" __global__"), std::string::npos);
    EXPECT_FALSE(K.Outputs.empty()) << K.Name;
  }
}

TEST(CudaCodegen, RowReductionNeedsWholeRow) {
  auto P = lowerAndFuse(R"(
graph @g(%x: bf16[64,256], %w: bf16[256,256], %r: bf16[64,256], %g: bf16[256]) {
  %y = matmul(%x, %w) : bf16[64,256]
  %s = add(%y, %r) : bf16[64,256]
  %o = rmsnorm(%s, %g) {eps = 1.0e-05} : bf16[64,256]
  return %o
}
)",
                        "row.mir");
  ASSERT_TRUE(P);
  const Graph &G = *P->M->getGraphs()[0];
  const auto *M = llvm::cast<MultiTemplateBufferNode>(G.getNodes()[0].get());
  ASSERT_EQ(M->getEpilogue().size(), 2u);
  auto Narrow = generateGemmKernel(*M, {64, 128, 64, 4, 3}, true);
  ASSERT_FALSE(bool(Narrow));
  EXPECT_NE(llvm::toString(Narrow.takeError()).find("N = 256 > BN = 128"),
            std::string::npos);
  auto Wide = generateGemmKernel(*M, {16, 256, 64, 4, 3}, true);
  ASSERT_TRUE(bool(Wide)) << llvm::toString(Wide.takeError());
  EXPECT_EQ(Wide->Inputs.size(), 4u); // x, w, r, g
  EXPECT_EQ(Wide->Outputs[0]->getName(), "o");
  EXPECT_NE(Wide->Source.find("rsqrtf"), std::string::npos);
}

TEST(CudaCodegen, SplitKTilesNameParseAndGenerate) {
  auto P = lowerAndFuse(R"(
graph @g(%x: bf16[16,4096], %w: bf16[4096,4096], %b: bf16[4096]) {
  %y = matmul(%x, %w) : bf16[16,4096]
  %z = add(%y, %b) : bf16[16,4096]
  return %z
}
graph @f(%x: f32[16,4096], %w: f32[4096,4096]) {
  %y = matmul(%x, %w) : f32[16,4096]
  return %y
}
)",
                        "splitk.mir");
  ASSERT_TRUE(P);
  GemmTileConfig T{16, 64, 128, 4, 5};
  T.SplitK = 4;
  EXPECT_EQ(gemmChoiceName(T), "gemm_16x64x128_w4_s5_k4");
  std::optional<GemmTileConfig> Back =
      gemmTileOf(named("gemm_16x64x128_w4_s5_k4"));
  ASSERT_TRUE(Back.has_value());
  EXPECT_EQ(Back->SplitK, 4);
  EXPECT_EQ(Back->Stages, 5);
  EXPECT_EQ(gemmTileOf(named("gemm_16x64x128_w4_s5"))->SplitK, 1);
  for (const char *Bad : {"gemm_16x64x128_w4_s5_k1", "gemm_16x64x128_w4_s5_k",
                          "gemm_16x64x128_w4_s5_kx", "gemm_wg_64x64x64_s3_k1",
                          "gemm_wg_64x64x64_s3_k", "gemm_wg_64x64x64_w4_s3_k2"})
    EXPECT_FALSE(gemmTileOf(named(Bad)).has_value()) << Bad;
  // The wgmma template splits K too.
  std::optional<GemmTileConfig> Wg =
      gemmTileOf(named("gemm_wg_64x64x64_s3_k2"));
  ASSERT_TRUE(Wg.has_value());
  EXPECT_EQ(Wg->Template, GemmTemplate::Wgmma);
  EXPECT_EQ(Wg->SplitK, 2);
  EXPECT_EQ(Wg->Warps, 8);
  EXPECT_EQ(gemmChoiceName(*Wg), "gemm_wg_64x64x64_s3_k2");

  auto Mtb = [&](int I) {
    return llvm::cast<MultiTemplateBufferNode>(
        P->M->getGraphs()[I]->getNodes()[0].get());
  };
  auto K = generateGemmKernel(*Mtb(0), T, /*Fused=*/true);
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  // 64 output tiles, 4 CTAs each; a partial tile per CTA and a counter per
  // output tile.
  EXPECT_EQ(K->GridX, 64u);
  EXPECT_EQ(K->GridZ, 4u);
  EXPECT_EQ(K->WorkspaceBytes, 64u * 4 * 16 * 64 * 4 + 64u * 4);
  EXPECT_NE(K->Source.find("#define SPLITK 4"), std::string::npos);
  EXPECT_NE(K->Source.find("float *__restrict__ mt_ws"), std::string::npos);
  // The wgmma template's split: GridZ slices, the workspace after the
  // outputs, the slice-order sum of the partials.
  auto W = generateGemmKernel(*Mtb(0), *Wg, /*Fused=*/false);
  ASSERT_TRUE(bool(W)) << llvm::toString(W.takeError());
  EXPECT_TRUE(W->NeedsSm90a);
  EXPECT_EQ(W->GridZ, 2u);
  EXPECT_EQ(W->WorkspaceBytes, uint64_t(W->GridX) * W->GridY * 2 * 64 * 64 * 4 +
                                   uint64_t(W->GridX) * W->GridY * 4);
  for (const char *S : {"#define SPLITK 2", "float *__restrict__ mt_ws",
                        "z == split ? own : parts"})
    EXPECT_NE(W->Source.find(S), std::string::npos) << S;
  // fp32 runs the SIMT template, which does not split K.
  auto F = generateGemmKernel(*Mtb(1), T, /*Fused=*/false);
  ASSERT_FALSE(bool(F));
  EXPECT_NE(llvm::toString(F.takeError()).find("needs bf16, f16 or fp8"),
            std::string::npos);
}

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

TEST(CudaCodegen, TwoOutputEpilogueStoresTheSumToo) {
  // The residual sum feeds the RMSNorm and is read again: every template
  // stores it (in the chain, before the row reduction) beside the norm.
  auto P = lowerAndFuse(R"(
graph @g(%x: bf16[64,256], %w: bf16[256,256], %r: bf16[64,256], %g: bf16[256]) {
  %y = matmul(%x, %w) : bf16[64,256]
  %s = add(%y, %r) : bf16[64,256]
  %o = rmsnorm(%s, %g) {eps = 1.0e-05} : bf16[64,256]
  return %s, %o
}
graph @f(%x: f32[32,64], %w: f32[64,64], %r: f32[32,64], %g: f32[64]) {
  %y = matmul(%x, %w) : f32[32,64]
  %s = add(%y, %r) : f32[32,64]
  %o = rmsnorm(%s, %g) {eps = 1.0e-05} : f32[32,64]
  return %s, %o
}
)",
                        "two.mir");
  ASSERT_TRUE(P);
  for (auto &G : P->M->getGraphs()) {
    const auto *M = llvm::cast<MultiTemplateBufferNode>(G->getNodes()[0].get());
    ASSERT_EQ(M->getEpilogueWrites().size(), 1u) << G->getName();
    bool F32 = G->getName() == "f";
    std::vector<GemmTileConfig> Tiles = {{16, 256, 64, 4, 3}};
    if (F32)
      Tiles = {{16, 64, 16, 4, 1}};
    else
      Tiles.push_back(wgmmaTile(64, 256, 64, 4));
    for (const GemmTileConfig &T : Tiles) {
      auto K = generateGemmKernel(*M, T, /*Fused=*/true);
      ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
      // Outputs: the writes, then the last member (as getFusedOutputs).
      ASSERT_EQ(K->Outputs.size(), 2u) << K->Name;
      EXPECT_EQ(K->Outputs[0]->getName(), "s");
      EXPECT_EQ(K->Outputs[1]->getName(), "o");
      size_t Sum = K->Source.find("p_s_out[r * N_ + c] =");
      size_t Norm = K->Source.find("rsqrtf");
      ASSERT_NE(Sum, std::string::npos) << K->Name;
      ASSERT_NE(Norm, std::string::npos) << K->Name;
      EXPECT_LT(Sum, Norm) << K->Name;
      EXPECT_NE(K->Source.find("p_o_out[r * N_ + c]"), std::string::npos);
      if (llvm::Expected<const cuda::NvrtcApi &> Nv = cuda::loadNvrtc(); !Nv) {
        llvm::consumeError(Nv.takeError());
      } else {
        llvm::Expected<std::string> Cubin =
            cuda::compileToCubin(K->Source, K->Name, 90, K->NeedsSm90a);
        EXPECT_TRUE(bool(Cubin))
            << K->Name << ": "
            << (Cubin ? "" : llvm::toString(Cubin.takeError()));
      }
      // Unfused, the GEMM writes its own result only.
      auto U = generateGemmKernel(*M, T, /*Fused=*/false);
      ASSERT_TRUE(bool(U)) << llvm::toString(U.takeError());
      EXPECT_EQ(U->Outputs.size(), 1u);
    }
  }
}

TEST(CudaCodegen, DumpWritesOneFilePerKernel) {
  auto P = lowerAndFuse(R"(
graph @g(%x: f32[8,8], %b: f32[8]) {
  %y = add(%x, %b) : f32[8,8]
  %z = relu(%y) : f32[8,8]
  return %z
}
)",
                        "pw.mir");
  ASSERT_TRUE(P);
  std::vector<std::string> Errors;
  auto Ks = generateGraphKernels(*P->M->getGraphs()[0], Errors);
  ASSERT_EQ(Ks.size(), 1u);
  llvm::SmallString<128> Dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("mtsched-dump", Dir));
  ASSERT_FALSE(bool(dumpKernels(Ks, Dir)));
  llvm::SmallString<128> File(Dir);
  llvm::sys::path::append(File, Ks[0].Name + ".cu");
  EXPECT_TRUE(llvm::sys::fs::exists(File));
  llvm::sys::fs::remove_directories(Dir);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
static constexpr bool SanitizedBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
static constexpr bool SanitizedBuild = true;
#else
static constexpr bool SanitizedBuild = false;
#endif
#else
static constexpr bool SanitizedBuild = false;
#endif

namespace {

/// Every distinct kernel generated for the corpus, plus one that evaluates
/// every pointwise op of the table, in a fixed order (the corpus is sorted),
/// built once per process.
struct KernelCorpus {
  std::vector<std::pair<std::string, KernelSource>> Work;
  /// Generation errors, "file#case: message".
  std::vector<std::string> Errors;
  /// The op units some graph of the corpus uses: their kernels are in Work.
  llvm::StringSet<> OpUnitsUsed;
  unsigned Graphs = 0;
  /// The kernels point into the parsed modules.
  std::vector<std::unique_ptr<Parsed>> Keep;
  double Seconds = 0;
};

const KernelCorpus &kernelCorpus() {
  static const KernelCorpus C = [] {
    KernelCorpus C;
    auto Start = std::chrono::steady_clock::now();
    llvm::StringSet<> Seen; // Distinct sources only: many tests share shapes.
    for (auto &Case : corpus()) {
      auto P = lowerAndFuse(Case.second, Case.first);
      if (!P)
        continue;
      for (auto &G : P->M->getGraphs()) {
        ++C.Graphs;
        for (const auto &N : G->getNodes())
          if (isOpUnit(N->getOp()))
            C.OpUnitsUsed.insert(N->getOpName());
        std::vector<std::string> Errors;
        for (KernelSource &K : generateGraphKernels(*G, Errors))
          if (Seen.insert(K.Source).second)
            C.Work.emplace_back(Case.first, std::move(K));
        for (const std::string &E : Errors)
          C.Errors.push_back(Case.first + ": " + E);
      }
      C.Keep.push_back(std::move(P));
    }
    // Every pointwise op of the table, whether or not an input uses it: one
    // kernel evaluates each expression (as the codegens expand it) over
    // loaded operands.
    KernelSource K;
    K.Name = "op_table_expressions";
    std::string Body;
    unsigned Out = 0;
    for (const OpInfo &Info : allOps()) {
      if (Info.Category != OpCategory::Pointwise)
        continue;
      std::vector<std::string> Ops;
      for (int I = 0; I < Info.NumOperands; ++I)
        Ops.push_back("p[i * 4 + " + std::to_string(I) + "]");
      Body += "  q[i * 64 + " + std::to_string(Out++) +
              "] = " + expandCudaExpr(Info.Code, Ops) + "; // " +
              Info.Name.str() + "\n";
    }
    // After the prelude, as every generated kernel: an expression may call
    // its device functions (mt_pow).
    K.Source = codegen::kernelPrelude().str() +
               "\nextern \"C\" __global__ void " + K.Name +
               "(const float *p, float *q) {\n  const int i = threadIdx.x;\n" +
               Body + "}\n";
    C.Work.emplace_back("the op table", std::move(K));
    C.Seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - Start)
            .count();
    return C;
  }();
  return C;
}

/// Compiling every kernel is one test per shard: as a single test it ran
/// past ctest's 900 s on a loaded two-core machine. Kernel I goes to shard
/// I % NumNvrtcShards, so each shard gets a similar mix. If the corpus grows
/// past MaxKernelsPerShard per shard, EveryGraphGeneratesKernels fails and
/// says to raise NumNvrtcShards.
constexpr unsigned NumNvrtcShards = 128;
constexpr size_t MaxKernelsPerShard = 32;

} // namespace

TEST(CudaCodegen, EveryGraphGeneratesKernels) {
  const KernelCorpus &C = kernelCorpus();
  EXPECT_GT(C.Graphs, 10u);
  // Unsupported constructs are reported, never silently dropped.
  for (const std::string &E : C.Errors)
    ADD_FAILURE() << E;
  size_t PerShard = (C.Work.size() + NumNvrtcShards - 1) / NumNvrtcShards;
  EXPECT_LE(PerShard, MaxKernelsPerShard)
      << C.Work.size() << " distinct kernels: raise NumNvrtcShards so that "
      << "each EveryKernelCompilesWithNvrtc shard stays short";
  std::cout << "[ generated ] " << C.Work.size() << " distinct kernels from "
            << C.Graphs << " graphs in "
            << llvm::formatv("{0:F1}", C.Seconds).str() << " s\n";
}

/// Every OP_UNIT of Ops.def registers its three parts (registerAllOpUnits,
/// called by the tests' main), and a lit test or example uses it, so that
/// its kernel is generated above and compiled by the shards below.
TEST(CudaCodegen, EveryOpUnitIsRegisteredAndCompiled) {
  const KernelCorpus &C = kernelCorpus();
  unsigned Units = 0;
  for (const OpInfo &Info : allOps()) {
    if (!isOpUnit(Info.Code))
      continue;
    ++Units;
    const OpUnitInfo *U = lookupOpUnitInfo(Info.Code);
    EXPECT_TRUE(U && U->InferType && U->Flops)
        << Info.Name.str() << ": no type rule or cost registered";
    EXPECT_NE(lookupOpUnitReference(Info.Code), nullptr)
        << Info.Name.str() << ": no fp64 reference registered";
    EXPECT_NE(lookupOpUnitKernel(Info.Code), nullptr)
        << Info.Name.str() << ": no kernel registered";
    EXPECT_TRUE(C.OpUnitsUsed.contains(Info.Name))
        << Info.Name.str()
        << ": no graph of test/lit or examples uses it, so its kernel is "
           "never compiled";
  }
  EXPECT_GE(Units, 1u);
}

class EveryKernelCompilesWithNvrtc : public ::testing::TestWithParam<unsigned> {
};

TEST_P(EveryKernelCompilesWithNvrtc, Shard) {
  llvm::Expected<const cuda::NvrtcApi &> N = cuda::loadNvrtc();
  if (!N)
    GTEST_SKIP() << "NVRTC not available, generated kernels not compiled: "
                 << llvm::toString(N.takeError());
  const unsigned Shard = GetParam();
  const KernelCorpus &C = kernelCorpus();
  ASSERT_GT(C.Work.size(), 1u);
  // Under a sanitizer NVRTC runs uninstrumented but allocates through the
  // sanitizer's allocator: compiling every kernel ran past ctest's 900 s in a
  // CI rehearsal's ASan stage on 2 cores (with another job running; 289 s
  // in the release stage, which compiles them all). There every fourth
  // kernel is compiled, the same ones each run: the host code generating
  // them is checked all the same (EveryGraphGeneratesKernels).
  const size_t Stride = SanitizedBuild ? 4 : 1;
  std::vector<const std::pair<std::string, KernelSource> *> Mine;
  for (size_t I = 0; I < C.Work.size(); ++I)
    if (I % NumNvrtcShards == Shard && (I / NumNvrtcShards) % Stride == 0)
      Mine.push_back(&C.Work[I]);
  auto Start = std::chrono::steady_clock::now();
  std::mutex Mu;
  std::vector<std::string> Failures;
  {
    llvm::DefaultThreadPool Pool(llvm::hardware_concurrency(8));
    for (const auto *W : Mine)
      Pool.async([W, &Mu, &Failures] {
        llvm::Expected<std::string> Cubin = cuda::compileToCubin(
            W->second.Source, W->second.Name, 90, W->second.NeedsSm90a);
        if (!Cubin) {
          std::lock_guard<std::mutex> L(Mu);
          Failures.push_back(W->first + ": " + W->second.Name + ": " +
                             llvm::toString(Cubin.takeError()));
        }
      });
    Pool.wait();
  }
  for (const std::string &F : Failures)
    ADD_FAILURE() << F;
  double Secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - Start)
          .count();
  std::cout << "[ compiled ] shard " << Shard << " of " << NumNvrtcShards
            << ": " << Mine.size() << " of " << C.Work.size()
            << " distinct kernels in " << llvm::formatv("{0:F1}", Secs).str()
            << " s (generating all: "
            << llvm::formatv("{0:F1}", C.Seconds).str() << " s)"
            << (Stride > 1 ? " (a sanitizer build: every fourth)" : "") << "\n";
}

INSTANTIATE_TEST_SUITE_P(CudaCodegen, EveryKernelCompilesWithNvrtc,
                         ::testing::Range(0u, NumNvrtcShards));

TEST(CudaCompiler, CachesAndRewritesCorruptEntries) {
  llvm::Expected<const cuda::NvrtcApi &> N = cuda::loadNvrtc();
  if (!N)
    GTEST_SKIP() << "NVRTC not available: " << llvm::toString(N.takeError());
  llvm::SmallString<128> Dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("mtsched-kcache", Dir));
  cuda::KernelCompileOptions Opts;
  Opts.CacheDir = std::string(Dir);
  // Several kernels, so some keys start with a zero digit.
  std::vector<cuda::CompileJob> Jobs;
  for (int I = 0; I < 6; ++I)
    Jobs.push_back({"k" + std::to_string(I),
                    "extern \"C\" __global__ void k" + std::to_string(I) +
                        "(float *p) { p[threadIdx.x] += " + std::to_string(I) +
                        ".f; }\n"});
  cuda::KernelStats S;
  unsigned C0 = S.Compiled, H0 = S.Cached;
  for (auto &R : cuda::compileAll(Jobs, 90, Opts, &S))
    ASSERT_TRUE(bool(R)) << llvm::toString(R.takeError());
  EXPECT_EQ(S.Compiled - C0, 6u);
  for (auto &R : cuda::compileAll(Jobs, 90, Opts, &S))
    ASSERT_TRUE(bool(R));
  EXPECT_EQ(S.Cached - H0, 6u);
  // Corrupt every entry: each is recompiled, not trusted.
  std::error_code EC;
  for (llvm::sys::fs::directory_iterator I(Dir, EC), E; I != E && !EC;
       I.increment(EC)) {
    std::error_code WEC;
    llvm::raw_fd_ostream OS(I->path(), WEC, llvm::sys::fs::OF_Append);
    OS << "garbage";
  }
  unsigned C1 = S.Compiled;
  for (auto &R : cuda::compileAll(Jobs, 90, Opts, &S))
    ASSERT_TRUE(bool(R));
  EXPECT_EQ(S.Compiled - C1, 6u);
  llvm::sys::fs::remove_directories(Dir);
}
