//===- DecisionTable.cpp - Thread ranks' decisions, kept off the IR -------===//
#include "mtsched/Autotune/DecisionTable.h"
#include "llvm/ADT/StringExtras.h"
#include <cstring>

using namespace mtsched;

void DecisionDigest::add(unsigned GraphIndex,
                         const MultiTemplateBufferNode &N) {
  auto Name = [&](llvm::StringRef S) -> llvm::raw_ostream & {
    return OS << S.size() << ':' << S;
  };
  auto Us = [&](double V) {
    uint64_t Bits;
    std::memcpy(&Bits, &V, sizeof(Bits));
    OS << Bits;
  };
  OS << 'N' << GraphIndex << '/' << N.getIndex() << ' ';
  Name(N.getDecision()) << ' ' << N.isEpilogueFused()
                        << dispatchUnitName(N.getDispatchUnit());
  if (const auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N))
    OS << C->isFallback() << syncStateName(C->getSync());
  for (const std::vector<ChoiceTiming> *L :
       {&N.getTimings(), &N.getFusedTimings()}) {
    OS << '[';
    for (const ChoiceTiming &T : *L) {
      Name(T.Choice) << '=';
      Us(T.Us);
      OS << (T.Skipped ? "s," : ",");
    }
    OS << ']';
  }
  for (const DispatchEntry &E : N.getDispatch()) {
    OS << E.Hint << '>';
    Name(E.Choice) << ',';
  }
  OS << '\n';
}

std::string DecisionDigest::result() { return llvm::toHex(OS.sha1()); }

DecisionTable::DecisionTable(const Module &M) {
  for (const auto &G : M.getGraphs()) {
    Slots.emplace_back(G->size());
    for (std::atomic<MultiTemplateBufferNode *> &S : Slots.back())
      S.store(nullptr, std::memory_order_relaxed);
  }
}

DecisionTable::~DecisionTable() {
  for (auto &Graph : Slots)
    for (std::atomic<MultiTemplateBufferNode *> &S : Graph)
      delete S.load(std::memory_order_relaxed);
}

void DecisionTable::offer(unsigned GraphIndex,
                          std::unique_ptr<MultiTemplateBufferNode> Decided) {
  if (GraphIndex >= Slots.size() ||
      Decided->getIndex() >= Slots[GraphIndex].size())
    return;
  std::atomic<MultiTemplateBufferNode *> &S =
      Slots[GraphIndex][Decided->getIndex()];
  MultiTemplateBufferNode *Expected = nullptr;
  if (S.compare_exchange_strong(Expected, Decided.get(),
                                std::memory_order_acq_rel))
    Decided.release();
}

llvm::Error DecisionTable::apply(Module &M) const {
  for (size_t GI = 0; GI < Slots.size(); ++GI)
    for (size_t I = 0; I < Slots[GI].size(); ++I) {
      const MultiTemplateBufferNode *D = Slots[GI][I].load();
      if (!D)
        continue;
      MultiTemplateBufferNode *N = nullptr;
      if (GI < M.getGraphs().size() && I < M.getGraphs()[GI]->size())
        N = llvm::dyn_cast<MultiTemplateBufferNode>(
            M.getGraphs()[GI]->getNodes()[I].get());
      if (!N || N->getKind() != D->getKind())
        return llvm::createStringError(
            "decision table: node " + llvm::Twine(I) + " of graph " +
            llvm::Twine(GI) + " is not the multi-template buffer decided");
      // Every field deciding sets (Autotuner.cpp, Decision.cpp,
      // SubgroupTuning.cpp), nothing else: the stand-in's other fields are
      // the module's own.
      N->setDecision(D->getDecision());
      N->setEpilogueFused(D->isEpilogueFused());
      N->getTimings() = D->getTimings();
      N->getFusedTimings() = D->getFusedTimings();
      N->getDispatch() = D->getDispatch();
      N->setDispatchUnit(D->getDispatchUnit());
      if (auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(N)) {
        const auto *DC = llvm::cast<CollectiveMultiTemplateBufferNode>(D);
        C->setSync(DC->getSync());
        C->setFallback(DC->isFallback());
      }
    }
  return llvm::Error::success();
}
