//===- HorizontalSelect.cpp - The `select-horizontal` pass ----------------===//
#include "mtsched/Autotune/HorizontalSelect.h"
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/Autotune/Decision.h"
#include "mtsched/Autotune/Workload.h"
#include "mtsched/Lowering/ChoiceConfig.h"
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/Schedule/FusionHeuristic.h"
#include "mtsched/Support/Diagnostics.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include <cmath>
#include <limits>
#include <set>

using namespace mtsched;

static constexpr double Inf = std::numeric_limits<double>::infinity();

/// Times kept to the nanosecond, as the autotuner keeps them.
static double roundUs(double Us) {
  return std::isfinite(Us) ? std::round(Us * 1000.0) / 1000.0 : Us;
}

/// Whether N is a matmul a merged group may take, ignoring group marks.
static bool mergeableMatMul(const MultiTemplateBufferNode &N) {
  if (N.getOp() != OpCode::MatMul || N.getNumOperands() != 2 ||
      llvm::isa<CollectiveMultiTemplateBufferNode>(N))
    return false;
  const Value *A = N.getOperand(0), *B = N.getOperand(1);
  DType Dt = A->getType().Dtype;
  // The merged kernel is the mma.sync template's: bf16 and f16 only. A
  // weight is a graph input (no defining node), so its columns can be
  // read where they lie; a computed B may change from call to call.
  return (Dt == DType::BF16 || Dt == DType::F16) && B->getDef() == nullptr &&
         B->getType().rank() == 2 && B->getType().Dtype == Dt &&
         N.getType().Dtype == Dt && A->getType().rank() >= 2;
}

std::vector<std::vector<MultiTemplateBufferNode *>>
mtsched::findHorizontalGroups(Graph &G) {
  llvm::MapVector<const Value *, std::vector<MultiTemplateBufferNode *>> ByA;
  for (const auto &N : G.getNodes()) {
    auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get());
    if (!M || !M->isDecided() || !mergeableMatMul(*M) ||
        M->getAttrs().contains(HorizontalAttr) ||
        M->getAttrs().contains(HorizontalOfAttr))
      continue;
    // A fused epilogue would be lost in the merged kernel (it writes the
    // GEMM's columns only), so such a GEMM stays on its own.
    if (M->isEpilogueFused())
      continue;
    ByA[M->getOperand(0)].push_back(M);
  }
  std::vector<std::vector<MultiTemplateBufferNode *>> Groups;
  for (auto &KV : ByA)
    if (KV.second.size() >= 2)
      Groups.push_back(std::move(KV.second));
  return Groups;
}

std::vector<const MultiTemplateBufferNode *>
mtsched::horizontalMembers(const Graph &G,
                           const MultiTemplateBufferNode &Leader) {
  const Attribute *L = Leader.getAttrs().get(HorizontalAttr);
  if (!L || !L->isList())
    return {};
  llvm::StringMap<const MultiTemplateBufferNode *> ByName;
  for (const auto &N : G.getNodes())
    if (const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get()))
      ByName[M->getName()] = M;
  std::vector<const MultiTemplateBufferNode *> Members;
  for (const Attribute &E : L->getList()) {
    const MultiTemplateBufferNode *M =
        E.isString() ? ByName.lookup(E.getString()) : nullptr;
    if (!M || !mergeableMatMul(*M))
      return {};
    Members.push_back(M);
  }
  return Members;
}

/// The undecided groups `fuse-horizontal` offers a merged GEMM for: as
/// findHorizontalGroups, before anything is decided (whether a member's
/// epilogue fuses is not known yet).
static std::vector<std::vector<MultiTemplateBufferNode *>>
undecidedGroups(Graph &G) {
  // SwiGLU's gate and up GEMMs have their own merged form (fuse-swiglu's
  // alternative reads the same input and weights): not offered twice.
  std::set<std::pair<const Value *, const Value *>> SwiGluPairs;
  for (const auto &N : G.getNodes())
    if (N->getOp() == OpCode::SwiGlu && N->getNumOperands() == 3) {
      SwiGluPairs.insert({N->getOperand(0), N->getOperand(1)});
      SwiGluPairs.insert({N->getOperand(0), N->getOperand(2)});
    }
  llvm::MapVector<const Value *, std::vector<MultiTemplateBufferNode *>> ByA;
  for (const auto &N : G.getNodes()) {
    auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get());
    if (M && !M->isDecided() && mergeableMatMul(*M) &&
        !M->getAttrs().contains(HorizontalAlternativeOfAttr) &&
        !SwiGluPairs.count({M->getOperand(0), M->getOperand(1)}))
      ByA[M->getOperand(0)].push_back(M);
  }
  std::vector<std::vector<MultiTemplateBufferNode *>> Groups;
  for (auto &KV : ByA)
    if (KV.second.size() >= 2)
      Groups.push_back(std::move(KV.second));
  return Groups;
}

