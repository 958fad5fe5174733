//===- Verifier.cpp - Structural and type checks --------------------------===//
//
// Reports every problem it finds (not just the first), each at the location
// of the construct at fault, so a user fixes a file in one pass.
//
//===----------------------------------------------------------------------===//
#include "mtsched/IR/Verifier.h"
#include "mtsched/IR/Graph.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/SourceMgr.h"
#include <cmath>

using namespace mtsched;
using llvm::SMLoc;
using llvm::Twine;

namespace {

class Verifier {
public:
  Verifier(const Module &M, llvm::SourceMgr &SM) : M(M), SM(SM) {
    for (const ProcessGroup &G : M.getGroups())
      GroupsByName.try_emplace(G.Name, &G);
  }

  unsigned run() {
    for (const ProcessGroup &G : M.getGroups())
      for (int64_t R : G.Ranks)
        if (R < 0)
          error(G.Loc, "group '@" + G.Name + "' has negative rank " + Twine(R));
    for (const auto &G : M.getGraphs())
      verifyGraph(*G);
    return NumErrors;
  }

private:
  void error(SMLoc Loc, const Twine &Msg) {
    SM.PrintMessage(Loc, llvm::SourceMgr::DK_Error, Msg);
    ++NumErrors;
  }

  void verifyGraph(const Graph &G);
  void verifyNode(const Graph &G, const Node &N);
  /// Checks op-specific operand and attribute rules and computes the result
  /// type; returns false (after reporting) if it cannot be computed.
  bool inferType(const Graph &G, const Node &N, TensorType &Result);
  bool inferCollective(const Graph &G, const Node &N, TensorType &Result);
  bool inferSwiGlu(const Graph &G, const Node &N, TensorType &Result);
  bool inferAttention(const Node &N, TensorType &Result);
  /// `alternative_of = "v"`: N computes %v another way and nothing reads N.
  void verifyAlternatives(const Graph &G);
  void verifyMTB(const Graph &G, const MultiTemplateBufferNode &N);
  /// Checks that every epilogue can be fused as written: each member
  /// consumes the one before it, reads only values computed before its
  /// template runs, belongs to one epilogue only, and every value read
  /// outside the fused kernel is written by it (docs/IR.md, "Epilogues").
  void verifyEpilogues(const Graph &G);
  void verifyChoiceParams(const Choice &C, SMLoc Loc, llvm::StringRef What);
  void verifyChoices(const Node &N, llvm::ArrayRef<Choice> Choices,
                     llvm::StringRef What);
  void verifyTimings(const MultiTemplateBufferNode &N,
                     llvm::ArrayRef<ChoiceTiming> Timings,
                     llvm::StringRef Clause);
  /// Size of the group a node runs on, or 0 after reporting an error.
  int64_t groupSize(const Graph &G, llvm::StringRef Name, SMLoc Loc);
  /// Name of the process group an op's attributes select; None (reported
  /// if Report is set) when the attribute is not a string.
  std::optional<std::string> groupAttr(const Node &N, bool Report = true);

  static std::string name(const Value *V) { return "'%" + V->getName() + "'"; }

  /// Whether List has a choice called Name. Lists are usually short and
  /// scanned; a long one (a custom op's thousands of configs) gets a set of
  /// its names, built once, so that checking every timing and dispatch
  /// entry against it stays linear.
  bool hasChoice(const std::vector<Choice> &List, llvm::StringRef Name);
  static constexpr size_t SmallList = 8;

  const Module &M;
  llvm::SourceMgr &SM;
  unsigned NumErrors = 0;
  /// Program position of each value's definition; inputs are -1.
  llvm::DenseMap<const Value *, int> Position;
  /// Nodes with an `alternative_of` attribute, checked after the graph.
  std::vector<const Node *> Alternatives;
  /// Choice lists verified without errors.
  llvm::DenseSet<const std::vector<Choice> *> CleanChoiceLists;
  /// The names of each long choice list (see hasChoice).
  llvm::DenseMap<const std::vector<Choice> *, llvm::StringSet<>> ChoiceNames;
  /// The module's groups by name, and the world size of the graph being
  /// verified: looked up for every collective node.
  llvm::StringMap<const ProcessGroup *> GroupsByName;
  int64_t WorldSize = 1;
};

bool Verifier::hasChoice(const std::vector<Choice> &List,
                         llvm::StringRef Name) {
  if (List.size() <= SmallList)
    return llvm::any_of(List, [&](const Choice &C) { return C.Name == Name; });
  auto [It, New] = ChoiceNames.try_emplace(&List);
  if (New)
    for (const Choice &C : List)
      It->second.insert(C.Name);
  return It->second.count(Name);
}

} // namespace

