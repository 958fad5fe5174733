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
#include "LowerAndFuse.h"
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
using test::lowerAndFuse;
using test::named;
using test::Parsed;

#ifndef MTSCHED_SOURCE_DIR
#error "MTSCHED_SOURCE_DIR must be defined"
#endif

namespace {

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

/// examples/tp_mlp.mir lowered and fused (null if it cannot be read).
std::unique_ptr<Parsed> exampleGraph() {
  llvm::SmallString<256> Path(MTSCHED_SOURCE_DIR);
  llvm::sys::path::append(Path, "examples", "tp_mlp.mir");
  auto Buf = llvm::MemoryBuffer::getFile(Path);
  if (!Buf)
    return nullptr;
  return lowerAndFuse((*Buf)->getBuffer(), Path);
}

} // namespace

TEST(CudaCodegen, GeneratesKernelsForExample) {
  std::vector<std::string> Errors;
  std::unique_ptr<Parsed> P = exampleGraph();
  ASSERT_TRUE(P);
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

TEST(CudaCodegen, ProgrammaticWaitIsEachKernelsFirstStatement) {
  std::vector<std::string> Errors;
  std::unique_ptr<Parsed> P = exampleGraph();
  ASSERT_TRUE(P);
  std::vector<KernelSource> Ks =
      generateGraphKernels(*P->M->getGraphs()[0], Errors);
  ASSERT_TRUE(Errors.empty()) << Errors.front();
  const std::string Wait =
      "\n#if __CUDA_ARCH__ >= 900\n"
      "  asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
      "  asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n"
      "#endif\n";
  // Every GEMM tile (mma.sync and wgmma) and every group waits first thing,
  // then lets the kernel after it launch.
  for (const KernelSource &K : Ks) {
    EXPECT_TRUE(K.ProgrammaticWait) << K.Name;
    size_t Fn = K.Source.find("extern \"C\" __global__");
    ASSERT_NE(Fn, std::string::npos) << K.Name;
    size_t Body = K.Source.find(") {", Fn);
    EXPECT_EQ(K.Source.find(Wait), Body + 3) << K.Name;
    EXPECT_EQ(K.Source.find("griddepcontrol.wait"),
              K.Source.rfind("griddepcontrol.wait"))
        << K.Name;
  }
  // Once only; a source of two kernels and a failure pass unchanged.
  llvm::Expected<KernelSource> Again = withProgrammaticWait(Ks.front());
  ASSERT_TRUE(bool(Again));
  EXPECT_EQ(Again->Source, Ks.front().Source);
  KernelSource Two;
  Two.Source = "extern \"C\" __global__ void a(int *p) {\n}\n"
               "extern \"C\" __global__ void b(int *p) {\n}\n";
  llvm::Expected<KernelSource> Same = withProgrammaticWait(Two);
  ASSERT_TRUE(bool(Same));
  EXPECT_FALSE(Same->ProgrammaticWait);
  EXPECT_EQ(Same->Source, Two.Source);
  llvm::Expected<KernelSource> Failed = withProgrammaticWait(
      llvm::createStringError(llvm::inconvertibleErrorCode(), "no tile"));
  ASSERT_FALSE(bool(Failed));
  EXPECT_EQ(llvm::toString(Failed.takeError()), "no tile");
}

TEST(CudaCodegen, LongGemmsTakeNoPartInPdl) {
  // 2 * 2048 * 8192 * 8192 = 2.7e11 flops (the 70B MLP's prefill has 9.6e11
  // a GEMM), 2 * 16 * 8192 * 8192 = 2.1e9 (decode).
  auto P = lowerAndFuse(R"(
graph @g(%x: bf16[2048,8192], %h: bf16[16,8192], %w: bf16[8192,8192]) {
  %y = matmul(%x, %w) : bf16[2048,8192]
  %d = matmul(%h, %w) : bf16[16,8192]
  return %y, %d
}
)",
                        "long.mir");
  ASSERT_TRUE(P);
  const Graph &G = *P->M->getGraphs()[0];
  const auto *Long = llvm::cast<MultiTemplateBufferNode>(G.getNodes()[0].get());
  const auto *Short =
      llvm::cast<MultiTemplateBufferNode>(G.getNodes()[1].get());
  EXPECT_GE(gemmFlops(*Long), LongKernelFlops);
  EXPECT_LT(gemmFlops(*Short), LongKernelFlops);
  // The size hint counts: the long node's GEMM at 16 rows is short.
  EXPECT_LT(gemmFlops(*Long, 16), LongKernelFlops);
  const GemmTileConfig T{64, 128, 64, 4, 3};
  auto L = generateGemmKernel(*Long, T, false);
  ASSERT_TRUE(bool(L)) << llvm::toString(L.takeError());
  EXPECT_FALSE(L->ProgrammaticWait);
  EXPECT_EQ(L->Source.find("griddepcontrol"), std::string::npos);
  auto S = generateGemmKernel(*Short, T, false);
  ASSERT_TRUE(bool(S)) << llvm::toString(S.takeError());
  EXPECT_TRUE(S->ProgrammaticWait);
  EXPECT_NE(S->Source.find("griddepcontrol.launch_dependents"),
            std::string::npos);
  auto Hinted = generateGemmKernel(*Long, T, false, /*MArg=*/16);
  ASSERT_TRUE(bool(Hinted)) << llvm::toString(Hinted.takeError());
  EXPECT_TRUE(Hinted->ProgrammaticWait);
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
constexpr unsigned NumNvrtcShards = 144;
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
