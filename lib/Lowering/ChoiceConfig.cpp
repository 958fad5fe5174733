//===- ChoiceConfig.cpp - The choices a node gets -------------------------===//
//
// The default choice lists, the names of tiles and their parsing, and the
// choices of each GEMM, SwiGLU, attention and collective node.
// ChoiceConfigFile.cpp reads a choices file into the same lists.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Lowering/ChoiceConfig.h"
#include "mtsched/IR/Attention.h"
#include "mtsched/IR/OpUnit.h"
#include "mtsched/Lowering/CublasLtChoice.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"
#include <array>

using namespace mtsched;

ChoiceConfig ChoiceConfig::getDefault() {
  ChoiceConfig C;
  // Tile shapes in the spirit of Inductor's mm configs: large tiles for
  // prefill-sized M, narrow ones for decode-sized M. Then the Hopper wgmma
  // tiles, BK = 64 (one 128-byte swizzled row of bf16), as deep as shared
  // memory allows.
  C.GemmTiles = {
      {128, 256, 64, 8, 3}, {256, 128, 64, 8, 3}, {128, 128, 64, 4, 3},
      {128, 128, 32, 4, 4}, {128, 64, 64, 4, 4},  {64, 128, 64, 4, 4},
      {64, 64, 64, 4, 4},   {32, 64, 64, 4, 4},   {16, 128, 128, 4, 4},
      {16, 64, 128, 4, 5},
  };
  // Split-K decode tiles: offered only where the unsplit grid leaves SMs
  // idle (gemmChoices). The fastest three of 14 tried on an H100 at
  // 16 x 4096 x 4096 (18.9, 19.1 and 19.9 us; cuBLAS 17.2, the unsplit
  // 16x64x128 tile 21.7; docs/BENCHMARKS.md).
  for (auto [BM, BN, BK, Stages, Split] : {std::array<int, 5>{16, 64, 64, 8, 2},
                                           {16, 64, 128, 5, 2},
                                           {16, 128, 128, 4, 4}}) {
    GemmTileConfig T{BM, BN, BK, 4, Stages};
    T.SplitK = Split;
    C.GemmTiles.push_back(T);
  }
  // The 64-row tiles as deep as shared memory allows, and 64x64, twice the
  // CTAs of 64x128 at M = 64: on an H100 at N = K = 4096, 64x64x64_s10
  // runs M = 64 in 16.5 us and 64x128x64_s8 M = 256 in 19.3 us, against
  // cuBLAS's 16.1 and 20.1 (64x128x64_s6: 20.7 and 21.7; docs/BENCHMARKS.md).
  // The 128-row tiles are persistent: at 4096^3 on an H100 the 128x256
  // tile ran 192.7 us so against 196.9 (128x128: 252.2 against 257.0), the
  // producer filling the next tile's stages during each epilogue.
  auto Persistent = [](GemmTileConfig T) {
    T.Persistent = true;
    return T;
  };
  for (GemmTileConfig T :
       {Persistent(wgmmaTile(128, 256, 64, 4)),
        Persistent(wgmmaTile(128, 128, 64, 6)), wgmmaTile(64, 256, 64, 4),
        wgmmaTile(64, 128, 64, 8), wgmmaTile(64, 64, 64, 10)})
    C.GemmTiles.push_back(T);
  // Merged gate+up tiles hold two accumulators per output element, so they
  // are half as wide as the GEMM tiles for the same registers.
  C.SwiGluTiles = {
      {128, 128, 32, 8, 3}, {128, 64, 64, 8, 3}, {64, 128, 64, 4, 3},
      {64, 64, 64, 4, 4},   {32, 64, 64, 4, 4},  {16, 128, 64, 4, 3},
      {16, 64, 128, 4, 3},
  };
  // And the Hopper (sm_90a) tiles of the wgmma GEMM template with both
  // weights in each stage: BN = 128 gives each consumer thread 128 fp32
  // accumulators (gate and up), what the GEMM's 256-wide tile holds.
  // The persistent one is the GEMM template's 128x256 tile itself, its
  // B stage both weights' 128 columns (one wgmma 256 wide reads A once):
  // on an H200 it ran Llama-3-8B's prefill SwiGLU in 606.6-627.9 us against
  // the split form's 642.4-648.8 and the plain 128x128 tile's 643.5-649.5
  // (it loses to the split at 70B, where select-swiglu keeps the split;
  // docs/CUDA.md).
  for (GemmTileConfig T :
       {wgmmaTile(128, 128, 64, 4), wgmmaTile(128, 64, 64, 6),
        wgmmaTile(64, 128, 64, 5), Persistent(wgmmaTile(128, 128, 64, 4))})
    C.SwiGluTiles.push_back(T);
  // Tall tiles for prefill; 16 rows still cover a decode step's packed
  // query heads (4 per kv head for Llama-3-8B), and split-KV spreads a
  // decode step's few (batch, kv head) tiles over more CTAs.
  // The tensor-core tiles give each warp 16 or 32 rows at prefill (4 or 8
  // warps); a decode step's few rows take a 16-row tile whose 4 warps split
  // each stage of 4 x 32 keys, and split-KV across CTAs (docs/BENCHMARKS.md,
  // 2026-11-26: faster than one warp per CTA at batch 1, 4 and 16).
  auto Mma = [](int BQ, int BKV, int Warps, int Splits = 1) {
    return AttentionTile{BQ, BKV, Warps, Splits, /*Mma=*/true};
  };
  auto Dec = [](int BKV, int Stages, int Splits, bool SwapAB = false) {
    AttentionTile T{16, BKV, 4, Splits};
    T.Stages = Stages;
    T.Dec = true;
    T.SwapAB = SwapAB;
    return T;
  };
  C.AttentionTiles = {{64, 64, 4},
                      {32, 64, 4},
                      {16, 64, 4},
                      {16, 32, 4},
                      {16, 64, 4, 8},
                      {16, 64, 4, 16},
                      {16, 64, 4, 32},
                      Mma(128, 64, 8),
                      Mma(128, 32, 4),
                      Mma(256, 32, 8),
                      Mma(64, 64, 4),
                      Mma(16, 32, 4),
                      Mma(16, 32, 4, 4),
                      Mma(16, 32, 4, 8),
                      Mma(16, 32, 4, 16),
                      // Hopper (sm_90a) prefill tiles: wgmma + TMA.
                      wgAttentionTile(128, 128, 2),
                      wgAttentionTile(128, 64, 3),
                      wgAttentionTile(128, 176, 2),
                      wgAttentionTile(128, 128, 2, /*Overlap=*/true),
                      // Its 64-key stages leave room for the additive
                      // mask's tiles (wgAttentionStagesMask).
                      wgAttentionTile(128, 64, 2, /*Overlap=*/true),
                      // Causal prefill: the CTAs persist across query tiles
                      // (the next tile's loads under this one's end), and
                      // the consumers take turns at the tensor cores.
                      wgAttentionTile(128, 128, 2, /*Overlap=*/true,
                                      /*PingPong=*/false, /*Persistent=*/true),
                      wgAttentionTile(128, 128, 2, /*Overlap=*/true,
                                      /*PingPong=*/true),
                      wgAttentionTile(128, 128, 2, /*Overlap=*/true,
                                      /*PingPong=*/true, /*Persistent=*/true),
                      // Three stages of 128 keys: the most that fits at
                      // D = 128 (225 KB).
                      wgAttentionTile(128, 128, 3, /*Overlap=*/true,
                                      /*PingPong=*/true),
                      wgAttentionTile(128, 128, 3, /*Overlap=*/true,
                                      /*PingPong=*/true, /*Persistent=*/true),
                      // Hopper (sm_90) decode tiles: TMA-fed mma.sync,
                      // the fastest at Llama-3-8B's decode on an H200
                      // (batch 16, 4 and 1 over 4096 keys; docs/
                      // BENCHMARKS.md). Unsplit, 64 KB of stages in flight
                      // (4 x 32 keys) beat 128 KB at batch 16 (65.5 against
                      // 68.0 us, 2026-11-29). The split tiles swap the
                      // MMA's operands (`_sw`) where a kv head's packed
                      // rows fit its 8 columns, else attentionChoices
                      // offers them unswapped: half the MMAs of a stage,
                      // and the short split CTAs of batch 1 and 4 gain
                      // (20.96 against 21.47 us at batch 4, 9.26 against
                      // 9.76 at batch 1); batch 16 did not (memory-bound).
                      Dec(32, 4, 1),
                      Dec(32, 8, 4, /*SwapAB=*/true),
                      Dec(32, 8, 8, /*SwapAB=*/true),
                      Dec(32, 8, 16, /*SwapAB=*/true)};
  C.GemmExterns = {"extern.cublas"};
  // The heuristic's first four: at Megatron's prefill GEMMs its fifth to
  // eighth ran 4-9% slower than cuBLAS (docs/CUDA.md).
  for (int I = 0; I < 4; ++I)
    C.LongGemmExterns.push_back(cublasLtChoiceName(I));
  // `hier` is offered only to groups that span hosts.
  C.AllReduce = {"nccl", "one_shot", "two_shot", "hier"};
  C.AllGather = {"nccl", "p2p", "hier"};
  C.ReduceScatter = {"nccl", "p2p", "hier"};
  C.AllToAll = {"nccl", "p2p"};
  return C;
}

