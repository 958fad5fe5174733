//===- AttentionCodegenTest.cpp - The attention kernels compile -----------===//
//
// Lowering's attention choices, the shape of the generated kernels, and
// every default choice generated for decode, prefill and ragged shapes in
// bf16, f16 and f32 and compiled with NVRTC for sm_90 wherever libnvrtc can
// be opened (skips and says why elsewhere).
//
//===----------------------------------------------------------------------===//
#include "mtsched/Backend/Cuda/AttentionCodegen.h"
#include "CompileAll.h"
#include "IRTestUtils.h"
#include "LowerAndFuse.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/IR/Attention.h"
#include "mtsched/Lowering/Lowering.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "gtest/gtest.h"
#include <cmath>
#include <iterator>
#include <mutex>
#include <tuple>

using namespace mtsched;

namespace {

using test::Parsed;

struct Shape {
  const char *Ty;
  int64_t B, Hq, Hkv, Sq, Skv, D;
  bool Causal;
  /// The additive mask's type, e.g. "f32[4,1,1,4096]"; none if null.
  const char *Mask = nullptr;
};

/// `%o = attention(%q, %k, %v)` of shape S, lowered.
std::unique_ptr<Parsed> attention(const Shape &S) {
  auto T = [&](int64_t H, int64_t L) {
    return std::string(S.Ty) + "[" + std::to_string(S.B) + "," +
           std::to_string(H) + "," + std::to_string(L) + "," +
           std::to_string(S.D) + "]";
  };
  std::string MaskArg = S.Mask ? std::string(", %m: ") + S.Mask : "";
  std::string Src = "graph @a(%q: " + T(S.Hq, S.Sq) +
                    ", %k: " + T(S.Hkv, S.Skv) + ", %v: " + T(S.Hkv, S.Skv) +
                    MaskArg + ") {\n  %o = attention(%q, %k, %v" +
                    (S.Mask ? ", %m" : "") +
                    ") {causal = " + (S.Causal ? "true" : "false") +
                    "} : " + T(S.Hq, S.Sq) + "\n  return %o\n}\n";
  return test::lowered(Src, "a.mir");
}

const MultiTemplateBufferNode &node(const Parsed &P) {
  return test::firstNode(P);
}

} // namespace

TEST(AttentionCodegen, ChoiceNames) {
  for (const AttentionTile &T : ChoiceConfig::getDefault().AttentionTiles) {
    std::optional<AttentionTile> Back =
        attentionTileOf(Choice{attentionChoiceName(T), {}, {}});
    ASSERT_TRUE(Back) << attentionChoiceName(T);
    EXPECT_EQ(Back->BQ, T.BQ);
    EXPECT_EQ(Back->BKV, T.BKV);
    EXPECT_EQ(Back->Warps, T.Warps);
    EXPECT_EQ(Back->Splits, T.Splits);
    EXPECT_EQ(Back->Mma, T.Mma);
    EXPECT_EQ(Back->Stages, T.Stages);
    EXPECT_EQ(Back->Wg, T.Wg);
    EXPECT_EQ(Back->Overlap, T.Overlap);
    EXPECT_EQ(Back->PingPong, T.PingPong);
    EXPECT_EQ(Back->Persistent, T.Persistent);
  }
  // The flags follow the stages in the order _o, _pp, _p.
  EXPECT_EQ(attentionChoiceName(wgAttentionTile(128, 128, 2, true, true, true)),
            "attn_wg_128x128_s2_o_pp_p");
  std::optional<AttentionTile> PP =
      attentionTileOf(Choice{"attn_wg_128x128_s2_o_pp", {}, {}});
  ASSERT_TRUE(PP);
  EXPECT_TRUE(PP->Overlap);
  EXPECT_TRUE(PP->PingPong);
  EXPECT_FALSE(PP->Persistent);
  std::optional<AttentionTile> P =
      attentionTileOf(Choice{"attn_wg_128x64_s3_p", {}, {}});
  ASSERT_TRUE(P);
  EXPECT_FALSE(P->Overlap);
  EXPECT_FALSE(P->PingPong);
  EXPECT_TRUE(P->Persistent);
  EXPECT_EQ(P->Stages, 3);
  EXPECT_EQ(attentionChoiceName(wgAttentionTile(128, 64, 3, true)),
            "attn_wg_128x64_s3_o");
  std::optional<AttentionTile> Ov =
      attentionTileOf(Choice{"attn_wg_128x64_s3_o", {}, {}});
  ASSERT_TRUE(Ov);
  EXPECT_TRUE(Ov->Overlap);
  EXPECT_EQ(Ov->Stages, 3);
  EXPECT_EQ(attentionChoiceName(wgAttentionTile(128, 128, 2)),
            "attn_wg_128x128_s2");
  std::optional<AttentionTile> Wg =
      attentionTileOf(Choice{"attn_wg_128x176_s3", {}, {}});
  ASSERT_TRUE(Wg);
  EXPECT_TRUE(Wg->Wg);
  EXPECT_FALSE(Wg->Mma);
  EXPECT_EQ(Wg->BQ, 128);
  EXPECT_EQ(Wg->BKV, 176);
  EXPECT_EQ(Wg->Stages, 3);
  EXPECT_EQ(Wg->Warps, 12);
  EXPECT_EQ(Wg->Splits, 1);
  EXPECT_EQ(attentionChoiceName({64, 32, 4}), "attn_flash_64x32_w4");
  EXPECT_EQ(attentionChoiceName({16, 64, 4, 8}), "attn_flash_16x64_w4_kv8");
  EXPECT_EQ(attentionChoiceName({64, 64, 4, 1, true}), "attn_mma_64x64_w4");
  EXPECT_EQ(attentionChoiceName({16, 64, 1, 16, true}),
            "attn_mma_16x64_w1_kv16");
  EXPECT_EQ(attentionChoiceName({16, 32, 1, 32, true, 4}),
            "attn_mma_16x32_w1_s4_kv32");
  std::optional<AttentionTile> Staged =
      attentionTileOf(Choice{"attn_mma_128x64_w8_s3", {}, {}});
  ASSERT_TRUE(Staged);
  EXPECT_EQ(Staged->Stages, 3);
  EXPECT_EQ(Staged->Splits, 1);
  for (const char *Bad :
       {"attn_flash_064x64_w4", "attn_flash_16x64", "attn_flash_0x64_w4",
        "attn_flash_16x64_w4_kv1", "attn_flash_16x64_w4_kv0",
        "attn_flash_16x64_w4_kv", "attn_math", "gemm_16x64", "attn_mma_",
        "attn_mma_16x64_w1_kv1", "attn_mmaflash_16x64_w1",
        // Stages: only tensor-core tiles, and 2 is never spelled out.
        "attn_flash_16x64_w4_s3", "attn_mma_16x64_w1_s2", "attn_mma_16x64_w1_s",
        "attn_mma_16x64_w1_kv8_s3",
        // A wgmma tile always names its stages, and nothing else.
        "attn_wg_128x128", "attn_wg_128x128_s", "attn_wg_128x128_w12_s2",
        "attn_wg_128x128_s2_kv2", "attn_wg_0128x128_s2", "attn_wg_x128_s2",
        "attn_wg_128x128_o", "attn_wg_128x128_s2_o_o", "attn_wg_128x128_s_o",
        "attn_wg_128x128_s2_p_o", "attn_wg_128x128_s2_pp_o",
        "attn_wg_128x128_s2_o_p_p", "attn_wg_128x128_s2_x",
        "attn_wg_128x128_s2_", "attn_wg_128x128_s2__p", "attn_mma_16x64_w1_o"})
    EXPECT_FALSE(attentionTileOf(Choice{Bad, {}, {}})) << Bad;
}