namespace {

class FuseHorizontalPass : public Pass {
public:
  explicit FuseHorizontalPass(const LoweringOptions &Opts) : Opts(Opts) {}
  llvm::StringRef getArgument() const override { return "fuse-horizontal"; }
  llvm::StringRef getDescription() const override {
    return "Add the merged GEMM of each group of matmuls over one input "
           "(Q/K/V) as an alternative for the autotuner to time";
  }
  llvm::Error run(Graph &G) override;

private:
  LoweringOptions Opts;
};

} // namespace

llvm::Error FuseHorizontalPass::run(Graph &G) {
  llvm::StringSet<> Names, Offered;
  for (const auto &In : G.getInputs())
    Names.insert(In->getName());
  for (const auto &N : G.getNodes()) {
    Names.insert(N->getName());
    if (std::optional<llvm::StringRef> Of =
            N->getAttrs().getString(HorizontalAlternativeOfAttr))
      Offered.insert(*Of);
  }
  auto Fresh = [&](const std::string &Base) {
    std::string Name = Base;
    for (unsigned Suffix = 1; Names.count(Name); ++Suffix)
      Name = Base + std::to_string(Suffix);
    Names.insert(Name);
    return Name;
  };
  for (std::vector<MultiTemplateBufferNode *> &Members : undecidedGroups(G)) {
    MultiTemplateBufferNode &Leader = *Members.front();
    // Running the pass twice adds nothing.
    if (Offered.count(Leader.getName()))
      continue;
    const TensorType &Out = Leader.getType();
    int64_t M = Out.numElements() / Out.innerDim();
    int64_t K = Leader.getOperand(0)->getType().innerDim();
    int64_t Cols = 0;
    std::vector<Operand> Weights;
    for (MultiTemplateBufferNode *X : Members) {
      Cols += X->getType().innerDim();
      Weights.push_back({X->getOperand(1), Leader.getLoc()});
    }
    // The tiles the merged kernel can run: mma.sync, split-K or not.
    std::vector<Choice> Tiles;
    for (Choice &C : Opts.Choices.gemmChoices(M, Cols, K, Out.Dtype))
      if (std::optional<GemmTileConfig> T = gemmTileOf(C))
        if (T->Template == GemmTemplate::MmaSync && !T->Persistent)
          Tiles.push_back(std::move(C));
    if (Tiles.empty())
      continue;
    // Timed as the GEMM over the weights' concatenation, which exists only
    // for the timing: select-horizontal removes it and the alternative. A
    // merged kernel runs the same main loop per tile, each CTA on its
    // member's weight.
    size_t At = 0;
    while (G.getNodes()[At].get() != &Leader)
      ++At;
    TensorType CatType = Leader.getOperand(1)->getType();
    CatType.Shape[1] = Cols;
    auto Cat = std::make_unique<BufferNode>(OpCode::Concat, Leader.getLoc());
    Cat->getOperands() = Weights;
    Cat->getAttrs().set("dim", Attribute::getInt(1));
    Cat->getAttrs().set(HorizontalAlternativeOfAttr,
                        Attribute::getString(Leader.getName()));
    Value *CatV = G.createValue(Fresh(Leader.getName() + ".hweights"), CatType,
                                Leader.getLoc());
    G.insertNode(At, std::move(Cat), CatV);
    TensorType AltType = Out;
    AltType.Shape.back() = Cols;
    auto Alt = std::make_unique<MultiTemplateBufferNode>(OpCode::MatMul,
                                                         Leader.getLoc());
    Alt->getOperands() = {{Leader.getOperand(0), Leader.getLoc()},
                          {CatV, Leader.getLoc()}};
    Alt->getAttrs().set(HorizontalAlternativeOfAttr,
                        Attribute::getString(Leader.getName()));
    Alt->setChoices(std::move(Tiles));
    Value *AltV = G.createValue(Fresh(Leader.getName() + ".horizontal"),
                                AltType, Leader.getLoc());
    G.insertNode(At + 1, std::move(Alt), AltV);
  }
  return llvm::Error::success();
}

