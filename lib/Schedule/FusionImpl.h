//===- FusionImpl.h - FusionAnalysis's state --------------------*- C++ -*-===//
//
// Private to lib/Schedule: Fusion.cpp groups buffers into kernels and runs
// the analysis; FusionEpilogue.cpp finds each template's epilogue.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_SCHEDULE_FUSIONIMPL_H
#define MTSCHED_LIB_SCHEDULE_FUSIONIMPL_H

#include "mtsched/Schedule/Fusion.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include <optional>
#include <string>
#include <vector>

namespace mtsched {
namespace detail {

class FusionAnalysis {
public:
  FusionAnalysis(const Graph &G, const FusionOptions &Opts) : G(G), Opts(Opts) {
    for (const auto &N : G.getNodes())
      for (const Operand &O : N->getOperands()) {
        auto &Us = Users[O.V];
        if (Us.empty() || Us.back() != N.get())
          Us.push_back(N.get());
      }
    for (const Operand &O : G.getOutputs())
      Outputs.insert(O.V);
  }

  FusionPlan run();

private:
  using KernelSet = llvm::DenseSet<const Node *>;

  /// A buffer groupBuffers may put in a kernel with others
  /// (canShareKernel), unless it is a layout op or a sum/max taken out of
  /// kernels (or a sum/max with --reduction-fusion=false).
  bool isGroupable(const Node *N) const {
    return N && canShareKernel(*N) && !Excluded.count(N) &&
           (Opts.Reductions || !isFusableReduction(*N));
  }
  /// The members of kernel K in program order.
  std::vector<const Node *> membersOf(unsigned K) const {
    std::vector<const Node *> Ms(KernelSets[K].begin(), KernelSets[K].end());
    llvm::sort(Ms, [](const Node *A, const Node *B) {
      return A->getIndex() < B->getIndex();
    });
    return Ms;
  }
  /// Kernel K's form, replayed from its members.
  void rebuildForm(unsigned K) {
    std::vector<const Node *> Ms = membersOf(K);
    Forms[K].emplace(*Ms.front());
    for (const Node *N : llvm::drop_begin(Ms))
      Forms[K]->join(*N);
  }
  /// The operand through which a fusion of Consumer into the kernel would
  /// form a cycle, or null. Only nodes after the kernel's first node can
  /// depend on it, which keeps the search short.
  const Node *cycleThrough(const Node *Consumer, const KernelSet &Kernel,
                           unsigned FirstIndex);
  /// Why U cannot join M's epilogue after Cur; empty if it can.
  std::string whyNotJoin(const MultiTemplateBufferNode &M, const Node *U,
                         const Node *Cur, const KernelSet &Members);
  /// Members of Chain, but the last, whose values are read outside it.
  std::vector<const Node *>
  readOutside(llvm::ArrayRef<const Node *> Chain) const;
  void findEpilogue(const MultiTemplateBufferNode &M, FusionPlan &Plan);
  void groupBuffers(FusionPlan &Plan);
  /// Members of read-through kernels that cannot stay
  /// (membersThatCannotStay). Empty when every kernel is well formed.
  std::vector<const Node *> invalidMembers() const;
  /// Moves a layout op alone in its kernel into the kernel of its readers
  /// when they are all in one (a slice or transpose of a graph input read
  /// by a pointwise group): the group then reads through it.
  void absorbLayoutProducers();

  const Graph &G;
  const FusionOptions &Opts;
  llvm::DenseMap<const Value *, llvm::SmallVector<const Node *, 2>> Users;
  llvm::DenseSet<const Value *> Outputs;
  /// Kernel index of each grouped buffer.
  llvm::DenseMap<const Node *, unsigned> KernelOf;
  std::vector<KernelSet> KernelSets;
  std::vector<unsigned> KernelFirst;
  /// Kernels that are epilogue chains and take no other members.
  llvm::DenseSet<unsigned> Closed;
  /// The form of each kernel of buffers (none for an epilogue chain).
  std::vector<std::optional<KernelForm>> Forms;
  /// Layout ops and sum/max that stay out of kernels (invalidMembers).
  llvm::DenseSet<const Node *> Excluded;
  /// The template whose epilogue each chain member is in.
  llvm::DenseMap<const Node *, const MultiTemplateBufferNode *> EpilogueOwner;
};

} // namespace detail
} // namespace mtsched

#endif // MTSCHED_LIB_SCHEDULE_FUSIONIMPL_H
