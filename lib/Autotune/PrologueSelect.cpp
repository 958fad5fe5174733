//===- PrologueSelect.cpp - The `select-prologue` pass --------------------===//
#include "mtsched/Autotune/PrologueSelect.h"
#include "mtsched/Autotune/Autotuner.h"
#include "mtsched/Autotune/HorizontalSelect.h"
#include "mtsched/Autotune/TimePredictor.h"
#include "mtsched/Autotune/Workload.h"
#include "mtsched/Lowering/ChoiceConfig.h"
#include "mtsched/Schedule/FusionHeuristic.h"
#include "mtsched/Support/Diagnostics.h"
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
         W.rank() == 1 && W.Dtype == X.Dtype &&
         W.Shape[0] == X.innerDim() && N.getType() == X;
}

bool mtsched::canTakePrologue(const BufferNode &Norm,
                              const MultiTemplateBufferNode &M) {
  if (!M.isDecided() || M.getOp() != OpCode::MatMul ||
      M.getNumOperands() != 2 ||
      llvm::isa<CollectiveMultiTemplateBufferNode>(M) ||
      M.getOperand(0) != Norm.getResult() || M.isEpilogueFused() ||
      M.getAttrs().contains(HorizontalAttr) ||
      M.getAttrs().contains(HorizontalOfAttr))
    return false;
  const TensorType &B = M.getOperand(1)->getType();
  DType Dt = Norm.getType().Dtype;
  if (B.rank() != 2 || B.Dtype != Dt || M.getType().Dtype != Dt)
    return false;
  const Choice *C = M.findChoice(M.getDecision());
  std::optional<GemmTileConfig> T = C ? gemmTileOf(*C) : std::nullopt;
  return T && T->Template == GemmTemplate::MmaSync && !T->Persistent;
}

std::vector<PrologueGroup> mtsched::findPrologueGroups(Graph &G) {
  // Nodes per fusion kernel: the norm must be a kernel of its own, or
  // skipping it would skip what it was fused with.
  llvm::DenseMap<int, unsigned> KernelSize;
  for (const auto &N : G.getNodes())
    if (const auto *B = llvm::dyn_cast<BufferNode>(N.get()))
      if (B->getKernel() != BufferNode::NoKernel)
        ++KernelSize[B->getKernel()];
  std::vector<PrologueGroup> Groups;
  for (const auto &N : G.getNodes()) {
    auto *Norm = llvm::dyn_cast<BufferNode>(N.get());
    if (!Norm || !isPrologueNorm(*Norm) || G.isOutput(Norm->getResult()) ||
        (Norm->getKernel() != BufferNode::NoKernel &&
         KernelSize.lookup(Norm->getKernel()) > 1))
      continue;
    PrologueGroup PG;
    PG.Norm = Norm;
    bool All = true;
    for (Node *U : G.getUsers(Norm->getResult())) {
      auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(U);
      // A reader that reads the norm twice (or as B) is not a prologue.
      if (!M || !canTakePrologue(*Norm, *M) ||
          M->getOperand(1) == Norm->getResult()) {
        All = false;
        break;
      }
      if (!llvm::is_contained(PG.Readers, M))
        PG.Readers.push_back(M);
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
    // Both forms priced by the cost model (nothing fused was timed): the
    // GEMMs as decided, plus the norm's own kernel when split, plus each
    // GEMM's prologue when fused.
    const TimePredictor &Model = Session->getTimePredictor();
    const TensorType &X = PG.Norm->getOperand(0)->getType();
    EpilogueDesc NormKernel;
    NormKernel.Elements = X.numElements();
    NormKernel.ExtraInputBytes = PG.Norm->getOperand(1)->getType().numBytes();
    NormKernel.Dtype = X.Dtype;
    NormKernel.FlopsPerElement = 4;
    NormKernel.RowReduction = true;
    NormKernel.NumOps = 1;
    double Gemms = 0, Prologues = 0;
    for (MultiTemplateBufferNode *M : PG.Readers) {
      const Choice *C = M->findChoice(M->getDecision());
      Workload W = describeNode(*Ctx.M, G, *M);
      Gemms += C ? Model.choiceUs(W, *C, /*Fused=*/false) : Inf;
      Prologues += C ? Model.prologueUs(W, *C) : Inf;
    }
    PrologueQuery Q;
    Q.Readers = unsigned(PG.Readers.size());
    Q.TieTolerance = Session->getTieTolerance();
    Q.SplitUs = roundUs(Gemms + Model.chainUs(NormKernel));
    Q.FusedUs = roundUs(Gemms + Prologues);
    if (Session->getHeuristic().fusePrologue(Q)) {
      std::vector<Attribute> Names;
      for (MultiTemplateBufferNode *M : PG.Readers) {
        Names.push_back(Attribute::getString(M->getName()));
        M->getAttrs().set(PrologueAttr,
                          Attribute::getString(PG.Norm->getName()));
      }
      PG.Norm->getAttrs().set(PrologueIntoAttr,
                              Attribute::getList(std::move(Names)));
    }
    // Both times either way, as select-horizontal records them.
    PG.Norm->getAttrs().set(PrologueFusedUsAttr, Attribute::getFloat(Q.FusedUs));
    PG.Norm->getAttrs().set(PrologueSplitUsAttr, Attribute::getFloat(Q.SplitUs));
  }
  return llvm::Error::success();
}

std::unique_ptr<Pass>
mtsched::createSelectProloguePass(Autotuner *Session,
                                  const FusionOptions &Fusion) {
  return std::make_unique<SelectProloguePass>(Session, Fusion);
}