AttentionTile mtsched::wgAttentionTile(int BQ, int BKV, int Stages,
                                       bool Overlap, bool PingPong,
                                       bool Persistent) {
  AttentionTile T{BQ, BKV, 12};
  T.Stages = Stages;
  T.Wg = true;
  T.Overlap = Overlap;
  T.PingPong = PingPong;
  T.Persistent = Persistent;
  return T;
}

std::string mtsched::wgmmaTileProblem(const GemmTileConfig &T) {
  if (T.BK != 64)
    return "the wgmma template needs BK = 64 (one 128-byte swizzled row of "
           "16-bit elements)";
  if (T.BM % 64 || T.BM > 256 || T.BN % 64 || T.BN > 256)
    return "the wgmma template needs BM and BN multiples of 64 up to 256";
  if (T.Stages < 2)
    return "the wgmma template needs at least 2 stages";
  return "";
}

GemmTileConfig mtsched::wgmmaTile(int BM, int BN, int BK, int Stages) {
  GemmTileConfig T{BM, BN, BK, (std::max(BM, 64) / 64 + 1) * 4, Stages};
  T.Template = GemmTemplate::Wgmma;
  return T;
}

/// A wgmma tile's name after its stages and split: _p, _d, _c<CTAs>,
/// _g<rows>.
static std::string wgmmaSuffix(const GemmTileConfig &T) {
  return std::string(T.Persistent ? "_p" : "") + (T.Dynamic ? "_d" : "") +
         (T.Cluster > 1 ? "_c" + std::to_string(T.Cluster) : "") +
         (T.GroupM ? "_g" + std::to_string(T.GroupM) : "");
}

