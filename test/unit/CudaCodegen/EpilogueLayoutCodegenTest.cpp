//===- EpilogueLayoutCodegenTest.cpp - Epilogues through layout ops -------===//
//
// A matmul's epilogue that continues through a reshape and a transpose
// (Schedule/Fusion.h, index substitution): every GEMM template that takes
// an epilogue (mma.sync with and without split-K, fp32, wgmma, persistent
// wgmma) reads the values after the layout ops and stores the result at the
// mapped index, never through pair or TMA tile stores; the epilogue run
// apart is a read-through group. Each kernel is compiled with NVRTC for sm_90
// wherever libnvrtc can be opened. The element map itself is checked against
// the interpreter's layout plan: it is the plan's inverse.
//
//===----------------------------------------------------------------------===//
#include "CompileAll.h"
#include "IRTestUtils.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/IR/Layout.h"
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/Schedule/Fusion.h"
#include "mtsched/Schedule/Schedule.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"
#include <iostream>
#include <optional>
#include <set>

using namespace mtsched;

namespace {

struct Parsed {
  llvm::SourceMgr SM;
  std::unique_ptr<Module> M;
};

std::unique_ptr<Parsed> lowerAndFuse(llvm::StringRef Text) {
  auto P = std::make_unique<Parsed>();
  P->M = test::parseAndVerify(P->SM, Text, "g.mir");
  if (!P->M) {
    // The diagnostics went to stderr; the test stops at its ASSERT_TRUE.
    ADD_FAILURE() << "the graph does not parse and verify";
    return nullptr;
  }
  // The feature is opt-in (--epilogue-through-layout).
  FusionOptions FO;
  FO.EpilogueThroughLayout = true;
  for (auto &G : P->M->getGraphs()) {
    llvm::Error E = createLowerPass(LoweringOptions())->run(*G);
    if (!E)
      E = createFusePass(FO)->run(*G);
    if (E) {
      ADD_FAILURE() << llvm::toString(std::move(E));
      return nullptr;
    }
  }
  return P;
}

const char *const QRope = R"(
graph @b(%x: bf16[32,256], %w: bf16[256,512], %cos: bf16[16,128], %sin: bf16[2,4,16,128], %res: bf16[2,4,16,128]) {
  %q = matmul(%x, %w) : bf16[32,512]
  %q4 = reshape(%q) : bf16[2,16,4,128]
  %t = transpose(%q4) {perm = [0, 2, 1, 3]} : bf16[2,4,16,128]
  %qc = mul(%t, %cos) : bf16[2,4,16,128]
  %qs = mul(%sin, %qc) : bf16[2,4,16,128]
  %r = add(%qs, %res) : bf16[2,4,16,128]
  return %r
}
graph @f(%x: f32[32,64], %w: f32[64,128], %b: f32[64]) {
  %q = matmul(%x, %w) : f32[32,128]
  %q3 = reshape(%q) : f32[32,2,64]
  %t = transpose(%q3) {perm = [1, 0, 2]} : f32[2,32,64]
  %a = add(%t, %b) : f32[2,32,64]
  %e = exp(%a) : f32[2,32,64]
  return %e
}
graph @v(%x: bf16[64,256], %w: bf16[256,256], %g: bf16[4,64]) {
  %q = matmul(%x, %w) : bf16[64,256]
  %q3 = reshape(%q) : bf16[64,4,64]
  %m = mul(%q3, %g) : bf16[64,4,64]
  return %m
}
)";

