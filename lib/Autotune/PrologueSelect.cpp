//===- PrologueSelect.cpp - The `select-prologue` pass --------------------===//
#include "mtsched/Autotune/PrologueSelect.h"
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/Autotune/Decision.h"
#include "mtsched/Autotune/HorizontalSelect.h"
#include "mtsched/Autotune/TimePredictor.h"
#include "mtsched/Autotune/Workload.h"
#include "mtsched/Lowering/ChoiceConfig.h"
#include "mtsched/Schedule/FusionHeuristic.h"
#include "mtsched/Support/Diagnostics.h"
#include "llvm/ADT/DenseSet.h"
#include <cmath>
#include <limits>

using namespace mtsched;

static constexpr double Inf = std::numeric_limits<double>::infinity();

/// Times kept to the nanosecond, as the autotuner keeps them.
static double roundUs(double Us) {
  return std::isfinite(Us) ? std::round(Us * 1000.0) / 1000.0 : Us;
}

/// Whether N is an rmsnorm the prologue GEMM can run: x (rank >= 2, bf16
/// or f16) and a weight over x's last dimension of x's dtype.
static bool isPrologueNorm(const BufferNode &N) {
  if (N.getOp() != OpCode::RmsNorm || N.getNumOperands() != 2 ||
      llvm::isa<MultiTemplateBufferNode>(N))
    return false;
  const TensorType &X = N.getOperand(0)->getType();
  const TensorType &W = N.getOperand(1)->getType();
  return (X.Dtype == DType::BF16 || X.Dtype == DType::F16) && X.rank() >= 2 &&
         W.rank() == 1 && W.Dtype == X.Dtype && W.Shape[0] == X.innerDim() &&
         N.getType() == X;
}

/// Whether choice C of an Op node is a tile of a template that runs a
/// prologue: the mma.sync GEMM's, or SwiGLU's merged gate+up GEMM's.
static bool isPrologueTile(OpCode Op, const Choice &C) {
  std::optional<GemmTileConfig> T =
      Op == OpCode::SwiGlu ? swigluTileOf(C) : gemmTileOf(C);
  return T && T->Template == GemmTemplate::MmaSync && !T->Persistent;
}

double mtsched::predictNormKernelUs(const TimePredictor &Model,
                                    const BufferNode &Norm) {
  const TensorType &X = Norm.getOperand(0)->getType();
  EpilogueDesc NormKernel;
  NormKernel.Elements = X.numElements();
  NormKernel.ExtraInputBytes = Norm.getOperand(1)->getType().numBytes();
  NormKernel.Dtype = X.Dtype;
  NormKernel.FlopsPerElement = 4;
  NormKernel.RowReduction = true;
  NormKernel.NumOps = 1;
  return Model.chainUs(NormKernel);
}

bool mtsched::canTakePrologue(const BufferNode &Norm,
                              const MultiTemplateBufferNode &M) {
  // SwiGLU's merged gate+up GEMM (select-swiglu kept it): %h, %wg, %wu.
  bool SwiGlu = M.getOp() == OpCode::SwiGlu && M.getNumOperands() == 3;
  if (!M.isDecided() ||
      (!SwiGlu && (M.getOp() != OpCode::MatMul || M.getNumOperands() != 2)) ||
      llvm::isa<CollectiveMultiTemplateBufferNode>(M) ||
      M.getOperand(0) != Norm.getResult() || M.isEpilogueFused() ||
      M.getAttrs().contains(HorizontalAttr) ||
      M.getAttrs().contains(HorizontalOfAttr))
    return false;
  DType Dt = Norm.getType().Dtype;
  for (unsigned I = 1; I < M.getNumOperands(); ++I) {
    const TensorType &B = M.getOperand(I)->getType();
    if (B.rank() != 2 || B.Dtype != Dt || M.getOperand(I) == Norm.getResult())
      return false;
  }
  if (M.getType().Dtype != Dt)
    return false;
  return llvm::any_of(M.getChoices(), [&](const Choice &C) {
    return isPrologueTile(M.getOp(), C);
  });
}

