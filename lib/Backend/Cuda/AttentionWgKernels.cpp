//===- AttentionWgKernels.cpp - Hopper attention tiles (wgmma + TMA) ------===//
//
// `attn_wg_BQxBKV_sS`, bf16/f16, head dimension 64 or 128, sm_90a only:
// the FlashAttention-3 structure on the GEMM template's pieces
// (WgmmaGemm.cpp: TMA tensor maps, mbarrier stage rings, setmaxnreg,
// 128-byte-swizzle wgmma descriptors). A CTA is one producer warpgroup and
// two consumer warpgroups of 64 packed query rows each (BQ = 128) of one
// (batch, kv head): the rows are the query heads sharing the kv head, then
// their queries, which in q's [B, Hq, Sq, D] layout are G * Sq consecutive
// rows, so q is one 3-d tensor map [B * Hkv][G * Sq][D].
//
//   * The producer's first thread loads the q tile once, then streams the
//     key and value tiles of BKV keys through STAGES stages with TMA, each
//     row as D / 64 boxes of 64 columns (128 bytes, swizzled); k and v of a
//     stage have their own `full` barriers, so q kᵀ starts before v lands,
//     and their own `empty` barriers: a stage's k is free once both
//     consumers' q kᵀ (and softmax, which reads a staged mask tile) is
//     done, its v once their p v is, so the next k tile loads a p v
//     earlier.
//   * A consumer computes s = q kᵀ with `wgmma m64nBKVk16` (q and k both
//     K-major from shared memory), scales it by scale * log2(e), adds the
//     additive mask, masks keys past each row's last (a causal diagonal
//     tile or the end of the keys) and runs the online softmax on the
//     accumulator fragments in registers (row max and sum over the four
//     lanes of a row). The probabilities, rounded to 16 bits, are already
//     the A fragments of p v: `wgmma m64nDk16` takes them from registers,
//     with v ([BKV][D] row-major, MN-major) from shared memory.
//   * A causal CTA stops at the last key its last row sees, and the CTAs
//     that see the most keys start first; a consumer whose rows see none of
//     a tile skips its products (but still frees the stage).
//   * `_o`: a consumer's softmax of tile j runs while tile j-1's p v is in
//     flight (FA3's intra-warpgroup overlap). `_pp` (with `_o`): the two
//     consumers take turns to issue their products at named barriers 1
//     and 2, so one's softmax runs under the other's products (FA3's
//     pingpong); each takes nTiles + 1 turns per query tile, empty ones
//     where it has no products, so the turns stay paired.
//   * `_p`: persistent. At most one CTA per SM; CTA c takes unit c + k G
//     (G = gridDim.x) of round k in even rounds and the mirrored one in odd
//     rounds (snake order over the heaviest-first units, so the SMs' key
//     tiles even out). The stage ring's index and phase count key tiles
//     over all of the CTA's units; q's `qfree` barrier (both consumers,
//     each once its last q kᵀ of the unit is done) lets the producer load
//     the next unit's q and first k/v tiles under the current unit's last
//     p v and output stores.
//   * Without a mask the row max is taken over the raw scores and the scale
//     folds into exp2's argument (FUSED_SCALE); a warp skips the output's
//     rescale when no row max moved (LAZY_RESCALE); the first q kᵀ step
//     overwrites the scores (QK_ZERO_INIT). Only an edge tile (past some
//     row's last key) compares keys: the softmax has a copy without the
//     comparisons for the others (EDGE_SPLIT), and the row maxima are a
//     tree (TREE_MAX). Without a staged mask the producer keeps 24
//     registers and the consumers take 240.
//   * A row that sees no key (masked everywhere) is NaN with a mask and 0
//     without, as in the other tiles.
//
//===----------------------------------------------------------------------===//
#include "AttentionCodegenImpl.h"
#include "GemmCodegen.h"
#include "mtsched/Backend/Cuda/AttentionCodegen.h"
#include "mtsched/IR/Attention.h"

#include <cassert>

using namespace mtsched;
using namespace mtsched::codegen;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

/// Wgmma function F (wgmmaFunction, A from shared memory) made to
/// overwrite its accumulators: scale-d 0, and the registers outputs only,
/// so that nothing zeroes them first.
static std::string overwritingWgmma(std::string F) {
  size_t Scale = F.find("1, 1, 1, 0, ");
  assert(Scale != std::string::npos && "wgmma without scale-d 1");
  F[Scale] = '0';
  for (size_t P = F.find("\"+f\""); P != std::string::npos;
       P = F.find("\"+f\"", P))
    F[P + 1] = '=';
  return F;
}