void Verifier::verifyGraph(const Graph &G) {
  WorldSize = G.getWorldSize();
  if (const Attribute *W = G.getAttrs().get("world_size"))
    if (!W->isInt() || W->getInt() < 1)
      error(G.getLoc(), "attribute 'world_size' of graph '@" + G.getName() +
                            "' must be a positive integer");
  Position.clear();
  for (const auto &In : G.getInputs())
    Position[In.get()] = -1;
  for (const auto &N : G.getNodes()) {
    for (const Operand &O : N->getOperands()) {
      auto It = Position.find(O.V);
      if (It == Position.end())
        error(O.Loc, "operand " + name(O.V) + " of '%" + N->getName() +
                         "' is not defined before its use");
    }
    Position[N->getResult()] = N->getIndex();
    verifyNode(G, *N);
  }
  for (const Operand &O : G.getOutputs())
    if (!Position.count(O.V))
      error(O.Loc, "returned value " + name(O.V) + " is not defined");
  verifyEpilogues(G);
  verifyAlternatives(G);
  Alternatives.clear();
}

void Verifier::verifyEpilogues(const Graph &G) {
  std::vector<const MultiTemplateBufferNode *> Templates;
  for (const auto &N : G.getNodes())
    if (const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get()))
      if (!M->getEpilogue().empty() || !M->getEpilogueWrites().empty())
        Templates.push_back(M);
  if (Templates.empty())
    return;
  llvm::DenseMap<const Value *, llvm::SmallVector<const Node *, 2>> Users;
  for (const auto &N : G.getNodes())
    for (const Operand &O : N->getOperands()) {
      auto &Us = Users[O.V];
      if (Us.empty() || Us.back() != N.get())
        Us.push_back(N.get());
    }
  llvm::DenseSet<const Value *> Returned;
  for (const Operand &O : G.getOutputs())
    Returned.insert(O.V);
  // The template whose kernel computes each epilogue member. A member runs
  // where its template runs, so that is where its value becomes readable.
  llvm::DenseMap<const Node *, const MultiTemplateBufferNode *> Owner;
  auto ReadyAt = [&](const Node *Def) {
    auto It = Owner.find(Def);
    return It == Owner.end() ? Def->getIndex() : It->second->getIndex();
  };

  for (const MultiTemplateBufferNode *M : Templates) {
    const std::string MName = "'%" + M->getName() + "'";
    llvm::DenseSet<const Value *> InKernel{M->getResult()};
    const Value *Prev = M->getResult();
    bool Chain = true;
    const auto &Epi = M->getEpilogue();
    for (const Operand &E : Epi)
      if (!E.V->getDef() || E.V->getDef()->getIndex() <= M->getIndex()) {
        error(E.Loc, "epilogue value " + name(E.V) + " must be defined after " +
                         MName);
        Chain = false;
      }
    // Order and duplicates first: they explain a broken chain best.
    for (size_t I = 1; I < Epi.size() && Chain; ++I) {
      const Node *D = Epi[I].V->getDef(), *P = Epi[I - 1].V->getDef();
      if (D == P)
        error(Epi[I].Loc,
              name(Epi[I].V) + " appears twice in the epilogue of " + MName);
      else if (D->getIndex() < P->getIndex())
        error(Epi[I].Loc, "the epilogue of " + MName +
                              " is not in program order: " + name(Epi[I].V) +
                              " is defined before '%" + P->getName() + "'");
      else
        continue;
      Chain = false;
    }
    for (size_t I = 0; I < Epi.size() && Chain; ++I) {
      const Operand &E = Epi[I];
      const Node *D = E.V->getDef();
      auto [It, New] = Owner.try_emplace(D, M);
      if (!New)
        error(E.Loc, name(E.V) + " is already in the epilogue of '%" +
                         It->second->getName() +
                         "'; a node belongs to at most one kernel");
      bool Fusable = llvm::isa<BufferNode>(D) &&
                     (isPointwise(D->getOp()) || isRowReduction(D->getOp()));
      if (!Fusable) {
        error(E.Loc, "epilogue member " + name(E.V) +
                         " is not a pointwise op or a row reduction");
        Chain = false;
        break;
      }
      bool Row = isRowReduction(D->getOp());
      bool Consumes =
          Row ? D->getOperand(0) == Prev
              : llvm::any_of(D->getOperands(),
                             [&](const Operand &O) { return O.V == Prev; });
      if (!Consumes) {
        error(E.Loc, "epilogue member " + name(E.V) + " does not " +
                         (Row ? "normalise " : "consume ") + name(Prev) +
                         ", the value before it in the epilogue of " + MName);
        Chain = false;
        break;
      }
      if (Row && I + 1 != Epi.size())
        error(E.Loc, "row reduction " + name(E.V) +
                         " must end the epilogue of " + MName);
      if (D->getType().Shape != M->getType().Shape)
        error(E.Loc, "epilogue member " + name(E.V) + " iterates over " +
                         shapeStr(D->getType().Shape) + ", not " +
                         shapeStr(M->getType().Shape) + " like " + MName);
      for (const Operand &O : D->getOperands()) {
        const Node *Src = O.V->getDef();
        if (InKernel.count(O.V) || !Src)
          continue;
        if (ReadyAt(Src) >= M->getIndex())
          error(O.Loc, "epilogue member " + name(E.V) + " of " + MName +
                           " reads " + name(O.V) +
                           ", which is computed after " + MName + " runs");
      }
      InKernel.insert(E.V);
      Prev = E.V;
    }
    if (!Chain)
      continue;

    // The fused kernel writes the last member and the 'writes' list, not
    // the template's own result.
    auto ReaderOutside = [&](const Value *V) -> std::string {
      if (Returned.count(V))
        return "the graph's return";
      auto U = Users.find(V);
      if (U != Users.end())
        for (const Node *N : U->second)
          if (!InKernel.count(N->getResult()))
            return "'%" + N->getName() + "'";
      return "";
    };
    std::string R = ReaderOutside(M->getResult());
    if (!Epi.empty() && !R.empty())
      error(M->getLoc(), MName +
                             " has an epilogue, but its result is also read "
                             "by " +
                             R + ", and a fused kernel does not write it");
    llvm::DenseSet<const Value *> Listed;
    for (const Operand &W : M->getEpilogueWrites()) {
      bool Member =
          llvm::any_of(Epi, [&](const Operand &E) { return E.V == W.V; });
      if (!Member || W.V == Epi.back().V)
        error(W.Loc, name(W.V) + " in the 'writes' list of " + MName +
                         (Member ? " is the last epilogue member, which is "
                                   "always written"
                                 : " is not a member of its epilogue"));
      else if (!Listed.insert(W.V).second)
        error(W.Loc,
              name(W.V) + " appears twice in the 'writes' list of " + MName);
      else if (ReaderOutside(W.V).empty())
        error(W.Loc, name(W.V) + " is in the 'writes' list of " + MName +
                         ", but nothing outside the fused kernel reads it");
    }
    for (size_t I = 0; I + 1 < Epi.size(); ++I) {
      std::string Reader = ReaderOutside(Epi[I].V);
      if (!Reader.empty() && !Listed.count(Epi[I].V))
        error(Epi[I].Loc, name(Epi[I].V) + " is read by " + Reader +
                              " outside the fused kernel of " + MName +
                              ", so it must be in the epilogue's 'writes' "
                              "list");
    }
  }
}

