//===- VerifySchedule.cpp - Run the schedule as the GPU would -------------===//
//
// The fusion rules and the verifier make illegal fusion hard to write; this
// check proves the decided schedule runnable, whatever produced it, by
// replaying which kernel writes and reads which buffer.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Passes/Diagnostics.h"
#include "mtsched/Schedule/Schedule.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

using namespace mtsched;

static llvm::Error fail(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

llvm::Error mtsched::verifySchedule(const Graph &G) {
  llvm::Expected<Schedule> S = buildSchedule(G);
  if (!S)
    return S.takeError();
  // The kernel that wrote each buffer; graph inputs are there from the
  // start.
  llvm::DenseMap<const Value *, unsigned> WrittenBy;
  constexpr unsigned Input = ~0u;
  for (const auto &In : G.getInputs())
    WrittenBy[In.get()] = Input;
  for (unsigned K = 0; K < S->Kernels.size(); ++K) {
    const ScheduledKernel &SK = S->Kernels[K];
    const Node *Leader = SK.getLeader();
    auto What = [&] {
      return "kernel " + std::to_string(K) + " ('%" + Leader->getName() + "')";
    };
    llvm::DenseSet<const Value *> Computed;
    for (const Node *N : SK.Nodes) {
      for (const Operand &O : N->getOperands())
        if (!Computed.count(O.V) && !WrittenBy.count(O.V))
          return fail(What() + " reads '%" + O.V->getName() +
                      "', which no earlier kernel writes");
      for (unsigned R = 0; R < N->getNumResults(); ++R)
        Computed.insert(N->getResult(R));
    }
    std::vector<const Value *> Writes;
    const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(Leader);
    if (M && M->isEpilogueFused())
      Writes = M->getFusedOutputs();
    else
      for (const Node *N : SK.Nodes)
        for (unsigned R = 0; R < N->getNumResults(); ++R)
          Writes.push_back(N->getResult(R));
    for (const Value *V : Writes) {
      if (!Computed.count(V))
        return fail(What() + " is to write '%" + V->getName() +
                    "', which it does not compute");
      auto [It, New] = WrittenBy.try_emplace(V, K);
      if (!New)
        return fail("'%" + V->getName() + "' is written by kernel " +
                    std::to_string(It->second) + " and by " + What());
    }
  }
  for (const Operand &O : G.getOutputs())
    if (!WrittenBy.count(O.V))
      return fail("returned value '%" + O.V->getName() +
                  "' is never written to memory");
  return llvm::Error::success();
}

namespace {

class VerifySchedulePass : public Pass {
public:
  llvm::StringRef getArgument() const override { return "verify-schedule"; }
  llvm::StringRef getDescription() const override {
    return "Check that the decided schedule runs: every kernel reads only "
           "buffers written before it, and each buffer is written once";
  }
  llvm::Error run(Graph &G) override {
    if (llvm::Error E = verifySchedule(G))
      return Ctx.Diags->error(G.getLoc(), "illegal schedule for '@" +
                                              G.getName() +
                                              "': " + toString(std::move(E)));
    return llvm::Error::success();
  }
};

} // namespace

std::unique_ptr<Pass> mtsched::createVerifySchedulePass() {
  return std::make_unique<VerifySchedulePass>();
}
