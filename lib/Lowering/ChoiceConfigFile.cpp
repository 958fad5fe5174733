//===- ChoiceConfigFile.cpp - Reading a choices file ----------------------===//
//
// ChoiceConfig::loadFile: a JSON choices file (docs/PASSES.md,
// `--choices-file`) replaces the default tile and collective lists, every
// entry checked, every error naming the file. ChoiceConfig.cpp holds the
// defaults and the choices each node gets from them.
//
//===----------------------------------------------------------------------===//
#include "mtsched/IR/Attention.h"
#include "mtsched/Lowering/ChoiceConfig.h"
#include "mtsched/Lowering/CublasLtChoice.h"
#include "mtsched/Support/FileIO.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mtsched;

static llvm::Error fileError(llvm::StringRef Path, const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 Path + ": " + Msg);
}

static llvm::Error readNames(const llvm::json::Object &Root,
                             llvm::StringRef Key, llvm::StringRef Path,
                             std::vector<std::string> &Out) {
  const llvm::json::Value *V = Root.get(Key);
  if (!V)
    return llvm::Error::success();
  const llvm::json::Array *A = V->getAsArray();
  if (!A)
    return fileError(Path, "'" + Key + "' must be a list of choice names");
  Out.clear();
  for (const llvm::json::Value &E : *A) {
    std::optional<llvm::StringRef> S = E.getAsString();
    if (!S || S->empty())
      return fileError(Path, "'" + Key + "' must be a list of choice names");
    Out.push_back(S->str());
  }
  return llvm::Error::success();
}

