//===- Lowering.cpp - The `lower` pass ------------------------------------===//
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/IR/Attention.h"
#include "mtsched/IR/OpUnit.h"
#include "mtsched/Support/Diagnostics.h"
#include <map>
#include <tuple>

using namespace mtsched;

llvm::StringRef mtsched::collectiveModeName(CollectiveMode M) {
  return M == CollectiveMode::Deferred ? "deferred" : "immediate";
}

CustomOpClass mtsched::classifyCustomOp(llvm::StringRef Name,
                                        llvm::ArrayRef<Choice> Configs) {
  CustomOpClass C;
  C.Kind = collectiveKindInName(Name);
  if (C.Kind != CollectiveKind::None) {
    C.IsCollective = true;
    return C;
  }
  // The configs decide; if they name different collectives the kind is
  // unknown, but the op is still collective.
  for (const Choice &Config : Configs) {
    CollectiveKind K = collectiveKindInName(Config.Name);
    if (K == CollectiveKind::None)
      continue;
    if (C.IsCollective && C.Kind != K)
      C.Kind = CollectiveKind::Unknown;
    else if (!C.IsCollective)
      C.Kind = K;
    C.IsCollective = true;
  }
  return C;
}

std::string mtsched::processGroupOf(const AttrDict &Attrs) {
  for (llvm::StringRef Key : {"group", "process_group"})
    if (std::optional<llvm::StringRef> G = Attrs.getString(Key))
      return G->str();
  return std::string(WorldGroupName);
}

namespace {

class LowerPass : public Pass {
public:
  explicit LowerPass(const LoweringOptions &Opts) : Opts(Opts) {}
  llvm::StringRef getArgument() const override { return "lower"; }
  llvm::StringRef getDescription() const override {
    return "Lower high-level ops to buffer / multi_template_buffer / "
           "collective_multi_template_buffer nodes";
  }
  llvm::Error run(Graph &G) override;

private:
  std::unique_ptr<Node> lower(const OpNode &N, llvm::Error &Err);
  /// Why N lowered to no choice at all: --disable-choices took them all, or
  /// there were none to begin with (a choices file's empty list, a node
  /// with no configs, no tile that fits its shape).
  std::string noChoicesMessage(const OpNode &N);
  template <typename T> std::unique_ptr<T> copyOf(const OpNode &N) {
    auto New = std::make_unique<T>(N.getOp(), N.getLoc());
    New->setCustomName(N.getCustomName());
    New->getOperands() = N.getOperands();
    New->getAttrs() = N.getAttrs();
    return New;
  }

  LoweringOptions Opts;
  /// Pruned GEMM choice lists by (M, N, K, dtype): models repeat the same
  /// shapes in every layer.
  std::map<std::tuple<int64_t, int64_t, int64_t, DType>, ChoiceList>
      GemmChoices;
  /// Built-in collective choice lists by kind and group, shared the same
  /// way: a group's topology decides its list.
  std::map<std::tuple<CollectiveKind, std::string, int64_t>, ChoiceList>
      CollectiveChoices;
  /// The world size of the graph being lowered.
  int64_t WorldSize = 1;
};

} // namespace