TEST(AttentionCodegen, LoweringOffersTilesThatFit) {
  // A Llama-3-8B decode step: 4 packed rows per kv head, 16-row tiles only.
  auto P = attention({"bf16", 2, 32, 8, 1, 4096, 128, true});
  ASSERT_TRUE(P);
  const MultiTemplateBufferNode &N = node(*P);
  ASSERT_EQ(N.getChoices().size(), 14u);
  EXPECT_EQ(N.getChoices()[0].Name, "attn_flash_16x64_w4");
  EXPECT_EQ(N.getChoices()[1].Name, "attn_flash_16x32_w4");
  EXPECT_EQ(N.getChoices()[2].Name, "attn_flash_16x64_w4_kv8");
  EXPECT_EQ(N.getChoices()[4].Name, "attn_flash_16x64_w4_kv32");
  // The tensor-core tiles: 16 rows on 4 warps splitting the keys, and
  // split-KV across CTAs.
  EXPECT_EQ(N.getChoices()[5].Name, "attn_mma_16x32_w4");
  EXPECT_EQ(N.getChoices()[6].Name, "attn_mma_16x32_w4_kv4");
  EXPECT_EQ(N.getChoices()[8].Name, "attn_mma_16x32_w4_kv16");
  // The Hopper decode tiles (TMA-fed, 16 rows: decode steps only).
  EXPECT_EQ(N.getChoices()[9].Name, "attn_dec_16x32_w4_s4");
  // The split ones swap the MMA's operands (4 packed rows fit its 8
  // columns).
  EXPECT_EQ(N.getChoices()[10].Name, "attn_dec_16x32_w4_s8_kv4_sw");
  EXPECT_EQ(N.getChoices()[12].Name, "attn_dec_16x32_w4_s8_kv16_sw");
  EXPECT_EQ(N.getChoices()[13].Name, AttentionMathChoice);
  // 16 packed rows (16 query heads a kv head) are too many for `_sw`: the
  // same split tiles come unswapped.
  auto Wide = attention({"bf16", 2, 32, 2, 1, 4096, 128, true});
  ASSERT_TRUE(Wide);
  std::vector<std::string> WideDec;
  for (const Choice &C : node(*Wide).getChoices())
    if (llvm::StringRef(C.Name).starts_with("attn_dec_"))
      WideDec.push_back(C.Name);
  EXPECT_EQ(WideDec, (std::vector<std::string>{"attn_dec_16x32_w4_s4",
                                               "attn_dec_16x32_w4_s8_kv4",
                                               "attn_dec_16x32_w4_s8_kv8",
                                               "attn_dec_16x32_w4_s8_kv16"}));
  // A shorter context gets fewer splits: each needs two key tiles.
  auto Short = attention({"bf16", 2, 32, 8, 1, 2048, 128, true});
  ASSERT_TRUE(Short);
  EXPECT_EQ(node(*Short).getChoices().size(), 12u);
  // f32 has no tensor-core tile.
  auto F32 = attention({"f32", 2, 32, 8, 1, 4096, 128, true});
  ASSERT_TRUE(F32);
  for (const Choice &C : node(*F32).getChoices())
    EXPECT_EQ(C.Name.find("attn_mma"), std::string::npos) << C.Name;
  // Prefill: every tile without splits, then attn_math.
  auto Pre = attention({"bf16", 1, 32, 8, 512, 512, 128, true});
  ASSERT_TRUE(Pre);
  ASSERT_EQ(node(*Pre).getChoices().size(), 20u);
  for (const Choice &C : node(*Pre).getChoices()) {
    EXPECT_EQ(C.Name.find("_kv"), std::string::npos) << C.Name;
    EXPECT_EQ(C.Name.find("attn_dec"), std::string::npos) << C.Name;
  }
  // ... the Hopper tiles among them; a decode step's 4 packed rows get none.
  EXPECT_EQ(node(*Pre).getChoices()[9].Name, "attn_wg_128x128_s2");
  EXPECT_EQ(node(*Pre).getChoices()[10].Name, "attn_wg_128x64_s3");
  EXPECT_EQ(node(*Pre).getChoices()[11].Name, "attn_wg_128x176_s2");
  EXPECT_EQ(node(*Pre).getChoices()[12].Name, "attn_wg_128x128_s2_o");
  EXPECT_EQ(node(*Pre).getChoices()[13].Name, "attn_wg_128x64_s2_o");
  EXPECT_EQ(node(*Pre).getChoices()[14].Name, "attn_wg_128x128_s2_o_p");
  EXPECT_EQ(node(*Pre).getChoices()[15].Name, "attn_wg_128x128_s2_o_pp");
  EXPECT_EQ(node(*Pre).getChoices()[16].Name, "attn_wg_128x128_s2_o_pp_p");
  EXPECT_EQ(node(*Pre).getChoices()[17].Name, "attn_wg_128x128_s3_o_pp");
  EXPECT_EQ(node(*Pre).getChoices()[18].Name, "attn_wg_128x128_s3_o_pp_p");
  for (const Choice &C : N.getChoices())
    EXPECT_EQ(C.Name.find("attn_wg"), std::string::npos) << C.Name;
  // f32 and a head dimension other than 64 or 128 get none either.
  for (auto [Ty, D] : {std::pair{"f32", 128}, std::pair{"bf16", 96}}) {
    auto Other = attention({Ty, 1, 32, 8, 512, 512, D, true});
    ASSERT_TRUE(Other);
    for (const Choice &C : node(*Other).getChoices())
      EXPECT_EQ(C.Name.find("attn_wg"), std::string::npos) << C.Name;
  }
  // Disabled names are never offered; attn_math alone is a valid list.
  ChoiceConfig C = ChoiceConfig::getDefault();
  for (const AttentionTile &T : C.AttentionTiles)
    C.Disabled.insert(attentionChoiceName(T));
  auto Dec = attention({"bf16", 1, 32, 8, 1, 4096, 128, true});
  ASSERT_TRUE(Dec);
  std::vector<Choice> Only = C.attentionChoices(*attentionShapeOf(node(*Dec)));
  ASSERT_EQ(Only.size(), 1u);
  EXPECT_EQ(Only[0].Name, AttentionMathChoice);
}