/// One entry of "gemm_tiles".
static llvm::Expected<GemmTileConfig> parseGemmTile(const llvm::json::Object *O,
                                                    llvm::StringRef Path) {
  if (!O)
    return fileError(Path, "'gemm_tiles' must be a list of objects");
  GemmTileConfig T;
  // A wgmma tile derives its warps from BM, so it names no "warps".
  bool Wgmma = false;
  if (const llvm::json::Value *Tmpl = O->get("template")) {
    std::optional<llvm::StringRef> Name = Tmpl->getAsString();
    if (!Name || (*Name != "wgmma" && *Name != "mma"))
      return fileError(Path, "gemm tile field 'template' must be \"mma\" or "
                             "\"wgmma\"");
    Wgmma = *Name == "wgmma";
  }
  std::pair<const char *, int *> Fields[] = {{"bm", &T.BM},
                                             {"bn", &T.BN},
                                             {"bk", &T.BK},
                                             {"warps", &T.Warps},
                                             {"stages", &T.Stages}};
  for (auto &F : Fields) {
    if (Wgmma && llvm::StringRef(F.first) == "warps") {
      if (O->get("warps"))
        return fileError(Path, "a wgmma gemm tile takes no 'warps' (one "
                               "consumer warpgroup per 64 rows)");
      continue;
    }
    std::optional<int64_t> V = O->getInteger(F.first);
    if (!V || *V <= 0 || *V > 1024)
      return fileError(Path, "gemm tile field '" + llvm::Twine(F.first) +
                                 "' must be an integer in [1, 1024]");
    *F.second = int(*V);
  }
  if (const llvm::json::Value *Split = O->get("split_k")) {
    std::optional<int64_t> V = Split->getAsInteger();
    if (!V || *V < 1 || *V > 64)
      return fileError(Path, "gemm tile field 'split_k' must be an "
                             "integer in [1, 64]");
    T.SplitK = int(*V);
  }
  bool Persistent = false;
  if (const llvm::json::Value *P = O->get("persistent")) {
    std::optional<bool> V = P->getAsBoolean();
    if (!V)
      return fileError(Path, "gemm tile field 'persistent' must be true "
                             "or false");
    if (*V && (!Wgmma || T.SplitK > 1))
      return fileError(Path, "only a wgmma gemm tile without split_k can "
                             "be 'persistent'");
    Persistent = *V;
  }
  int Cluster = 1;
  if (const llvm::json::Value *C = O->get("cluster")) {
    std::optional<int64_t> V = C->getAsInteger();
    if (!V || (*V != 1 && *V != 2))
      return fileError(Path, "gemm tile field 'cluster' must be 1 or 2");
    if (*V > 1 && !Persistent)
      return fileError(Path, "only a 'persistent' wgmma gemm tile can "
                             "have a 'cluster' of 2");
    Cluster = int(*V);
  }
  bool Dynamic = false;
  if (const llvm::json::Value *D = O->get("dynamic")) {
    std::optional<bool> V = D->getAsBoolean();
    if (!V || (*V && (!Persistent || Cluster > 1)))
      return fileError(Path, "gemm tile field 'dynamic' must be true or "
                             "false, and true only for a 'persistent' tile "
                             "without a 'cluster'");
    Dynamic = *V;
  }
  int GroupM = 0;
  if (const llvm::json::Value *G = O->get("group_m")) {
    std::optional<int64_t> V = G->getAsInteger();
    if (!V || *V < 1 || *V > 64 || !Persistent)
      return fileError(Path, "gemm tile field 'group_m' must be an integer "
                             "in [1, 64], and only for a 'persistent' tile");
    GroupM = int(*V);
  }
  if (Wgmma) {
    // A shape the template cannot run is the file's error, not a choice
    // that fails when it is benchmarked.
    if (std::string Problem = wgmmaTileProblem(T); !Problem.empty())
      return fileError(Path, "gemm tile bm " + llvm::Twine(T.BM) + ", bn " +
                                 llvm::Twine(T.BN) + ", bk " +
                                 llvm::Twine(T.BK) + ": " + Problem);
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

/// An attention tile's decode-only options ("decode" already read).
static llvm::Error parseDecodeOptions(const llvm::json::Object *O,
                                      llvm::StringRef Path, AttentionTile &T) {
  // "prefetch" (tiles ahead), "evict_first", "stagger", "warp_partials",
  // "steal", "tail_depth", "one_box" and "swap_ab" are optional (0 or
  // false), decode tiles only.
  if (const llvm::json::Value *Pf = O->get("prefetch")) {
    std::optional<int64_t> V = Pf->getAsInteger();
    if (!V || *V < 0 || *V > 64 || (*V && !T.Dec))
      return fileError(Path, "attention tile field 'prefetch' must be an "
                             "integer in [0, 64], and not 0 only with "
                             "\"decode\": true");
    T.Prefetch = int(*V);
  }
  if (const llvm::json::Value *Ef = O->get("evict_first")) {
    std::optional<bool> B = Ef->getAsBoolean();
    if (!B || (*B && !T.Dec))
      return fileError(Path, "attention tile field 'evict_first' must be "
                             "true or false, and true only with "
                             "\"decode\": true");
    T.EvictFirst = *B;
  }
  if (const llvm::json::Value *St = O->get("stagger")) {
    std::optional<bool> B = St->getAsBoolean();
    if (!B || (*B && !T.Dec))
      return fileError(Path, "attention tile field 'stagger' must be true "
                             "or false, and true only with \"decode\": true");
    T.Stagger = *B;
  }
  if (const llvm::json::Value *Wp = O->get("warp_partials")) {
    std::optional<bool> B = Wp->getAsBoolean();
    if (!B || (*B && !(T.Dec && T.Persistent)))
      return fileError(Path, "attention tile field 'warp_partials' must be "
                             "true or false, and true only with "
                             "\"decode\": true and \"persistent\": true");
    T.WarpPartials = *B;
  }
  if (const llvm::json::Value *St = O->get("steal")) {
    std::optional<bool> B = St->getAsBoolean();
    if (!B || (*B && !(T.Dec && T.Persistent)))
      return fileError(Path, "attention tile field 'steal' must be true or "
                             "false, and true only with \"decode\": true and "
                             "\"persistent\": true");
    T.Steal = *B;
  }
  if (const llvm::json::Value *Td = O->get("tail_depth")) {
    std::optional<bool> B = Td->getAsBoolean();
    if (!B || (*B && !T.Dec))
      return fileError(Path, "attention tile field 'tail_depth' must be "
                             "true or false, and true only with \"decode\": "
                             "true");
    T.Tail = *B;
  }
  if (const llvm::json::Value *Ob = O->get("one_box")) {
    std::optional<bool> B = Ob->getAsBoolean();
    if (!B || (*B && !T.Dec))
      return fileError(Path, "attention tile field 'one_box' must be true "
                             "or false, and true only with \"decode\": true");
    T.OneBox = *B;
  }
  if (const llvm::json::Value *Sw = O->get("swap_ab")) {
    std::optional<bool> B = Sw->getAsBoolean();
    if (!B || (*B && !T.Dec))
      return fileError(Path, "attention tile field 'swap_ab' must be true "
                             "or false, and true only with \"decode\": true");
    T.SwapAB = *B;
  }
  return llvm::Error::success();
}

/// One entry of "attention_tiles".
static llvm::Expected<AttentionTile>
parseAttentionTile(const llvm::json::Object *O, llvm::StringRef Path) {
  if (!O)
    return fileError(Path, "'attention_tiles' must be a list of objects");
  AttentionTile T{0, 0, 0};
  // "mma" is optional: false, the CUDA-core template.
  if (const llvm::json::Value *Mma = O->get("mma")) {
    std::optional<bool> B = Mma->getAsBoolean();
    if (!B)
      return fileError(Path, "attention tile field 'mma' must be true or "
                             "false");
    T.Mma = *B;
  }
  // "wgmma" is optional: true, the Hopper template (bq 128, no warps or
  // splits: they follow from it).
  if (const llvm::json::Value *Wg = O->get("wgmma")) {
    std::optional<bool> B = Wg->getAsBoolean();
    if (!B)
      return fileError(Path, "attention tile field 'wgmma' must be true or "
                             "false");
    T.Wg = *B;
    if (T.Wg && T.Mma)
      return fileError(Path, "attention tile fields 'wgmma' and 'mma' "
                             "exclude each other");
  }
  // "decode" is optional: true, the Hopper decode template (a TMA
  // producer warp, "warps" consumer warps, bq 16).
  if (const llvm::json::Value *Dec = O->get("decode")) {
    std::optional<bool> B = Dec->getAsBoolean();
    if (!B)
      return fileError(Path, "attention tile field 'decode' must be true or "
                             "false");
    T.Dec = *B;
    if (T.Dec && (T.Mma || T.Wg))
      return fileError(Path, "attention tile field 'decode' excludes 'mma' "
                             "and 'wgmma'");
  }
  // "cluster" is optional: true (decode tiles of 2 to 8 splits only) makes
  // a tile's splits a thread block cluster.
  if (const llvm::json::Value *Cl = O->get("cluster")) {
    std::optional<bool> B = Cl->getAsBoolean();
    if (!B || (*B && !T.Dec))
      return fileError(Path, "attention tile field 'cluster' must be true "
                             "or false, and true only with \"decode\": "
                             "true");
    T.Cluster = *B;
  }
  // "overlap" is optional: false; true (wgmma tiles only) overlaps a
  // tile's softmax with the previous tile's p v.
  if (const llvm::json::Value *Ov = O->get("overlap")) {
    std::optional<bool> B = Ov->getAsBoolean();
    if (!B || (*B && !T.Wg))
      return fileError(Path, "attention tile field 'overlap' must be true "
                             "or false, and true only with \"wgmma\": "
                             "true");
    T.Overlap = *B;
  }
  // "pingpong" (overlap tiles only) and "persistent" (wgmma and decode
  // tiles only) are optional: false.
  for (auto [Key, Flag] : {std::pair{"pingpong", &T.PingPong},
                           std::pair{"persistent", &T.Persistent}}) {
    const llvm::json::Value *V = O->get(Key);
    if (!V)
      continue;
    std::optional<bool> B = V->getAsBoolean();
    bool Needs = llvm::StringRef(Key) == "pingpong" ? T.Overlap : T.Wg || T.Dec;
    if (!B || (*B && !Needs))
      return fileError(Path, "attention tile field '" + llvm::Twine(Key) +
                                 "' must be true or false, and true only " +
                                 (llvm::StringRef(Key) == "pingpong"
                                      ? "with \"overlap\": true"
                                      : "with \"wgmma\" or \"decode\": "
                                        "true"));
    *Flag = *B;
  }
  if (llvm::Error E = parseDecodeOptions(O, Path, T))
    return std::move(E);
  // "stages" is optional: 2 (a double buffer), tensor-core tiles only.
  if (const llvm::json::Value *St = O->get("stages")) {
    std::optional<int64_t> V = St->getAsInteger();
    if (!V || *V < 2 || *V > 8)
      return fileError(Path, "attention tile field 'stages' must be an "
                             "integer in [2, 8]");
    if (!T.Mma && !T.Wg && !T.Dec)
      return fileError(Path, "attention tile field 'stages' needs "
                             "\"mma\": true (only the tensor-core tiles "
                             "pipeline their keys)");
    T.Stages = int(*V);
  }
  // "splits" is optional: 1, no split-KV.
  std::pair<const char *, int *> Fields[] = {{"bq", &T.BQ},
                                             {"bkv", &T.BKV},
                                             {"warps", &T.Warps},
                                             {"splits", &T.Splits}};
  for (auto &F : Fields) {
    if (llvm::StringRef(F.first) == "splits" && !O->get("splits"))
      continue;
    if (T.Wg && llvm::StringRef(F.first) == "warps" && !O->get("warps")) {
      T.Warps = 12;
      continue;
    }
    std::optional<int64_t> V = O->getInteger(F.first);
    if (!V || *V <= 0 || *V > 1024)
      return fileError(Path, "attention tile field '" + llvm::Twine(F.first) +
                                 "' must be an integer in [1, 1024]");
    *F.second = int(*V);
  }
  if (T.Wg && (T.Warps != 12 || T.Splits != 1 ||
               !wgAttentionTileValid(T.BQ, T.BKV, T.Stages)))
    return fileError(Path, "attention tile '" + attentionChoiceName(T) +
                               "' cannot run on the wgmma template: bq "
                               "128, bkv a multiple of 16 from 16 to 192, "
                               "2 to 4 stages, 12 warps and no splits");
  if (T.Dec && (!decAttentionTileValid(T.BQ, T.BKV, T.Warps, T.Stages) ||
                !decTileOptionsValid(T)))
    return fileError(Path, "attention tile '" + attentionChoiceName(T) +
                               "' cannot run on the decode template: bq 16, "
                               "bkv a multiple of 16 up to 128, 1 to 8 "
                               "warps, 2 to 8 stages (a multiple of the "
                               "warps), 2 to 8 splits in a cluster, no "
                               "splits when persistent, nor a stagger, no "
                               "prefetch with warp partials or stealing, "
                               "not both of them, a tail depth "
                               "only unsplit, not persistent, without "
                               "prefetch and with half the stages a "
                               "multiple of the warps, one box not "
                               "persistent and without prefetch, swapped "
                               "operands not persistent");
  if (T.Mma && !mmaAttentionTileValid(T.BQ, T.BKV, T.Warps, T.Stages))
    return fileError(Path, "attention tile '" + attentionChoiceName(T) +
                               "' cannot run on the tensor cores: BQ "
                               "must be 16 or 32 times the warps (or 16 "
                               "with 2, 4 or 8 warps), BKV a multiple of "
                               "16 up to 128");
  return T;
}

llvm::Error ChoiceConfig::loadFile(llvm::StringRef Path) {
  auto BufOrErr = readBoundedFile(Path, MaxConfigFileBytes, "a --choices-file");
  if (!BufOrErr)
    return fileError(Path, "cannot read choices file: " +
                               llvm::toString(BufOrErr.takeError()));
  llvm::Expected<llvm::json::Value> Json =
      llvm::json::parse((*BufOrErr)->getBuffer());
  if (!Json)
    return fileError(Path, "invalid JSON: " + toString(Json.takeError()));
  const llvm::json::Object *Root = Json->getAsObject();
  if (!Root)
    return fileError(Path, "expected a JSON object at the top level");
  static const llvm::StringRef Known[] = {
      "gemm_tiles", "gemm_externs",       "attention_tiles", "swiglu_tiles",
      "all_reduce", "all_gather",         "reduce_scatter",  "all_to_all",
      "disabled",   "split_k_below_tiles"};
  for (const auto &KV : *Root)
    if (!llvm::is_contained(Known, KV.first.str()))
      return fileError(Path, "unknown key '" + KV.first.str() + "'");

  if (const llvm::json::Value *Below = Root->get("split_k_below_tiles")) {
    std::optional<int64_t> V = Below->getAsInteger();
    if (!V || *V < 0)
      return fileError(Path, "'split_k_below_tiles' must be a non-negative "
                             "integer");
    SplitKBelowTiles = *V;
  }
  if (const llvm::json::Value *Tiles = Root->get("gemm_tiles")) {
    const llvm::json::Array *A = Tiles->getAsArray();
    if (!A)
      return fileError(Path, "'gemm_tiles' must be a list of objects");
    GemmTiles.clear();
    for (const llvm::json::Value &E : *A) {
      llvm::Expected<GemmTileConfig> T = parseGemmTile(E.getAsObject(), Path);
      if (!T)
        return T.takeError();
      GemmTiles.push_back(*T);
    }
  }
  // The merged gate+up GEMM's tiles (swiglu_*), spelt as GEMM tiles; none
  // splits K.
  if (const llvm::json::Value *Tiles = Root->get("swiglu_tiles")) {
    const llvm::json::Array *A = Tiles->getAsArray();
    if (!A)
      return fileError(Path, "'swiglu_tiles' must be a list of objects");
    SwiGluTiles.clear();
    for (const llvm::json::Value &E : *A) {
      if (!E.getAsObject())
        return fileError(Path, "'swiglu_tiles' must be a list of objects");
      llvm::Expected<GemmTileConfig> T = parseGemmTile(E.getAsObject(), Path);
      if (!T)
        return T.takeError();
      if (T->SplitK > 1)
        return fileError(Path, "a swiglu tile cannot split K ('split_k')");
      SwiGluTiles.push_back(*T);
    }
  }
  if (const llvm::json::Value *Tiles = Root->get("attention_tiles")) {
    const llvm::json::Array *A = Tiles->getAsArray();
    if (!A)
      return fileError(Path, "'attention_tiles' must be a list of objects");
    AttentionTiles.clear();
    for (const llvm::json::Value &E : *A) {
      llvm::Expected<AttentionTile> T =
          parseAttentionTile(E.getAsObject(), Path);
      if (!T)
        return T.takeError();
      AttentionTiles.push_back(*T);
    }
  }
  if (llvm::Error E = readNames(*Root, "gemm_externs", Path, GemmExterns))
    return E;
  // The file's list is every extern a matmul is offered, long ones too.
  if (Root->get("gemm_externs"))
    LongGemmExterns.clear();
  // Any other `extern.` name is a library the backend may not know (a
  // failed choice when measured), but a cuBLASLt one must name an index of
  // the heuristic's list: a typo is caught here, not after a tuning run.
  for (const std::string &E : GemmExterns)
    if (isCublasLtName(E) && !cublasLtAlgoOf(E))
      return fileError(Path, "'" + E + "' is not a cuBLASLt choice (" +
                                 cublasLtChoiceName(0) + " to " +
                                 cublasLtChoiceName(CublasLtListed - 1) + ")");
  std::pair<const char *, std::vector<std::string> *> Lists[] = {
      {"all_reduce", &AllReduce},
      {"all_gather", &AllGather},
      {"reduce_scatter", &ReduceScatter},
      {"all_to_all", &AllToAll}};
  for (auto &L : Lists) {
    if (llvm::Error E = readNames(*Root, L.first, Path, *L.second))
      return E;
    if (Root->get(L.first) && L.second->empty())
      return fileError(Path, "'" + llvm::Twine(L.first) +
                                 "' must name at least one choice");
  }
  std::vector<std::string> Disable;
  if (llvm::Error E = readNames(*Root, "disabled", Path, Disable))
    return E;
  for (const std::string &D : Disable)
    Disabled.insert(D);
  return llvm::Error::success();
}
