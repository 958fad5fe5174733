//===- AttentionDecodeVariantsTest.cpp - attn_dec's variant forms -------===//
//
// The decode template's staggered start (`_r`), its persistent form with a
// partial result per consumer warp (`_pw`), its work-stealing persistent
// form (`_ps`), its tail depth (`_t`), its one-box copies (`_ob`) and its
// swapped MMA operands (`_sw`), the unsplit tiles' early combine and their
// L2 prefetch before the programmatic wait:
// names, what a kernel of each holds, the tiles they cannot run, and the
// kernels compiled with NVRTC for sm_90 wherever libnvrtc can be opened
// (skips and says why elsewhere).
//
//===----------------------------------------------------------------------===//
#include "CompileAll.h"
#include "IRTestUtils.h"
#include "LowerAndFuse.h"
#include "mtsched/Backend/Cuda/AttentionCodegen.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/IR/Attention.h"
#include "mtsched/Lowering/Lowering.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"

using namespace mtsched;

namespace {

using test::Parsed;

/// A causal bf16 (or Ty) decode-like attention of B batches, Hq query and
/// Hkv kv heads, Sq queries over Skv keys, head dimension D, lowered.
std::unique_ptr<Parsed> attention(const char *Ty, int64_t B, int64_t Hq,
                                  int64_t Hkv, int64_t Sq, int64_t Skv,
                                  int64_t D) {
  auto T = [&](int64_t H, int64_t L) {
    return std::string(Ty) + "[" + std::to_string(B) + "," + std::to_string(H) +
           "," + std::to_string(L) + "," + std::to_string(D) + "]";
  };
  std::string Src =
      "graph @a(%q: " + T(Hq, Sq) + ", %k: " + T(Hkv, Skv) +
      ", %v: " + T(Hkv, Skv) +
      ") {\n  %o = attention(%q, %k, %v) {causal = true} : " + T(Hq, Sq) +
      "\n  return %o\n}\n";
  return test::lowered(Src, "a.mir");
}

const MultiTemplateBufferNode &node(const Parsed &P) {
  return test::firstNode(P);
}

llvm::Expected<KernelSource> generate(const Parsed &P, const char *Name) {
  return generateAttentionKernel(node(P), Choice{Name, {}, {}});
}

} // namespace

TEST(AttentionDecodeVariants, Names) {
  std::optional<AttentionTile> R =
      attentionTileOf(Choice{"attn_dec_16x64_w2_s2_kv4_pf8_r", {}, {}});
  ASSERT_TRUE(R);
  EXPECT_TRUE(R->Dec && R->Stagger);
  EXPECT_FALSE(R->Persistent || R->WarpPartials);
  EXPECT_EQ(R->Splits, 4);
  EXPECT_EQ(R->Prefetch, 8);
  std::optional<AttentionTile> Pw =
      attentionTileOf(Choice{"attn_dec_16x32_w4_s4_pw", {}, {}});
  ASSERT_TRUE(Pw);
  EXPECT_TRUE(Pw->Persistent && Pw->WarpPartials);
  EXPECT_FALSE(Pw->Stagger);
  EXPECT_EQ(attentionChoiceName(*Pw), "attn_dec_16x32_w4_s4_pw");
  std::optional<AttentionTile> P =
      attentionTileOf(Choice{"attn_dec_16x32_w4_s4_p", {}, {}});
  ASSERT_TRUE(P);
  EXPECT_TRUE(P->Persistent);
  EXPECT_FALSE(P->WarpPartials);
  std::optional<AttentionTile> Ps =
      attentionTileOf(Choice{"attn_dec_16x32_w4_s4_ps", {}, {}});
  ASSERT_TRUE(Ps);
  EXPECT_TRUE(Ps->Persistent && Ps->Steal);
  EXPECT_FALSE(Ps->WarpPartials);
  EXPECT_EQ(attentionChoiceName(*Ps), "attn_dec_16x32_w4_s4_ps");
  EXPECT_FALSE(P->Steal);
  // Flags in another order, or on the other templates, are no tile.
  for (const char *Bad :
       {"attn_dec_16x32_w4_s4_r_ef", "attn_dec_16x32_w4_s4_pw_r",
        "attn_mma_16x32_w4_r", "attn_dec_16x32_w4_s4_p_pw",
        "attn_dec_16x32_w4_s4_ps_p", "attn_dec_16x32_w4_s4_pw_ps"})
    EXPECT_FALSE(attentionTileOf(Choice{Bad, {}, {}})) << Bad;
}