std::optional<std::string> Verifier::groupAttr(const Node &N, bool Report) {
  for (llvm::StringRef Key : {"group", "process_group"})
    if (const Attribute *A = N.getAttrs().get(Key)) {
      if (!A->isString()) {
        if (Report)
          error(N.getLoc(), "attribute '" + Key + "' must be a string");
        return std::nullopt;
      }
      return A->getString().str();
    }
  return std::string(WorldGroupName);
}

int64_t Verifier::groupSize(const Graph &G, llvm::StringRef Name, SMLoc Loc) {
  int64_t World = WorldSize;
  // An invalid world_size was reported with the graph; sizes below 1 would
  // only produce confusing follow-on errors.
  if (World < 1)
    return 0;
  if (Name == WorldGroupName)
    return World;
  auto It = GroupsByName.find(Name);
  const ProcessGroup *PG = It == GroupsByName.end() ? nullptr : It->second;
  if (!PG) {
    error(Loc, "unknown process group '@" + Name + "'");
    return 0;
  }
  for (int64_t R : PG->Ranks)
    if (R >= World) {
      error(Loc, "group '@" + Name + "' has rank " + Twine(R) +
                     ", but graph '@" + G.getName() + "' has world size " +
                     Twine(World));
      return 0;
    }
  return PG->Ranks.size();
}

bool Verifier::inferSwiGlu(const Graph &G, const Node &N, TensorType &Result) {
  const TensorType &A = N.getOperand(0)->getType();
  const TensorType &Wg = N.getOperand(1)->getType();
  const TensorType &Wu = N.getOperand(2)->getType();
  if (!isFloatDType(A.Dtype)) {
    error(N.getLoc(),
          "'swiglu' needs floating-point operands, got " + dtypeName(A.Dtype));
    return false;
  }
  if (A.rank() < 2) {
    error(N.getOperands()[0].Loc, "operand " + name(N.getOperand(0)) +
                                      " of 'swiglu' must have rank 2 or more, "
                                      "got " +
                                      A.str());
    return false;
  }
  for (unsigned I = 1; I < 3; ++I) {
    const TensorType &W = N.getOperand(I)->getType();
    if (W.rank() != 2 || W.Shape[0] != A.innerDim()) {
      error(N.getOperands()[I].Loc,
            "weight " + name(N.getOperand(I)) + " of 'swiglu' has shape " +
                shapeStr(W.Shape) + ", expected [" + Twine(A.innerDim()) +
                ", N] (K = the last dimension of " + name(N.getOperand(0)) +
                ")");
      return false;
    }
  }
  if (Wg.Shape != Wu.Shape) {
    error(N.getOperands()[2].Loc,
          "the gate and up weights of 'swiglu' differ in shape: " +
              shapeStr(Wg.Shape) + " and " + shapeStr(Wu.Shape));
    return false;
  }
  Result = A;
  Result.Shape.back() = Wg.Shape[1];
  return true;
}

