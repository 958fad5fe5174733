//===- Fusion.cpp - Vertical fusion and epilogue candidates ---------------===//
//
// FusionAnalysis::run: the epilogues (FusionEpilogue.cpp), then buffers
// grouped into kernels by the rules of KernelForm.cpp; and the passes
// that apply or print the plan.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Schedule/Fusion.h"
#include "FusionImpl.h"
#include "mtsched/IR/Printer.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"
#include <optional>

using namespace mtsched;
using namespace mtsched::detail;

const Node *FusionAnalysis::cycleThrough(const Node *Consumer,
                                         const KernelSet &Kernel,
                                         unsigned FirstIndex) {
  for (const Operand &O : Consumer->getOperands()) {
    const Node *Def = O.V->getDef();
    if (!Def || Kernel.count(Def) || Def->getIndex() < FirstIndex)
      continue;
    llvm::SmallVector<const Node *, 16> Work{Def};
    llvm::DenseSet<const Node *> Seen{Def};
    while (!Work.empty()) {
      const Node *N = Work.pop_back_val();
      for (const Operand &In : N->getOperands()) {
        const Node *D = In.V->getDef();
        if (!D || D->getIndex() < FirstIndex)
          continue;
        if (Kernel.count(D))
          return Def;
        if (Seen.insert(D).second)
          Work.push_back(D);
      }
    }
  }
  return nullptr;
}

void FusionAnalysis::groupBuffers(FusionPlan &Plan) {
  for (const auto &Owned : G.getNodes()) {
    const Node *C = Owned.get();
    if (!llvm::isa<BufferNode>(C) || KernelOf.count(C))
      continue;
    bool Joined = false;
    if (isGroupable(C)) {
      for (const Operand &O : C->getOperands()) {
        const Node *P = O.V->getDef();
        if (!isGroupable(P) || !KernelOf.count(P))
          continue;
        unsigned K = KernelOf[P];
        std::string Why;
        if (Closed.count(K))
          Why = "'%" + P->getName() + "' belongs to an epilogue";
        else
          Why = Forms[K]->whyNotJoin(*C);
        if (Why.empty())
          if (const Node *Through =
                  cycleThrough(C, KernelSets[K], KernelFirst[K]))
            Why = "would create a cycle through '%" + Through->getName() + "'";
        if (!Why.empty()) {
          Plan.Rejections.push_back({P, C, std::move(Why)});
          continue;
        }
        KernelSets[K].insert(C);
        KernelOf[C] = K;
        Forms[K]->join(*C);
        Joined = true;
        break;
      }
    }
    if (!Joined) {
      KernelOf[C] = KernelSets.size();
      KernelSets.push_back(KernelSet{C});
      KernelFirst.push_back(C->getIndex());
      Forms.emplace_back(std::in_place, *C);
    }
  }
}

void FusionAnalysis::absorbLayoutProducers() {
  for (unsigned L = 0; L < KernelSets.size(); ++L) {
    if (KernelSets[L].size() != 1)
      continue;
    const Node *N = *KernelSets[L].begin();
    if (!isLayout(N->getOp()) || !isGroupable(N))
      continue;
    auto It = Users.find(N->getResult());
    if (It == Users.end() || Outputs.count(N->getResult()))
      continue;
    auto KIt = KernelOf.find(It->second.front());
    if (KIt == KernelOf.end())
      continue;
    unsigned K = KIt->second;
    // Into a kernel of groupable members only (not a reshape kept as a
    // view, nor a gather kernel of its own).
    if (K == L || Closed.count(K) ||
        !llvm::all_of(KernelSets[K],
                      [&](const Node *X) { return isGroupable(X); }) ||
        !llvm::all_of(It->second, [&](const Node *U) {
          auto UK = KernelOf.find(U);
          return UK != KernelOf.end() && UK->second == K;
        }))
      continue;
    if (cycleThrough(N, KernelSets[K], std::min(KernelFirst[K], N->getIndex())))
      continue;
    // The kernel, read through N, must still fit its form (a reduction's
    // value is not read through a layout op).
    std::vector<const Node *> With = membersOf(K);
    With.insert(llvm::upper_bound(With, N,
                                  [](const Node *A, const Node *B) {
                                    return A->getIndex() < B->getIndex();
                                  }),
                N);
    if (!whyNotKernel(With).empty())
      continue;
    KernelSets[K].insert(N);
    KernelSets[L].clear();
    KernelOf[N] = K;
    KernelFirst[K] = std::min(KernelFirst[K], N->getIndex());
    rebuildForm(K);
  }
  // Drop the emptied kernels.
  for (unsigned K = KernelSets.size(); K-- > 0;)
    if (KernelSets[K].empty()) {
      KernelSets.erase(KernelSets.begin() + K);
      KernelFirst.erase(KernelFirst.begin() + K);
      Forms.erase(Forms.begin() + K);
    }
  KernelOf.clear();
  for (unsigned K = 0; K < KernelSets.size(); ++K)
    for (const Node *N : KernelSets[K])
      KernelOf[N] = K;
}