TEST(AttentionDecodeVariants, StaggerKernel) {
  auto P = attention("bf16", 16, 32, 8, 1, 4096, 128);
  ASSERT_TRUE(P);
  llvm::Expected<KernelSource> Plain = generate(*P, "attn_dec_16x32_w4_s4");
  llvm::Expected<KernelSource> R = generate(*P, "attn_dec_16x32_w4_s4_r");
  ASSERT_TRUE(bool(Plain)) << llvm::toString(Plain.takeError());
  ASSERT_TRUE(bool(R)) << llvm::toString(R.takeError());
  EXPECT_NE(Plain->Source.find("#define STAGGER 0"), std::string::npos);
  EXPECT_NE(R->Source.find("#define STAGGER 1"), std::string::npos);
  // The same grid, shared memory and registers bound: only the order of
  // a CTA's key tiles differs.
  EXPECT_EQ(R->GridX, Plain->GridX);
  EXPECT_EQ(R->GridY, 128u);
  EXPECT_EQ(R->GridZ, 1u);
  EXPECT_EQ(R->SharedBytes, Plain->SharedBytes);
  EXPECT_EQ(R->WorkspaceBytes, 0u);
  // Not with the persistent forms (their shares are already spread).
  llvm::Expected<KernelSource> Rp = generate(*P, "attn_dec_16x32_w4_s4_r_p");
  ASSERT_FALSE(bool(Rp));
  EXPECT_NE(llvm::toString(Rp.takeError()).find("no stagger when persistent"),
            std::string::npos);
}

TEST(AttentionDecodeVariants, WarpPartialsKernel) {
  // Llama-3-8B at batch 16: 128 kv heads of 128 key tiles of 32.
  auto P = attention("bf16", 16, 32, 8, 1, 4096, 128);
  ASSERT_TRUE(P);
  llvm::Expected<KernelSource> K = generate(*P, "attn_dec_16x32_w4_s4_pw");
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  EXPECT_TRUE(K->Persistent);
  EXPECT_EQ(K->GridX, 512u); // CTAs at most; one an SM at launch
  EXPECT_EQ(K->GridY, 1u);
  EXPECT_EQ(K->BlockX, 160u);
  // A partial result (16 x 128 accumulators, 16 maxima and sums) per slot
  // of (CTAs + kv heads) x 4 warps, then a counter per kv head.
  EXPECT_EQ(K->WorkspaceBytes,
            uint64_t(((512 + 128) * 4 * (16 * 128 + 32) + 128) * 4));
  EXPECT_NE(K->Source.find("prev = atomicAdd(count, 1u)"), std::string::npos);
  // No q tile in shared memory and no barrier across the consumers.
  EXPECT_EQ(K->Source.find("bar.sync 1"), std::string::npos);
  EXPECT_EQ(K->Source.find("sQ"), std::string::npos);
  llvm::Expected<KernelSource> Old = generate(*P, "attn_dec_16x32_w4_s4_p");
  ASSERT_TRUE(bool(Old)) << llvm::toString(Old.takeError());
  EXPECT_EQ(Old->WorkspaceBytes,
            uint64_t(((512 + 128) * (16 * 128 + 32) + 128) * 4));
  // One kv head's packed rows in one tile of 16, as the other persistent
  // form; no L2 prefetch.
  auto Tall = attention("bf16", 1, 32, 8, 5, 4096, 128);
  ASSERT_TRUE(Tall);
  llvm::Expected<KernelSource> KT = generate(*Tall, "attn_dec_16x32_w4_s4_pw");
  ASSERT_FALSE(bool(KT));
  EXPECT_NE(llvm::toString(KT.takeError()).find("in one tile of 16"),
            std::string::npos);
  llvm::Expected<KernelSource> Pf =
      generate(*P, "attn_dec_16x32_w4_s8_pf16_pw");
  ASSERT_FALSE(bool(Pf));
  EXPECT_NE(llvm::toString(Pf.takeError()).find("no prefetch with warp"),
            std::string::npos);
}