bool Verifier::inferAttention(const Node &N, TensorType &Result) {
  const TensorType &Q = N.getOperand(0)->getType();
  const TensorType &K = N.getOperand(1)->getType();
  const TensorType &V = N.getOperand(2)->getType();
  if (Q.Dtype != DType::BF16 && Q.Dtype != DType::F16 &&
      Q.Dtype != DType::F32) {
    error(N.getLoc(), "'attention' needs bf16, f16 or f32 operands, got " +
                          dtypeName(Q.Dtype));
    return false;
  }
  static const char *const Layout[] = {"[B, Hq, Sq, D]", "[B, Hkv, Skv, D]",
                                       "[B, Hkv, Skv, D]"};
  for (unsigned I = 0; I < 3; ++I)
    if (N.getOperand(I)->getType().rank() != 4) {
      error(N.getOperands()[I].Loc,
            "operand " + name(N.getOperand(I)) + " of 'attention' must be " +
                Layout[I] + ", got " + N.getOperand(I)->getType().str());
      return false;
    }
  if (V.Shape != K.Shape) {
    error(N.getOperands()[2].Loc,
          "values " + name(N.getOperand(2)) + " of 'attention' have shape " +
              shapeStr(V.Shape) + ", expected the shape of the keys " +
              shapeStr(K.Shape));
    return false;
  }
  if (K.Shape[0] != Q.Shape[0]) {
    error(N.getOperands()[1].Loc,
          "'attention' batch sizes differ: " + name(N.getOperand(0)) + " has " +
              Twine(Q.Shape[0]) + " and " + name(N.getOperand(1)) + " has " +
              Twine(K.Shape[0]));
    return false;
  }
  if (K.Shape[3] != Q.Shape[3]) {
    error(N.getOperands()[1].Loc,
          "'attention' head dimensions differ: " + name(N.getOperand(0)) +
              " has " + Twine(Q.Shape[3]) + " and " + name(N.getOperand(1)) +
              " has " + Twine(K.Shape[3]));
    return false;
  }
  if (K.Shape[1] <= 0 || Q.Shape[1] % K.Shape[1]) {
    error(N.getOperands()[1].Loc,
          "'attention' needs the query heads (" + Twine(Q.Shape[1]) +
              ") to be a multiple of the kv heads (" + Twine(K.Shape[1]) + ")");
    return false;
  }
  bool Causal = false;
  if (const Attribute *C = N.getAttrs().get("causal")) {
    if (!C->isBool()) {
      error(N.getLoc(), "attribute 'causal' of 'attention' must be true or "
                        "false");
      return false;
    }
    Causal = C->getBool();
  }
  if (const Attribute *S = N.getAttrs().get("scale"))
    if ((!S->isInt() && !S->isFloat()) || !std::isfinite(S->getNumber()) ||
        S->getNumber() <= 0) {
      error(N.getLoc(), "attribute 'scale' of 'attention' must be a positive "
                        "finite number");
      return false;
    }
  // The causal mask aligns queries to the end of the keys; a query before
  // the first key would see none.
  if (Causal && Q.Shape[2] > K.Shape[2]) {
    error(N.getLoc(), "causal 'attention' needs at most as many queries as "
                      "keys, got " +
                          Twine(Q.Shape[2]) + " queries and " +
                          Twine(K.Shape[2]) + " keys");
    return false;
  }
  Result = Q;
  return true;
}

void Verifier::verifyAlternatives(const Graph &G) {
  if (Alternatives.empty())
    return;
  llvm::StringMap<const Node *> ByName;
  llvm::DenseSet<const Value *> Read;
  for (const auto &X : G.getNodes()) {
    ByName[X->getName()] = X.get();
    for (const Operand &O : X->getOperands())
      Read.insert(O.V);
  }
  for (const Operand &O : G.getOutputs())
    Read.insert(O.V);
  for (const Node *N : Alternatives) {
    const Attribute &A = *N->getAttrs().get("alternative_of");
    if (!A.isString()) {
      error(N->getLoc(), "attribute 'alternative_of' must be a string");
      continue;
    }
    const Node *Of = ByName.lookup(A.getString());
    if (!Of || Of->getIndex() >= N->getIndex()) {
      error(N->getLoc(), "'%" + N->getName() + "' is an alternative of '%" +
                             A.getString() +
                             "', which is not a node defined before it");
      continue;
    }
    if (Of->getType() != N->getType())
      error(N->getLoc(), "'%" + N->getName() + "' has type " +
                             N->getType().str() + " but its alternative_of '%" +
                             Of->getName() + "' has type " +
                             Of->getType().str());
    if (Read.count(N->getResult()))
      error(N->getLoc(), "'%" + N->getName() + "' is an alternative of '%" +
                             Of->getName() +
                             "'; nothing may read or return it");
  }
}

/// Numpy-style broadcasting of two shapes; false if incompatible.
static bool broadcastShapes(llvm::ArrayRef<int64_t> A,
                            llvm::ArrayRef<int64_t> B,
                            llvm::SmallVectorImpl<int64_t> &Out) {
  size_t R = std::max(A.size(), B.size());
  Out.assign(R, 1);
  for (size_t I = 0; I < R; ++I) {
    int64_t DA = I < R - A.size() ? 1 : A[I - (R - A.size())];
    int64_t DB = I < R - B.size() ? 1 : B[I - (R - B.size())];
    if (DA != DB && DA != 1 && DB != 1)
      return false;
    Out[I] = std::max(DA, DB);
  }
  return true;
}

