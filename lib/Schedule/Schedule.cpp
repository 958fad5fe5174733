//===- Schedule.cpp - Kernel order and the collective list ----------------===//
#include "mtsched/Schedule/Schedule.h"
#include "mtsched/Support/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"
#include <map>
#include <queue>

using namespace mtsched;

llvm::Expected<Schedule> mtsched::buildSchedule(const Graph &G) {
  // Assign every node to a kernel, numbered by first appearance.
  std::vector<ScheduledKernel> Kernels;
  llvm::DenseMap<const Node *, unsigned> KernelOfNode;
  // Kernel ids come from the input and may be any int in [0, 2^31-1],
  // INT_MAX included, which is DenseMap<int>'s empty key: a map without
  // reserved keys.
  std::map<int, unsigned> KernelOfId;
  for (const auto &Owned : G.getNodes()) {
    const Node *N = Owned.get();
    if (const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N))
      if (M->isEpilogueFused())
        for (const Operand &E : M->getEpilogue()) {
          auto [It, New] =
              KernelOfNode.try_emplace(E.V->getDef(), Kernels.size());
          if (!New)
            return llvm::createStringError(
                llvm::inconvertibleErrorCode(),
                "'%" + E.V->getName() + "' is fused into the kernels of '%" +
                    Kernels[It->second].getLeader()->getName() + "' and '%" +
                    M->getName() + "'");
        }
    // Fused epilogue nodes were mapped to their template's kernel above.
    auto It = KernelOfNode.find(N);
    if (It != KernelOfNode.end()) {
      Kernels[It->second].Nodes.push_back(N);
      continue;
    }
    if (const auto *B = llvm::dyn_cast<BufferNode>(N))
      if (B->getKernel() != BufferNode::NoKernel) {
        auto [Id, New] = KernelOfId.try_emplace(B->getKernel(), Kernels.size());
        if (!New) {
          KernelOfNode[N] = Id->second;
          Kernels[Id->second].Nodes.push_back(N);
          continue;
        }
      }
    KernelOfNode[N] = Kernels.size();
    Kernels.emplace_back();
    Kernels.back().Nodes.push_back(N);
  }

  // Read/write dependencies between kernels.
  std::vector<unsigned> InDegree(Kernels.size());
  std::vector<std::vector<unsigned>> Succs(Kernels.size());
  for (unsigned K = 0; K < Kernels.size(); ++K) {
    for (const Node *N : Kernels[K].Nodes)
      for (const Operand &O : N->getOperands()) {
        const Node *Def = O.V->getDef();
        if (!Def)
          continue;
        unsigned D = KernelOfNode.lookup(Def);
        if (D != K && !llvm::is_contained(Kernels[K].Deps, D))
          Kernels[K].Deps.push_back(D);
      }
    for (unsigned D : Kernels[K].Deps) {
      Succs[D].push_back(K);
      ++InDegree[K];
    }
  }

  // Kahn's algorithm; ties go to the kernel that appears first.
  std::priority_queue<unsigned, std::vector<unsigned>, std::greater<unsigned>>
      Ready;
  for (unsigned K = 0; K < Kernels.size(); ++K)
    if (InDegree[K] == 0)
      Ready.push(K);
  std::vector<unsigned> Order;
  while (!Ready.empty()) {
    unsigned K = Ready.top();
    Ready.pop();
    Order.push_back(K);
    for (unsigned S : Succs[K])
      if (--InDegree[S] == 0)
        Ready.push(S);
  }
  if (Order.size() != Kernels.size()) {
    for (unsigned K = 0; K < Kernels.size(); ++K)
      if (InDegree[K] != 0)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "kernels depend on each other in a cycle through '%" +
                Kernels[K].getLeader()->getName() + "'");
  }

  Schedule S;
  std::vector<unsigned> Position(Kernels.size());
  for (unsigned I = 0; I < Order.size(); ++I)
    Position[Order[I]] = I;
  for (unsigned K : Order) {
    ScheduledKernel SK = std::move(Kernels[K]);
    for (unsigned &D : SK.Deps)
      D = Position[D];
    llvm::sort(SK.Deps);
    if (const auto *C =
            llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(SK.getLeader()))
      S.Collectives.push_back(C);
    S.Kernels.push_back(std::move(SK));
  }
  return S;
}

namespace {

class TestPrintSchedulePass : public Pass {
public:
  llvm::StringRef getArgument() const override { return "test-print-schedule"; }
  llvm::StringRef getDescription() const override {
    return "Print the kernel execution order and the collective node list";
  }
  llvm::Error run(Graph &G) override {
    llvm::Expected<Schedule> S = buildSchedule(G);
    if (!S)
      return Ctx.Diags->error(G.getLoc(), toString(S.takeError()));
    llvm::raw_ostream &OS = *Ctx.AnalysisOS;
    OS << "schedule @" << G.getName() << '\n';
    for (unsigned I = 0; I < S->Kernels.size(); ++I) {
      const ScheduledKernel &K = S->Kernels[I];
      OS << "  " << I << ": ";
      llvm::interleaveComma(K.Nodes, OS,
                            [&](const Node *N) { OS << '%' << N->getName(); });
      const Node *L = K.getLeader();
      OS << " (";
      if (!L->getKindKeyword().empty())
        OS << L->getKindKeyword() << ' ';
      OS << L->getOpName() << ')';
      if (!K.Deps.empty()) {
        OS << " after ";
        llvm::interleaveComma(K.Deps, OS);
      }
      OS << '\n';
    }
    OS << "collectives @" << G.getName() << ':';
    for (const CollectiveMultiTemplateBufferNode *C : S->Collectives)
      OS << " %" << C->getName();
    OS << '\n';
    OS.flush();
    return llvm::Error::success();
  }
};

} // namespace

std::unique_ptr<Pass> mtsched::createTestPrintSchedulePass() {
  return std::make_unique<TestPrintSchedulePass>();
}