TEST(AttentionCodegen, ShapeOfTheAttention) {
  auto P = attention({"f16", 2, 6, 3, 5, 100, 40, true});
  ASSERT_TRUE(P);
  std::optional<AttentionShape> S = attentionShapeOf(node(*P));
  ASSERT_TRUE(S);
  EXPECT_EQ(S->group(), 2);
  EXPECT_TRUE(S->Causal);
  EXPECT_DOUBLE_EQ(S->Scale, 1 / std::sqrt(40.0));
  // End-aligned: query i sees keys up to 95 + i.
  EXPECT_EQ(S->lastKey(0), 95);
  EXPECT_EQ(S->lastKey(4), 99);
  EXPECT_EQ(S->visiblePairs(), 96 + 97 + 98 + 99 + 100);
}

TEST(AttentionCodegen, KernelShape) {
  auto P = attention({"bf16", 2, 32, 8, 1, 4096, 128, true});
  ASSERT_TRUE(P);
  const MultiTemplateBufferNode &N = node(*P);
  llvm::Expected<KernelSource> F =
      generateAttentionKernel(N, Choice{"attn_flash_16x64_w4", {}, {}});
  ASSERT_TRUE(bool(F)) << llvm::toString(F.takeError());
  ASSERT_EQ(F->Inputs.size(), 3u);
  ASSERT_EQ(F->Outputs.size(), 1u);
  // One CTA per 16 packed rows (4 used) of each (batch, kv head).
  EXPECT_EQ(F->GridX, 1u);
  EXPECT_EQ(F->GridY, 16u);
  EXPECT_EQ(F->BlockX, 128u);
  EXPECT_EQ(F->SharedBytes, unsigned(flashAttentionSharedBytes(16, 64, 128)));
  EXPECT_EQ(F->WorkspaceBytes, 0u);
  llvm::Expected<KernelSource> M =
      generateAttentionKernel(N, Choice{"attn_math", {}, {}});
  ASSERT_TRUE(bool(M)) << llvm::toString(M.takeError());
  EXPECT_EQ(M->GridX, 64u); // a CTA per query row
  EXPECT_EQ(M->WorkspaceBytes, 64u * 4096 * 4);
  // Split-KV: 8 CTAs per tile, partials and a counter per tile.
  llvm::Expected<KernelSource> SK =
      generateAttentionKernel(N, Choice{"attn_flash_16x64_w4_kv8", {}, {}});
  ASSERT_TRUE(bool(SK)) << llvm::toString(SK.takeError());
  EXPECT_EQ(SK->GridZ, 8u);
  EXPECT_EQ(SK->WorkspaceBytes, 16u * 8 * (16 * 128 + 2 * 16) * 4 + 16u * 4);
  // A tile the template cannot map, and a name that is no choice.
  llvm::Expected<KernelSource> Bad =
      generateAttentionKernel(N, Choice{"attn_flash_16x48_w4", {}, {}});
  ASSERT_FALSE(bool(Bad));
  EXPECT_NE(llvm::toString(Bad.takeError()).find("BKV must divide"),
            std::string::npos);
  llvm::Expected<KernelSource> None =
      generateAttentionKernel(N, Choice{"gemm_16x64x64_w4_s3", {}, {}});
  ASSERT_FALSE(bool(None));
  llvm::consumeError(None.takeError());
}

TEST(AttentionCodegen, MaskedKernelShape) {
  // A padding mask [B, 1, 1, Skv] in f32 beside bf16 q, k, v: every
  // template reads it as a fourth input through broadcast strides.
  auto P = attention({"bf16", 2, 32, 8, 1, 4096, 128, true, "f32[2,1,1,4096]"});
  ASSERT_TRUE(P);
  std::optional<AttentionShape> S = attentionShapeOf(node(*P));
  ASSERT_TRUE(S);
  EXPECT_TRUE(S->HasMask);
  EXPECT_EQ(S->MaskDtype, DType::F32);
  EXPECT_EQ(S->maskElements(), 2 * 4096);
  // Batch 1, head 7, query 0 reads the second batch's row.
  EXPECT_EQ(S->maskRowOffset(1, 7, 0), 4096);
  EXPECT_EQ(S->maskRowOf(32 + 7), 4096);
  for (const char *Name : {"attn_flash_16x64_w4", "attn_flash_16x64_w4_kv8",
                           "attn_mma_16x32_w4_kv8", "attn_math"}) {
    llvm::Expected<KernelSource> K =
        generateAttentionKernel(node(*P), Choice{Name, {}, {}});
    ASSERT_TRUE(bool(K)) << Name << ": " << llvm::toString(K.takeError());
    ASSERT_EQ(K->Inputs.size(), 4u) << Name;
    EXPECT_EQ(K->Inputs[3], node(*P).getOperand(3)) << Name;
    EXPECT_NE(K->Source.find("#define HAS_MASK 1"), std::string::npos);
    EXPECT_NE(K->Source.find("#define MASK_SB 4096LL\n#define MASK_SH 0LL\n"
                             "#define MASK_SQ 0LL"),
              std::string::npos)
        << Name;
    EXPECT_NE(K->Source.find("const float *__restrict__ mask"),
              std::string::npos)
        << Name;
    EXPECT_NE(K->Source.find("MASK_AT("), std::string::npos) << Name;
    // An even row length: a tensor-core tile reads two keys per load.
    EXPECT_NE(K->Source.find("#define MASK_T float\n#define MASK_F32 1\n"
                             "#define MASK_VEC 1\n"),
              std::string::npos)
        << Name;
  }
  // The tensor-core tile finds each thread's mask rows once, before the
  // key loop, and reads them in pairs.
  {
    llvm::Expected<KernelSource> K = generateAttentionKernel(
        node(*P), Choice{"attn_mma_16x32_w4_kv8", {}, {}});
    ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
    size_t Rows = K->Source.find("mrA[m] = ra < ROWS ? MASK_ROW(");
    size_t Loop = K->Source.find("for (int it = 0; it < nTiles; ++it)");
    ASSERT_NE(Rows, std::string::npos);
    EXPECT_LT(Rows, Loop);
    EXPECT_NE(K->Source.find("mt_mask_pair(mrA[m], "), std::string::npos);
  }
  // An odd row length reads the keys one at a time.
  auto O =
      attention({"bf16", 1, 8, 2, 33, 101, 128, false, "bf16[1,1,33,101]"});
  ASSERT_TRUE(O);
  llvm::Expected<KernelSource> KO =
      generateAttentionKernel(node(*O), Choice{"attn_mma_64x32_w4", {}, {}});
  ASSERT_TRUE(bool(KO)) << llvm::toString(KO.takeError());
  EXPECT_NE(KO->Source.find("#define MASK_T mt_bf16\n#define MASK_F32 "
                            "0\n#define MASK_VEC 0\n"),
            std::string::npos);
  // Without a mask the kernels take three inputs and no mask parameter.
  auto U = attention({"bf16", 2, 32, 8, 1, 4096, 128, true});
  ASSERT_TRUE(U);
  llvm::Expected<KernelSource> K =
      generateAttentionKernel(node(*U), Choice{"attn_math", {}, {}});
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  EXPECT_EQ(K->Inputs.size(), 3u);
  EXPECT_NE(K->Source.find("#define HAS_MASK 0"), std::string::npos);
  EXPECT_EQ(K->Source.find("mask,"), std::string::npos);
}

