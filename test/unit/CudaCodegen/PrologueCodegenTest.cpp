//===- PrologueCodegenTest.cpp - A GEMM with an RMSNorm prologue compiles -===//
//
// generatePrologueGemmKernel over rmsnorm -> matmul at decode (M = 1, 16,
// 64) and ragged shapes, for every default mma.sync tile (split-K too),
// bf16 and f16, compiled with NVRTC for sm_90 wherever libnvrtc can be
// opened (skips and says why elsewhere); its launch shape; what it refuses.
//
//===----------------------------------------------------------------------===//
#include "CompileAll.h"
#include "IRTestUtils.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Lowering/Lowering.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"

using namespace mtsched;

namespace {

/// "T[A,B]", a matrix type in the IR's text.
std::string matrix(const std::string &T, int64_t A, int64_t B) {
  return T + "[" + std::to_string(A) + "," + std::to_string(B) + "]";
}

/// A module of one graph, parsed from text, verified and lowered: what
/// every test below starts from (each names the nodes it reads besides the
/// norm).
struct LoweredModule {
  llvm::SourceMgr SM;
  std::unique_ptr<Module> M;
  /// The graph's first node: every graph here starts with its rmsnorm.
  const Node *Norm = nullptr;
  Graph &graph() const { return *M->getGraphs()[0]; }
};

/// Src parsed, verified and lowered into a new ParsedT (a LoweredModule);
/// null if any step fails.
template <typename ParsedT>
std::unique_ptr<ParsedT> parseAndLower(const std::string &Src) {
  auto R = std::make_unique<ParsedT>();
  R->M = test::parseAndVerify(R->SM, Src, "g.mir");
  if (!R->M)
    return nullptr;
  if (llvm::Error E = createLowerPass(LoweringOptions())->run(R->graph())) {
    llvm::consumeError(std::move(E));
    return nullptr;
  }
  R->Norm = R->graph().getNodes()[0].get();
  return R;
}

struct Parsed : LoweredModule {
  const MultiTemplateBufferNode *Gemm = nullptr;
};

/// `%n = rmsnorm(%x, %w); %y = matmul(%n, %b)` over [M, K] x [K, N],
/// lowered; WType overrides the weight's dtype.
std::unique_ptr<Parsed> normGemm(const std::string &T, int64_t M, int64_t K,
                                 int64_t N, const char *WType = nullptr) {
  std::string W = WType ? WType : T;
  std::string Src =
      "graph @g(%x: " + matrix(T, M, K) + ", %w: " + W + "[" +
      std::to_string(K) + "], %b: " + matrix(T, K, N) +
      ") {\n  %n = rmsnorm(%x, %w) {eps = 1e-05} : " + matrix(T, M, K) +
      "\n  %y = matmul(%n, %b) : " + matrix(T, M, N) + "\n  return %y\n}\n";
  auto P = parseAndLower<Parsed>(Src);
  if (!P)
    return nullptr;
  Graph &G = P->graph();
  P->Gemm = llvm::dyn_cast<MultiTemplateBufferNode>(G.getNodes()[1].get());
  if (!P->Gemm)
    return nullptr;
  return P;
}

std::vector<GemmTileConfig> mmaTiles() {
  std::vector<GemmTileConfig> Out;
  for (const GemmTileConfig &T : ChoiceConfig::getDefault().GemmTiles)
    if (T.Template == GemmTemplate::MmaSync && !T.Persistent)
      Out.push_back(T);
  return Out;
}

std::string msg(llvm::Expected<KernelSource> K) {
  return K ? std::string() : llvm::toString(K.takeError());
}

} // namespace