std::string mtsched::gemmChoiceName(const GemmTileConfig &T) {
  std::string Tile = std::to_string(T.BM) + "x" + std::to_string(T.BN) + "x" +
                     std::to_string(T.BK);
  std::string Split =
      T.SplitK > 1 ? "_k" + std::to_string(T.SplitK) : std::string();
  if (T.Template == GemmTemplate::Wgmma)
    return "gemm_wg_" + Tile + "_s" + std::to_string(T.Stages) + Split +
           wgmmaSuffix(T);
  return "gemm_" + Tile + "_w" + std::to_string(T.Warps) + "_s" +
         std::to_string(T.Stages) + Split;
}

std::optional<GemmTileConfig> mtsched::gemmTileOf(const Choice &C) {
  // gemm_<BM>x<BN>x<BK>_w<warps>_s<stages> or gemm_wg_<BM>x<BN>x<BK>_s<stages>,
  // either with an optional split-K suffix _k<splits>, 2 or more; a wgmma
  // tile ends in _p when persistent, then _d when dynamic, _c<CTAs> when
  // clustered and _g<rows> with its own raster group.
  llvm::StringRef S(C.Name);
  GemmTileConfig T;
  int Cluster = 1, GroupM = 0;
  // The number after a wgmma name's last `_<Tag>`, consumed, or 0.
  auto TagNumber = [&](llvm::StringRef Tag, int Min) -> std::optional<int> {
    if (!S.starts_with("gemm_wg_"))
      return 0;
    llvm::StringRef Last = S.substr(S.rfind('_'));
    int V = 0;
    if (!Last.consume_front(("_" + Tag).str()))
      return 0;
    if (Last.getAsInteger(10, V) || V < Min)
      return std::nullopt;
    S = S.drop_back(Last.size() + 1 + Tag.size());
    return V;
  };
  std::optional<int> G = TagNumber("g", 1);
  std::optional<int> Cl = G ? TagNumber("c", 2) : std::nullopt;
  if (!G || !Cl)
    return std::nullopt;
  GroupM = *G;
  Cluster = std::max(1, *Cl);
  bool Dynamic = S.starts_with("gemm_wg_") && S.consume_back("_d");
  bool Persistent = S.starts_with("gemm_wg_") && S.consume_back("_p");
  if ((Cluster > 1 || Dynamic || GroupM) && !Persistent)
    return std::nullopt;
  if (Dynamic && Cluster > 1)
    return std::nullopt;
  auto Int = [&](int &Out, char Sep) {
    size_t End = Sep ? S.find(Sep) : S.size();
    if (End == llvm::StringRef::npos ||
        S.substr(0, End).getAsInteger(10, Out) || Out <= 0)
      return false;
    S = S.drop_front(std::min(S.size(), End + 1));
    return true;
  };
  if (!S.consume_front("gemm_"))
    return std::nullopt;
  bool Wgmma = S.consume_front("wg_");
  if (!Int(T.BM, 'x') || !Int(T.BN, 'x') || !Int(T.BK, '_') ||
      (!Wgmma && (!S.consume_front("w") || !Int(T.Warps, '_'))) ||
      !S.consume_front("s"))
    return std::nullopt;
  size_t Split = S.find("_k");
  llvm::StringRef Stages = S.substr(0, Split);
  if (Stages.getAsInteger(10, T.Stages) || T.Stages <= 0)
    return std::nullopt;
  if (Split != llvm::StringRef::npos &&
      (S.substr(Split + 2).getAsInteger(10, T.SplitK) || T.SplitK < 2))
    return std::nullopt;
  if (Wgmma) {
    int SplitK = T.SplitK;
    T = wgmmaTile(T.BM, T.BN, T.BK, T.Stages);
    T.SplitK = SplitK;
    T.Persistent = Persistent;
    T.Cluster = Cluster;
    T.Dynamic = Dynamic;
    T.GroupM = GroupM;
  }
  return T;
}