/// The value of a generated index expression (integers with an optional
/// LL suffix, r, c, + - * / % and parentheses, C's precedence) at (R, C);
/// nullopt if it is not one.
class IndexEval {
public:
  IndexEval(llvm::StringRef E, int64_t R, int64_t C) : E(E), R(R), C(C) {}
  std::optional<int64_t> eval() {
    std::optional<int64_t> V = sum();
    skip();
    return E.empty() ? V : std::nullopt;
  }

private:
  void skip() { E = E.ltrim(); }
  std::optional<int64_t> sum() {
    std::optional<int64_t> V = product();
    for (skip(); V && (E.starts_with("+") || E.starts_with("-")); skip()) {
      char Op = E.front();
      E = E.drop_front();
      std::optional<int64_t> W = product();
      if (!W)
        return std::nullopt;
      V = Op == '+' ? *V + *W : *V - *W;
    }
    return V;
  }
  std::optional<int64_t> product() {
    std::optional<int64_t> V = atom();
    for (skip(); V && !E.empty() && llvm::StringRef("*/%").contains(E[0]);
         skip()) {
      char Op = E.front();
      E = E.drop_front();
      std::optional<int64_t> W = atom();
      if (!W || (Op != '*' && *W == 0))
        return std::nullopt;
      V = Op == '*' ? *V * *W : Op == '/' ? *V / *W : *V % *W;
    }
    return V;
  }
  std::optional<int64_t> atom() {
    skip();
    if (E.consume_front("(")) {
      std::optional<int64_t> V = sum();
      skip();
      return E.consume_front(")") ? V : std::nullopt;
    }
    if (E.consume_front("r"))
      return R;
    if (E.consume_front("c"))
      return C;
    size_t Digits = E.find_first_not_of("0123456789");
    if (Digits == 0)
      return std::nullopt;
    int64_t V = 0;
    if (E.take_front(Digits).getAsInteger(10, V))
      return std::nullopt;
    E = E.drop_front(Digits);
    E.consume_front("LL");
    return V;
  }
  llvm::StringRef E;
  int64_t R, C;
};

/// The index expression between `Array[` and its matching `]` after Pos.
std::string indexAfter(const std::string &Src, const std::string &Array,
                       size_t Pos = 0) {
  size_t At = Src.find(Array + "[", Pos);
  if (At == std::string::npos)
    return "";
  size_t Begin = At + Array.size() + 1;
  int Depth = 1;
  for (size_t I = Begin; I < Src.size(); ++I) {
    Depth += Src[I] == '[' ? 1 : Src[I] == ']' ? -1 : 0;
    if (Depth == 0)
      return Src.substr(Begin, I - Begin);
  }
  return "";
}

} // namespace

TEST(EpilogueLayoutCodegen, GeneratedIndicesAreTheElementMaps) {
  // The Q projection's chain: the store's and cos's index expressions of
  // the mma.sync and wgmma kernels, evaluated at every (r, c) of the GEMM, are
  // where the element maps put the element and where its cos value broadcasts
  // from (cos [16,128] over [2,4,16,128]).
  auto P = lowerAndFuse(QRope);
  ASSERT_TRUE(P);
  const Graph &G = *P->M->getGraphs()[0];
  const auto *M = llvm::cast<MultiTemplateBufferNode>(G.getNodes()[0].get());
  std::vector<ElementMap> Maps;
  for (const Operand &E : M->getEpilogue())
    if (std::optional<ElementMap> Map = elementMapOf(*E.V->getDef()))
      Maps.push_back(*Map);
  ASSERT_EQ(Maps.size(), 2u);
  for (const GemmTileConfig &T :
       {GemmTileConfig{16, 64, 64, 4, 4}, wgmmaTile(64, 128, 64, 4)}) {
    auto K = generateGemmKernel(*M, T, true);
    ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
    size_t Tail = K->Source.find("// Each element at its index in the result");
    ASSERT_NE(Tail, std::string::npos) << K->Name;
    std::string Store = indexAfter(K->Source, "p_r_out", Tail);
    std::string Cos = indexAfter(K->Source, "p_cos");
    std::string Res = indexAfter(K->Source, "p_res");
    ASSERT_FALSE(Store.empty() || Cos.empty() || Res.empty()) << K->Name;
    std::set<int64_t> Stored;
    for (int64_t R = 0; R < 32; ++R)
      for (int64_t C = 0; C < 512; ++C) {
        int64_t To = R * 512 + C;
        for (const ElementMap &Map : Maps)
          To = Map.apply(To);
        ASSERT_EQ(IndexEval(Store, R, C).eval(), To) << K->Name;
        ASSERT_EQ(IndexEval(Res, R, C).eval(), To) << K->Name;
        ASSERT_EQ(IndexEval(Cos, R, C).eval(), To % 2048) << K->Name;
        Stored.insert(To);
      }
    // Every element of the result is stored once.
    EXPECT_EQ(Stored.size(), size_t(32 * 512));
    EXPECT_EQ(*Stored.rbegin(), 32 * 512 - 1);
  }
}

