//===- Graph.h - Values, nodes, graphs and modules --------------*- C++ -*-===//
//
// A Module holds process groups and graphs. A Graph holds its input Values
// and its Nodes in program order; every Node defines one Value, or more
// where its op's type rule says so (topk and sort: values, then indices).
// Nodes come in a kind hierarchy queried with isa/cast/dyn_cast:
//
//   Node
//   ├── OpNode                          high-level op, before lowering
//   ├── BufferNode                      computed node (pointwise / reduction)
//   └── MultiTemplateBufferNode         [kind range] several choices
//       └── CollectiveMultiTemplateBufferNode
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_IR_GRAPH_H
#define MTSCHED_IR_GRAPH_H

#include "mtsched/IR/Attributes.h"
#include "mtsched/IR/Ops.h"
#include "mtsched/IR/Types.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Casting.h"
#include "llvm/Support/SMLoc.h"
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace mtsched {

class Node;
class Graph;

/// An SSA value: a graph input or the result of a node.
class Value {
public:
  Value(std::string Name, TensorType Type, llvm::SMLoc Loc)
      : Name(std::move(Name)), Type(std::move(Type)), Loc(Loc) {}

  /// Name without the leading '%'.
  const std::string &getName() const { return Name; }
  const TensorType &getType() const { return Type; }
  void setType(TensorType T) { Type = std::move(T); }
  llvm::SMLoc getLoc() const { return Loc; }
  /// The defining node, or null for a graph input.
  Node *getDef() const { return Def; }
  void setDef(Node *N) { Def = N; }
  bool isGraphInput() const { return Def == nullptr; }

private:
  std::string Name;
  TensorType Type;
  llvm::SMLoc Loc;
  Node *Def = nullptr;
};

/// One candidate implementation: a name plus parameters, e.g.
/// `gemm_128x128x64_w4_s3 {bm = 128, ...}` or `extern.cublas`.
struct Choice {
  std::string Name;
  AttrDict Params;
  llvm::SMLoc Loc;

  /// Extern choices call a library (NCCL, cuBLAS) and do not fuse, but for
  /// cuBLASLt's bias / residual epilogue (Autotune/BlasEpilogue.h).
  bool isExtern() const;
  bool operator==(const Choice &O) const {
    return Name == O.Name && Params == O.Params;
  }
};

/// A node's candidate list. Lists are immutable once built and shared between
/// nodes: lowering gives every matmul of one shape the same list, which keeps
/// a graph of many layers small.
using ChoiceList = std::shared_ptr<const std::vector<Choice>>;

/// A ChoiceList holding Choices.
ChoiceList makeChoiceList(std::vector<Choice> Choices);

struct Operand {
  Value *V;
  llvm::SMLoc Loc;
};

class Node {
public:
  enum class Kind {
    Op,
    Buffer,
    MultiTemplateBuffer,
    CollectiveMultiTemplateBuffer,
    LastMultiTemplateBuffer = CollectiveMultiTemplateBuffer,
  };

  virtual ~Node() = default;

  Kind getKind() const { return K; }
  /// The keyword printed before the op (empty for a high-level op).
  llvm::StringRef getKindKeyword() const;

  OpCode getOp() const { return Op; }
  /// For custom ops, the quoted name (e.g. "vllm.allreduce_tp").
  const std::string &getCustomName() const { return CustomName; }
  void setCustomName(std::string N) { CustomName = std::move(N); }
  /// The op's name for messages: the custom name for custom ops.
  llvm::StringRef getOpName() const;

  /// The first result; the name and type of the node are its.
  Value *getResult() const { return Result; }
  const std::string &getName() const { return Result->getName(); }
  const TensorType &getType() const { return Result->getType(); }
  /// Results in order: getResult(), then the further ones.
  unsigned getNumResults() const { return 1 + ExtraResults.size(); }
  Value *getResult(unsigned I) const {
    return I == 0 ? Result : ExtraResults[I - 1];
  }
  /// The results after the first (empty for single-result ops).
  llvm::ArrayRef<Value *> getExtraResults() const { return ExtraResults; }

  std::vector<Operand> &getOperands() { return Operands; }
  const std::vector<Operand> &getOperands() const { return Operands; }
  Value *getOperand(unsigned I) const { return Operands[I].V; }
  unsigned getNumOperands() const { return Operands.size(); }

  AttrDict &getAttrs() { return Attrs; }
  const AttrDict &getAttrs() const { return Attrs; }

  /// Location of the op name, where node-level diagnostics point.
  llvm::SMLoc getLoc() const { return Loc; }
  /// Position in the graph's program order, kept current by Graph.
  unsigned getIndex() const { return Index; }

  /// Copies everything but the kind-specific payload into a new node of
  /// this kind; Result is set by the caller.
  virtual std::unique_ptr<Node> clone() const = 0;
  /// A copy that stands in for this node outside its graph: same results
  /// (values still defined by this node) and index, owned by the caller.
  /// Thread ranks that share one immutable module decide such copies
  /// instead of the shared nodes (docs/RANKS.md).
  std::unique_ptr<Node> cloneStandIn() const;

protected:
  Node(Kind K, OpCode Op, llvm::SMLoc Loc) : K(K), Op(Op), Loc(Loc) {}
  void copyCommonInto(Node &N) const;

private:
  friend class Graph;
  Kind K;
  OpCode Op;
  std::string CustomName;
  Value *Result = nullptr;
  std::vector<Value *> ExtraResults;
  std::vector<Operand> Operands;
  AttrDict Attrs;
  llvm::SMLoc Loc;
  unsigned Index = 0;
};

/// A high-level op as written by the user, before lowering.
class OpNode : public Node {
public:
  OpNode(OpCode Op, llvm::SMLoc Loc) : Node(Kind::Op, Op, Loc) {}
  /// `configs [...]` of a custom op.
  std::vector<Choice> &getConfigs() { return Configs; }
  const std::vector<Choice> &getConfigs() const { return Configs; }
  std::unique_ptr<Node> clone() const override;
  static bool classof(const Node *N) { return N->getKind() == Kind::Op; }

private:
  std::vector<Choice> Configs;
};

/// An ordinary computed node. Nodes that share a kernel id were fused into
/// one kernel by the scheduler.
class BufferNode : public Node {
public:
  BufferNode(OpCode Op, llvm::SMLoc Loc) : Node(Kind::Buffer, Op, Loc) {}
  static constexpr int NoKernel = -1;
  int getKernel() const { return KernelId; }
  void setKernel(int K) { KernelId = K; }
  std::unique_ptr<Node> clone() const override;
  static bool classof(const Node *N) { return N->getKind() == Kind::Buffer; }

private:
  int KernelId = NoKernel;
};

/// Timing of one choice, in microseconds; +inf when it failed or was not
/// measured.
struct ChoiceTiming {
  std::string Choice;
  double Us = std::numeric_limits<double>::infinity();
  /// Not measured because --prune-top-k dropped it: printed `skipped`
  /// rather than `inf`, so that a pruned choice does not read as a failed
  /// one. Us stays +inf, so nothing can pick it.
  bool Skipped = false;
  /// Where the parser read the entry; diagnostics about it point here.
  llvm::SMLoc Loc = {};
};

/// One row of a multi-kernel dispatch table: inputs up to `UpTo` (the size
/// hint) use `Choice`.
struct DispatchEntry {
  int64_t Hint;
  std::string Choice;
  /// Where the parser read the entry; diagnostics about it point here.
  llvm::SMLoc Loc = {};
  bool operator==(const DispatchEntry &O) const {
    return Hint == O.Hint && Choice == O.Choice;
  }
};

/// What a dispatch table's size hints count: rows (M) of a matmul, or the
/// message bytes of a collective. Printed `dispatch m {...}` and
/// `dispatch bytes {...}`.
enum class DispatchUnit { M, Bytes };
llvm::StringRef dispatchUnitName(DispatchUnit U);

/// A node whose implementation is chosen among several by the scheduler.
class MultiTemplateBufferNode : public Node {
public:
  MultiTemplateBufferNode(OpCode Op, llvm::SMLoc Loc)
      : MultiTemplateBufferNode(Kind::MultiTemplateBuffer, Op, Loc) {}

  const std::vector<Choice> &getChoices() const { return *Choices; }
  const ChoiceList &getChoiceList() const { return Choices; }
  void setChoices(ChoiceList L) { Choices = std::move(L); }
  void setChoices(std::vector<Choice> L) {
    Choices = makeChoiceList(std::move(L));
  }
  const Choice *findChoice(llvm::StringRef Name) const;

  /// Epilogue candidates found by the scheduler, in program order.
  std::vector<Operand> &getEpilogue() { return Epilogue; }
  const std::vector<Operand> &getEpilogue() const { return Epilogue; }
  /// Epilogue members other than the last whose values are read outside the
  /// fused kernel (or returned): a fused kernel writes them as well as the
  /// last member, e.g. the residual sum beside the normalised output.
  std::vector<Operand> &getEpilogueWrites() { return EpilogueWrites; }
  const std::vector<Operand> &getEpilogueWrites() const {
    return EpilogueWrites;
  }
  /// Every value a fused kernel of this node writes: the extra writes, then
  /// the last epilogue member. Empty without an epilogue.
  std::vector<const Value *> getFusedOutputs() const;

  bool isDecided() const { return !Decision.empty(); }
  const std::string &getDecision() const { return Decision; }
  void setDecision(std::string C) { Decision = std::move(C); }
  llvm::SMLoc getDecisionLoc() const { return DecisionLoc; }
  void setDecisionLoc(llvm::SMLoc L) { DecisionLoc = L; }
  /// Whether the decided choice runs with its epilogue fused.
  bool isEpilogueFused() const { return EpilogueFused; }
  void setEpilogueFused(bool F) { EpilogueFused = F; }

  std::vector<ChoiceTiming> &getTimings() { return Timings; }
  const std::vector<ChoiceTiming> &getTimings() const { return Timings; }
  std::vector<ChoiceTiming> &getFusedTimings() { return FusedTimings; }
  const std::vector<ChoiceTiming> &getFusedTimings() const {
    return FusedTimings;
  }
  std::vector<DispatchEntry> &getDispatch() { return Dispatch; }
  const std::vector<DispatchEntry> &getDispatch() const { return Dispatch; }
  /// The unit of the dispatch table's hints, as written or as the autotuner
  /// tuned them; the verifier checks it fits the node.
  DispatchUnit getDispatchUnit() const { return DispUnit; }
  void setDispatchUnit(DispatchUnit U) { DispUnit = U; }
  llvm::SMLoc getDispatchUnitLoc() const { return DispUnitLoc; }
  void setDispatchUnitLoc(llvm::SMLoc L) { DispUnitLoc = L; }

  std::unique_ptr<Node> clone() const override;
  static bool classof(const Node *N) {
    return N->getKind() >= Kind::MultiTemplateBuffer &&
           N->getKind() <= Kind::LastMultiTemplateBuffer;
  }

protected:
  MultiTemplateBufferNode(Kind K, OpCode Op, llvm::SMLoc Loc)
      : Node(K, Op, Loc) {}
  void copyMTBInto(MultiTemplateBufferNode &N) const;

private:
  ChoiceList Choices = makeChoiceList({});
  std::vector<Operand> Epilogue;
  std::vector<Operand> EpilogueWrites;
  std::string Decision;
  llvm::SMLoc DecisionLoc;
  bool EpilogueFused = false;
  std::vector<ChoiceTiming> Timings;
  std::vector<ChoiceTiming> FusedTimings;
  std::vector<DispatchEntry> Dispatch;
  DispatchUnit DispUnit = DispatchUnit::M;
  llvm::SMLoc DispUnitLoc;
};

enum class SyncState { Pending, Ok, Failed };
llvm::StringRef syncStateName(SyncState S);

/// A multi-template buffer for a collective: all ranks of its process group
/// must time its choices together.
class CollectiveMultiTemplateBufferNode : public MultiTemplateBufferNode {
public:
  CollectiveMultiTemplateBufferNode(OpCode Op, llvm::SMLoc Loc)
      : MultiTemplateBufferNode(Kind::CollectiveMultiTemplateBuffer, Op, Loc) {}

  CollectiveKind getCollectiveKind() const { return CKind; }
  void setCollectiveKind(CollectiveKind K) { CKind = K; }
  /// Name of the process group, without '@'.
  const std::string &getGroup() const { return Group; }
  void setGroup(std::string G) { Group = std::move(G); }
  llvm::SMLoc getGroupLoc() const { return GroupLoc; }
  void setGroupLoc(llvm::SMLoc L) { GroupLoc = L; }
  SyncState getSync() const { return Sync; }
  void setSync(SyncState S) { Sync = S; }
  /// True when the decision is the fallback choice, not a measured winner.
  bool isFallback() const { return Fallback; }
  void setFallback(bool F) { Fallback = F; }

  std::unique_ptr<Node> clone() const override;
  static bool classof(const Node *N) {
    return N->getKind() == Kind::CollectiveMultiTemplateBuffer;
  }

private:
  CollectiveKind CKind = CollectiveKind::Unknown;
  std::string Group;
  llvm::SMLoc GroupLoc;
  SyncState Sync = SyncState::Pending;
  bool Fallback = false;
};

/// A named set of ranks, e.g. `group @tp = [0, 1]`.
struct ProcessGroup {
  std::string Name;
  std::vector<int64_t> Ranks;
  llvm::SMLoc Loc;
};

/// The implicit group of all ranks.
inline constexpr llvm::StringLiteral WorldGroupName = "world";

class Graph {
public:
  explicit Graph(std::string Name, llvm::SMLoc Loc = {})
      : Name(std::move(Name)), Loc(Loc) {}
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  const std::string &getName() const { return Name; }
  llvm::SMLoc getLoc() const { return Loc; }
  AttrDict &getAttrs() { return Attrs; }
  const AttrDict &getAttrs() const { return Attrs; }
  /// The `world_size` attribute, else 1.
  int64_t getWorldSize() const;

  Value *addInput(std::string Name, TensorType Type, llvm::SMLoc Loc);
  const std::vector<std::unique_ptr<Value>> &getInputs() const {
    return Inputs;
  }

  /// Creates the value a node will define; it belongs to the graph.
  Value *createValue(std::string Name, TensorType Type, llvm::SMLoc Loc);
  /// Appends N, defining Result and then Extra (its further results).
  Node *appendNode(std::unique_ptr<Node> N, Value *Result,
                   llvm::ArrayRef<Value *> Extra = {});
  /// Replaces Old by New in place; New defines Old's result values, so
  /// every use now refers to New.
  Node *replaceNode(Node *Old, std::unique_ptr<Node> New);
  /// Inserts N before position Index (size() appends), defining Result.
  Node *insertNode(unsigned Index, std::unique_ptr<Node> N, Value *Result);
  /// Removes N, which nothing may read any more; its value stays allocated
  /// (and undefined) until the graph dies.
  void eraseNode(Node *N);

  const std::vector<std::unique_ptr<Node>> &getNodes() const { return Nodes; }
  size_t size() const { return Nodes.size(); }

  std::vector<Operand> &getOutputs() { return Outputs; }
  const std::vector<Operand> &getOutputs() const { return Outputs; }

  /// Nodes reading V, in program order.
  std::vector<Node *> getUsers(const Value *V) const;
  /// Whether V is returned by the graph.
  bool isOutput(const Value *V) const;

  std::unique_ptr<Graph> clone() const;

private:
  std::string Name;
  llvm::SMLoc Loc;
  AttrDict Attrs;
  std::vector<std::unique_ptr<Value>> Inputs;
  std::vector<std::unique_ptr<Value>> NodeValues;
  std::vector<std::unique_ptr<Node>> Nodes;
  std::vector<Operand> Outputs;
};

class Module {
public:
  std::vector<ProcessGroup> &getGroups() { return Groups; }
  const std::vector<ProcessGroup> &getGroups() const { return Groups; }
  const ProcessGroup *findGroup(llvm::StringRef Name) const;
  /// The ranks of group Name in a graph of the given world size (the world
  /// group is all ranks); empty if there is no such group.
  std::vector<int64_t> groupRanks(llvm::StringRef Name,
                                  int64_t WorldSize) const;

  std::vector<std::unique_ptr<Graph>> &getGraphs() { return Graphs; }
  const std::vector<std::unique_ptr<Graph>> &getGraphs() const {
    return Graphs;
  }

  std::unique_ptr<Module> clone() const;

private:
  std::vector<ProcessGroup> Groups;
  std::vector<std::unique_ptr<Graph>> Graphs;
};

} // namespace mtsched

#endif // MTSCHED_IR_GRAPH_H