llvm::Expected<KernelSource>
mtsched::generateWgAttentionKernel(const MultiTemplateBufferNode &N,
                                   const AttentionTile &T) {
  std::optional<AttentionShape> S = attentionShapeOf(N);
  if (!S)
    return err("'%" + N.getName() + "' is not a well-formed attention");
  std::string ChoiceName = attentionChoiceName(T);
  if (T.PingPong && !T.Overlap)
    return err("tile " + ChoiceName +
               ": pingpong (`_pp`) needs the overlapped main loop (`_o`)");
  if (!T.Wg || T.Warps != 12 || T.Splits != 1 ||
      !wgAttentionSupports(*S, T.BQ, T.BKV, T.Stages))
    return err("tile " + ChoiceName +
               " cannot run: the wgmma template needs bf16 or f16, head "
               "dimension 64 or 128, BQ = 128, BKV a multiple of 16 up to "
               "192, 2 to 4 stages that fit in shared memory (got " +
               dtypeName(S->Dtype) + ", D = " + llvm::Twine(S->D) + ")");
  int64_t NBH = S->B * S->Hkv;
  int64_t Rows = S->group() * S->Sq;
  int64_t Tiles = (Rows + T.BQ - 1) / T.BQ;
  if (NBH * Tiles > 0x7fffffff || Rows > 0x7fffffff || NBH > 0x7fffffff)
    return err("the wgmma attention grid exceeds CUDA's limits");
  // The consumers' registers: the scores, p and the output accumulators
  // (BKV / 2 + BKV / 4 + D / 2) and their addresses must fit in what the
  // producer gives back.
  int ConsumerRegs = wgmmaConsumerRegs(2);
  if (T.BKV / 2 + T.BKV / 4 + S->D / 2 + 24 > ConsumerRegs)
    return err("tile " + ChoiceName +
               ": the scores and accumulators do not "
               "fit in the consumers' " +
               llvm::Twine(ConsumerRegs) + " registers at head dimension " +
               llvm::Twine(S->D));
  const char *Type = S->Dtype == DType::BF16 ? "bf16" : "f16";
  // The additive mask's tiles through shared memory where they fit beside
  // the stages: by TMA where each tile's rows are consecutive rows of an
  // f32 mask (a mask per query, whole query tiles of one head, 16-byte row
  // strides), else loaded by producer warps (float4 loads of an f32 mask
  // whose rows are 16-byte aligned).
  int64_t TmaSmem = wgAttentionTmaMaskSharedBytes(T.BQ, T.BKV, S->D, T.Stages);
  bool MaskTma = wgAttentionMaskByTma(*S, T.BQ, T.BKV, T.Stages);
  bool MaskStaged = MaskTma || wgAttentionStagesMask(*S, T.BQ, T.BKV, T.Stages);
  // Without a staged mask the producer only issues TMA copies: it keeps 24
  // registers (as FlashAttention-3's) and each consumer gets 8 more of the
  // 128 x 16 it gives up (240: 1-2 % faster at the causal 4096 prefill on
  // an H200, 259.6 and 261.9 us against 260.9 and 266.6 for the s2 and s3
  // pingpong tiles); the warps that stage a mask keep the GEMM template's
  // 40 (WgmmaProducerRegs).
  int ProducerRegs = MaskStaged ? WgmmaProducerRegs : 24;
  ConsumerRegs += (WgmmaProducerRegs - ProducerRegs) * 128 / 256 / 8 * 8;
  KernelSource K;
  K.Name = sanitizeIdentifier(N.getName() + "_" + ChoiceName);
  std::string Src;
  llvm::raw_string_ostream OS(Src);
  std::string Helpers =
      std::string("#define MMA_TYPE \"") + Type + "\"\n" + KeyRange +
      PackHelper + WgmmaHelpers +
      wgmmaFunction(T.BKV, Type, "mt_wgmma_qk",
                    /*TransB=*/false) +
      overwritingWgmma(wgmmaFunction(T.BKV, Type, "mt_wgmma_qk0",
                                     /*TransB=*/false)) +
      wgmmaFunction(int(S->D), Type, "mt_wgmma_pv",
                    /*TransB=*/true, /*RegisterA=*/true);
  llvm::Expected<AttentionShape> Header = emitAttentionHeader(
      OS, N, K.Name, ChoiceName, 3 * 128, /*Workspace=*/false, Helpers,
      "const __grid_constant__ mt_tensor_map tm_q,\n    const "
      "__grid_constant__ mt_tensor_map tm_k,\n    const __grid_constant__ "
      "mt_tensor_map tm_v,\n    " +
          std::string(MaskTma ? "const __grid_constant__ mt_tensor_map tm_m,\n"
                                "    "
                              : ""));
  if (!Header)
    return Header.takeError();
  OS << "#define BQ " << T.BQ << "\n#define BKV " << T.BKV
     << "\n#define STAGES " << T.Stages << "\n#define OVERLAP "
     << (T.Overlap ? 1 : 0) << "\n#define PERSISTENT " << (T.Persistent ? 1 : 0)
     << "\n#define PINGPONG " << (T.PingPong ? 1 : 0)
     << "\n#define FUSED_SCALE " << (!S->HasMask && S->Scale > 0 ? 1 : 0)
     << "\n#define LAZY_RESCALE 1\n#define QK_ZERO_INIT 1"
     // One softmax for every tile made the compiler predicate a compare and
     // a select per score on all of them: the causal 4096 prefill took
     // 259.3 us on an H200, 231.9 with an edge-only copy, 228.8 with the
     // maxima's tree too (2048 x 4096 unmasked: 127.1 -> 108.3).
     << "\n#define EDGE_SPLIT 1\n#define TREE_MAX 1"
     << "\n#define UNITS " << NBH * Tiles
     << "LL // query tiles x (batch, kv head)\n#define NBH " << NBH
     << "LL // batch x kv heads\n#define PRODUCER_REGS \"" << ProducerRegs
     << "\"\n#define CONSUMER_REGS \"" << ConsumerRegs << "\"\n";
  OS << "#define MASK_STAGED " << (MaskStaged ? 1 : 0) << "\n#define MASK_TMA "
     << (MaskTma ? 1 : 0) << "\n";
  if (MaskTma)
    OS << "#define M_STAGE (BQ * BKV * 4) // one stage's mask tile\n";
  else if (MaskStaged)
    OS << "#define MASK_LOADERS 96 // producer threads that stage the mask\n"
       << "#define MS (BKV + 8) // floats of a staged mask row (padded: the "
          "8 rows a warp reads fall in different banks)\n"
       << "#define M_STAGE (BQ * MS * 4)\n#define MASK_VEC "
       << (S->MaskDtype == DType::F32 && S->Skv % 4 == 0 ? 1 : 0) << "\n";
  OS << AttentionWgBody;
  K.Source = OS.str();
  K.Inputs = {N.getOperand(0), N.getOperand(1), N.getOperand(2)};
  if (S->HasMask)
    K.Inputs.push_back(N.getOperand(3));
  K.Outputs = {N.getResult()};
  // A persistent kernel walks the UNITS work units with at most one CTA
  // per SM (launchGridX).
  K.GridX = unsigned(std::max<int64_t>(1, NBH * Tiles));
  K.Persistent = T.Persistent;
  K.BlockX = 3 * 128;
  K.SharedBytes =
      unsigned(MaskTma ? TmaSmem
                       : wgAttentionSharedBytes(T.BQ, T.BKV, S->D, T.Stages,
                                                MaskStaged));
  K.NeedsSm90a = true;
  // q as [B * Hkv][G * Sq][D] (a kv head's packed rows are consecutive),
  // k and v as [B * Hkv][Skv][D], in boxes of 64 columns.
  K.TensorMaps = {wgmmaTensorMap(0, S->D, Rows, NBH, 64, uint32_t(T.BQ)),
                  wgmmaTensorMap(1, S->D, S->Skv, NBH, 64, uint32_t(T.BKV)),
                  wgmmaTensorMap(2, S->D, S->Skv, NBH, 64, uint32_t(T.BKV))};
  if (MaskTma) {
    // The mask as [rows][Skv] 32-bit words, boxes of 32 keys x BQ rows.
    TensorMapParam M;
    M.Input = 3;
    M.ElementBytes = 4;
    int64_t MaskRows = S->MaskB * S->MaskH * S->MaskSq;
    M.Dims[0] = uint64_t(S->Skv);
    M.Dims[1] = uint64_t(MaskRows);
    M.Strides[0] = uint64_t(S->Skv) * 4;
    M.Strides[1] = uint64_t(MaskRows) * S->Skv * 4;
    M.Box[0] = 32;
    M.Box[1] = uint32_t(T.BQ);
    K.TensorMaps.push_back(M);
  }
  return K;
}