TEST(PrologueCodegen, KernelShape) {
  auto P = normGemm("bf16", 16, 4096, 14336);
  ASSERT_TRUE(P);
  GemmTileConfig T{16, 64, 64, 4, 8};
  T.SplitK = 2;
  llvm::Expected<KernelSource> K =
      generatePrologueGemmKernel("g", *P->Norm, *P->Gemm, T);
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  // Reads x, the norm's weight and B; never the norm's result.
  ASSERT_EQ(K->Inputs.size(), 3u);
  EXPECT_EQ(K->Inputs[0]->getName(), "x");
  EXPECT_EQ(K->Inputs[1]->getName(), "w");
  EXPECT_EQ(K->Inputs[2]->getName(), "b");
  ASSERT_EQ(K->Outputs.size(), 1u);
  EXPECT_EQ(K->Outputs[0]->getName(), "y");
  EXPECT_EQ(K->GridX, 14336u / 64);
  EXPECT_EQ(K->GridY, 1u);
  EXPECT_EQ(K->GridZ, 2u);
  EXPECT_EQ(K->BlockX, 128u);
  EXPECT_EQ(K->WorkspaceBytes, 224u * 2 * 16 * 64 * 4 + 224u * 4);
  EXPECT_NE(K->Source.find("#define PL_EPS 1.000000000e-05f"),
            std::string::npos);
  EXPECT_NE(K->Source.find("pl_inv[BM]"), std::string::npos);
  EXPECT_NE(K->Source.find("#define ALIGNED8 1"), std::string::npos);
  // Ragged: element-wise copies, no workspace without split-K.
  auto R = normGemm("f16", 33, 130, 200);
  ASSERT_TRUE(R);
  llvm::Expected<KernelSource> K2 = generatePrologueGemmKernel(
      "g", *R->Norm, *R->Gemm, GemmTileConfig{32, 64, 32, 4, 2});
  ASSERT_TRUE(bool(K2)) << llvm::toString(K2.takeError());
  EXPECT_NE(K2->Source.find("#define ALIGNED8 0"), std::string::npos);
  EXPECT_EQ(K2->GridX, 4u);
  EXPECT_EQ(K2->GridY, 2u);
  EXPECT_EQ(K2->WorkspaceBytes, 0u);
}

TEST(PrologueCodegen, Refuses) {
  auto P = normGemm("bf16", 16, 256, 128);
  ASSERT_TRUE(P);
  GemmTileConfig T{16, 64, 32, 4, 2};
  // The GEMM is not the norm's reader the other way round.
  EXPECT_NE(msg(generatePrologueGemmKernel("g", *P->Gemm, *P->Gemm, T))
                .find("is not an rmsnorm"),
            std::string::npos);
  EXPECT_NE(msg(generatePrologueGemmKernel("g", *P->Norm, *P->Gemm,
                                           GemmTileConfig{16, 16, 16, 8, 2}))
                .find("warp tiles"),
            std::string::npos);
  EXPECT_NE(msg(generatePrologueGemmKernel("g", *P->Norm, *P->Gemm,
                                           wgmmaTile(64, 128, 64, 4)))
                .find("mma.sync template only"),
            std::string::npos);
  // A norm another GEMM does not read.
  auto Q = normGemm("bf16", 16, 256, 128);
  ASSERT_TRUE(Q);
  EXPECT_NE(msg(generatePrologueGemmKernel("g", *Q->Norm, *P->Gemm, T))
                .find("does not read"),
            std::string::npos);
  auto F = normGemm("f32", 16, 64, 64);
  ASSERT_TRUE(F);
  EXPECT_NE(msg(generatePrologueGemmKernel("g", *F->Norm, *F->Gemm, T))
                .find("bf16 or f16"),
            std::string::npos);
}

TEST(PrologueCodegen, EveryTileCompilesWithNvrtc) {
  llvm::Expected<const cuda::NvrtcApi &> Nv = cuda::loadNvrtc();
  if (!Nv)
    GTEST_SKIP() << "NVRTC not available, prologue kernels not compiled: "
                 << llvm::toString(Nv.takeError());
  struct Shape {
    const char *Ty;
    int64_t M, K, N;
  };
  // Llama-3-8B's norm -> Q and norm -> gate/up (one rank) at decode, and
  // ragged shapes (element-wise copies, rows past M).
  const Shape Shapes[] = {{"bf16", 1, 4096, 4096},
                          {"bf16", 16, 4096, 14336},
                          {"bf16", 64, 4096, 4096},
                          {"f16", 33, 130, 200},
                          {"bf16", 100, 200, 72}};
  std::vector<std::unique_ptr<Parsed>> Keep;
  std::vector<KernelSource> Work;
  for (const Shape &S : Shapes) {
    auto P = normGemm(S.Ty, S.M, S.K, S.N);
    ASSERT_TRUE(P);
    for (const GemmTileConfig &T : mmaTiles()) {
      llvm::Expected<KernelSource> K =
          generatePrologueGemmKernel("g", *P->Norm, *P->Gemm, T);
      ASSERT_TRUE(bool(K)) << gemmChoiceName(T) << ": "
                           << llvm::toString(K.takeError());
      Work.push_back(std::move(*K));
    }
    Keep.push_back(std::move(P));
  }
  ASSERT_FALSE(Work.empty());
  expectEveryKernelCompiles(Work, 2);
}