TEST(AttentionCodegen, MmaKernelShape) {
  auto P = attention({"bf16", 2, 32, 8, 1, 4096, 128, true});
  ASSERT_TRUE(P);
  const MultiTemplateBufferNode &N = node(*P);
  // A warp per 16 rows; q and two stages of k and v in 16 bits.
  llvm::Expected<KernelSource> W =
      generateAttentionKernel(N, Choice{"attn_mma_16x64_w1_kv8", {}, {}});
  ASSERT_TRUE(bool(W)) << llvm::toString(W.takeError());
  EXPECT_EQ(W->BlockX, 32u);
  EXPECT_EQ(W->GridX, 1u);
  EXPECT_EQ(W->GridY, 16u);
  EXPECT_EQ(W->GridZ, 8u);
  EXPECT_EQ(W->SharedBytes, unsigned(2 * (16 + 4 * 64) * (128 + 8)));
  EXPECT_EQ(W->WorkspaceBytes, 16u * 8 * (16 * 128 + 2 * 16) * 4 + 16u * 4);
  EXPECT_NE(W->Source.find("#define MMA_TYPE \"bf16\""), std::string::npos);
  EXPECT_NE(W->Source.find("mma.sync.aligned.m16n8k16"), std::string::npos);
  // Prefill with 8 warps: 4096 * 4 packed rows per kv head, 128 a tile.
  auto Pre = attention({"f16", 1, 32, 8, 4096, 4096, 128, true});
  ASSERT_TRUE(Pre);
  llvm::Expected<KernelSource> Big =
      generateAttentionKernel(node(*Pre), Choice{"attn_mma_128x64_w8", {}, {}});
  ASSERT_TRUE(bool(Big)) << llvm::toString(Big.takeError());
  EXPECT_EQ(Big->GridX, 128u);
  EXPECT_EQ(Big->GridY, 8u);
  EXPECT_EQ(Big->BlockX, 256u);
  EXPECT_EQ(Big->WorkspaceBytes, 0u);
  EXPECT_NE(Big->Source.find("#define MMA_TYPE \"f16\""), std::string::npos);
  EXPECT_NE(Big->Source.find("#define STAGES 2"), std::string::npos);
  // Four stages of 32-key tiles: q and 4 x (k + v) in shared memory.
  llvm::Expected<KernelSource> Deep =
      generateAttentionKernel(N, Choice{"attn_mma_16x32_w1_s4_kv32", {}, {}});
  ASSERT_TRUE(bool(Deep)) << llvm::toString(Deep.takeError());
  EXPECT_EQ(Deep->SharedBytes, unsigned(2 * (16 + 8 * 32) * (128 + 8)));
  EXPECT_NE(Deep->Source.find("#define STAGES 4"), std::string::npos);
  // Four warps splitting each stage's keys for the same 16 rows: stages of
  // 4 x 32 keys, the split-KV shares in whole stages.
  llvm::Expected<KernelSource> Split4 =
      generateAttentionKernel(N, Choice{"attn_mma_16x32_w4_kv8", {}, {}});
  ASSERT_TRUE(bool(Split4)) << llvm::toString(Split4.takeError());
  EXPECT_EQ(Split4->BlockX, 128u);
  EXPECT_EQ(Split4->GridZ, 8u);
  EXPECT_EQ(Split4->SharedBytes, unsigned(2 * (16 + 2 * 2 * 4 * 32) * 136));
  EXPECT_EQ(mmaAttentionKeyWarps(16, 4), 4);
  EXPECT_EQ(mmaAttentionKeyWarps(64, 4), 1);
  EXPECT_EQ(mmaAttentionKeyWarps(16, 3), 1);
  // What the template cannot take says why: rows per warp, f32, D = 40,
  // BKV = 40, 9 stages.
  for (auto [Ty, D, Name] : {std::tuple{"bf16", 128, "attn_mma_48x64_w1"},
                             std::tuple{"f32", 128, "attn_mma_16x64_w1"},
                             std::tuple{"bf16", 40, "attn_mma_16x64_w1"},
                             std::tuple{"bf16", 128, "attn_mma_16x40_w1"},
                             std::tuple{"bf16", 128, "attn_mma_16x32_w1_s9"}}) {
    auto Q = attention({Ty, 1, 8, 2, 4, 256, D, false});
    ASSERT_TRUE(Q);
    llvm::Expected<KernelSource> Bad =
        generateAttentionKernel(node(*Q), Choice{Name, {}, {}});
    ASSERT_FALSE(bool(Bad)) << Ty << " " << D << " " << Name;
    EXPECT_NE(llvm::toString(Bad.takeError())
                  .find("the tensor-core template needs bf16 or f16"),
              std::string::npos);
  }
}