bool Verifier::inferCollective(const Graph &G, const Node &N,
                               TensorType &Result) {
  const TensorType &In = N.getOperand(0)->getType();
  std::optional<std::string> Group = groupAttr(N);
  if (!Group)
    return false;
  int64_t Size = groupSize(G, *Group, N.getLoc());
  if (Size == 0)
    return false;
  if (const Attribute *R = N.getAttrs().get("reduce")) {
    llvm::StringRef Op = R->isString() ? R->getString() : "";
    if (Op != "sum" && Op != "max" && Op != "min" && Op != "avg") {
      error(N.getLoc(), "attribute 'reduce' must be \"sum\", \"max\", "
                        "\"min\" or \"avg\"");
      return false;
    }
  }
  Result = In;
  if (N.getOp() == OpCode::AllReduce)
    return true;
  int64_t Dim = 0;
  if (const Attribute *D = N.getAttrs().get("dim")) {
    if (!D->isInt()) {
      error(N.getLoc(), "attribute 'dim' must be an integer");
      return false;
    }
    Dim = D->getInt();
  }
  if (In.rank() == 0 || Dim < 0 || Dim >= int64_t(In.rank())) {
    error(N.getLoc(), "dimension " + Twine(Dim) + " is out of range for " +
                          name(N.getOperand(0)) + " of type " + In.str());
    return false;
  }
  if (N.getOp() == OpCode::AllGather) {
    if (llvm::MulOverflow(Result.Shape[Dim], Size, Result.Shape[Dim])) {
      error(N.getLoc(), "'all_gather' result is too large: dimension " +
                            Twine(Dim) + " of size " + Twine(In.Shape[Dim]) +
                            " times " + Twine(Size) + " ranks overflows");
      return false;
    }
    return true;
  }
  if (In.Shape[Dim] % Size != 0) {
    error(N.getLoc(), "'" + N.getOpName() + "' splits dimension " + Twine(Dim) +
                          " of size " + Twine(In.Shape[Dim]) + " into " +
                          Twine(Size) + " ranks, which does not divide it");
    return false;
  }
  if (N.getOp() == OpCode::ReduceScatter)
    Result.Shape[Dim] /= Size;
  return true;
}