namespace {

/// `%n = rmsnorm(%x, %w); %y<i> = matmul(%n, %b<i>)`, lowered: a norm
/// before a horizontal group (Q/K/V).
struct ParsedGroup : LoweredModule {
  std::vector<const MultiTemplateBufferNode *> Members;
};

std::unique_ptr<ParsedGroup> normGroup(const std::string &T, int64_t M,
                                       int64_t K, std::vector<int64_t> Ns) {
  std::string Args = "%x: " + matrix(T, M, K) + ", %w: " + T + "[" +
                     std::to_string(K) + "]",
              Body =
                  "  %n = rmsnorm(%x, %w) {eps = 1e-05} : " + matrix(T, M, K) +
                  "\n",
              Ret;
  for (size_t I = 0; I < Ns.size(); ++I) {
    std::string B = "%b" + std::to_string(I), Y = "%y" + std::to_string(I);
    Args += ", " + B + ": " + matrix(T, K, Ns[I]);
    Body +=
        "  " + Y + " = matmul(%n, " + B + ") : " + matrix(T, M, Ns[I]) + "\n";
    Ret += (Ret.empty() ? "" : ", ") + Y;
  }
  std::string Src =
      "graph @g(" + Args + ") {\n" + Body + "  return " + Ret + "\n}\n";
  auto P = parseAndLower<ParsedGroup>(Src);
  if (!P)
    return nullptr;
  Graph &G = P->graph();
  for (size_t I = 1; I < G.getNodes().size(); ++I)
    P->Members.push_back(
        llvm::cast<MultiTemplateBufferNode>(G.getNodes()[I].get()));
  return P;
}

} // namespace

TEST(PrologueCodegen, HorizontalGroupReadsXAndW) {
  auto P = normGroup("bf16", 16, 4096, {2048, 512, 512});
  ASSERT_TRUE(P);
  GemmTileConfig T{16, 64, 64, 4, 8};
  T.SplitK = 2;
  llvm::Expected<KernelSource> K =
      generateHorizontalGemmKernel("qkv", P->Members, T, P->Norm);
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  ASSERT_EQ(K->Inputs.size(), 5u);
  EXPECT_EQ(K->Inputs[0]->getName(), "x");
  EXPECT_EQ(K->Inputs[1]->getName(), "w");
  EXPECT_EQ(K->Inputs[2]->getName(), "b0");
  EXPECT_EQ(K->Outputs.size(), 3u);
  EXPECT_NE(K->Source.find("#define PROLOGUE 1"), std::string::npos);
  EXPECT_NE(K->Source.find("hz0::pl_row_scales(A, m0, pl_inv);"),
            std::string::npos);
  // Without the norm: the plain merged GEMM over %n.
  llvm::Expected<KernelSource> Plain =
      generateHorizontalGemmKernel("qkv", P->Members, T);
  ASSERT_TRUE(bool(Plain)) << llvm::toString(Plain.takeError());
  EXPECT_EQ(Plain->Inputs[0]->getName(), "n");
  EXPECT_NE(Plain->Source.find("#define PROLOGUE 0"), std::string::npos);
  // A norm that does not define the group's A.
  auto Q = normGroup("bf16", 16, 4096, {2048, 512});
  ASSERT_TRUE(Q);
  EXPECT_NE(msg(generateHorizontalGemmKernel("qkv", P->Members, T, Q->Norm))
                .find("defining the group's A"),
            std::string::npos);
}

TEST(PrologueCodegen, EveryHorizontalTileCompilesWithNvrtc) {
  llvm::Expected<const cuda::NvrtcApi &> Nv = cuda::loadNvrtc();
  if (!Nv)
    GTEST_SKIP() << "NVRTC not available, prologue kernels not compiled: "
                 << llvm::toString(Nv.takeError());
  // Llama-3-8B's norm -> Q/K/V at one rank, decode; ragged.
  auto P = normGroup("bf16", 16, 4096, {4096, 1024, 1024});
  auto R = normGroup("f16", 33, 130, {200, 72});
  ASSERT_TRUE(P && R);
  std::vector<KernelSource> Work;
  for (ParsedGroup *G : {P.get(), R.get()})
    for (const GemmTileConfig &T : mmaTiles()) {
      llvm::Expected<KernelSource> K =
          generateHorizontalGemmKernel("g", G->Members, T, G->Norm);
      ASSERT_TRUE(bool(K)) << gemmChoiceName(T) << ": "
                           << llvm::toString(K.takeError());
      Work.push_back(std::move(*K));
    }
  expectEveryKernelCompiles(Work, 2);
}