TEST(AttentionCodegen, DecKernelShape) {
  // The decode template's name round-trips; stages are always named.
  AttentionTile T{16, 64, 4, 16};
  T.Dec = true;
  T.Stages = 4;
  EXPECT_EQ(attentionChoiceName(T), "attn_dec_16x64_w4_s4_kv16");
  std::optional<AttentionTile> Back =
      attentionTileOf(Choice{"attn_dec_16x64_w4_s4_kv16", {}, {}});
  ASSERT_TRUE(Back);
  EXPECT_TRUE(Back->Dec);
  EXPECT_FALSE(Back->Mma);
  EXPECT_EQ(Back->Warps, 4);
  EXPECT_EQ(Back->Stages, 4);
  EXPECT_EQ(Back->Splits, 16);
  EXPECT_FALSE(attentionTileOf(Choice{"attn_dec_16x64_w4", {}, {}}));
  auto P = attention({"bf16", 2, 32, 8, 1, 4096, 128, true});
  ASSERT_TRUE(P);
  llvm::Expected<KernelSource> K = generateAttentionKernel(
      node(*P), Choice{"attn_dec_16x64_w4_s4_kv16", {}, {}});
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  // Four consumer warps and the producer; a CTA per (batch, kv head, split).
  EXPECT_EQ(K->BlockX, 160u);
  EXPECT_EQ(K->GridX, 1u);
  EXPECT_EQ(K->GridY, 16u);
  EXPECT_EQ(K->GridZ, 16u);
  EXPECT_TRUE(K->NeedsSm90a);
  ASSERT_EQ(K->TensorMaps.size(), 2u);
  EXPECT_EQ(K->TensorMaps[0].Input, 1u);
  EXPECT_EQ(K->TensorMaps[0].Box[1], 64u);
  EXPECT_EQ(K->TensorMaps[1].Dims[2], 16u);
  EXPECT_EQ(K->SharedBytes,
            unsigned(1024 + 4 * 2 * 64 * 128 * 2 + 16 * 136 * 2 + 4 * 16));
  EXPECT_EQ(K->WorkspaceBytes, 16u * 16 * (16 * 128 + 2 * 16) * 4 + 16u * 4);
  EXPECT_NE(K->Source.find("cp.async.bulk.tensor.3d"), std::string::npos);
  // Clustered splits: a cluster of 8 CTAs along x per tile, no workspace.
  llvm::Expected<KernelSource> C = generateAttentionKernel(
      node(*P), Choice{"attn_dec_16x32_w4_s4_kv8_c", {}, {}});
  ASSERT_TRUE(bool(C)) << llvm::toString(C.takeError());
  EXPECT_EQ(C->GridX, 8u);
  EXPECT_EQ(C->GridZ, 1u);
  EXPECT_EQ(C->ClusterX, 8u);
  EXPECT_EQ(C->WorkspaceBytes, 0u);
  EXPECT_NE(C->Source.find("#define CLUSTER_SPLITS 1"), std::string::npos);
  std::optional<AttentionTile> Cl =
      attentionTileOf(Choice{"attn_dec_16x32_w4_s4_kv8_c", {}, {}});
  ASSERT_TRUE(Cl);
  EXPECT_TRUE(Cl->Cluster);
  EXPECT_EQ(Cl->Splits, 8);
  EXPECT_FALSE(attentionTileOf(Choice{"attn_mma_16x32_w4_kv8_c", {}, {}}));
  EXPECT_FALSE(bool(generateAttentionKernel(
      node(*P), Choice{"attn_dec_16x32_w4_s4_kv16_c", {}, {}})));
  // Few stages of few keys: the combine needs more than the stages.
  EXPECT_EQ(decAttentionSharedBytes(16, 8, 64, 2),
            1024 + 4 * (9 * 16 * 64 + 3 * 16 * 8 + 32) + 16 * 72 * 2 + 2 * 16);
  // What the template cannot take: a mask, f32, D = 96, 9 warps, 9 stages,
  // more warps than stages, stages not a multiple of the warps, 32 rows.
  auto Masked =
      attention({"bf16", 4, 32, 8, 1, 4096, 128, true, "f32[4,1,1,4096]"});
  ASSERT_TRUE(Masked);
  EXPECT_FALSE(bool(generateAttentionKernel(
      node(*Masked), Choice{"attn_dec_16x64_w4_s4", {}, {}})));
  for (auto [Ty, D, Name] : {std::tuple{"f32", 128, "attn_dec_16x64_w4_s4"},
                             std::tuple{"bf16", 96, "attn_dec_16x64_w4_s4"},
                             std::tuple{"bf16", 128, "attn_dec_16x64_w9_s4"},
                             std::tuple{"bf16", 128, "attn_dec_16x64_w4_s9"},
                             std::tuple{"bf16", 128, "attn_dec_16x64_w4_s3"},
                             std::tuple{"bf16", 128, "attn_dec_16x64_w4_s6"},
                             std::tuple{"bf16", 128, "attn_dec_32x64_w4_s4"}}) {
    auto Q = attention({Ty, 1, 8, 2, 1, 256, D, true});
    ASSERT_TRUE(Q);
    llvm::Expected<KernelSource> Bad =
        generateAttentionKernel(node(*Q), Choice{Name, {}, {}});
    ASSERT_FALSE(bool(Bad)) << Ty << " " << D << " " << Name;
    EXPECT_NE(llvm::toString(Bad.takeError())
                  .find("the decode template needs bf16 or f16"),
              std::string::npos);
  }
}