std::vector<const Node *> FusionAnalysis::invalidMembers() const {
  std::vector<const Node *> Out;
  for (unsigned K = 0; K < KernelSets.size(); ++K) {
    const KernelSet &Set = KernelSets[K];
    if (!Forms[K] || !(Forms[K]->readsThrough() || Forms[K]->hasLayout()) ||
        Set.size() == 1)
      continue; // a layout op alone is its own gather kernel, as before
    std::vector<const Node *> Members = membersOf(K);
    auto Escapes = [&](const Node *N) {
      if (Outputs.count(N->getResult()))
        return true;
      auto It = Users.find(N->getResult());
      return It != Users.end() && llvm::any_of(It->second, [&](const Node *U) {
               return !Set.count(U);
             });
    };
    for (const Node *N : membersThatCannotStay(Members, Escapes))
      Out.push_back(N);
  }
  llvm::sort(Out, [](const Node *A, const Node *B) {
    return A->getIndex() < B->getIndex();
  });
  return Out;
}

FusionPlan FusionAnalysis::run() {
  FusionPlan Plan;
  for (const auto &N : G.getNodes())
    if (const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get()))
      findEpilogue(*M, Plan);
  // Group, then regroup without the layout ops and sum/max that cannot
  // stay in their kernels; each round takes at least one out, so this ends.
  size_t EpilogueKernels = KernelSets.size();
  std::vector<FusionRejection> Rejections = Plan.Rejections;
  for (;;) {
    groupBuffers(Plan);
    absorbLayoutProducers();
    std::vector<const Node *> Out = invalidMembers();
    // Each round takes out members not taken out before (none is ever
    // grouped again), so the loop ends.
    llvm::erase_if(Out, [&](const Node *N) { return Excluded.count(N); });
    if (Out.empty())
      break;
    Excluded.insert(Out.begin(), Out.end());
    for (unsigned K = EpilogueKernels; K < KernelSets.size(); ++K)
      for (const Node *N : KernelSets[K])
        KernelOf.erase(N);
    KernelSets.resize(EpilogueKernels);
    KernelFirst.resize(EpilogueKernels);
    Forms.resize(EpilogueKernels);
    Plan.Rejections = Rejections;
  }

  // Number kernels in program order of their first node.
  std::vector<unsigned> Order(KernelSets.size());
  for (unsigned I = 0; I < Order.size(); ++I)
    Order[I] = I;
  llvm::sort(Order, [&](unsigned A, unsigned B) {
    return KernelFirst[A] < KernelFirst[B];
  });
  Plan.Kernels.resize(KernelSets.size());
  std::vector<unsigned> NewId(KernelSets.size());
  for (unsigned I = 0; I < Order.size(); ++I)
    NewId[Order[I]] = I;
  for (const auto &N : G.getNodes()) {
    auto It = KernelOf.find(N.get());
    if (It != KernelOf.end())
      Plan.Kernels[NewId[It->second]].push_back(N.get());
  }
  return Plan;
}