TEST(AttentionDecodeVariants, StealKernel) {
  // Llama-3-8B at batch 16: 128 kv heads of 128 key tiles of 32.
  auto P = attention("bf16", 16, 32, 8, 1, 4096, 128);
  ASSERT_TRUE(P);
  llvm::Expected<KernelSource> K = generate(*P, "attn_dec_16x32_w4_s4_ps");
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  EXPECT_TRUE(K->Persistent);
  EXPECT_EQ(K->GridX, 512u); // CTAs at most; one an SM at launch
  EXPECT_EQ(K->GridY, 1u);
  llvm::Expected<KernelSource> Old = generate(*P, "attn_dec_16x32_w4_s4_p");
  ASSERT_TRUE(bool(Old)) << llvm::toString(Old.takeError());
  EXPECT_EQ(K->SharedBytes, Old->SharedBytes);
  // A partial result per owned kv head and per CTA and stolen head (4),
  // then per kv head three counters and a list of 8, and the CTAs done.
  EXPECT_EQ(K->WorkspaceBytes,
            uint64_t(((128 + 512 * 4) * (16 * 128 + 32) + 128 * 11 + 1) * 4));
  EXPECT_NE(K->Source.find("#define SMAX 4"), std::string::npos);
  EXPECT_NE(K->Source.find("#define CLAIM 2u"), std::string::npos);
  EXPECT_NE(K->Source.find("next = atomicAdd(claimed + h, (unsigned)CLAIM)"),
            std::string::npos);
  // The grid's last CTA zeroes the counters for the next launch.
  EXPECT_NE(K->Source.find("atomicAdd(ctasDone, 1u)"), std::string::npos);
  // Not with prefetch or warp partials.
  llvm::Expected<KernelSource> Pf = generate(*P, "attn_dec_16x32_w4_s8_pf4_ps");
  ASSERT_FALSE(bool(Pf));
}

TEST(AttentionDecodeVariants, TailDepthKernel) {
  std::optional<AttentionTile> T =
      attentionTileOf(Choice{"attn_dec_16x32_w4_s8_r_t", {}, {}});
  ASSERT_TRUE(T);
  EXPECT_TRUE(T->Tail && T->Stagger);
  EXPECT_FALSE(attentionTileOf(Choice{"attn_dec_16x32_w4_s8_t_r", {}, {}}));
  auto P = attention("bf16", 16, 32, 8, 1, 4096, 128);
  ASSERT_TRUE(P);
  llvm::Expected<KernelSource> K = generate(*P, "attn_dec_16x32_w4_s8_t");
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  // Four of the eight stages in flight until a CTA has finished; the count
  // of finished CTAs in the workspace.
  EXPECT_NE(K->Source.find("#define TAIL 1\n#define DEPTH 4\n"),
            std::string::npos);
  EXPECT_EQ(K->WorkspaceBytes, 16u);
  EXPECT_EQ(K->GridY, 128u);
  llvm::Expected<KernelSource> Plain = generate(*P, "attn_dec_16x32_w4_s8");
  ASSERT_TRUE(bool(Plain)) << llvm::toString(Plain.takeError());
  EXPECT_NE(Plain->Source.find("#define TAIL 0\n#define DEPTH 8\n"),
            std::string::npos);
  EXPECT_EQ(Plain->WorkspaceBytes, 0u);
  // The count's barrier and copy after the stages' barriers.
  EXPECT_EQ(Plain->SharedBytes + 32, K->SharedBytes);
  EXPECT_NE(K->Source.find("cp.async.bulk.shared::cluster.global"),
            std::string::npos);
  // Unsplit, not persistent, half the stages a multiple of the warps.
  for (const char *Bad :
       {"attn_dec_16x32_w4_s8_kv4_t", "attn_dec_16x32_w4_s8_t_p",
        "attn_dec_16x32_w4_s4_t", "attn_dec_16x32_w4_s8_pf8_t"}) {
    llvm::Expected<KernelSource> B = generate(*P, Bad);
    ASSERT_FALSE(bool(B)) << Bad;
    EXPECT_NE(llvm::toString(B.takeError()).find("a tail depth only unsplit"),
              std::string::npos)
        << Bad;
  }
}