TEST(AttentionCodegen, DecPersistentKernelShape) {
  // The flags round-trip in the order _c, _pfN, _ef, _p.
  std::optional<AttentionTile> T =
      attentionTileOf(Choice{"attn_dec_16x32_w4_s8_pf16_ef_p", {}, {}});
  ASSERT_TRUE(T);
  EXPECT_TRUE(T->Dec && T->Persistent && T->EvictFirst);
  EXPECT_EQ(T->Prefetch, 16);
  EXPECT_EQ(T->Splits, 1);
  EXPECT_EQ(attentionChoiceName(*T), "attn_dec_16x32_w4_s8_pf16_ef_p");
  for (const char *Bad :
       {"attn_dec_16x32_w4_s8_p_ef", "attn_dec_16x32_w4_s8_pf0",
        "attn_dec_16x32_w4_s8_pfx", "attn_mma_16x32_w4_s3_pf4",
        "attn_dec_16x32_w4_s8_ef_pf4"})
    EXPECT_FALSE(attentionTileOf(Choice{Bad, {}, {}})) << Bad;
  // Llama-3-8B decode at batch 16: 128 kv heads of 64 tiles of 64 keys,
  // at most 512 CTAs (the launcher starts one per SM).
  auto P = attention({"bf16", 16, 32, 8, 1, 4096, 128, true});
  ASSERT_TRUE(P);
  llvm::Expected<KernelSource> K = generateAttentionKernel(
      node(*P), Choice{"attn_dec_16x64_w4_s4_p", {}, {}});
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  EXPECT_TRUE(K->Persistent);
  EXPECT_EQ(K->GridX, 512u);
  EXPECT_EQ(K->GridY, 1u);
  EXPECT_EQ(K->GridZ, 1u);
  EXPECT_EQ(launchGridX(*K, 132), 132u);
  // No static shared memory (a launch of more than 48 KB in all fails
  // unless the dynamic size was opted into: the launchers do that above
  // 48 KB of dynamic memory only).
  EXPECT_EQ(K->Source.find("__shared__ int"), std::string::npos);
  EXPECT_FALSE(attentionTileOf(Choice{"attn_dec_16x32_w2_s4_p2", {}, {}}));
  // The partial results beside the stages, not over them.
  int64_t Combine = 4 * (5 * 16 * 128 + 3 * 16 * 4 + 2 * 16);
  EXPECT_EQ(K->SharedBytes, unsigned(1024 + 4 * 2 * 64 * 128 * 2 + Combine +
                                     16 * 136 * 2 + 4 * 16));
  EXPECT_EQ(decAttentionSharedBytes(64, 4, 128, 4, /*Persistent=*/true),
            int64_t(K->SharedBytes));
  // A partial result per CTA and kv head boundary, a counter per kv head.
  EXPECT_EQ(K->WorkspaceBytes, ((512u + 128) * (16 * 128 + 32) + 128) * 4);
  EXPECT_NE(K->Source.find("#define COMBINE " + std::to_string(Combine)),
            std::string::npos);
  EXPECT_NE(K->Source.find("#define PREFETCH 0\n"), std::string::npos);
  EXPECT_EQ(K->Source.find("L2::evict_first"), std::string::npos);
  // Few key tiles: the grid is the tiles (2 kv heads of 2 tiles here).
  auto Small = attention({"f16", 1, 8, 2, 1, 100, 64, false});
  ASSERT_TRUE(Small);
  llvm::Expected<KernelSource> KS = generateAttentionKernel(
      node(*Small), Choice{"attn_dec_16x64_w4_s4_pf8_ef_p", {}, {}});
  ASSERT_TRUE(bool(KS)) << llvm::toString(KS.takeError());
  EXPECT_EQ(KS->GridX, 4u);
  EXPECT_NE(KS->Source.find("#define PREFETCH 8"), std::string::npos);
  EXPECT_NE(KS->Source.find("L2::evict_first"), std::string::npos);
  // Prefetch and evict-first on the unsplit and split forms.
  llvm::Expected<KernelSource> KP = generateAttentionKernel(
      node(*P), Choice{"attn_dec_16x32_w4_s8_kv4_pf16_ef", {}, {}});
  ASSERT_TRUE(bool(KP)) << llvm::toString(KP.takeError());
  EXPECT_FALSE(KP->Persistent);
  EXPECT_NE(KP->Source.find("if (it + PREFETCH < nTiles)"), std::string::npos);
  EXPECT_NE(KP->Source.find("#define mt_tma_load mt_tma_load_ef"),
            std::string::npos);
  // Not persistent with splits or a cluster, nor with more than 16 packed
  // rows of a kv head.
  EXPECT_FALSE(bool(generateAttentionKernel(
      node(*P), Choice{"attn_dec_16x64_w4_s4_kv2_p", {}, {}})));
  EXPECT_FALSE(bool(generateAttentionKernel(
      node(*P), Choice{"attn_dec_16x64_w4_s4_kv2_c_p", {}, {}})));
  auto Tall = attention({"bf16", 1, 32, 8, 5, 256, 128, true});
  ASSERT_TRUE(Tall);
  llvm::Expected<KernelSource> KT = generateAttentionKernel(
      node(*Tall), Choice{"attn_dec_16x64_w4_s4_p", {}, {}});
  ASSERT_FALSE(bool(KT));
  EXPECT_NE(llvm::toString(KT.takeError()).find("in one tile of 16"),
            std::string::npos);
}

/// The decode tiles bench/device/attn-decode.sh times (not defaults),
/// compiled with NVRTC at the Llama-3-8B decode shape, a ragged one, f16 at
/// D = 64 with queries ending mid-tile, and a causal multi-query step.
TEST(AttentionCodegen, DecTilesCompileWithNvrtc) {
  llvm::Expected<const cuda::NvrtcApi &> Nv = cuda::loadNvrtc();
  if (!Nv)
    GTEST_SKIP() << "NVRTC not available, attention kernels not compiled: "
                 << llvm::toString(Nv.takeError());
  std::vector<std::unique_ptr<Parsed>> Keep;
  std::vector<KernelSource> Work;
  const Shape Shapes[] = {{"bf16", 4, 32, 8, 1, 4096, 128, true},
                          {"bf16", 1, 32, 8, 1, 4100, 128, true},
                          {"f16", 2, 6, 3, 5, 100, 64, true}};
  const char *Names[] = {
      "attn_dec_16x64_w4_s4",       "attn_dec_16x64_w4_s4_kv8",
      "attn_dec_16x32_w8_s8_kv16",  "attn_dec_16x128_w1_s3",
      "attn_dec_16x16_w1_s2_kv2",   "attn_dec_16x32_w4_s4_kv8_c",
      "attn_dec_16x64_w4_s4_p",     "attn_dec_16x32_w4_s8_pf16_ef_p",
      "attn_dec_16x16_w1_s2_p",     "attn_dec_16x32_w8_s8_p",
      "attn_dec_16x128_w2_s2_ef_p", "attn_dec_16x32_w4_s8_kv4_pf16_ef",
      "attn_dec_16x64_w4_s4_pf8",   "attn_dec_16x32_w2_s4_p",
      "attn_dec_16x32_w4_s4_p"};
  for (const Shape &S : Shapes) {
    auto P = attention(S);
    ASSERT_TRUE(P);
    for (const char *Name : Names) {
      llvm::Expected<KernelSource> K =
          generateAttentionKernel(node(*P), Choice{Name, {}, {}});
      ASSERT_TRUE(bool(K)) << Name << ": " << llvm::toString(K.takeError());
      Work.push_back(std::move(*K));
    }
    Keep.push_back(std::move(P));
  }
  expectEveryKernelCompiles(Work, 2);
}

