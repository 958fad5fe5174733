//===- Graph.cpp ----------------------------------------------------------===//
#include "mtsched/IR/Graph.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

using namespace mtsched;

bool Choice::isExtern() const {
  llvm::StringRef N(Name);
  return N == "nccl" || N.starts_with("extern.");
}

llvm::StringRef Node::getKindKeyword() const {
  switch (K) {
  case Kind::Op:
    return "";
  case Kind::Buffer:
    return "buffer";
  case Kind::MultiTemplateBuffer:
    return "multi_template_buffer";
  case Kind::CollectiveMultiTemplateBuffer:
    return "collective_multi_template_buffer";
  }
  return "";
}

llvm::StringRef Node::getOpName() const {
  if (Op == OpCode::Custom)
    return CustomName;
  return getOpInfo(Op).Name;
}

void Node::copyCommonInto(Node &N) const {
  N.CustomName = CustomName;
  N.Operands = Operands;
  N.Attrs = Attrs;
}

std::unique_ptr<Node> Node::cloneStandIn() const {
  std::unique_ptr<Node> N = clone();
  N->Result = Result;
  N->ExtraResults = ExtraResults;
  N->Index = Index;
  return N;
}

std::unique_ptr<Node> OpNode::clone() const {
  auto N = std::make_unique<OpNode>(getOp(), getLoc());
  copyCommonInto(*N);
  N->Configs = Configs;
  return N;
}

std::unique_ptr<Node> BufferNode::clone() const {
  auto N = std::make_unique<BufferNode>(getOp(), getLoc());
  copyCommonInto(*N);
  N->KernelId = KernelId;
  return N;
}

ChoiceList mtsched::makeChoiceList(std::vector<Choice> Choices) {
  if (Choices.empty()) {
    // Every node starts with no choices: one list serves them all.
    static const ChoiceList Empty =
        std::make_shared<const std::vector<Choice>>();
    return Empty;
  }
  return std::make_shared<const std::vector<Choice>>(std::move(Choices));
}

const Choice *MultiTemplateBufferNode::findChoice(llvm::StringRef Name) const {
  for (const Choice &C : *Choices)
    if (C.Name == Name)
      return &C;
  return nullptr;
}

std::vector<const Value *> MultiTemplateBufferNode::getFusedOutputs() const {
  std::vector<const Value *> Out;
  if (Epilogue.empty())
    return Out;
  for (const Operand &W : EpilogueWrites)
    Out.push_back(W.V);
  Out.push_back(Epilogue.back().V);
  return Out;
}

void MultiTemplateBufferNode::copyMTBInto(MultiTemplateBufferNode &N) const {
  copyCommonInto(N);
  N.Choices = Choices;
  N.Epilogue = Epilogue;
  N.EpilogueWrites = EpilogueWrites;
  N.Decision = Decision;
  N.DecisionLoc = DecisionLoc;
  N.EpilogueFused = EpilogueFused;
  N.Timings = Timings;
  N.FusedTimings = FusedTimings;
  N.Dispatch = Dispatch;
  N.DispUnit = DispUnit;
  N.DispUnitLoc = DispUnitLoc;
}

llvm::StringRef mtsched::dispatchUnitName(DispatchUnit U) {
  return U == DispatchUnit::Bytes ? "bytes" : "m";
}

std::unique_ptr<Node> MultiTemplateBufferNode::clone() const {
  auto N = std::make_unique<MultiTemplateBufferNode>(getOp(), getLoc());
  copyMTBInto(*N);
  return N;
}

llvm::StringRef mtsched::syncStateName(SyncState S) {
  switch (S) {
  case SyncState::Pending:
    return "pending";
  case SyncState::Ok:
    return "ok";
  case SyncState::Failed:
    return "failed";
  }
  return "pending";
}

std::unique_ptr<Node> CollectiveMultiTemplateBufferNode::clone() const {
  auto N =
      std::make_unique<CollectiveMultiTemplateBufferNode>(getOp(), getLoc());
  copyMTBInto(*N);
  N->CKind = CKind;
  N->Group = Group;
  N->GroupLoc = GroupLoc;
  N->Sync = Sync;
  N->Fallback = Fallback;
  return N;
}

int64_t Graph::getWorldSize() const {
  if (std::optional<int64_t> W = Attrs.getInt("world_size"))
    return *W;
  return 1;
}

Value *Graph::addInput(std::string Name, TensorType Type, llvm::SMLoc Loc) {
  Inputs.push_back(
      std::make_unique<Value>(std::move(Name), std::move(Type), Loc));
  return Inputs.back().get();
}

