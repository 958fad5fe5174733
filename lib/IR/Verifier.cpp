//===- Verifier.cpp - Structural checks -----------------------------------===//
//
// Reports every problem it finds (not just the first), each at the location
// of the construct at fault, so a user fixes a file in one pass. Each op's
// type rule is in OpTypes.cpp.
//
//===----------------------------------------------------------------------===//
#include "mtsched/IR/Verifier.h"
#include "VerifierImpl.h"
#include "mtsched/IR/Layout.h"
#include "mtsched/IR/OpUnit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"
#include <cmath>

using namespace mtsched;
using detail::Verifier;
using llvm::SMLoc;
using llvm::Twine;

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
    for (unsigned R = 0; R < N->getNumResults(); ++R)
      Position[N->getResult(R)] = N->getIndex();
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
    bool Moved = false; // a layout op is in the chain before this member
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
      bool Row = isRowReduction(D->getOp());
      // A matmul's epilogue continues through reshape and transpose: later
      // members are read and written at the mapped index.
      bool Moves = llvm::isa<BufferNode>(D) && M->getOp() == OpCode::MatMul &&
                   isFloatDType(D->getType().Dtype) && elementMapOf(*D);
      bool Fusable = llvm::isa<BufferNode>(D) &&
                     (isPointwise(D->getOp()) || isRowReduction(D->getOp()));
      if (!Fusable && !Moves) {
        error(E.Loc, "epilogue member " + name(E.V) +
                         " is not a pointwise op or a row reduction" +
                         (M->getOp() == OpCode::MatMul
                              ? " (nor a float reshape or transpose)"
                              : ""));
        Chain = false;
        break;
      }
      if (Row && Moved)
        error(E.Loc, "row reduction " + name(E.V) +
                         " follows a layout op in the epilogue of " + MName);

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
      // Members iterate over the shape of the value before them (the
      // template's, or the last layout op's).
      if (!Moves && D->getType().Shape != Prev->getType().Shape)
        error(E.Loc, "epilogue member " + name(E.V) + " iterates over " +
                         shapeStr(D->getType().Shape) + ", not " +
                         shapeStr(Prev->getType().Shape) + " like " +
                         (Moved ? name(Prev) : MName));
      for (const Operand &O : D->getOperands())
        if (Moved && O.V != Prev && InKernel.count(O.V))
          error(O.Loc, "epilogue member " + name(E.V) + " reads " + name(O.V) +
                           ", which its kernel computes at another index "
                           "across a layout op");
      Moved |= Moves;
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
    if (Chain)
      verifyEpilogueWrites(*M, InKernel, Users, Returned);
  }
}

void Verifier::verifyEpilogueWrites(
    const MultiTemplateBufferNode &M,
    const llvm::DenseSet<const Value *> &InKernel,
    const llvm::DenseMap<const Value *, llvm::SmallVector<const Node *, 2>>
        &Users,
    const llvm::DenseSet<const Value *> &Returned) {
  const std::string MName = "'%" + M.getName() + "'";
  const auto &Epi = M.getEpilogue();
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
  std::string R = ReaderOutside(M.getResult());
  if (!Epi.empty() && !R.empty())
    error(M.getLoc(), MName +
                          " has an epilogue, but its result is also read "
                          "by " +
                          R + ", and a fused kernel does not write it");
  llvm::DenseSet<const Value *> Listed;
  for (const Operand &W : M.getEpilogueWrites()) {
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
  // names are Runtime/Roofline.h's CollectiveAlgo, which the IR cannot include.
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
    if (Cat != OpCategory::Pointwise && Cat != OpCategory::Reduction &&
        Cat != OpCategory::Layout && Cat != OpCategory::Unit) {
      error(N.getLoc(), "a buffer must be a pointwise op, a reduction, a "
                        "layout op, a sort, a scatter or a scan, not '" +
                            N.getOpName() + "'");
      return;
    }
    break;
  case Node::Kind::MultiTemplateBuffer:
    if (Cat != OpCategory::MatMul && Cat != OpCategory::Custom &&
        !hasOpUnitChoices(N.getOp())) {
      error(N.getLoc(), "a multi_template_buffer must be a matmul, a custom "
                        "op or an op unit with kernel choices (conv2d), not '" +
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

  unsigned Want = opNumResults(N.getOp());
  if (N.getNumResults() != Want) {
    error(N.getLoc(), "'" + N.getOpName() + "' has " + Twine(Want) + " result" +
                          (Want == 1 ? "" : "s") + ", not " +
                          Twine(N.getNumResults()));
    return;
  }
  llvm::SmallVector<TensorType, 2> Inferred(Want);
  if (!inferType(G, N, Inferred))
    return;
  for (unsigned R = 0; R < Want; ++R) {
    const TensorType &Expected = Inferred[R];
    const Value *V = N.getResult(R);
    if (Expected != V->getType())
      error(N.getLoc(),
            "result type " + V->getType().str() + " of '%" + V->getName() +
                "' does not match the inferred type " + Expected.str());
  }
}

llvm::Error mtsched::verifyModule(const Module &M, llvm::SourceMgr &SM) {
  unsigned N = Verifier(M, SM).run();
  if (N == 0)
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "verification failed with " + Twine(N) +
                                     " error" + (N == 1 ? "" : "s"));
}