TEST(AttentionDecodeVariants, OneBoxKernel) {
  std::optional<AttentionTile> T =
      attentionTileOf(Choice{"attn_dec_16x32_w4_s8_r_t_ob", {}, {}});
  ASSERT_TRUE(T);
  EXPECT_TRUE(T->OneBox && T->Tail && T->Stagger);
  EXPECT_EQ(attentionChoiceName(*T), "attn_dec_16x32_w4_s8_r_t_ob");
  EXPECT_FALSE(attentionTileOf(Choice{"attn_dec_16x32_w4_s8_ob_t", {}, {}}));
  auto P = attention("bf16", 16, 32, 8, 1, 4096, 128);
  ASSERT_TRUE(P);
  llvm::Expected<KernelSource> K = generate(*P, "attn_dec_16x32_w4_s4_ob");
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  llvm::Expected<KernelSource> Plain = generate(*P, "attn_dec_16x32_w4_s4");
  ASSERT_TRUE(bool(Plain)) << llvm::toString(Plain.takeError());
  EXPECT_NE(K->Source.find("#define ONE_BOX 1\n#define ROW_BOXES 2"),
            std::string::npos);
  EXPECT_NE(Plain->Source.find("#define ONE_BOX 0\n"), std::string::npos);
  EXPECT_EQ(K->SharedBytes, Plain->SharedBytes);
  // k and v as 128-byte rows, two a key, in boxes of a stage's 64 rows.
  ASSERT_EQ(K->TensorMaps.size(), 2u);
  for (const auto &M : K->TensorMaps) {
    EXPECT_EQ(M.Dims[0], 64u);
    EXPECT_EQ(M.Dims[1], 8192u);
    EXPECT_EQ(M.Dims[2], 128u);
    EXPECT_EQ(M.Strides[1], uint64_t(4096) * 128 * 2);
    EXPECT_EQ(M.Box[0], 64u);
    EXPECT_EQ(M.Box[1], 64u);
  }
  EXPECT_EQ(Plain->TensorMaps[0].Box[1], 32u);
  // Not persistent, no prefetch.
  for (const char *Bad :
       {"attn_dec_16x32_w4_s4_ob_p", "attn_dec_16x32_w4_s8_pf8_ob"}) {
    llvm::Expected<KernelSource> B = generate(*P, Bad);
    ASSERT_FALSE(bool(B)) << Bad;
    EXPECT_NE(llvm::toString(B.takeError()).find("one box not persistent"),
              std::string::npos)
        << Bad;
  }
}

TEST(AttentionDecodeVariants, EarlyCombineOnlyWhereEachWarpOwnsAStage) {
  auto P = attention("bf16", 16, 32, 8, 1, 4096, 128);
  ASSERT_TRUE(P);
  const char *Early = "float *pO = (float *)(region + warp * KV_TILE);";
  const char *Old = "float *cW = cL + NC * 16;";
  // Unsplit, STAGES a multiple of the consumer warps, a stage's k holding
  // 16 rows of D floats (BKV >= 32): each warp stores its partial result
  // in its own stage as its loop ends, and one barrier precedes the output.
  for (const char *Name : {"attn_dec_16x32_w4_s4", "attn_dec_16x32_w4_s8",
                           "attn_dec_16x64_w2_s4", "attn_dec_16x32_w4_s4_ob"}) {
    llvm::Expected<KernelSource> K = generate(*P, Name);
    ASSERT_TRUE(bool(K)) << Name << ": " << llvm::toString(K.takeError());
    EXPECT_NE(K->Source.find(Early), std::string::npos) << Name;
    EXPECT_EQ(K->Source.find(Old), std::string::npos) << Name;
  }
  // Splits, clusters, swapped operands or 16 keys a stage (too few bytes
  // for a warp's partial result) keep the combine after the barrier.
  for (const char *Name :
       {"attn_dec_16x32_w4_s4_kv2", "attn_dec_16x32_w4_s4_kv8_c",
        "attn_dec_16x32_w4_s4_sw", "attn_dec_16x16_w1_s2"}) {
    llvm::Expected<KernelSource> K = generate(*P, Name);
    ASSERT_TRUE(bool(K)) << Name << ": " << llvm::toString(K.takeError());
    EXPECT_EQ(K->Source.find(Early), std::string::npos) << Name;
    EXPECT_NE(K->Source.find(Old), std::string::npos) << Name;
  }
}

