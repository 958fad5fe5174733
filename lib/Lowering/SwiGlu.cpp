//===- SwiGlu.cpp - The `fuse-swiglu` pass --------------------------------===//
#include "mtsched/Lowering/SwiGlu.h"
#include "mtsched/Support/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"
#include <map>
#include <tuple>

using namespace mtsched;

/// The matmul MTB defining V, decided or not as asked, or null.
static MultiTemplateBufferNode *matMul(const Value *V, bool Decided) {
  auto *M = llvm::dyn_cast_or_null<MultiTemplateBufferNode>(V->getDef());
  // An fp8 matmul (four operands: the scales) has no SwiGLU template.
  if (!M || M->getOp() != OpCode::MatMul || M->getNumOperands() != 2 ||
      M->isDecided() != Decided ||
      llvm::isa<CollectiveMultiTemplateBufferNode>(M))
    return nullptr;
  return M;
}

UseCounts mtsched::countUses(const Graph &G) {
  UseCounts Uses;
  for (const auto &N : G.getNodes()) {
    const std::vector<Operand> &Ops = N->getOperands();
    for (size_t I = 0; I < Ops.size(); ++I)
      if (std::none_of(Ops.begin(), Ops.begin() + I,
                       [&](const Operand &X) { return X.V == Ops[I].V; }))
        ++Uses[Ops[I].V];
  }
  for (const Operand &O : G.getOutputs())
    ++Uses[O.V];
  return Uses;
}

void mtsched::rewriteUntilNoMatch(
    Graph &G, llvm::function_ref<bool(Node &, const UseCounts &)> Rewrite) {
  UseCounts Uses = countUses(G);
  for (size_t I = 0; I < G.size();) {
    if (!Rewrite(*G.getNodes()[I], Uses)) {
      ++I;
      continue;
    }
    Uses = countUses(G);
    I = 0;
  }
}

/// Whether V's only use is one operand of one node.
static bool usedOnce(const UseCounts &Uses, const Value *V) {
  auto It = Uses.find(V);
  return It != Uses.end() && It->second == 1;
}

std::optional<SwiGluMatch>
mtsched::matchSwiGlu(Node &Mul, const UseCounts &Uses, bool Decided) {
  if (!llvm::isa<BufferNode>(Mul) || Mul.getOp() != OpCode::Mul ||
      Mul.getNumOperands() != 2)
    return std::nullopt;
  for (unsigned SiluIdx = 0; SiluIdx < 2; ++SiluIdx) {
    Node *Silu = Mul.getOperand(SiluIdx)->getDef();
    Value *UpV = Mul.getOperand(1 - SiluIdx);
    if (!Silu || !llvm::isa<BufferNode>(Silu) || Silu->getOp() != OpCode::Silu)
      continue;
    MultiTemplateBufferNode *Gate = matMul(Silu->getOperand(0), Decided);
    MultiTemplateBufferNode *Up = matMul(UpV, Decided);
    if (!Gate || !Up || Gate == Up)
      continue;
    Value *H = Gate->getOperand(0);
    Value *Wg = Gate->getOperand(1), *Wu = Up->getOperand(1);
    const TensorType &WgT = Wg->getType(), &WuT = Wu->getType();
    // Weights [K, N], or per batch (bmm: the matmul verified that their
    // batch dimensions are h's).
    if (Up->getOperand(0) != H ||
        (WgT.rank() != 2 && WgT.rank() != H->getType().rank()) || WgT != WuT ||
        H->getType().Dtype != WgT.Dtype)
      continue;
    // Every value of the pattern has the result's shape and type.
    if (Gate->getType() != Mul.getType() || Up->getType() != Mul.getType() ||
        Silu->getType() != Mul.getType())
      continue;
    // Users are known (silu reads %g, mul reads the silu and %u): one use
    // each means nothing else reads or returns them.
    if (!usedOnce(Uses, Gate->getResult()) ||
        !usedOnce(Uses, Silu->getResult()) || !usedOnce(Uses, UpV))
      continue;
    return SwiGluMatch{Gate, Up, Silu, &Mul, H, Wg, Wu};
  }
  return std::nullopt;
}

namespace {

class FuseSwiGluPass : public Pass {
public:
  explicit FuseSwiGluPass(const LoweringOptions &Opts) : Opts(Opts) {}
  llvm::StringRef getArgument() const override { return "fuse-swiglu"; }
  llvm::StringRef getDescription() const override {
    return "Add a merged gate+up GEMM (swiglu) as an alternative to each "
           "mul(silu(matmul), matmul) over one input";
  }
  llvm::Error run(Graph &G) override;

private:
  LoweringOptions Opts;
};

} // namespace

llvm::Error FuseSwiGluPass::run(Graph &G) {
  llvm::StringSet<> Names;
  for (const auto &In : G.getInputs())
    Names.insert(In->getName());
  llvm::StringSet<> HasAlternative;
  for (const auto &N : G.getNodes()) {
    Names.insert(N->getName());
    if (std::optional<llvm::StringRef> Of =
            N->getAttrs().getString(AlternativeOfAttr))
      HasAlternative.insert(*Of);
  }
  UseCounts Uses = countUses(G);
  // Lists shared by every match of one shape, as lowering shares them.
  std::map<std::tuple<int64_t, int64_t, int64_t, DType, bool>, ChoiceList>
      Lists;
  for (size_t I = 0; I < G.size(); ++I) {
    Node &Mul = *G.getNodes()[I];
    // An alternative already added (the pass ran twice) is not added again.
    if (HasAlternative.count(Mul.getName()))
      continue;
    std::optional<SwiGluMatch> S = matchSwiGlu(Mul, Uses);
    if (!S)
      continue;
    const TensorType &Out = Mul.getType();
    // Batched weights: the rows of one batch are what a tile covers.
    bool Batched = S->Wg->getType().rank() > 2;
    int64_t M = Batched ? Out.Shape[Out.rank() - 2]
                        : Out.numElements() / Out.innerDim();
    int64_t K = S->H->getType().innerDim();
    auto [It, New] =
        Lists.try_emplace({M, Out.innerDim(), K, Out.Dtype, Batched});
    if (New)
      It->second = makeChoiceList(
          Opts.Choices.swigluChoices(M, Out.innerDim(), K, Out.Dtype, Batched));
    if (It->second->empty())
      continue;
    std::string Name = Mul.getName() + ".swiglu";
    for (unsigned Suffix = 1; Names.count(Name); ++Suffix)
      Name = Mul.getName() + ".swiglu" + std::to_string(Suffix);
    Names.insert(Name);
    // The alternative points at the mul it would replace.
    auto Alt =
        std::make_unique<MultiTemplateBufferNode>(OpCode::SwiGlu, Mul.getLoc());
    Alt->getOperands() = {
        {S->H, Mul.getLoc()}, {S->Wg, Mul.getLoc()}, {S->Wu, Mul.getLoc()}};
    Alt->getAttrs().set(AlternativeOfAttr, Attribute::getString(Mul.getName()));
    Alt->setChoices(It->second);
    Value *V = G.createValue(Name, Out, Mul.getLoc());
    G.insertNode(I + 1, std::move(Alt), V);
    ++I;
  }
  return llvm::Error::success();
}

std::unique_ptr<Pass>
mtsched::createFuseSwiGluPass(const LoweringOptions &Opts) {
  return std::make_unique<FuseSwiGluPass>(Opts);
}