TEST(AttentionCodegen, WgKernelShape) {
  // Llama-3-8B prefill: 4 query heads x 4096 queries packed per kv head, a
  // CTA per 128 of them, the producer and two consumer warpgroups.
  auto Pre = attention({"bf16", 1, 32, 8, 4096, 4096, 128, true});
  ASSERT_TRUE(Pre);
  llvm::Expected<KernelSource> K =
      generateAttentionKernel(node(*Pre), Choice{"attn_wg_128x128_s2", {}, {}});
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  EXPECT_EQ(K->GridX, 8u * 128);
  EXPECT_EQ(K->GridY, 1u);
  EXPECT_EQ(K->BlockX, 384u);
  EXPECT_TRUE(K->NeedsSm90a);
  EXPECT_EQ(K->WorkspaceBytes, 0u);
  EXPECT_EQ(K->SharedBytes,
            unsigned(1024 + 2 * (128 + 2 * 2 * 128) * 128 + 8 * 10));
  EXPECT_EQ(K->SharedBytes, unsigned(wgAttentionSharedBytes(128, 128, 128, 2)));
  // q as [B * Hkv][G * Sq][D], k and v as [B * Hkv][Skv][D], 64-column
  // boxes of 128 query rows and 128 keys.
  ASSERT_EQ(K->TensorMaps.size(), 3u);
  for (unsigned I = 0; I < 3; ++I) {
    const TensorMapParam &M = K->TensorMaps[I];
    EXPECT_EQ(M.Input, I);
    EXPECT_EQ(M.Dims[0], 128u);
    EXPECT_EQ(M.Dims[1], I == 0 ? 4u * 4096 : 4096u);
    EXPECT_EQ(M.Dims[2], 8u);
    EXPECT_EQ(M.Strides[0], 256u);
    EXPECT_EQ(M.Box[0], 64u);
    EXPECT_EQ(M.Box[1], 128u);
  }
  EXPECT_NE(K->Source.find("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16"),
            std::string::npos);
  EXPECT_NE(K->Source.find("setmaxnreg.inc"), std::string::npos);
  EXPECT_NE(K->Source.find("__launch_bounds__(THREADS, 1)"), std::string::npos);
  EXPECT_NE(K->Source.find("#define OVERLAP 0"), std::string::npos);
  // Without a staged mask the producer keeps 24 registers, the consumers
  // take 240; the scale folds into exp2's argument.
  EXPECT_NE(K->Source.find("#define PRODUCER_REGS \"24\""), std::string::npos);
  EXPECT_NE(K->Source.find("#define CONSUMER_REGS \"240\""), std::string::npos);
  EXPECT_NE(K->Source.find("#define FUSED_SCALE 1"), std::string::npos);
  llvm::Expected<KernelSource> Ov = generateAttentionKernel(
      node(*Pre), Choice{"attn_wg_128x128_s2_o", {}, {}});
  ASSERT_TRUE(bool(Ov)) << llvm::toString(Ov.takeError());
  EXPECT_NE(Ov->Source.find("#define OVERLAP 1"), std::string::npos);
  EXPECT_EQ(Ov->SharedBytes, K->SharedBytes);
  EXPECT_FALSE(Ov->Persistent);
  EXPECT_NE(Ov->Source.find("#define PERSISTENT 0"), std::string::npos);
  EXPECT_NE(Ov->Source.find("#define PINGPONG 0"), std::string::npos);
  // Persistent: the grid counts the 1024 query tiles, the launcher starts
  // at most one CTA per SM; pingpong takes turns at named barriers.
  llvm::Expected<KernelSource> PP = generateAttentionKernel(
      node(*Pre), Choice{"attn_wg_128x128_s2_o_pp_p", {}, {}});
  ASSERT_TRUE(bool(PP)) << llvm::toString(PP.takeError());
  EXPECT_TRUE(PP->Persistent);
  EXPECT_EQ(PP->GridX, 8u * 128);
  EXPECT_EQ(launchGridX(*PP, 132), 132u);
  EXPECT_EQ(PP->SharedBytes, K->SharedBytes);
  EXPECT_NE(PP->Source.find("#define PERSISTENT 1"), std::string::npos);
  EXPECT_NE(PP->Source.find("#define PINGPONG 1"), std::string::npos);
  EXPECT_NE(PP->Source.find("#define UNITS 1024LL"), std::string::npos);
  EXPECT_NE(PP->Source.find("bar.sync"), std::string::npos);
  // Pingpong pairs the turns of the overlapped loop only.
  llvm::Expected<KernelSource> NoOv = generateAttentionKernel(
      node(*Pre), Choice{"attn_wg_128x128_s2_pp", {}, {}});
  ASSERT_FALSE(bool(NoOv));
  EXPECT_NE(llvm::toString(NoOv.takeError()).find("needs the overlapped"),
            std::string::npos);
  // D = 64 f16 with a mask: one box per row; the mask is the fourth
  // pointer, after the maps.
  auto Masked =
      attention({"f16", 2, 6, 3, 300, 300, 64, false, "f16[2,6,300,300]"});
  ASSERT_TRUE(Masked);
  llvm::Expected<KernelSource> M = generateAttentionKernel(
      node(*Masked), Choice{"attn_wg_128x64_s3", {}, {}});
  ASSERT_TRUE(bool(M)) << llvm::toString(M.takeError());
  EXPECT_EQ(M->Inputs.size(), 4u);
  EXPECT_EQ(M->GridX, 2u * 3 * 5); // 600 packed rows: 5 tiles
  EXPECT_EQ(M->TensorMaps[0].Dims[1], 600u);
  EXPECT_NE(M->Source.find("m64n64k16.f32.f16.f16"), std::string::npos);
  // Its mask's tiles fit beside the stages: staged through shared memory
  // (16-bit, no float4 loads), one more barrier and tile per stage.
  EXPECT_NE(M->Source.find("#define MASK_STAGED 1"), std::string::npos);
  EXPECT_NE(M->Source.find("#define MASK_VEC 0"), std::string::npos);
  // Its producer warps stage the mask: 40 registers, 232 for the
  // consumers; the mask adds to the scaled scores.
  EXPECT_NE(M->Source.find("#define PRODUCER_REGS \"40\""), std::string::npos);
  EXPECT_NE(M->Source.find("#define CONSUMER_REGS \"232\""), std::string::npos);
  EXPECT_NE(M->Source.find("#define FUSED_SCALE 0"), std::string::npos);
  EXPECT_EQ(M->SharedBytes, unsigned(wgAttentionSharedBytes(128, 64, 64, 3) +
                                     3 * (128 * (64 + 8) * 4 + 8)));
  // At D = 128 two stages of 128 keys leave no room: each score's mask
  // element is read from global memory.
  auto Big = attention(
      {"bf16", 1, 16, 4, 2048, 4096, 128, false, "f32[1,1,2048,4096]"});
  ASSERT_TRUE(Big);
  llvm::Expected<KernelSource> NoStage =
      generateAttentionKernel(node(*Big), Choice{"attn_wg_128x128_s2", {}, {}});
  ASSERT_TRUE(bool(NoStage)) << llvm::toString(NoStage.takeError());
  EXPECT_NE(NoStage->Source.find("#define MASK_STAGED 0"), std::string::npos);
  llvm::Expected<KernelSource> Stage = generateAttentionKernel(
      node(*Big), Choice{"attn_wg_128x64_s2_o", {}, {}});
  ASSERT_TRUE(bool(Stage)) << llvm::toString(Stage.takeError());
  // 64-key stages leave room, and each query tile's mask rows are
  // consecutive rows of the f32 mask: TMA copies them, a fourth map of
  // 32-bit words in 32 x 128 boxes.
  EXPECT_NE(Stage->Source.find("#define MASK_STAGED 1"), std::string::npos);
  EXPECT_NE(Stage->Source.find("#define MASK_TMA 1"), std::string::npos);
  ASSERT_EQ(Stage->TensorMaps.size(), 4u);
  const TensorMapParam &MM = Stage->TensorMaps[3];
  EXPECT_EQ(MM.Input, 3u);
  EXPECT_EQ(MM.ElementBytes, 4u);
  EXPECT_EQ(MM.Dims[0], 4096u);
  EXPECT_EQ(MM.Dims[1], 2048u);
  EXPECT_EQ(MM.Strides[0], 4096u * 4);
  EXPECT_EQ(MM.Box[0], 32u);
  EXPECT_EQ(MM.Box[1], 128u);
  EXPECT_EQ(Stage->SharedBytes,
            unsigned(wgAttentionSharedBytes(128, 64, 128, 2) +
                     2 * (128 * 64 * 4 + 8)));
  EXPECT_NE(Stage->Source.find("mt_tensor_map tm_m"), std::string::npos);
  // A mask broadcast over the queries is not a box of rows: producer warps
  // stage it.
  auto Pad =
      attention({"bf16", 1, 16, 4, 2048, 4096, 128, false, "f32[1,1,1,4096]"});
  ASSERT_TRUE(Pad);
  llvm::Expected<KernelSource> Warps = generateAttentionKernel(
      node(*Pad), Choice{"attn_wg_128x64_s2_o", {}, {}});
  ASSERT_TRUE(bool(Warps)) << llvm::toString(Warps.takeError());
  EXPECT_NE(Warps->Source.find("#define MASK_TMA 0"), std::string::npos);
  EXPECT_NE(Warps->Source.find("#define MASK_VEC 1"), std::string::npos);
  EXPECT_EQ(Warps->TensorMaps.size(), 3u);
  EXPECT_NE(M->Source.find("tm_v,\n    const mt_f16 *__restrict__ q"),
            std::string::npos);
  // What the template cannot take says why: f32, D = 96, BQ = 64, a
  // 208-key tile, 5 stages, and 4 stages of 128 keys at D = 128 (shared
  // memory).
  for (auto [Ty, D, Name] : {std::tuple{"f32", 128, "attn_wg_128x128_s2"},
                             std::tuple{"bf16", 96, "attn_wg_128x128_s2"},
                             std::tuple{"bf16", 128, "attn_wg_64x128_s2"},
                             std::tuple{"bf16", 128, "attn_wg_128x208_s2"},
                             std::tuple{"bf16", 128, "attn_wg_128x64_s5"},
                             std::tuple{"bf16", 128, "attn_wg_128x128_s4"}}) {
    auto Q = attention({Ty, 1, 8, 2, 256, 256, D, false});
    ASSERT_TRUE(Q);
    llvm::Expected<KernelSource> Bad =
        generateAttentionKernel(node(*Q), Choice{Name, {}, {}});
    ASSERT_FALSE(bool(Bad)) << Ty << " " << D << " " << Name;
    EXPECT_NE(llvm::toString(Bad.takeError())
                  .find("the wgmma template needs bf16 or f16"),
              std::string::npos)
        << Ty << " " << D << " " << Name;
  }
}