TEST(AttentionDecodeVariants, ProgrammaticWaitBeforeGlobalMemory) {
  auto P = attention("bf16", 16, 32, 8, 1, 4096, 128);
  ASSERT_TRUE(P);
  const std::string Wait = "griddepcontrol.wait;";
  // The tiles with the shared loop wait in the producer before its first
  // copy and in the consumers before they read q, and are launched with
  // PDL (KernelSource::ProgrammaticWait).
  for (const char *Name :
       {"attn_dec_16x32_w4_s4", "attn_dec_16x32_w4_s4_kv2",
        "attn_dec_16x32_w4_s4_kv8_c", "attn_dec_16x32_w4_s4_sw",
        "attn_dec_16x32_w4_s8_t", "attn_dec_16x32_w4_s8_pf8"}) {
    llvm::Expected<KernelSource> K = generate(*P, Name);
    ASSERT_TRUE(bool(K)) << Name << ": " << llvm::toString(K.takeError());
    EXPECT_TRUE(K->ProgrammaticWait) << Name;
    const std::string &S = K->Source;
    size_t First = S.find(Wait);
    ASSERT_NE(First, std::string::npos) << Name;
    size_t Second = S.find(Wait, First + 1);
    ASSERT_NE(Second, std::string::npos) << Name;
    EXPECT_EQ(S.find(Wait, Second + 1), std::string::npos) << Name;
    EXPECT_LT(First, S.find("issue(it);")) << Name;
    EXPECT_LT(Second, S.find("x = *(const uint4 *)(q +")) << Name;
    // Every thread lets the next kernel launch once q is loaded.
    EXPECT_LT(S.find("x = *(const uint4 *)(q +"),
              S.find("griddepcontrol.launch_dependents;"))
        << Name;
  }
  // The persistent forms have loops of their own and no wait.
  llvm::Expected<KernelSource> Pers = generate(*P, "attn_dec_16x32_w4_s4_p");
  ASSERT_TRUE(bool(Pers)) << llvm::toString(Pers.takeError());
  EXPECT_FALSE(Pers->ProgrammaticWait);
  EXPECT_EQ(Pers->Source.find(Wait), std::string::npos);
}

