//===- VerifySchedule.cpp - Run the schedule as the GPU would -------------===//
//
// The fusion rules and the verifier make illegal fusion hard to write; this
// check proves the decided schedule runnable, whatever produced it, by
// replaying which kernel writes and reads which buffer.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Schedule/Fusion.h"
#include "mtsched/Schedule/Schedule.h"
#include "mtsched/Support/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

using namespace mtsched;

static llvm::Error fail(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

/// Prologue fusion's marks (select-prologue, mtsched/Autotune/PrologueSelect.h,
/// a layer above): a norm with `prologue_into` runs in its readers'
/// prologues and writes nothing; a GEMM with `prologue = "n"` reads the
/// norm's operands, not its result.
static constexpr llvm::StringLiteral PrologueIntoAttr = "prologue_into";
static constexpr llvm::StringLiteral PrologueAttr = "prologue";

/// The node whose prologue N runs in place of reading its A operand, or
/// null when N runs none; an error when N names one that is not its A
/// operand's norm or that norm does not run in its readers' prologues.
static llvm::Expected<const Node *> prologueOf(const Node &N) {
  std::optional<llvm::StringRef> Name = N.getAttrs().getString(PrologueAttr);
  if (!Name)
    return nullptr;
  const Node *Norm = N.getNumOperands() ? N.getOperand(0)->getDef() : nullptr;
  if (!Norm || Norm->getName() != *Name ||
      !Norm->getAttrs().contains(PrologueIntoAttr))
    return fail("'%" + N.getName() + "' runs prologue '%" + *Name +
                "', which is not a norm of its A operand run in its "
                "readers' prologues");
  return Norm;
}

/// Whether the nodes of kernel SK may be one kernel, by the rules the
/// fusion pass groups with (Fusion.h): a fused template absorbs epilogues
/// and its members may join one; every member of a group of buffers may
/// share a kernel and fits its form (KernelForm); the layout and sum/max
/// members of a read-through kernel can stay.
/// ReadOutside: whether a node's value is returned or read by a node
/// outside the set given.
using ReadOutsideFn = llvm::function_ref<bool(
    const Node *, const llvm::DenseSet<const Node *> &)>;
static llvm::Error checkFusion(const ScheduledKernel &SK,
                               ReadOutsideFn ReadOutside) {
  const Node *Leader = SK.getLeader();
  const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(Leader);
  if (M && M->isEpilogueFused()) {
    if (std::string Why = whyNoEpilogue(*M); !Why.empty())
      return fail("has a fused epilogue, but " + Why);
    for (const Node *N : llvm::drop_begin(SK.Nodes))
      if (std::string Why = whyNotEpilogueMember(*M, *N); !Why.empty())
        return fail("cannot hold '%" + N->getName() + "': " + Why);
    return llvm::Error::success();
  }
  if (SK.Nodes.size() < 2)
    return llvm::Error::success();
  KernelForm Form(*Leader);
  for (const Node *N : SK.Nodes) {
    std::string Why = Form.whyNotJoin(*N);
    if (!Why.empty())
      return fail("cannot hold '%" + N->getName() + "': " + Why);
    if (N != Leader)
      Form.join(*N);
  }
  if (!Form.readsThrough() && !Form.hasLayout())
    return llvm::Error::success();
  llvm::DenseSet<const Node *> In(SK.Nodes.begin(), SK.Nodes.end());
  auto Escapes = [&](const Node *N) { return ReadOutside(N, In); };
  std::vector<const Node *> Out = membersThatCannotStay(SK.Nodes, Escapes);
  if (!Out.empty())
    return fail(
        "cannot hold " +
        std::string(isLayout(Out.front()->getOp()) ? "layout op"
                                                   : "reduction") +
        " '%" + Out.front()->getName() + "': " +
        (Form.reducesRows()
             ? std::string("a kernel with a row reduction writes no "
                           "value it reads through")
             : std::string("a kernel that reads through layout ops or "
                           "sum/max computes in float, writes values of one "
                           "shape, and leaves a reshape read outside it a "
                           "view")));
  return llvm::Error::success();
}

llvm::Error mtsched::verifySchedule(const Graph &G) {
  llvm::Expected<Schedule> S = buildSchedule(G);
  if (!S)
    return S.takeError();
  llvm::DenseMap<const Value *, llvm::SmallVector<const Node *, 2>> Users;
  for (const auto &N : G.getNodes())
    for (const Operand &O : N->getOperands())
      Users[O.V].push_back(N.get());
  llvm::DenseSet<const Value *> Returned;
  for (const Operand &O : G.getOutputs())
    Returned.insert(O.V);
  auto ReadOutside = [&](const Node *N,
                         const llvm::DenseSet<const Node *> &In) {
    if (Returned.count(N->getResult()))
      return true;
    auto It = Users.find(N->getResult());
    return It != Users.end() && llvm::any_of(It->second, [&](const Node *U) {
             return !In.count(U);
           });
  };
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
    if (llvm::Error E = checkFusion(SK, ReadOutside))
      return fail(What() + " " + toString(std::move(E)));
    // A norm run in its readers' prologues writes nothing and reads
    // nothing here: its readers read its operands.
    if (SK.Nodes.size() == 1 && Leader->getAttrs().contains(PrologueIntoAttr))
      continue;
    llvm::DenseSet<const Value *> Computed;
    for (const Node *N : SK.Nodes) {
      llvm::Expected<const Node *> Norm = prologueOf(*N);
      if (!Norm)
        return fail(What() + ": " + toString(Norm.takeError()));
      llvm::SmallVector<const Value *, 4> Reads;
      for (const Operand &O : N->getOperands())
        if (!*Norm || O.V != (*Norm)->getResult())
          Reads.push_back(O.V);
      if (*Norm)
        for (const Operand &O : (*Norm)->getOperands())
          Reads.push_back(O.V);
      for (const Value *V : Reads)
        if (!Computed.count(V) && !WrittenBy.count(V))
          return fail(What() + " reads '%" + V->getName() +
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