bool Verifier::inferType(const Graph &G, const Node &N, TensorType &Result) {
  const OpInfo &Info = getOpInfo(N.getOp());
  if (Info.NumOperands >= 0 && int(N.getNumOperands()) != Info.NumOperands) {
    error(N.getLoc(), "'" + Info.Name + "' expects " + Twine(Info.NumOperands) +
                          " operand" + (Info.NumOperands == 1 ? "" : "s") +
                          ", got " + Twine(N.getNumOperands()));
    return false;
  }
  auto Operand = [&](unsigned I) -> const TensorType & {
    return N.getOperand(I)->getType();
  };
  auto SameDType = [&]() {
    for (unsigned I = 1; I < N.getNumOperands(); ++I)
      if (Operand(I).Dtype != Operand(0).Dtype) {
        error(N.getOperands()[I].Loc,
              "operand " + name(N.getOperand(I)) + " has element type " +
                  dtypeName(Operand(I).Dtype) + ", expected " +
                  dtypeName(Operand(0).Dtype));
        return false;
      }
    return true;
  };
  auto Dim = [&](int64_t Rank, int64_t Default) -> std::optional<int64_t> {
    int64_t D = Default;
    if (const Attribute *A = N.getAttrs().get("dim")) {
      if (!A->isInt()) {
        error(N.getLoc(), "attribute 'dim' must be an integer");
        return std::nullopt;
      }
      D = A->getInt();
    }
    if (D < -Rank || D >= Rank) {
      error(N.getLoc(), "dimension " + Twine(D) +
                            " is out of range for a tensor of rank " +
                            Twine(Rank));
      return std::nullopt;
    }
    return D < 0 ? D + Rank : D;
  };

  switch (Info.Category) {
  case OpCategory::Custom:
    // Custom ops declare their result type; nothing to infer.
    Result = N.getType();
    return true;
  case OpCategory::Collective:
    return inferCollective(G, N, Result);
  case OpCategory::MatMul: {
    if (!SameDType())
      return false;
    if (N.getOp() == OpCode::SwiGlu)
      return inferSwiGlu(G, N, Result);
    if (N.getOp() == OpCode::Attention)
      return inferAttention(N, Result);
    const TensorType &A = Operand(0), &B = Operand(1);
    if (!isFloatDType(A.Dtype)) {
      error(N.getLoc(), "'matmul' needs floating-point operands, got " +
                            dtypeName(A.Dtype));
      return false;
    }
    for (unsigned I = 0; I < 2; ++I)
      if (Operand(I).rank() < 2) {
        error(N.getOperands()[I].Loc,
              "operand " + name(N.getOperand(I)) +
                  " of 'matmul' must have rank 2 or more, got " +
                  Operand(I).str());
        return false;
      }
    if (B.rank() != 2 && B.rank() != A.rank()) {
      error(N.getOperands()[1].Loc, "operand " + name(N.getOperand(1)) +
                                        " must have rank 2 or the rank of " +
                                        name(N.getOperand(0)));
      return false;
    }
    int64_t K = A.Shape.back(), KB = B.Shape[B.rank() - 2];
    if (K != KB) {
      error(N.getOperands()[1].Loc,
            "'matmul' inner dimensions differ: " + name(N.getOperand(0)) +
                " has " + Twine(K) + " columns but " + name(N.getOperand(1)) +
                " has " + Twine(KB) + " rows");
      return false;
    }
    if (B.rank() > 2)
      for (unsigned I = 0; I + 2 < A.rank(); ++I)
        if (A.Shape[I] != B.Shape[I]) {
          error(N.getOperands()[1].Loc,
                "'matmul' batch dimensions differ: " + shapeStr(A.Shape) +
                    " and " + shapeStr(B.Shape));
          return false;
        }
    Result = A;
    Result.Shape.back() = B.Shape.back();
    return true;
  }
  case OpCategory::Pointwise: {
    if (Info.Types == OpTypeRule::Cast) {
      Result = TensorType(N.getType().Dtype, Operand(0).Shape);
      return true;
    }
    // The operands that give the result's element type: all of them but a
    // select's condition, which may be of any type.
    unsigned First = Info.Types == OpTypeRule::Select ? 1 : 0;
    for (unsigned I = First + 1; I < N.getNumOperands(); ++I)
      if (Operand(I).Dtype != Operand(First).Dtype) {
        error(N.getOperands()[I].Loc,
              "operand " + name(N.getOperand(I)) + " has element type " +
                  dtypeName(Operand(I).Dtype) + ", expected " +
                  dtypeName(Operand(First).Dtype));
        return false;
      }
    Result = TensorType(Operand(First).Dtype, Operand(0).Shape);
    // Each further operand broadcasts with the shape so far, so an error
    // names the operand that does not fit.
    for (unsigned I = 1; I < N.getNumOperands(); ++I) {
      llvm::SmallVector<int64_t, 4> Shape;
      if (!broadcastShapes(Result.Shape, Operand(I).Shape, Shape)) {
        error(N.getOperands()[I].Loc,
              "operands of '" + Info.Name +
                  "' cannot be broadcast together: " + shapeStr(Result.Shape) +
                  " and " + shapeStr(Operand(I).Shape));
        return false;
      }
      Result.Shape.assign(Shape.begin(), Shape.end());
    }
    return true;
  }
  case OpCategory::Reduction: {
    const TensorType &In = Operand(0);
    if (In.rank() == 0) {
      error(N.getOperands()[0].Loc,
            "'" + Info.Name + "' needs an operand of rank 1 or more");
      return false;
    }
    if (N.getOp() == OpCode::Sum || N.getOp() == OpCode::Max) {
      std::optional<int64_t> D = Dim(In.rank(), -1);
      if (!D)
        return false;
      Result = In;
      const Attribute *Keep = N.getAttrs().get("keepdim");
      if (Keep && !Keep->isBool()) {
        error(N.getLoc(), "attribute 'keepdim' must be true or false");
        return false;
      }
      if (Keep && Keep->getBool())
        Result.Shape[*D] = 1;
      else
        Result.Shape.erase(Result.Shape.begin() + *D);
      return true;
    }
    if (!isFloatDType(In.Dtype)) {
      error(N.getLoc(), "'" + Info.Name +
                            "' needs a floating-point operand, got " +
                            dtypeName(In.Dtype));
      return false;
    }
    if (N.getAttrs().contains("dim")) {
      error(N.getLoc(), "'" + Info.Name +
                            "' always normalises over the last dimension; "
                            "remove attribute 'dim'");
      return false;
    }
    if (N.getOp() == OpCode::RmsNorm) {
      if (!SameDType())
        return false;
      const TensorType &W = Operand(1);
      if (W.rank() != 1 || W.Shape[0] != In.innerDim()) {
        error(N.getOperands()[1].Loc,
              "rmsnorm weight " + name(N.getOperand(1)) + " has shape " +
                  shapeStr(W.Shape) + ", expected [" + Twine(In.innerDim()) +
                  "] (the last dimension of " + name(N.getOperand(0)) + ")");
        return false;
      }
      if (const Attribute *Eps = N.getAttrs().get("eps"))
        if (!(Eps->isFloat() || Eps->isInt()) || Eps->getNumber() <= 0) {
          error(N.getLoc(), "attribute 'eps' must be a positive number");
          return false;
        }
    }
    Result = In;
    return true;
  }
  }
  return false;
}

/// Whether Name is a bare identifier, the only form the parser reads back
/// for a choice name.
static bool isBareIdentifier(llvm::StringRef Name) {
  if (Name.empty() || !(llvm::isAlpha(Name[0]) || Name[0] == '_'))
    return false;
  return llvm::all_of(
      Name, [](char C) { return llvm::isAlnum(C) || C == '_' || C == '.'; });
}