// Decode and prefill of Llama-3-8B, a speculative step with an odd head
// dimension (the flash kernel's general path) and with D = 64 (the
// tensor-core tiles'), multi-head f32, and masked attention. One test per
// shape, so that each stays short on a loaded machine (all five took a minute
// of wall time at a load average of 30 on two cores).
static const Shape NvrtcShapes[] = {
    {"bf16", 4, 32, 8, 1, 4096, 128, true},
    {"bf16", 1, 32, 8, 4096, 4096, 128, true},
    {"f16", 2, 6, 3, 5, 100, 40, false},
    {"f16", 2, 6, 3, 5, 100, 64, true},
    {"f32", 1, 4, 4, 70, 70, 64, true},
    // Additive masks: an f32 padding mask
    // at a decode step, a full f16 mask of
    // the op's type, an f32 one per query,
    // and a bf16 one with an odd row length
    // (no paired mask loads).
    {"bf16", 4, 32, 8, 1, 4096, 128, true, "f32[4,1,1,4096]"},
    {"f16", 2, 6, 3, 5, 100, 64, false, "f16[2,6,5,100]"},
    {"f32", 1, 4, 4, 70, 70, 40, false, "f32[1,1,70,70]"},
    {"bf16", 1, 8, 2, 33, 101, 128, false, "bf16[1,1,33,101]"},
    // A per-query f32 mask at prefill: the wgmma tiles copy it with TMA.
    {"bf16", 1, 16, 4, 256, 512, 128, false, "f32[1,1,256,512]"}};

class EveryChoiceCompilesWithNvrtc : public ::testing::TestWithParam<size_t> {};

TEST_P(EveryChoiceCompilesWithNvrtc, Shape) {
  llvm::Expected<const cuda::NvrtcApi &> Nv = cuda::loadNvrtc();
  if (!Nv)
    GTEST_SKIP() << "NVRTC not available, attention kernels not compiled: "
                 << llvm::toString(Nv.takeError());
  // Tensor-core tiles are compiled where they apply.
  std::vector<std::unique_ptr<Parsed>> Keep;
  std::vector<KernelSource> Work;
  {
    const Shape &S = NvrtcShapes[GetParam()];
    auto P = attention(S);
    ASSERT_TRUE(P);
    std::vector<Choice> All;
    std::optional<AttentionShape> AS = attentionShapeOf(node(*P));
    ASSERT_TRUE(AS);
    for (const AttentionTile &Listed :
         ChoiceConfig::getDefault().AttentionTiles)
      // (A `_sw` tile above 8 packed rows as lowering offers it.)
      if (AttentionTile T = offeredAttentionTile(Listed, AS->group() * AS->Sq);
          T.Wg    ? wgAttentionSupports(*AS, T.BQ, T.BKV, T.Stages)
          : T.Dec ? decAttentionSupports(*AS, T.BQ, T.BKV, T.Warps, T.Stages)
                  : !T.Mma || mmaAttentionSupports(*AS, T.BQ, T.BKV, T.Warps,
                                                   T.Stages))
        All.push_back(Choice{attentionChoiceName(T), {}, {}});
    All.push_back(Choice{AttentionMathChoice.str(), {}, {}});
    for (const Choice &C : All) {
      llvm::Expected<KernelSource> K = generateAttentionKernel(node(*P), C);
      ASSERT_TRUE(bool(K)) << C.Name << ": " << llvm::toString(K.takeError());
      Work.push_back(std::move(*K));
    }
    Keep.push_back(std::move(P));
  }
  expectEveryKernelCompiles(Work, 2);
}

INSTANTIATE_TEST_SUITE_P(AttentionCodegen, EveryChoiceCompilesWithNvrtc,
                         ::testing::Range<size_t>(0, std::size(NvrtcShapes)));