namespace {

/// `%n = rmsnorm(%x, %w); %gu = swiglu(%n, %wg, %wu)`, lowered.
struct ParsedSwiGlu : LoweredModule {
  const MultiTemplateBufferNode *Gu = nullptr;
};

std::unique_ptr<ParsedSwiGlu> normSwiGlu(const std::string &T, int64_t M,
                                         int64_t K, int64_t N) {
  std::string Src =
      "graph @g(%x: " + matrix(T, M, K) + ", %w: " + T + "[" +
      std::to_string(K) + "], %wg: " + matrix(T, K, N) +
      ", %wu: " + matrix(T, K, N) +
      ") {\n  %n = rmsnorm(%x, %w) {eps = 1e-05} : " + matrix(T, M, K) +
      "\n  %gu = swiglu(%n, %wg, %wu) : " + matrix(T, M, N) +
      "\n  return %gu\n}\n";
  auto P = parseAndLower<ParsedSwiGlu>(Src);
  if (!P)
    return nullptr;
  Graph &G = P->graph();
  P->Gu = llvm::dyn_cast<MultiTemplateBufferNode>(G.getNodes()[1].get());
  if (!P->Gu)
    return nullptr;
  return P;
}

} // namespace

TEST(PrologueCodegen, SwiGluReadsXAndW) {
  auto P = normSwiGlu("bf16", 16, 4096, 7168);
  ASSERT_TRUE(P);
  GemmTileConfig T{16, 64, 128, 4, 3};
  llvm::Expected<KernelSource> K = generateSwiGluKernel(*P->Gu, T, 0, P->Norm);
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  ASSERT_EQ(K->Inputs.size(), 4u);
  EXPECT_EQ(K->Inputs[0]->getName(), "x");
  EXPECT_EQ(K->Inputs[1]->getName(), "w");
  EXPECT_EQ(K->Inputs[2]->getName(), "wg");
  EXPECT_NE(K->Source.find("#define PROLOGUE 1"), std::string::npos);
  EXPECT_NE(K->Source.find("pl_row_scales(A, m0, pl_inv);"), std::string::npos);
  llvm::Expected<KernelSource> Plain = generateSwiGluKernel(*P->Gu, T);
  ASSERT_TRUE(bool(Plain)) << llvm::toString(Plain.takeError());
  EXPECT_EQ(Plain->Inputs[0]->getName(), "n");
  EXPECT_NE(Plain->Source.find("#define PROLOGUE 0"), std::string::npos);
  auto Q = normSwiGlu("bf16", 16, 4096, 7168);
  ASSERT_TRUE(Q);
  EXPECT_NE(msg(generateSwiGluKernel(*P->Gu, T, 0, Q->Norm))
                .find("defining '%gu''s input"),
            std::string::npos);
}

TEST(PrologueCodegen, EverySwiGluTileCompilesWithNvrtc) {
  llvm::Expected<const cuda::NvrtcApi &> Nv = cuda::loadNvrtc();
  if (!Nv)
    GTEST_SKIP() << "NVRTC not available, prologue kernels not compiled: "
                 << llvm::toString(Nv.takeError());
  // Llama-3-8B's MLP norm -> gate/up at TP=2 decode; ragged.
  auto P = normSwiGlu("bf16", 16, 4096, 7168);
  auto R = normSwiGlu("f16", 33, 130, 76);
  ASSERT_TRUE(P && R);
  std::vector<KernelSource> Work;
  for (ParsedSwiGlu *G : {P.get(), R.get()})
    for (const GemmTileConfig &T : ChoiceConfig::getDefault().SwiGluTiles) {
      llvm::Expected<KernelSource> K =
          generateSwiGluKernel(*G->Gu, T, 0, G->Norm);
      // The wgmma tiles take no prologue (select-prologue never asks).
      if (T.Template == GemmTemplate::Wgmma) {
        ASSERT_FALSE(bool(K)) << swigluChoiceName(T);
        EXPECT_NE(llvm::toString(K.takeError()).find("no norm prologue"),
                  std::string::npos);
        continue;
      }
      ASSERT_TRUE(bool(K)) << swigluChoiceName(T) << ": "
                           << llvm::toString(K.takeError());
      Work.push_back(std::move(*K));
    }
  expectEveryKernelCompiles(Work, 2);
}