void Verifier::verifyChoices(const Node &N, llvm::ArrayRef<Choice> Choices,
                             llvm::StringRef What) {
  if (Choices.empty()) {
    // A custom op is only known through its configs, a multi-template
    // buffer only through its choices: either needs at least one.
    error(N.getLoc(),
          "'%" + N.getName() + "' has no " + What + "; it needs at least one");
    return;
  }
  // Choice lists are usually short: comparing with the earlier entries is
  // cheaper than hashing, and this runs after every pass. Long ones (a
  // custom op with thousands of configs) use a set, to stay linear.
  bool Long = Choices.size() > SmallList;
  llvm::StringSet<> Seen;
  for (size_t I = 0; I < Choices.size(); ++I) {
    const Choice &C = Choices[I];
    SMLoc Loc = C.Loc.isValid() ? C.Loc : N.getLoc();
    // Choices made by a pass (say from a choices file) would otherwise print
    // as text that does not parse back.
    if (!isBareIdentifier(C.Name))
      error(Loc, What.drop_back() + " name '" + C.Name + "' of '%" +
                     N.getName() +
                     "' is not an identifier (a letter or '_', then letters, "
                     "digits, '_' or '.')");
    else if (Long ? !Seen.insert(C.Name).second
                  : llvm::any_of(Choices.take_front(I), [&](const Choice &P) {
                      return P.Name == C.Name;
                    }))
      error(Loc, "duplicate " + What.drop_back() + " '" + C.Name + "' in '%" +
                     N.getName() + "'");
    verifyChoiceParams(C, Loc, What.drop_back());
  }
}

void Verifier::verifyChoiceParams(const Choice &C, SMLoc Loc,
                                  llvm::StringRef What) {
  // The simulator reads these two (docs/SIMULATOR.md): which algorithm a
  // custom collective's choice is, or the time to give it outright. The
  // names are CostModel's CollectiveAlgo, which the IR cannot include.
  if (const Attribute *A = C.Params.get("algo")) {
    static const llvm::StringLiteral Algos[] = {"nccl", "one_shot", "two_shot",
                                                "p2p"};
    if (!A->isString())
      error(Loc, "attribute 'algo' of " + What + " '" + C.Name +
                     "' must be a string");
    else if (!llvm::is_contained(Algos, A->getString()))
      error(Loc, "unknown collective algorithm '" + A->getString() + "' in " +
                     What + " '" + C.Name +
                     "' (expected \"nccl\", \"one_shot\", \"two_shot\" or "
                     "\"p2p\")");
  }
  if (const Attribute *A = C.Params.get("cost_us"))
    if (!(A->isInt() || A->isFloat()) || !std::isfinite(A->getNumber()) ||
        A->getNumber() < 0)
      error(Loc, "attribute 'cost_us' of " + What + " '" + C.Name +
                     "' must be a finite, non-negative number of "
                     "microseconds");
}

void Verifier::verifyTimings(const MultiTemplateBufferNode &N,
                             llvm::ArrayRef<ChoiceTiming> Timings,
                             llvm::StringRef Clause) {
  bool Long = Timings.size() > SmallList;
  llvm::StringSet<> Seen;
  for (size_t I = 0; I < Timings.size(); ++I) {
    const ChoiceTiming &T = Timings[I];
    SMLoc Loc = T.Loc.isValid() ? T.Loc : N.getLoc();
    if (!hasChoice(N.getChoices(), T.Choice))
      error(Loc, Clause + " names '" + T.Choice +
                     "', which is not a choice of '%" + N.getName() + "'");
    else if (Long ? !Seen.insert(T.Choice).second
                  : llvm::any_of(Timings.take_front(I),
                                 [&](const ChoiceTiming &P) {
                                   return P.Choice == T.Choice;
                                 }))
      error(Loc, Clause + " names '" + T.Choice + "' twice");
  }
}