std::string mtsched::swigluChoiceName(const GemmTileConfig &T) {
  if (T.Template == GemmTemplate::Wgmma)
    return "swiglu_wg_" + std::to_string(T.BM) + "x" + std::to_string(T.BN) +
           "x" + std::to_string(T.BK) + "_s" + std::to_string(T.Stages) +
           wgmmaSuffix(T);
  return "swiglu_" + std::to_string(T.BM) + "x" + std::to_string(T.BN) + "x" +
         std::to_string(T.BK) + "_w" + std::to_string(T.Warps) + "_s" +
         std::to_string(T.Stages);
}

std::optional<GemmTileConfig> mtsched::swigluTileOf(const Choice &C) {
  // swiglu_<BM>x<BN>x<BK>_w<warps>_s<stages> or swiglu_wg_<BM>x<BN>x<BK>_s<
  // stages>, then _p when persistent, _d, _c2 and _g<rows> as a GEMM's:
  // the GEMM spelling after its prefix. No merged tile splits K.
  llvm::StringRef S(C.Name);
  if (!S.consume_front("swiglu_"))
    return std::nullopt;
  Choice AsGemm{("gemm_" + S).str(), {}, {}};
  std::optional<GemmTileConfig> T = gemmTileOf(AsGemm);
  if (!T || (T->Template == GemmTemplate::Wgmma && T->SplitK > 1))
    return std::nullopt;
  return T;
}

static int64_t roundUpPow2(int64_t V) {
  return std::max<int64_t>(16, llvm::PowerOf2Ceil(uint64_t(V)));
}