Value *Graph::createValue(std::string Name, TensorType Type, llvm::SMLoc Loc) {
  NodeValues.push_back(
      std::make_unique<Value>(std::move(Name), std::move(Type), Loc));
  return NodeValues.back().get();
}

Node *Graph::appendNode(std::unique_ptr<Node> N, Value *Result,
                        llvm::ArrayRef<Value *> Extra) {
  N->Result = Result;
  N->Index = Nodes.size();
  Result->setDef(N.get());
  N->ExtraResults.assign(Extra.begin(), Extra.end());
  for (Value *V : Extra)
    V->setDef(N.get());
  Nodes.push_back(std::move(N));
  return Nodes.back().get();
}

Node *Graph::replaceNode(Node *Old, std::unique_ptr<Node> New) {
  unsigned I = Old->Index;
  New->Result = Old->Result;
  New->ExtraResults = Old->ExtraResults;
  New->Index = I;
  New->Result->setDef(New.get());
  for (Value *V : New->ExtraResults)
    V->setDef(New.get());
  Nodes[I] = std::move(New);
  return Nodes[I].get();
}

Node *Graph::insertNode(unsigned Index, std::unique_ptr<Node> N,
                        Value *Result) {
  N->Result = Result;
  Result->setDef(N.get());
  Node *Raw = N.get();
  Nodes.insert(Nodes.begin() + Index, std::move(N));
  for (unsigned I = Index; I < Nodes.size(); ++I)
    Nodes[I]->Index = I;
  return Raw;
}

void Graph::eraseNode(Node *N) {
  unsigned Index = N->Index;
  N->Result->setDef(nullptr);
  for (Value *V : N->ExtraResults)
    V->setDef(nullptr);
  Nodes.erase(Nodes.begin() + Index);
  for (unsigned I = Index; I < Nodes.size(); ++I)
    Nodes[I]->Index = I;
}

std::vector<Node *> Graph::getUsers(const Value *V) const {
  std::vector<Node *> Users;
  for (const auto &N : Nodes)
    for (const Operand &O : N->getOperands())
      if (O.V == V) {
        Users.push_back(N.get());
        break;
      }
  return Users;
}

bool Graph::isOutput(const Value *V) const {
  for (const Operand &O : Outputs)
    if (O.V == V)
      return true;
  return false;
}

std::unique_ptr<Graph> Graph::clone() const {
  auto G = std::make_unique<Graph>(Name, Loc);
  G->Attrs = Attrs;
  llvm::DenseMap<const Value *, Value *> Map;
  for (const auto &In : Inputs)
    Map[In.get()] = G->addInput(In->getName(), In->getType(), In->getLoc());
  auto Remap = [&](std::vector<Operand> &Ops) {
    for (Operand &O : Ops)
      O.V = Map.lookup(O.V);
  };
  for (const auto &N : Nodes) {
    Value *Old = N->getResult();
    Value *New = G->createValue(Old->getName(), Old->getType(), Old->getLoc());
    Map[Old] = New;
    llvm::SmallVector<Value *, 1> Extra;
    for (const Value *X : N->getExtraResults())
      Extra.push_back(
          Map[X] = G->createValue(X->getName(), X->getType(), X->getLoc()));
    std::unique_ptr<Node> Copy = N->clone();
    Remap(Copy->getOperands());
    G->appendNode(std::move(Copy), New, Extra);
  }
  // Epilogues may name values defined later, so remap after all exist.
  for (const auto &N : G->Nodes)
    if (auto *MTB = llvm::dyn_cast<MultiTemplateBufferNode>(N.get())) {
      Remap(MTB->getEpilogue());
      Remap(MTB->getEpilogueWrites());
    }
  G->Outputs = Outputs;
  Remap(G->Outputs);
  return G;
}

const ProcessGroup *Module::findGroup(llvm::StringRef Name) const {
  for (const ProcessGroup &G : Groups)
    if (G.Name == Name)
      return &G;
  return nullptr;
}

std::vector<int64_t> Module::groupRanks(llvm::StringRef Name,
                                        int64_t WorldSize) const {
  if (const ProcessGroup *G = findGroup(Name))
    return G->Ranks;
  std::vector<int64_t> Ranks;
  if (Name == WorldGroupName)
    for (int64_t R = 0; R < WorldSize; ++R)
      Ranks.push_back(R);
  return Ranks;
}

std::unique_ptr<Module> Module::clone() const {
  auto M = std::make_unique<Module>();
  M->Groups = Groups;
  for (const auto &G : Graphs)
    M->Graphs.push_back(G->clone());
  return M;
}