std::unique_ptr<Pass>
mtsched::createFuseHorizontalPass(const LoweringOptions &Opts) {
  return std::make_unique<FuseHorizontalPass>(Opts);
}

namespace {

class SelectHorizontalPass : public Pass {
public:
  SelectHorizontalPass(Autotuner *Session, const FusionOptions &Fusion)
      : Session(Session), Fusion(Fusion) {}
  llvm::StringRef getArgument() const override { return "select-horizontal"; }
  llvm::StringRef getDescription() const override {
    return "Merge decided GEMMs that read one input (Q/K/V) into one GEMM "
           "writing each member's columns, where the heuristic prefers it";
  }
  llvm::Error run(Graph &G) override;

private:
  Autotuner *Session;
  FusionOptions Fusion;
};

} // namespace

/// The time N's decision was made with, unfused, or +inf if it has none.
static double decidedUs(const MultiTemplateBufferNode &N) {
  for (const ChoiceTiming &T : N.getTimings())
    if (T.Choice == N.getDecision())
      return T.Us;
  return Inf;
}

llvm::Error SelectHorizontalPass::run(Graph &G) {
  // fuse-horizontal's alternatives, by the first member they stand for.
  // They are removed whatever is decided: nothing reads them.
  llvm::StringMap<MultiTemplateBufferNode *> Alternatives;
  std::vector<Node *> ToErase;
  for (const auto &N : G.getNodes())
    if (std::optional<llvm::StringRef> Of =
            N->getAttrs().getString(HorizontalAlternativeOfAttr)) {
      if (auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get()))
        Alternatives[*Of] = M;
      ToErase.push_back(N.get());
    }
  auto EraseAlternatives = [&] {
    // The GEMMs first: each reads its concatenation.
    for (Node *N : llvm::reverse(ToErase))
      G.eraseNode(N);
  };
  if (!Fusion.Horizontal) {
    EraseAlternatives();
    return llvm::Error::success();
  }
  std::vector<std::vector<MultiTemplateBufferNode *>> Groups =
      findHorizontalGroups(G);
  if (!Groups.empty() && (!Session || !Ctx.M))
    return Ctx.Diags->error(G.getLoc(), "the select-horizontal pass needs an "
                                        "autotuner session");
  for (std::vector<MultiTemplateBufferNode *> &Members : Groups) {
    MultiTemplateBufferNode &Leader = *Members.front();
    // The alternative stands for this group if it reads the group's A and
    // the concatenation of exactly its weights (a member whose epilogue
    // fused left the group after fuse-horizontal offered it).
    MultiTemplateBufferNode *Alt = Alternatives.lookup(Leader.getName());
    if (Alt) {
      const Node *Cat = Alt->getOperand(1)->getDef();
      bool Same = Alt->isDecided() &&
                  Alt->getOperand(0) == Leader.getOperand(0) && Cat &&
                  Cat->getNumOperands() == Members.size();
      for (size_t I = 0; Same && I < Members.size(); ++I)
        Same = Cat->getOperand(I) == Members[I]->getOperand(1);
      if (!Same)
        Alt = nullptr;
    }
    HorizontalQuery Q;
    Q.Members = unsigned(Members.size());
    Q.TieTolerance = Session->getTieTolerance();
    std::string Tile;
    if (Alt) {
      // Measured (on the simulator, its model's times with their noise):
      // the merged GEMM as the autotuner decided it, the members as they
      // were decided, none with a fused epilogue.
      Q.MergedUs = decidedUs(*Alt);
      double Split = 0;
      for (MultiTemplateBufferNode *X : Members)
        Split += decidedUs(*X);
      Q.SplitUs = roundUs(Split);
      if (std::isfinite(Q.MergedUs))
        Tile = Alt->getDecision();
    } else {
      // No alternative was timed (a decided file from before, immediate
      // mode, a SwiGLU pair whose merged kernel lost, or a group that
      // changed): the merged GEMM is the leader's problem over every
      // member's columns, with one of the leader's mma.sync tiles (split-K
      // ones too), priced by the cost model. Where the leader's own time
      // with that tile was measured, the price is scaled by measured over
      // predicted on the leader's problem, and the split side is the
      // members' measured decided times: the model alone can be off by
      // more than the margin it decides on (at 16 x 8192 x 28672 on an H200
      // it priced the 16x128x128 tile 19% under its measured time, wave
      // quantisation it does not see, and merged two GEMMs cuBLAS ran
      // faster apart). Otherwise both sides are the model's, so a measured
      // time is never set against a predicted one.
      const TimePredictor &Model = Session->getTimePredictor();
      Workload LeaderW = describeNode(*Ctx.M, G, Leader);
      double Split = 0, Measured = 0;
      int64_t Cols = 0;
      for (MultiTemplateBufferNode *X : Members) {
        const Choice *C = X->findChoice(X->getDecision());
        Workload W = describeNode(*Ctx.M, G, *X);
        Split += C ? Model.choiceUs(W, *C, /*Fused=*/false) : Inf;
        Measured += decidedUs(*X);
        Cols += X->getType().innerDim();
      }
      Workload Merged = LeaderW;
      Merged.Gemm.N = Cols;
      Merged.Epilogue = EpilogueDesc{};
      Q.MergedUs = Inf;
      bool Calibrated = std::isfinite(Measured);
      for (const Choice &C : Leader.getChoices()) {
        std::optional<GemmTileConfig> T = gemmTileOf(C);
        if (!T || T->Template != GemmTemplate::MmaSync || T->Persistent)
          continue;
        double Us = Model.choiceUs(Merged, C, /*Fused=*/false);
        if (Calibrated) {
          double Own = measuredUs(Leader, C.Name);
          double Priced = Model.choiceUs(LeaderW, C, /*Fused=*/false);
          if (!std::isfinite(Own) || !(Priced > 0))
            continue;
          Us *= Own / Priced;
        }
        Us = roundUs(Us);
        // Strictly faster: the first listed of equal tiles stays.
        if (Us < Q.MergedUs) {
          Q.MergedUs = Us;
          Tile = C.Name;
        }
      }
      Q.SplitUs = roundUs(Calibrated ? Measured : Split);
      if (Calibrated)
        Leader.getAttrs().set(HorizontalCalibratedAttr,
                              Attribute::getBool(true));
    }
    bool Merge = !Tile.empty() && Session->getHeuristic().mergeHorizontal(Q);
    if (Merge) {
      std::vector<Attribute> Names;
      for (MultiTemplateBufferNode *X : Members)
        Names.push_back(Attribute::getString(X->getName()));
      Leader.getAttrs().set(HorizontalAttr,
                            Attribute::getList(std::move(Names)));
      Leader.getAttrs().set(HorizontalTileAttr, Attribute::getString(Tile));
      for (MultiTemplateBufferNode *X : llvm::ArrayRef(Members).drop_front())
        X->getAttrs().set(HorizontalOfAttr,
                          Attribute::getString(Leader.getName()));
    }
    // Both times either way, as select-swiglu records them, and whether
    // they were measured.
    Leader.getAttrs().set(HorizontalMergedUsAttr,
                          Attribute::getFloat(Q.MergedUs));
    Leader.getAttrs().set(HorizontalSplitUsAttr,
                          Attribute::getFloat(Q.SplitUs));
    if (Alt)
      Leader.getAttrs().set(HorizontalMeasuredAttr, Attribute::getBool(true));
  }
  EraseAlternatives();
  return llvm::Error::success();
}

std::unique_ptr<Pass>
mtsched::createSelectHorizontalPass(Autotuner *Session,
                                    const FusionOptions &Fusion) {
  return std::make_unique<SelectHorizontalPass>(Session, Fusion);
}