std::unique_ptr<Node> LowerPass::lower(const OpNode &N, llvm::Error &Err) {
  switch (getOpInfo(N.getOp()).Category) {
  case OpCategory::Pointwise:
  case OpCategory::Reduction:
  case OpCategory::Layout:
    return copyOf<BufferNode>(N);
  case OpCategory::Unit: {
    // An op unit with kernel choices (conv2d) is tuned like a matmul: its
    // own file says which choices fit N (IR/OpUnit.h).
    const OpUnitInfo *Info = lookupOpUnitInfo(N.getOp());
    if (!Info || !Info->Choices)
      return copyOf<BufferNode>(N);
    auto MTB = copyOf<MultiTemplateBufferNode>(N);
    std::vector<Choice> Choices;
    for (std::string &Name : Info->Choices(N))
      if (!Opts.Choices.Disabled.count(Name))
        Choices.push_back(Choice{std::move(Name), {}, {}});
    MTB->setChoices(std::move(Choices));
    return MTB;
  }
  case OpCategory::MatMul: {
    auto MTB = copyOf<MultiTemplateBufferNode>(N);
    const TensorType &Out = N.getType();
    int64_t M = Out.numElements() / Out.innerDim();
    int64_t K = N.getOperand(0)->getType().innerDim();
    DType Dt = N.getOperand(0)->getType().Dtype;
    if (N.getOp() == OpCode::SwiGlu) {
      // Batched weights: a tile covers the rows of one batch.
      bool Batched = N.getOperand(1)->getType().rank() > 2;
      MTB->setChoices(
          Opts.Choices.swigluChoices(Batched ? Out.Shape[Out.rank() - 2] : M,
                                     Out.innerDim(), K, Dt, Batched));
      return MTB;
    }
    if (N.getOp() == OpCode::Attention) {
      // The verifier accepted N, so its shape is well formed.
      std::optional<AttentionShape> S = attentionShapeOf(N);
      MTB->setChoices(S ? Opts.Choices.attentionChoices(*S)
                        : std::vector<Choice>());
      return MTB;
    }
    auto [It, New] = GemmChoices.try_emplace({M, Out.innerDim(), K, Dt});
    if (New)
      It->second =
          makeChoiceList(Opts.Choices.gemmChoices(M, Out.innerDim(), K, Dt));
    MTB->setChoices(It->second);
    return MTB;
  }
  case OpCategory::Collective: {
    auto C = copyOf<CollectiveMultiTemplateBufferNode>(N);
    C->setCollectiveKind(collectiveKindOf(N.getOp()));
    C->setGroup(processGroupOf(N.getAttrs()));
    C->setGroupLoc(N.getLoc());
    auto [It, New] = CollectiveChoices.try_emplace(
        std::make_tuple(C->getCollectiveKind(), C->getGroup(), WorldSize));
    if (New) {
      std::vector<int64_t> Ranks;
      if (Ctx.M)
        Ranks = Ctx.M->groupRanks(C->getGroup(), WorldSize);
      It->second = makeChoiceList(
          Opts.Choices.collectiveChoices(C->getCollectiveKind(), Ranks));
    }
    C->setChoices(It->second);
    return C;
  }
  case OpCategory::Custom: {
    CustomOpClass Class = classifyCustomOp(N.getCustomName(), N.getConfigs());
    std::unique_ptr<MultiTemplateBufferNode> MTB;
    if (Class.IsCollective) {
      auto C = copyOf<CollectiveMultiTemplateBufferNode>(N);
      C->setCollectiveKind(Class.Kind);
      C->setGroup(processGroupOf(N.getAttrs()));
      C->setGroupLoc(N.getLoc());
      MTB = std::move(C);
    } else {
      MTB = copyOf<MultiTemplateBufferNode>(N);
    }
    std::vector<Choice> Choices;
    for (const Choice &Config : N.getConfigs())
      if (!Opts.Choices.Disabled.count(Config.Name))
        Choices.push_back(Config);
    MTB->setChoices(std::move(Choices));
    return MTB;
  }
  }
  Err = Ctx.Diags->error(N.getLoc(), "cannot lower op '" + N.getOpName() + "'");
  return nullptr;
}

std::string LowerPass::noChoicesMessage(const OpNode &N) {
  std::string Head = "no choices left for '%" + N.getName() + "' ('" +
                     N.getOpName().str() + "')";
  // Lower it again with nothing disabled (an error path: the cost is
  // irrelevant) to tell the two causes apart.
  LoweringOptions All = Opts;
  All.Choices.Disabled.clear();
  LowerPass Probe(All);
  Probe.setContext(getContext());
  llvm::Error Err = llvm::Error::success();
  std::unique_ptr<Node> Lowered = Probe.lower(N, Err);
  llvm::consumeError(std::move(Err));
  auto *MTB = llvm::dyn_cast_or_null<MultiTemplateBufferNode>(Lowered.get());
  if (MTB && !MTB->getChoices().empty()) {
    std::string Names;
    for (const Choice &C : MTB->getChoices())
      Names += (Names.empty() ? "" : ", ") + C.Name;
    return Head + " after disabling choices (--disable-choices removed " +
           std::to_string(MTB->getChoices().size()) +
           (MTB->getChoices().size() == 1 ? " choice: " : " choices: all of ") +
           Names + ")";
  }
  return "no choices for '%" + N.getName() + "' ('" + N.getOpName().str() +
         "'): none is configured for it, none was disabled";
}

llvm::Error LowerPass::run(Graph &G) {
  WorldSize = G.getWorldSize();
  // A topology file for another job would offer choices that cannot run:
  // every rank stops here alike (all read the same flags and graph).
  if (llvm::Error E =
          Opts.Choices.Topo.checkWorld(WorldSize, Opts.Choices.TopologyPath))
    return Ctx.Diags->error(G.getLoc(), "bad --topology for graph @" +
                                            G.getName() + ": " +
                                            llvm::toString(std::move(E)));
  for (size_t I = 0; I < G.size(); ++I) {
    auto *Op = llvm::dyn_cast<OpNode>(G.getNodes()[I].get());
    if (!Op)
      continue;
    llvm::Error Err = llvm::Error::success();
    std::unique_ptr<Node> New = lower(*Op, Err);
    if (Err)
      return Err;
    auto *MTB = llvm::dyn_cast<MultiTemplateBufferNode>(New.get());
    if (MTB && MTB->getChoices().empty())
      return Ctx.Diags->error(Op->getLoc(), noChoicesMessage(*Op));
    G.replaceNode(Op, std::move(New));
  }
  return llvm::Error::success();
}

std::unique_ptr<Pass> mtsched::createLowerPass(const LoweringOptions &Opts) {
  return std::make_unique<LowerPass>(Opts);
}