std::vector<Choice> ChoiceConfig::gemmChoices(int64_t M, int64_t N, int64_t K,
                                              DType Dtype) const {
  std::vector<Choice> Out;
  auto Add = [&](const GemmTileConfig &T) {
    Choice C;
    // The name encodes the whole tile, so no parameters are needed.
    C.Name = gemmChoiceName(T);
    if (Disabled.count(C.Name))
      return;
    for (const Choice &Prev : Out)
      if (Prev.Name == C.Name)
        return;
    Out.push_back(std::move(C));
  };
  bool WgmmaFits =
      (Dtype == DType::BF16 || Dtype == DType::F16) && K % 8 == 0 && N % 8 == 0;
  // fp8 operands run on the mma.sync template only (widened to f16 in
  // shared memory): wgmma and cuBLAS want both fp8 operands K-major, and
  // matmul's right operand is N-major.
  bool Fp8 = isFp8DType(Dtype);
  // A tile larger than the (power-of-two rounded) problem only wastes work.
  bool TensorCores = Dtype == DType::BF16 || Dtype == DType::F16 || Fp8;
  for (const GemmTileConfig &T : GemmTiles) {
    if (T.SplitK > 1) {
      // Split-K pays an fp32 round trip of the partials: only where the
      // unsplit grid leaves SMs idle and each split keeps two k-tiles.
      int64_t Tiles = llvm::divideCeil(M, T.BM) * llvm::divideCeil(N, T.BN);
      if (!TensorCores || Tiles >= SplitKBelowTiles ||
          K < int64_t(2) * T.BK * T.SplitK)
        continue;
    }
    // wgmma's 64-row tiles are not offered below M = 64 either: at
    // 16 x 4096 x 4096 on an H100 the best ran 17.6 us against the mma.sync
    // split-K tile's 17.1 (docs/BENCHMARKS.md, 2026-11-26), so they would
    // only lengthen decode tuning.
    if (T.BM <= roundUpPow2(M) && T.BN <= roundUpPow2(N) &&
        T.BK <= roundUpPow2(K) &&
        (T.Template != GemmTemplate::Wgmma || WgmmaFits))
      Add(T);
  }
  if (Out.empty()) {
    // Keep the smallest mma.sync tile so tiny problems still have a template
    // that runs anywhere.
    const GemmTileConfig *Smallest = nullptr;
    for (const GemmTileConfig &T : GemmTiles)
      if (T.Template == GemmTemplate::MmaSync && T.SplitK == 1 &&
          (!Smallest || int64_t(T.BM) * T.BN * T.BK < int64_t(Smallest->BM) *
                                                          Smallest->BN *
                                                          Smallest->BK))
        Smallest = &T;
    if (Smallest)
      Add(*Smallest);
  }
  auto AddExterns = [&](const std::vector<std::string> &List) {
    for (const std::string &E : List)
      if (!Disabled.count(E) && !Fp8)
        Out.push_back(Choice{E, {}, {}});
  };
  AddExterns(GemmExterns);
  if (2.0 * double(M) * double(N) * double(K) >= LongGemmMinFlops)
    AddExterns(LongGemmExterns);
  return Out;
}

std::vector<Choice> ChoiceConfig::swigluChoices(int64_t M, int64_t N, int64_t K,
                                                DType Dtype,
                                                bool BatchedWeights) const {
  std::vector<Choice> Out;
  if (Dtype != DType::BF16 && Dtype != DType::F16)
    return Out;
  // The wgmma tiles' TMA rows are multiples of 16 bytes.
  bool WgmmaFits = K % 8 == 0 && N % 8 == 0;
  for (const GemmTileConfig &T : SwiGluTiles) {
    Choice C{swigluChoiceName(T), {}, {}};
    if (Disabled.count(C.Name) || T.BM > roundUpPow2(M) ||
        T.BN > roundUpPow2(N) || T.BK > roundUpPow2(K) ||
        (T.Template == GemmTemplate::Wgmma && !WgmmaFits) ||
        (T.Template != GemmTemplate::Wgmma && BatchedWeights))
      continue;
    if (llvm::none_of(Out, [&](const Choice &P) { return P.Name == C.Name; }))
      Out.push_back(std::move(C));
  }
  // A tiny problem keeps the smallest mma.sync tile (one that runs
  // anywhere), as GEMMs do.
  const GemmTileConfig *Smallest = nullptr;
  for (const GemmTileConfig &T : SwiGluTiles)
    if (!Disabled.count(swigluChoiceName(T)) &&
        T.Template == GemmTemplate::MmaSync &&
        (!Smallest || int64_t(T.BM) * T.BN * T.BK <
                          int64_t(Smallest->BM) * Smallest->BN * Smallest->BK))
      Smallest = &T;
  if (Out.empty() && Smallest && !BatchedWeights)
    Out.push_back(Choice{swigluChoiceName(*Smallest), {}, {}});
  return Out;
}