void Verifier::verifyMTB(const Graph &G, const MultiTemplateBufferNode &N) {
  // Shared lists (lowering gives every matmul of a shape one list) are
  // checked once; whether a list is valid does not depend on its node.
  const std::vector<Choice> *List = N.getChoiceList().get();
  if (!CleanChoiceLists.count(List)) {
    unsigned Before = NumErrors;
    verifyChoices(N, *List, "choices");
    if (NumErrors == Before)
      CleanChoiceLists.insert(List);
  }
  auto CheckChoice = [&](llvm::StringRef Name, SMLoc Loc,
                         llvm::StringRef Where) {
    if (!hasChoice(N.getChoices(), Name))
      error(Loc.isValid() ? Loc : N.getLoc(),
            Where + " names '" + Name + "', which is not a choice of '%" +
                N.getName() + "'");
  };
  if (N.isDecided())
    CheckChoice(N.getDecision(), N.getDecisionLoc(), "decision");
  verifyTimings(N, N.getTimings(), "timings");
  verifyTimings(N, N.getFusedTimings(), "fused_timings");
  if (!N.getDispatch().empty()) {
    // Hints count rows of a matmul and message bytes of a collective; a
    // table in the other unit would be read at the wrong sizes.
    bool IsColl = llvm::isa<CollectiveMultiTemplateBufferNode>(N);
    bool IsMatMul = N.getOp() == OpCode::MatMul;
    SMLoc Loc =
        N.getDispatchUnitLoc().isValid() ? N.getDispatchUnitLoc() : N.getLoc();
    llvm::StringRef Unit = dispatchUnitName(N.getDispatchUnit());
    if (!IsColl && !IsMatMul)
      error(Loc, "'%" + N.getName() +
                     "' cannot have a dispatch table: only matmuls (unit "
                     "'m') and collectives (unit 'bytes') are tuned per size");
    else if (IsColl && N.getDispatchUnit() != DispatchUnit::Bytes)
      error(Loc, "dispatch unit '" + Unit + "' does not fit collective '%" +
                     N.getName() + "'; its hints are message bytes ('bytes')");
    else if (IsMatMul && N.getDispatchUnit() != DispatchUnit::M)
      error(Loc, "dispatch unit '" + Unit + "' does not fit matmul '%" +
                     N.getName() + "'; its hints are rows ('m')");
  }
  const DispatchEntry *Prev = nullptr;
  for (const DispatchEntry &E : N.getDispatch()) {
    SMLoc Loc = E.Loc.isValid() ? E.Loc : N.getLoc();
    CheckChoice(E.Choice, Loc, "dispatch table");
    if (E.Hint <= 0)
      error(Loc, "dispatch size hint must be positive, got " + Twine(E.Hint));
    else if (Prev && E.Hint <= Prev->Hint)
      error(Loc, "dispatch size hints must be increasing, got " +
                     Twine(E.Hint) + " after " + Twine(Prev->Hint));
    Prev = &E;
  }
  if (N.isEpilogueFused() && N.getEpilogue().empty())
    error(N.getDecisionLoc(),
          "'%" + N.getName() + "' is marked fused but has no epilogue");

  if (const auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N)) {
    CollectiveKind Expected = collectiveKindOf(N.getOp());
    if (Expected != CollectiveKind::None && C->getCollectiveKind() != Expected)
      error(C->getGroupLoc(),
            "collective kind '" + collectiveKindName(C->getCollectiveKind()) +
                "' does not match op '" + N.getOpName() + "'");
    // The clause repeats the group the op's attributes select (lowering
    // copies it), so it must agree with them. The group itself is checked
    // once, with the attributes, by inferCollective or verifyNode.
    if (std::optional<std::string> Attr = groupAttr(N, /*Report=*/false))
      if (*Attr != C->getGroup())
        error(C->getGroupLoc(), "group '@" + C->getGroup() +
                                    "' does not match the op's group '@" +
                                    *Attr + "'");
  }
}

void Verifier::verifyNode(const Graph &G, const Node &N) {
  OpCategory Cat = getOpInfo(N.getOp()).Category;
  if (N.getOp() == OpCode::Custom && N.getCustomName().empty())
    error(N.getLoc(), "custom op '%" + N.getName() + "' has an empty name");
  switch (N.getKind()) {
  case Node::Kind::Op:
    break;
  case Node::Kind::Buffer:
    if (Cat != OpCategory::Pointwise && Cat != OpCategory::Reduction) {
      error(N.getLoc(),
            "a buffer must be a pointwise op or a reduction, not '" +
                N.getOpName() + "'");
      return;
    }
    break;
  case Node::Kind::MultiTemplateBuffer:
    if (Cat != OpCategory::MatMul && Cat != OpCategory::Custom) {
      error(N.getLoc(),
            "a multi_template_buffer must be a matmul or a custom op, not '" +
                N.getOpName() + "'");
      return;
    }
    break;
  case Node::Kind::CollectiveMultiTemplateBuffer:
    if (Cat != OpCategory::Collective && Cat != OpCategory::Custom) {
      error(N.getLoc(), "a collective_multi_template_buffer must be a "
                        "collective or a custom op, not '" +
                            N.getOpName() + "'");
      return;
    }
    break;
  }

  if (const auto *O = llvm::dyn_cast<OpNode>(&N)) {
    if (N.getOp() == OpCode::Custom)
      verifyChoices(N, O->getConfigs(), "configs");
    else if (!O->getConfigs().empty())
      error(N.getLoc(), "only custom ops take 'configs'");
  }
  if (N.getOp() == OpCode::Custom) {
    if (std::optional<std::string> Group = groupAttr(N))
      groupSize(G, *Group, N.getLoc());
    // What the fusion pass may fuse into the custom kernel (none if absent).
    if (const Attribute *E = N.getAttrs().get("epilogue"))
      if (!E->isString() ||
          (E->getString() != "pointwise" && E->getString() != "none"))
        error(N.getLoc(), "attribute 'epilogue' of custom op '%" + N.getName() +
                              "' must be \"pointwise\" or \"none\"");
  }
  if (const auto *MTB = llvm::dyn_cast<MultiTemplateBufferNode>(&N))
    verifyMTB(G, *MTB);
  if (N.getAttrs().contains("alternative_of"))
    Alternatives.push_back(&N);

  TensorType Inferred;
  if (!inferType(G, N, Inferred))
    return;
  if (Inferred != N.getType())
    error(N.getLoc(), "result type " + N.getType().str() + " of '%" +
                          N.getName() + "' does not match the inferred type " +
                          Inferred.str());
}

llvm::Error mtsched::verifyModule(const Module &M, llvm::SourceMgr &SM) {
  unsigned N = Verifier(M, SM).run();
  if (N == 0)
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "verification failed with " + Twine(N) +
                                     " error" + (N == 1 ? "" : "s"));
}
