//===- HorizontalSelect.cpp - The `select-horizontal` pass ----------------===//
#include "mtsched/Autotune/HorizontalSelect.h"
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/Autotune/Workload.h"
#include "mtsched/Lowering/ChoiceConfig.h"
#include "mtsched/Schedule/FusionHeuristic.h"
#include "mtsched/Support/Diagnostics.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include <cmath>
#include <limits>

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

llvm::Error SelectHorizontalPass::run(Graph &G) {
  if (!Fusion.Horizontal)
    return llvm::Error::success();
  std::vector<std::vector<MultiTemplateBufferNode *>> Groups =
      findHorizontalGroups(G);
  if (Groups.empty())
    return llvm::Error::success();
  if (!Session || !Ctx.M)
    return Ctx.Diags->error(G.getLoc(), "the select-horizontal pass needs an "
                                        "autotuner session");
  // The session's own heuristic: the one epilogue fusion was decided with
  // (the lab hands each run its own object).
  const FusionHeuristic &H = Session->getHeuristic();
  const TimePredictor &Model = Session->getTimePredictor();
  for (std::vector<MultiTemplateBufferNode *> &Members : Groups) {
    MultiTemplateBufferNode &Leader = *Members.front();
    // Both forms priced by the cost model (predicted, noise-free), so the
    // comparison does not set a measured time against a predicted one: the
    // split side is each member's decided choice on its own problem.
    double Split = 0;
    int64_t Cols = 0;
    for (MultiTemplateBufferNode *X : Members) {
      const Choice *C = X->findChoice(X->getDecision());
      Workload W = describeNode(*Ctx.M, G, *X);
      Split += C ? Model.choiceUs(W, *C, /*Fused=*/false) : Inf;
      Cols += X->getType().innerDim();
    }
    // The merged GEMM: the leader's problem over every member's columns,
    // with one of the leader's mma.sync tiles (split-K ones too).
    Workload Merged = describeNode(*Ctx.M, G, Leader);
    Merged.Gemm.N = Cols;
    Merged.Epilogue = EpilogueDesc{};
    double MergedUs = Inf;
    std::string Tile;
    for (const Choice &C : Leader.getChoices()) {
      std::optional<GemmTileConfig> T = gemmTileOf(C);
      if (!T || T->Template != GemmTemplate::MmaSync || T->Persistent)
        continue;
      double Us = roundUs(Model.choiceUs(Merged, C, /*Fused=*/false));
      // Strictly faster: the first listed of equal tiles stays.
      if (Us < MergedUs) {
        MergedUs = Us;
        Tile = C.Name;
      }
    }
    HorizontalQuery Q;
    Q.Members = unsigned(Members.size());
    Q.SplitUs = roundUs(Split);
    Q.MergedUs = MergedUs;
    Q.TieTolerance = Session->getTieTolerance();
    bool Merge = !Tile.empty() && H.mergeHorizontal(Q);
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
    // Both times either way, as select-swiglu records them.
    Leader.getAttrs().set(HorizontalMergedUsAttr,
                          Attribute::getFloat(Q.MergedUs));
    Leader.getAttrs().set(HorizontalSplitUsAttr,
                          Attribute::getFloat(Q.SplitUs));
  }
  return llvm::Error::success();
}

std::unique_ptr<Pass>
mtsched::createSelectHorizontalPass(Autotuner *Session,
                                    const FusionOptions &Fusion) {
  return std::make_unique<SelectHorizontalPass>(Session, Fusion);
}