std::vector<PrologueGroup> mtsched::findPrologueGroups(Graph &G) {
  // Nodes per fusion kernel: the norm must be a kernel of its own, or
  // skipping it would skip what it was fused with.
  llvm::DenseMap<int, unsigned> KernelSize;
  // Nor may it run in a template's fused epilogue (an all_gather's, say):
  // it is then computed in that kernel, not one of its own.
  llvm::DenseSet<const Value *> InFusedEpilogue;
  for (const auto &N : G.getNodes()) {
    if (const auto *B = llvm::dyn_cast<BufferNode>(N.get()))
      if (B->getKernel() != BufferNode::NoKernel)
        ++KernelSize[B->getKernel()];
    if (const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get()))
      if (M->isEpilogueFused())
        for (const Operand &E : M->getEpilogue())
          InFusedEpilogue.insert(E.V);
  }
  std::vector<PrologueGroup> Groups;
  for (const auto &N : G.getNodes()) {
    auto *Norm = llvm::dyn_cast<BufferNode>(N.get());
    // A norm select-prologue priced already keeps its decision (running
    // the pass again changes nothing).
    if (!Norm || !isPrologueNorm(*Norm) || G.isOutput(Norm->getResult()) ||
        Norm->getAttrs().contains(PrologueSplitUsAttr) ||
        InFusedEpilogue.count(Norm->getResult()) ||
        (Norm->getKernel() != BufferNode::NoKernel &&
         KernelSize.lookup(Norm->getKernel()) > 1))
      continue;
    PrologueGroup PG;
    PG.Norm = Norm;
    bool All = true, Horizontal = false;
    for (Node *U : G.getUsers(Norm->getResult())) {
      auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(U);
      // A reader that reads the norm twice (or as B) is not a prologue.
      if (!M || M->getNumOperands() < 2 ||
          M->getOperand(0) != Norm->getResult() ||
          M->getOperand(1) == Norm->getResult()) {
        All = false;
        break;
      }
      if (M->getAttrs().contains(HorizontalAttr))
        PG.Leader = M;
      if (M->getAttrs().contains(HorizontalAttr) ||
          M->getAttrs().contains(HorizontalOfAttr))
        Horizontal = true;
      else if (!canTakePrologue(*Norm, *M))
        All = false;
      if (!llvm::is_contained(PG.Readers, M))
        PG.Readers.push_back(M);
    }
    if (All && Horizontal) {
      // Every reader a member of one merged group, and every member a
      // reader: the merged GEMM runs the prologue for all of them.
      std::vector<const MultiTemplateBufferNode *> Members =
          PG.Leader ? horizontalMembers(G, *PG.Leader)
                    : std::vector<const MultiTemplateBufferNode *>();
      All = !Members.empty() && Members.size() == PG.Readers.size() &&
            llvm::all_of(Members, [&](const MultiTemplateBufferNode *X) {
              return llvm::is_contained(PG.Readers, X);
            });
      if (All) {
        PG.Readers.clear();
        for (const MultiTemplateBufferNode *X : Members)
          PG.Readers.push_back(const_cast<MultiTemplateBufferNode *>(X));
      }
    }
    if (All && !PG.Readers.empty())
      Groups.push_back(std::move(PG));
  }
  return Groups;
}

namespace {

class SelectProloguePass : public Pass {
public:
  SelectProloguePass(Autotuner *Session, const FusionOptions &Fusion)
      : Session(Session), Fusion(Fusion) {}
  llvm::StringRef getArgument() const override { return "select-prologue"; }
  llvm::StringRef getDescription() const override {
    return "Run an RMSNorm read only by GEMMs inside those GEMMs, while they "
           "load A, where the heuristic prefers it";
  }
  llvm::Error run(Graph &G) override;

private:
  Autotuner *Session;
  FusionOptions Fusion;
};

} // namespace