TEST(AttentionDecodeVariants, UnsplitTilesPrefetchBeforeTheWait) {
  auto P = attention("bf16", 16, 32, 8, 1, 4096, 128);
  auto Big = attention("bf16", 64, 32, 8, 1, 4096, 128);
  ASSERT_TRUE(P && Big);
  const std::string Call = "mt_tma_prefetch_last(tm_k";
  const std::string Helper = "void mt_tma_prefetch_last(";
  const std::string EvictFirst = "#define EVICT_FIRST 1 ";
  // Batch 16, 128 CTAs: 128 KB a CTA, 8 tiles of 32 keys of k and v, the
  // copies evict-first, the prefetches before the producer's wait.
  llvm::Expected<KernelSource> K = generate(*P, "attn_dec_16x32_w4_s4");
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  const std::string &S = K->Source;
  EXPECT_NE(S.find("#define PRE_WAIT 8 "), std::string::npos);
  EXPECT_NE(S.find(Helper), std::string::npos);
  EXPECT_NE(S.find(EvictFirst), std::string::npos);
  // Its copies promote nothing more into L2.
  ASSERT_EQ(K->TensorMaps.size(), 2u);
  EXPECT_EQ(K->TensorMaps[0].L2PromotionBytes, 0u);
  EXPECT_EQ(K->TensorMaps[1].L2PromotionBytes, 0u);
  size_t Wait = S.find("griddepcontrol.wait;", S.find("mt_mbar_init(full"));
  ASSERT_NE(S.find(Call), std::string::npos);
  EXPECT_LT(S.find(Call), Wait);
  // 64 keys a tile: 4 tiles.
  llvm::Expected<KernelSource> Wide = generate(*P, "attn_dec_16x64_w4_s4");
  ASSERT_TRUE(bool(Wide)) << llvm::toString(Wide.takeError());
  EXPECT_NE(Wide->Source.find("#define PRE_WAIT 4 "), std::string::npos);
  // Batch 64, 512 CTAs: the grid's 16 MB, 32 KB a CTA, 2 tiles.
  llvm::Expected<KernelSource> Many = generate(*Big, "attn_dec_16x32_w4_s4");
  ASSERT_TRUE(bool(Many)) << llvm::toString(Many.takeError());
  EXPECT_NE(Many->Source.find("#define PRE_WAIT 2 "), std::string::npos);
  // Split, cluster and one-box tiles prefetch nothing before the wait, and
  // keep their copies as they were (the helpers are there, switched off).
  for (const char *Name :
       {"attn_dec_16x32_w4_s4_kv2", "attn_dec_16x32_w4_s4_kv8_c",
        "attn_dec_16x32_w4_s4_ob"}) {
    llvm::Expected<KernelSource> N = generate(*P, Name);
    ASSERT_TRUE(bool(N)) << Name << ": " << llvm::toString(N.takeError());
    EXPECT_NE(N->Source.find("#define PRE_WAIT 0 "), std::string::npos) << Name;
    EXPECT_NE(N->Source.find("#define EVICT_FIRST 0 "), std::string::npos)
        << Name;
    EXPECT_EQ(N->TensorMaps[0].L2PromotionBytes, 256u) << Name;
  }
  // The persistent forms do not wait.
  llvm::Expected<KernelSource> Pers = generate(*P, "attn_dec_16x32_w4_s4_p");
  ASSERT_TRUE(bool(Pers)) << llvm::toString(Pers.takeError());
  EXPECT_EQ(Pers->Source.find(Helper), std::string::npos);
  EXPECT_EQ(Pers->Source.find("void mt_tma_load_ef("), std::string::npos);
}

TEST(AttentionDecodeVariants, SwappedOperandsKernel) {
  std::optional<AttentionTile> T =
      attentionTileOf(Choice{"attn_dec_16x32_w4_s4_kv2_ob_sw", {}, {}});
  ASSERT_TRUE(T);
  EXPECT_TRUE(T->SwapAB && T->OneBox && T->Splits == 2);
  EXPECT_FALSE(attentionTileOf(Choice{"attn_dec_16x32_w4_s4_sw_ob", {}, {}}));
  auto P = attention("bf16", 16, 32, 8, 1, 4096, 128);
  ASSERT_TRUE(P);
  llvm::Expected<KernelSource> K = generate(*P, "attn_dec_16x32_w4_s4_sw");
  ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
  EXPECT_NE(K->Source.find("#define SWAP_AB 1\n"), std::string::npos);
  EXPECT_NE(K->Source.find("movmatrix.sync.aligned.m8n8.trans.b16"),
            std::string::npos);
  llvm::Expected<KernelSource> Plain = generate(*P, "attn_dec_16x32_w4_s4");
  ASSERT_TRUE(bool(Plain)) << llvm::toString(Plain.takeError());
  EXPECT_NE(Plain->Source.find("#define SWAP_AB 0\n"), std::string::npos);
  EXPECT_EQ(Plain->Source.find("movmatrix"), std::string::npos);
  EXPECT_EQ(K->SharedBytes, Plain->SharedBytes);
  // 16 packed rows (4 query heads of 4 queries) are more than 8 columns.
  auto Wide = attention("bf16", 1, 32, 8, 4, 4096, 128);
  ASSERT_TRUE(Wide);
  llvm::Expected<KernelSource> W = generate(*Wide, "attn_dec_16x32_w4_s4_sw");
  ASSERT_FALSE(bool(W));
  EXPECT_NE(llvm::toString(W.takeError()).find("8 or fewer"),
            std::string::npos);
  llvm::Expected<KernelSource> Pers = generate(*P, "attn_dec_16x32_w4_s4_sw_p");
  ASSERT_FALSE(bool(Pers));
  EXPECT_NE(llvm::toString(Pers.takeError()).find("swapped operands not"),
            std::string::npos);
}