TEST(EpilogueLayoutCodegen, ElementMapInvertsTheLayoutPlan) {
  auto P = lowerAndFuse(QRope);
  ASSERT_TRUE(P);
  unsigned Checked = 0;
  for (auto &G : P->M->getGraphs())
    for (auto &N : G->getNodes()) {
      if (!isLayout(N->getOp()))
        continue;
      std::optional<ElementMap> Map = elementMapOf(*N);
      std::optional<LayoutPlan> Plan = layoutPlanOf(*N);
      ASSERT_TRUE(Map && Plan) << N->getName();
      // Operand element I lands where the plan reads it from.
      int64_t Num = N->getType().numElements();
      for (int64_t I = 0; I < Num; ++I) {
        int64_t To = Map->apply(I);
        ASSERT_TRUE(To >= 0 && To < Num);
        ASSERT_EQ(Plan->sourceOf(To), std::make_pair(0u, I)) << N->getName();
      }
      ++Checked;
    }
  EXPECT_EQ(Checked, 5u);
}

TEST(EpilogueLayoutCodegen, EveryTemplateStoresAtTheMappedIndex) {
  auto P = lowerAndFuse(QRope);
  ASSERT_TRUE(P);
  for (auto &G : P->M->getGraphs()) {
    const auto *M = llvm::cast<MultiTemplateBufferNode>(G->getNodes()[0].get());
    ASSERT_FALSE(M->getEpilogue().empty()) << G->getName();
    bool F32 = G->getName() == "f";
    bool Permuted = G->getName() != "v";
    std::vector<GemmTileConfig> Tiles;
    if (F32) {
      Tiles = {{16, 64, 16, 4, 1}};
    } else {
      Tiles = {{16, 64, 64, 4, 4}, wgmmaTile(64, 128, 64, 4)};
      // Split-K: the last CTA of a tile runs the epilogue.
      GemmTileConfig Split{16, 64, 64, 4, 8};
      Split.SplitK = 2;
      Tiles.push_back(Split);
      GemmTileConfig Pers = wgmmaTile(64, 128, 64, 4);
      Pers.Persistent = true;
      Tiles.push_back(Pers);
    }
    std::string Out = "p_" + M->getEpilogue().back().V->getName() + "_out";
    for (const GemmTileConfig &T : Tiles) {
      auto K = generateGemmKernel(*M, T, /*Fused=*/true);
      ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
      ASSERT_EQ(K->Outputs.size(), 1u);
      EXPECT_EQ(K->Outputs[0], M->getEpilogue().back().V);
      if (Permuted) {
        // The store goes through the transpose's map: no pair or TMA tile
        // store of the GEMM's own box.
        EXPECT_NE(K->Source.find(Out + "[(("), std::string::npos) << K->Name;
        EXPECT_EQ(K->Source.find(Out + "[r * N_ + c]"), std::string::npos);
        EXPECT_EQ(K->Source.find("MT_TILE_STORE(("), std::string::npos);
      } else {
        EXPECT_NE(K->Source.find(Out), std::string::npos) << K->Name;
      }
      expectKernelCompiles(*K);
    }
    // The unfused choice runs the chain apart, read through.
    auto E = generateEpilogueKernel(*M);
    ASSERT_TRUE(bool(E)) << llvm::toString(E.takeError());
    expectKernelCompiles(*E);
  }
}