llvm::Error SelectProloguePass::run(Graph &G) {
  if (!Fusion.Prologue)
    return llvm::Error::success();
  std::vector<PrologueGroup> Groups = findPrologueGroups(G);
  if (!Groups.empty() && (!Session || !Ctx.M))
    return Ctx.Diags->error(G.getLoc(), "the select-prologue pass needs an "
                                        "autotuner session");
  for (PrologueGroup &PG : Groups) {
    // Nothing fused was timed, so the cost model prices the prologue. The
    // GEMMs are the measured ones wherever every reader's decided time
    // was measured (as select-horizontal's merged time, when measured or
    // scaled): the split side is the measured GEMMs, and each prologue
    // tile is its measured time plus the model's prologue scaled by the
    // tile's measured over predicted time, so that a measured cuBLAS
    // decision is never traded for a tile the model merely prices lower
    // (at 16 x 8192 x 28672 on an H200 the model priced the 16x128x128
    // tile 19% under its measured time). Otherwise both sides are the
    // model's. The norm's own kernel is the model's either way.
    const TimePredictor &Model = Session->getTimePredictor();
    bool Calibrated =
        PG.Leader ? (PG.Leader->getAttrs().contains(HorizontalMeasuredAttr) ||
                     PG.Leader->getAttrs().contains(HorizontalCalibratedAttr))
                  : llvm::all_of(PG.Readers, [](MultiTemplateBufferNode *M) {
                      return std::isfinite(measuredUs(*M, M->getDecision()));
                    });
    // Split: each GEMM as decided. Fused: each GEMM's fastest tile with
    // the prologue, which need not be its decided one (cuBLAS, or a wgmma
    // tile, runs no prologue): the prologue choices are template choices
    // of their own.
    double Gemms = 0, Fused = 0;
    std::vector<std::string> Tiles;
    if (PG.Leader) {
      // A merged horizontal group: its one GEMM over every member's
      // columns with the group's tile, plus the prologue when fused.
      std::optional<llvm::StringRef> Tile =
          PG.Leader->getAttrs().getString(HorizontalTileAttr);
      Workload Merged = describeNode(*Ctx.M, G, *PG.Leader);
      Merged.Gemm.N = 0;
      for (MultiTemplateBufferNode *X : PG.Readers)
        Merged.Gemm.N += X->getType().innerDim();
      Merged.Epilogue = EpilogueDesc{};
      Choice C{Tile ? Tile->str() : std::string(), {}, {}};
      double Priced = Tile ? Model.choiceUs(Merged, C, /*Fused=*/false) : Inf;
      std::optional<double> Kept;
      if (const Attribute *A =
              PG.Leader->getAttrs().get(HorizontalMergedUsAttr))
        if (A->isFloat())
          Kept = A->getFloat();
      Gemms = Calibrated && Kept ? *Kept : Priced;
      double Scale = Calibrated && Kept && Priced > 0 ? *Kept / Priced : 1;
      Fused = Gemms + (Tile ? Model.prologueUs(Merged, C) * Scale : Inf);
    }
    for (MultiTemplateBufferNode *M :
         PG.Leader ? llvm::ArrayRef<MultiTemplateBufferNode *>()
                   : llvm::ArrayRef(PG.Readers)) {
      const Choice *C = M->findChoice(M->getDecision());
      Workload W = describeNode(*Ctx.M, G, *M);
      Gemms += Calibrated ? measuredUs(*M, M->getDecision())
               : C        ? Model.choiceUs(W, *C, /*Fused=*/false)
                          : Inf;
      double Best = Inf;
      std::string Tile;
      for (const Choice &T : M->getChoices()) {
        if (!isPrologueTile(M->getOp(), T))
          continue;
        double Priced = Model.choiceUs(W, T, /*Fused=*/false);
        double Us = Priced + Model.prologueUs(W, T);
        if (Calibrated) {
          double Own = measuredUs(*M, T.Name);
          if (!std::isfinite(Own) || !(Priced > 0))
            continue;
          Us = Own + Model.prologueUs(W, T) * Own / Priced;
        }
        // Strictly faster: the first listed of equal tiles stays.
        if (Us < Best) {
          Best = Us;
          Tile = T.Name;
        }
      }
      Fused += Best;
      Tiles.push_back(Tile);
    }
    if (Calibrated)
      PG.Norm->getAttrs().set(PrologueCalibratedAttr, Attribute::getBool(true));
    PrologueQuery Q;
    Q.Readers = unsigned(PG.Readers.size());
    Q.TieTolerance = Session->getTieTolerance();
    Q.SplitUs = roundUs(Gemms + predictNormKernelUs(Model, *PG.Norm));
    Q.FusedUs = roundUs(Fused);
    if (Session->getHeuristic().fusePrologue(Q)) {
      std::vector<Attribute> Names;
      for (size_t I = 0; I < PG.Readers.size(); ++I) {
        MultiTemplateBufferNode *M = PG.Readers[I];
        Names.push_back(Attribute::getString(M->getName()));
        M->getAttrs().set(PrologueAttr,
                          Attribute::getString(PG.Norm->getName()));
        if (!PG.Leader)
          M->setDecision(Tiles[I]);
      }
      PG.Norm->getAttrs().set(PrologueIntoAttr,
                              Attribute::getList(std::move(Names)));
    }
    // Both times either way, as select-horizontal records them.
    PG.Norm->getAttrs().set(PrologueFusedUsAttr,
                            Attribute::getFloat(Q.FusedUs));
    PG.Norm->getAttrs().set(PrologueSplitUsAttr,
                            Attribute::getFloat(Q.SplitUs));
    PG.Norm->getAttrs().set(PrologueGemmsUsAttr,
                            Attribute::getFloat(roundUs(Gemms)));
  }
  return llvm::Error::success();
}

std::unique_ptr<Pass>
mtsched::createSelectProloguePass(Autotuner *Session,
                                  const FusionOptions &Fusion) {
  return std::make_unique<SelectProloguePass>(Session, Fusion);
}