std::string mtsched::attentionChoiceName(const AttentionTile &T) {
  if (T.Wg)
    return "attn_wg_" + std::to_string(T.BQ) + "x" + std::to_string(T.BKV) +
           "_s" + std::to_string(T.Stages) + (T.Overlap ? "_o" : "") +
           (T.PingPong ? "_pp" : "") + (T.Persistent ? "_p" : "");
  if (T.Dec)
    return "attn_dec_" + std::to_string(T.BQ) + "x" + std::to_string(T.BKV) +
           "_w" + std::to_string(T.Warps) + "_s" + std::to_string(T.Stages) +
           (T.Splits > 1 ? "_kv" + std::to_string(T.Splits) : "") +
           (T.Cluster ? "_c" : "") +
           (T.Prefetch > 0 ? "_pf" + std::to_string(T.Prefetch) : "") +
           (T.EvictFirst ? "_ef" : "") + (T.Stagger ? "_r" : "") +
           (T.Tail ? "_t" : "") + (T.OneBox ? "_ob" : "") +
           (T.SwapAB ? "_sw" : "") +
           (T.Persistent ? (T.WarpPartials ? "_pw"
                            : T.Steal      ? "_ps"
                                           : "_p")
                         : "");
  return (T.Mma ? "attn_mma_" : "attn_flash_") + std::to_string(T.BQ) + "x" +
         std::to_string(T.BKV) + "_w" + std::to_string(T.Warps) +
         (T.Stages != 2 ? "_s" + std::to_string(T.Stages) : "") +
         (T.Splits > 1 ? "_kv" + std::to_string(T.Splits) : "");
}

bool mtsched::decTileOptionsValid(const AttentionTile &T) {
  return T.Dec && (!T.Cluster || (T.Splits >= 2 && T.Splits <= 8)) &&
         (!T.Persistent || (T.Splits == 1 && !T.Cluster && !T.Stagger)) &&
         (!T.WarpPartials || (T.Persistent && !T.Prefetch)) &&
         (!T.Steal || (T.Persistent && !T.WarpPartials && !T.Prefetch)) &&
         (!T.Tail || (T.Splits == 1 && !T.Persistent && !T.Prefetch &&
                      T.Stages % 2 == 0 && (T.Stages / 2) % T.Warps == 0)) &&
         (!T.OneBox || (!T.Persistent && !T.Prefetch)) &&
         (!T.SwapAB || !T.Persistent);
}

AttentionTile mtsched::offeredAttentionTile(AttentionTile T,
                                            int64_t PackedRows) {
  if (T.Dec && T.SwapAB && PackedRows > 8)
    T.SwapAB = false;
  return T;
}

std::optional<AttentionTile> mtsched::attentionTileOf(const Choice &C) {
  llvm::StringRef S(C.Name);
  AttentionTile T;
  if (S.consume_front("attn_wg_")) {
    auto [BQ, Rest] = S.split('x');
    auto [BKV, StagesAndFlags] = Rest.split("_s");
    // The stages, then the flags `_o`, `_pp`, `_p` (the round trip below
    // takes each once, in that order).
    auto [Stages, Flags] = StagesAndFlags.split('_');
    T = wgAttentionTile(0, 0, 0);
    llvm::SmallVector<llvm::StringRef, 3> Fl;
    if (!Flags.empty())
      Flags.split(Fl, '_');
    for (llvm::StringRef F : Fl) {
      if (F == "o")
        T.Overlap = true;
      else if (F == "pp")
        T.PingPong = true;
      else if (F == "p")
        T.Persistent = true;
      else
        return std::nullopt;
    }
    if (BQ.getAsInteger(10, T.BQ) || BKV.getAsInteger(10, T.BKV) ||
        Stages.getAsInteger(10, T.Stages) || T.BQ <= 0 || T.BKV <= 0 ||
        T.Stages <= 0 || attentionChoiceName(T) != C.Name)
      return std::nullopt;
    return T;
  }
  T.Dec = S.consume_front("attn_dec_");
  T.Mma = !T.Dec && S.consume_front("attn_mma_");
  if (!T.Dec && !T.Mma && !S.consume_front("attn_flash_"))
    return std::nullopt;
  // The decode flags, last first (the round trip below keeps their order).
  T.WarpPartials = T.Dec && S.consume_back("_pw");
  T.Steal = T.Dec && !T.WarpPartials && S.consume_back("_ps");
  T.Persistent = T.WarpPartials || T.Steal || (T.Dec && S.consume_back("_p"));
  T.SwapAB = T.Dec && S.consume_back("_sw");
  T.OneBox = T.Dec && S.consume_back("_ob");
  T.Tail = T.Dec && S.consume_back("_t");
  T.Stagger = T.Dec && S.consume_back("_r");
  T.EvictFirst = T.Dec && S.consume_back("_ef");
  if (size_t Pf = S.rfind("_pf"); T.Dec && Pf != llvm::StringRef::npos) {
    if (S.substr(Pf + 3).getAsInteger(10, T.Prefetch) || T.Prefetch <= 0)
      return std::nullopt;
    S = S.take_front(Pf);
  }
  T.Cluster = T.Dec && S.consume_back("_c");
  auto [BQ, Rest] = S.split('x');
  auto [BKV, WS] = Rest.split("_w");
  auto [WSt, Splits] = WS.split("_kv");
  auto [W, Stages] = WSt.split("_s");
  if (BQ.getAsInteger(10, T.BQ) || BKV.getAsInteger(10, T.BKV) ||
      W.getAsInteger(10, T.Warps) ||
      (!Splits.empty() && Splits.getAsInteger(10, T.Splits)) ||
      (!Stages.empty() && Stages.getAsInteger(10, T.Stages)) || T.BQ <= 0 ||
      T.BKV <= 0 || T.Warps <= 0 || T.Splits <= 0 || T.Stages <= 0)
    return std::nullopt;
  // Only the tensor-core template pipelines its k and v tiles.
  if (!T.Mma && !T.Dec && T.Stages != 2)
    return std::nullopt;
  // Only what the name round-trips to, so `attn_flash_064x64_w4` is no tile.
  if (attentionChoiceName(T) != C.Name)
    return std::nullopt;
  return T;
}