FusionPlan mtsched::analyzeFusion(const Graph &G, const FusionOptions &Opts) {
  return FusionAnalysis(G, Opts).run();
}

namespace {

class FusePass : public Pass {
public:
  explicit FusePass(const FusionOptions &Opts) : Opts(Opts) {}
  llvm::StringRef getArgument() const override { return "fuse"; }
  llvm::StringRef getDescription() const override {
    return "Group buffers into fused kernels and find the epilogue of every "
           "multi-template buffer";
  }
  llvm::Error run(Graph &G) override {
    FusionPlan Plan = analyzeFusion(G, Opts);
    for (unsigned K = 0; K < Plan.Kernels.size(); ++K)
      for (const Node *N : Plan.Kernels[K])
        llvm::cast<BufferNode>(const_cast<Node *>(N))->setKernel(K);
    for (const auto &N : G.getNodes())
      if (auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get())) {
        // A decided node keeps the epilogue its decision was made for.
        if (M->isDecided())
          continue;
        M->getEpilogue().clear();
        M->getEpilogueWrites().clear();
        auto It = Plan.Epilogues.find(M);
        if (It == Plan.Epilogues.end())
          continue;
        for (const Node *E : It->second)
          M->getEpilogue().push_back({E->getResult(), E->getLoc()});
        auto W = Plan.Writes.find(M);
        if (W != Plan.Writes.end())
          for (const Node *E : W->second)
            M->getEpilogueWrites().push_back({E->getResult(), E->getLoc()});
      }
    return llvm::Error::success();
  }

private:
  FusionOptions Opts;
};

class TestPrintFusionCandidatesPass : public Pass {
public:
  explicit TestPrintFusionCandidatesPass(const FusionOptions &Opts)
      : Opts(Opts) {}
  llvm::StringRef getArgument() const override {
    return "test-print-fusion-candidates";
  }
  llvm::StringRef getDescription() const override {
    return "Print fused kernels, epilogue candidates and rejected fusions";
  }
  llvm::Error run(Graph &G) override {
    FusionPlan Plan = analyzeFusion(G, Opts);
    llvm::raw_ostream &OS = *Ctx.AnalysisOS;
    OS << "fusion candidates @" << G.getName() << '\n';
    for (unsigned K = 0; K < Plan.Kernels.size(); ++K) {
      OS << "  kernel " << K << ": ";
      llvm::interleaveComma(Plan.Kernels[K], OS,
                            [&](const Node *N) { OS << '%' << N->getName(); });
      OS << '\n';
    }
    for (const auto &E : Plan.Epilogues) {
      OS << "  epilogue of %" << E.first->getName() << ": ";
      llvm::interleaveComma(E.second, OS,
                            [&](const Node *N) { OS << '%' << N->getName(); });
      auto W = Plan.Writes.find(E.first);
      if (W != Plan.Writes.end()) {
        OS << " (also writes ";
        llvm::interleaveComma(
            W->second, OS, [&](const Node *N) { OS << '%' << N->getName(); });
        OS << ')';
      }
      OS << '\n';
    }
    for (const auto &E : Plan.NoEpilogue)
      OS << "  no epilogue for %" << E.first->getName() << ": " << E.second
         << '\n';
    for (const FusionRejection &R : Plan.Rejections)
      OS << "  cannot fuse %" << R.Consumer->getName() << " with %"
         << R.Producer->getName() << ": " << R.Reason << '\n';
    OS.flush();
    return llvm::Error::success();
  }

private:
  FusionOptions Opts;
};

} // namespace

std::unique_ptr<Pass> mtsched::createFusePass(const FusionOptions &Opts) {
  return std::make_unique<FusePass>(Opts);
}

std::unique_ptr<Pass>
mtsched::createTestPrintFusionCandidatesPass(const FusionOptions &Opts) {
  return std::make_unique<TestPrintFusionCandidatesPass>(Opts);
}