/// The new forms bench/device/attn-dec16b.sh (and attn-dec16c.sh) times,
/// compiled with NVRTC at Llama-3-8B's decode at batch 16, a ragged one, f16 at
/// D = 64 with queries ending mid-tile, and many short kv heads.
TEST(AttentionDecodeVariants, CompileWithNvrtc) {
  llvm::Expected<const cuda::NvrtcApi &> Nv = cuda::loadNvrtc();
  if (!Nv)
    GTEST_SKIP() << "NVRTC not available, attention kernels not compiled: "
                 << llvm::toString(Nv.takeError());
  std::vector<std::unique_ptr<Parsed>> Keep;
  Keep.push_back(attention("bf16", 16, 32, 8, 1, 4096, 128));
  Keep.push_back(attention("bf16", 1, 32, 8, 1, 4100, 128));
  Keep.push_back(attention("f16", 2, 6, 3, 5, 100, 64));
  Keep.push_back(attention("bf16", 32, 32, 8, 1, 256, 128));
  const char *Names[] = {
      "attn_dec_16x32_w4_s4_r",        "attn_dec_16x32_w2_s4_r",
      "attn_dec_16x32_w4_s8_r",        "attn_dec_16x64_w2_s2_kv4_pf8_r",
      "attn_dec_16x32_w4_s4_kv8_c_r",  "attn_dec_16x32_w4_s4_pw",
      "attn_dec_16x16_w1_s2_pw",       "attn_dec_16x64_w4_s4_pw",
      "attn_dec_16x32_w4_s8_t",        "attn_dec_16x32_w2_s8_t",
      "attn_dec_16x16_w1_s2_r_t",      "attn_dec_16x32_w4_s4_ob",
      "attn_dec_16x64_w2_s2_ob",       "attn_dec_16x32_w4_s4_kv8_c_ob",
      "attn_dec_16x16_w1_s2_kv2_r_ob", "attn_dec_16x32_w4_s4_ps",
      "attn_dec_16x16_w1_s2_ps",       "attn_dec_16x64_w2_s4_ps",
      "attn_dec_16x32_w4_s4",          "attn_dec_16x64_w2_s4"};
  std::vector<KernelSource> Work;
  for (const auto &P : Keep) {
    ASSERT_TRUE(P);
    for (const char *Name : Names) {
      llvm::Expected<KernelSource> K = generate(*P, Name);
      // A split tile the ragged or short shapes cannot split is refused by
      // lowering, not here: every name generates.
      ASSERT_TRUE(bool(K)) << Name << ": " << llvm::toString(K.takeError());
      Work.push_back(std::move(*K));
    }
  }
  // _sw where the packed rows are 8 or fewer (f16 at D = 64: 6 rows).
  Keep.push_back(attention("f16", 2, 6, 3, 3, 100, 64));
  const char *Swapped[] = {"attn_dec_16x32_w4_s4_sw", "attn_dec_16x64_w2_s2_sw",
                           "attn_dec_16x32_w4_s4_kv8_c_ob_sw",
                           "attn_dec_16x16_w1_s2_kv2_r_ob_sw"};
  for (size_t I : {size_t(0), size_t(1), size_t(3), size_t(4)})
    for (const char *Name : Swapped) {
      llvm::Expected<KernelSource> K = generate(*Keep[I], Name);
      ASSERT_TRUE(bool(K)) << Name << ": " << llvm::toString(K.takeError());
      Work.push_back(std::move(*K));
    }
  expectEveryKernelCompiles(Work, 2);
}