std::vector<Choice>
ChoiceConfig::attentionChoices(const AttentionShape &S) const {
  int64_t PackedRows = S.group() * S.Sq, D = S.D;
  std::vector<Choice> Out;
  auto Add = [&](const std::string &Name) {
    if (Disabled.count(Name) ||
        llvm::any_of(Out, [&](const Choice &P) { return P.Name == Name; }))
      return;
    Out.push_back(Choice{Name, {}, {}});
  };
  auto Fits = [&](const AttentionTile &T) {
    if (T.Wg)
      return wgAttentionSupports(S, T.BQ, T.BKV, T.Stages);
    // The decode template keeps its 16 rows per kv head: decode steps
    // only (a few queries of the query heads sharing a kv head); `_sw`
    // takes them as the MMA's 8 columns.
    if (T.Dec)
      return PackedRows <= (T.SwapAB ? 8 : T.BQ) &&
             decAttentionSupports(S, T.BQ, T.BKV, T.Warps, T.Stages,
                                  T.Persistent) &&
             decTileOptionsValid(T);
    if (T.Mma)
      return mmaAttentionSupports(S, T.BQ, T.BKV, T.Warps, T.Stages) &&
             mmaAttentionSharedBytes(T.BQ, T.BKV, T.Warps, D, T.Stages) <=
                 FlashAttentionMaxSharedBytes;
    return flashAttentionSharedBytes(T.BQ, T.BKV, D) <=
           FlashAttentionMaxSharedBytes;
  };
  for (const AttentionTile &Listed : AttentionTiles) {
    // (Add keeps a name once: a tile and its unswapped twin give one.)
    AttentionTile T = offeredAttentionTile(Listed, PackedRows);
    // Every split gets at least two stages of keys.
    int64_t StageKeys =
        int64_t(T.BKV) * (T.Mma ? mmaAttentionKeyWarps(T.BQ, T.Warps) : 1);
    // The decode template's warps take whole stages each (a split of few
    // stages leaves some idle: still the fastest at batch 1 if it is).
    if (T.Dec)
      StageKeys = T.BKV;
    bool SplitFits = T.Splits == 1 ||
                     (PackedRows <= T.BQ && S.Skv >= 2 * StageKeys * T.Splits);
    if (T.BQ <= roundUpPow2(PackedRows) && Fits(T) && SplitFits)
      Add(attentionChoiceName(T));
  }
  if (Out.empty()) {
    // A tiny problem keeps the shortest tile, as GEMMs keep their smallest.
    const AttentionTile *Smallest = nullptr;
    for (const AttentionTile &T : AttentionTiles)
      if (!Disabled.count(attentionChoiceName(T)) && Fits(T) && T.Splits == 1 &&
          !T.Wg && !T.Dec &&
          (!Smallest || T.BQ * T.BKV < Smallest->BQ * Smallest->BKV))
        Smallest = &T;
    if (Smallest)
      Add(attentionChoiceName(*Smallest));
  }
  Add(AttentionMathChoice.str());
  return Out;
}

namespace {

const std::vector<std::string> *collectiveList(const ChoiceConfig &C,
                                               CollectiveKind K) {
  switch (K) {
  case CollectiveKind::AllReduce:
    return &C.AllReduce;
  case CollectiveKind::AllGather:
    return &C.AllGather;
  case CollectiveKind::ReduceScatter:
    return &C.ReduceScatter;
  case CollectiveKind::AllToAll:
    return &C.AllToAll;
  default:
    return nullptr;
  }
}

bool hierSupports(CollectiveKind K) {
  return K == CollectiveKind::AllReduce || K == CollectiveKind::AllGather ||
         K == CollectiveKind::ReduceScatter;
}

} // namespace

bool mtsched::isPeerMemoryChoice(llvm::StringRef Name) {
  return Name == "one_shot" || Name == "two_shot" || Name == "p2p";
}

std::vector<Choice> ChoiceConfig::collectiveChoices(CollectiveKind K) const {
  return collectiveChoices(K, {});
}

std::vector<Choice>
ChoiceConfig::collectiveChoices(CollectiveKind K,
                                llvm::ArrayRef<int64_t> GroupRanks) const {
  const std::vector<std::string> *Names = collectiveList(*this, K);
  if (!Names)
    return {};
  Topology::Span S;
  if (!GroupRanks.empty())
    S = Topo.spanOf(GroupRanks);
  std::vector<Choice> Out;
  for (const std::string &N : *Names) {
    if (Disabled.count(N))
      continue;
    if (isPeerMemoryChoice(N) && S.Domains > 1)
      continue;
    if (N == HierChoice && (S.Hosts < 2 || !hierSupports(K)))
      continue;
    // Across hosts the cost model needs the group's shape (NCCL's ring runs
    // at the network's speed, `hier` steps inside and across hosts); the IR
    // carries it, so a printed module times the same when read back.
    AttrDict P;
    if (S.Hosts > 1 && (N == HierChoice || N == "nccl")) {
      P.set("hosts", Attribute::getInt(S.Hosts));
      P.set("per_host", Attribute::getInt(S.MaxPerHost));
    }
    Out.push_back(Choice{N, std::move(P), {}});
  }
  return Out;
}

std::string
ChoiceConfig::removedByTopology(CollectiveKind K, llvm::StringRef Group,
                                llvm::ArrayRef<int64_t> GroupRanks) const {
  const std::vector<std::string> *Names = collectiveList(*this, K);
  if (!Names || GroupRanks.empty())
    return "";
  Topology::Span S = Topo.spanOf(GroupRanks);
  if (S.Domains < 2)
    return "";
  std::vector<llvm::StringRef> Removed;
  for (const std::string &N : *Names)
    if (!Disabled.count(N) && isPeerMemoryChoice(N))
      Removed.push_back(N);
  if (Removed.empty())
    return "";
  std::string Where = S.Hosts > 1
                          ? std::to_string(S.Hosts) + " hosts"
                          : std::to_string(S.Domains) + " NVLink domains";
  return llvm::join(Removed, ", ") + ": group @" + Group.str() + " spans " +
         Where + " (peer memory needs one NVLink domain)";
}

bool ChoiceConfig::offers(llvm::StringRef Name) const {
  // An op unit's choices (conv2d's tiles, extern.cudnn) are its own file's.
  if (Name == AttentionMathChoice || opUnitOffersChoice(Name))
    return true;
  auto In = [&](const std::vector<std::string> &Names) {
    return llvm::is_contained(Names, Name);
  };
  if (In(GemmExterns) || In(AllReduce) || In(AllGather) || In(ReduceScatter) ||
      In(AllToAll))
    return true;
  return llvm::any_of(GemmTiles,
                      [&](const GemmTileConfig &T) {
                        return gemmChoiceName(T) == Name;
                      }) ||
         llvm::any_of(SwiGluTiles,
                      [&](const GemmTileConfig &T) {
                        return swigluChoiceName(T) == Name;
                      }) ||
         llvm::any_of(AttentionTiles, [&](const AttentionTile &T) {
           return attentionChoiceName(T) == Name;
         });
}
