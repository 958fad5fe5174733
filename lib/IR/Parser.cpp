//===- Parser.cpp - Recursive-descent parser for the IR text -------------===//
//
// The grammar is documented in docs/IR.md. The parser stops at the first
// error; it resolves value names itself, so a use before the definition or a
// redefinition is reported here, at the offending name.
//
//===----------------------------------------------------------------------===//
#include "mtsched/IR/Parser.h"
#include "ParserImpl.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/SourceMgr.h"
#include <cmath>
#include <cstdlib>
#include <set>

using namespace mtsched;
using namespace mtsched::ir_parser;

bool Parser::parseValueUse(Operand &O) {
  if (!Tok.is(Token::PercentIdent))
    return emitError("expected a value name such as '%x'");
  StringRef Name = Tok.ident();
  O.Loc = Tok.getLoc();
  auto It = Names->Defined.find(Name);
  if (It == Names->Defined.end()) {
    if (Names->DefinedLater.count(Name))
      return emitError("value '%" + Name + "' is used before it is defined");
    return emitError("use of undefined value '%" + Name + "'");
  }
  O.V = It->second;
  consume();
  return true;
}

bool Parser::parseGroup(Module &M) {
  consume(); // 'group'
  if (!Tok.is(Token::AtIdent))
    return emitError("expected a group name such as '@tp'");
  ProcessGroup G;
  G.Name = Tok.ident().str();
  G.Loc = Tok.getLoc();
  if (G.Name == WorldGroupName)
    return emitError("group '@world' is predefined and cannot be redefined");
  auto Prev = GroupsByName.find(G.Name);
  if (Prev != GroupsByName.end()) {
    emitError("redefinition of group '@" + G.Name + "'");
    SM.PrintMessage(M.getGroups()[Prev->second].Loc, llvm::SourceMgr::DK_Note,
                    "previous definition is here");
    return false;
  }
  consume();
  if (!expect(Token::Equal, "'=' after the group name") ||
      !expect(Token::LSquare, "'[' to start the rank list"))
    return false;
  // Any int64 is a rank here (the verifier bounds it), INT64_MAX and
  // INT64_MIN included, which are DenseSet<int64_t>'s reserved keys: a set
  // without reserved keys.
  std::set<int64_t> Seen;
  if (!parseCommaList(Token::RSquare, "]", [&] {
        SMLoc Loc = Tok.getLoc();
        int64_t R;
        if (!parseInteger(R, "a rank"))
          return false;
        if (!Seen.insert(R).second)
          return emitError(Loc, "rank " + llvm::Twine(R) +
                                    " appears twice in group '@" + G.Name +
                                    "'");
        G.Ranks.push_back(R);
        return true;
      }))
    return false;
  if (G.Ranks.empty())
    return emitError(G.Loc, "group '@" + G.Name + "' has no ranks");
  GroupsByName[G.Name] = M.getGroups().size();
  M.getGroups().push_back(std::move(G));
  return true;
}

bool Parser::parseMTBClauses(MultiTemplateBufferNode &N) {
  if (auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N)) {
    if (!expectKeyword("group"))
      return false;
    if (!Tok.is(Token::AtIdent))
      return emitError("expected a group name such as '@tp'");
    C->setGroup(Tok.ident().str());
    C->setGroupLoc(Tok.getLoc());
    consume();
    if (!expectKeyword("kind"))
      return false;
    std::optional<CollectiveKind> K;
    if (Tok.is(Token::BareIdent))
      K = parseCollectiveKind(Tok.Spelling);
    if (!K)
      return emitError("expected a collective kind (all_reduce, all_gather, "
                       "reduce_scatter, all_to_all or unknown)");
    C->setCollectiveKind(*K);
    consume();
  }
  std::vector<Choice> Choices;
  if (!expectKeyword("choices") || !parseChoiceList(Choices))
    return false;
  N.setChoices(std::move(Choices));
  // Both lists name values defined later; they are resolved at the end of
  // the graph.
  auto ParseLaterValues = [&](std::vector<Operand> &List, StringRef What) {
    if (!expect(Token::LSquare, ("'[' to start the " + What).str()))
      return false;
    return parseCommaList(Token::RSquare, "]", [&] {
      if (!Tok.is(Token::PercentIdent))
        return emitError("expected a value name such as '%x'");
      List.push_back({nullptr, Tok.getLoc()});
      Pending.push_back({&List, List.size() - 1, Tok.ident().str()});
      consume();
      return true;
    });
  };
  if (consumeKeyword("epilogue") &&
      !ParseLaterValues(N.getEpilogue(), "epilogue"))
    return false;
  if (consumeKeyword("writes") &&
      !ParseLaterValues(N.getEpilogueWrites(), "'writes' list"))
    return false;
  if (Tok.isKeyword("decided")) {
    consume();
    if (!Tok.is(Token::BareIdent))
      return emitError("expected the decided choice's name");
    N.setDecision(Tok.Spelling.str());
    N.setDecisionLoc(Tok.getLoc());
    consume();
    if (consumeKeyword("fused"))
      N.setEpilogueFused(true);
    if (Tok.isKeyword("fallback")) {
      auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N);
      if (!C)
        return emitError("only a collective node can fall back");
      C->setFallback(true);
      consume();
    }
  }
  if (Tok.isKeyword("sync")) {
    auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N);
    if (!C)
      return emitError("only a collective node has a sync state");
    consume();
    if (consumeKeyword("ok"))
      C->setSync(SyncState::Ok);
    else if (consumeKeyword("failed"))
      C->setSync(SyncState::Failed);
    else
      return emitError("expected 'ok' or 'failed'");
  }
  if (consumeKeyword("timings") && !parseTimings(N.getTimings()))
    return false;
  if (consumeKeyword("fused_timings") && !parseTimings(N.getFusedTimings()))
    return false;
  if (consumeKeyword("dispatch")) {
    // The unit says what the hints count, so a table is never read in the
    // wrong one.
    N.setDispatchUnitLoc(Tok.getLoc());
    if (Tok.isKeyword("m"))
      N.setDispatchUnit(DispatchUnit::M);
    else if (Tok.isKeyword("bytes"))
      N.setDispatchUnit(DispatchUnit::Bytes);
    else
      return emitError("expected the dispatch table's unit: 'm' (matmul "
                       "rows) or 'bytes' (collective message bytes)");
    consume();
    if (!parseDispatch(N.getDispatch()))
      return false;
  }
  return true;
}

/// The clauses a node kind takes, in the order they must appear.
static StringRef clausesOf(Node::Kind K) {
  switch (K) {
  case Node::Kind::Op:
    return "configs";
  case Node::Kind::Buffer:
    return "kernel";
  case Node::Kind::MultiTemplateBuffer:
    return "choices, epilogue, writes, decided, timings, fused_timings, "
           "dispatch";
  case Node::Kind::CollectiveMultiTemplateBuffer:
    return "group, kind, choices, epilogue, writes, decided, sync, timings, "
           "fused_timings, dispatch";
  }
  return "";
}

/// A clause keyword where the result type's ':' belongs is a clause out of
/// order, repeated or on the wrong kind of node; say which clauses fit
/// rather than just "expected ':'".
bool Parser::rejectMisplacedClause(const Node &N) {
  static const StringRef Clauses[] = {
      "configs",  "kernel",  "group",         "kind",    "choices",
      "epilogue", "writes",  "decided",       "fused",   "fallback",
      "sync",     "timings", "fused_timings", "dispatch"};
  if (!Tok.is(Token::BareIdent) || !llvm::is_contained(Clauses, Tok.Spelling))
    return true;
  if (Tok.isKeyword("fused") || Tok.isKeyword("fallback"))
    return emitError("'" + Tok.Spelling +
                     "' must directly follow 'decided <choice>'");
  StringRef Kind = N.getKindKeyword();
  std::string What =
      Kind.empty() ? "a high-level op" : ("a " + Kind + " node").str();
  return emitError("unexpected '" + Tok.Spelling + "' clause; " + What +
                   " takes, in this order: " + clausesOf(N.getKind()));
}

bool Parser::parseNode(Graph &G) {
  // `%a = ...`, or `%v, %i = ...` for the ops of two results.
  llvm::SmallVector<std::pair<StringRef, SMLoc>, 2> Results;
  while (true) {
    StringRef Name = Tok.ident();
    if (Names->Defined.count(Name)) {
      emitError("redefinition of value '%" + Name + "'");
      SM.PrintMessage(Names->Defined[Name]->getLoc(), llvm::SourceMgr::DK_Note,
                      "previous definition is here");
      return false;
    }
    for (const auto &R : Results)
      if (R.first == Name)
        return emitError("value '%" + Name + "' is defined twice here");
    Results.push_back({Name, Tok.getLoc()});
    consume();
    if (!consumeIf(Token::Comma))
      break;
    if (!Tok.is(Token::PercentIdent))
      return emitError("expected a result name after ','");
  }
  if (!expect(Token::Equal, Results.size() == 1 ? "'=' after the value name"
                                                : "'=' after the result names"))
    return false;

  Node::Kind Kind = Node::Kind::Op;
  if (consumeKeyword("buffer"))
    Kind = Node::Kind::Buffer;
  else if (consumeKeyword("multi_template_buffer"))
    Kind = Node::Kind::MultiTemplateBuffer;
  else if (consumeKeyword("collective_multi_template_buffer"))
    Kind = Node::Kind::CollectiveMultiTemplateBuffer;

  if (!Tok.is(Token::BareIdent))
    return emitError("expected an op name");
  SMLoc OpLoc = Tok.getLoc();
  std::optional<OpCode> Op = lookupOp(Tok.Spelling);
  if (!Op) {
    StringRef Hint = suggestOp(Tok.Spelling);
    if (!Hint.empty())
      return emitError("unknown op '" + Tok.Spelling + "'; did you mean '" +
                       Hint + "'?");
    return emitError("unknown op '" + Tok.Spelling + "'");
  }
  consume();
  if (Results.size() != opNumResults(*Op))
    return emitError(Results.front().second,
                     "'" + getOpInfo(*Op).Name + "' has " +
                         llvm::Twine(opNumResults(*Op)) + " result" +
                         (opNumResults(*Op) == 1 ? "" : "s") + ", but " +
                         llvm::Twine(Results.size()) + " name" +
                         (Results.size() == 1 ? " is" : "s are") + " given");
  std::string CustomName;
  if (*Op == OpCode::Custom) {
    if (!Tok.is(Token::String))
      return emitError("expected the custom op's name as a string");
    SMLoc CustomLoc = Tok.getLoc();
    // The printer escapes the name like any string, so undo that here.
    if (!parseString(CustomName))
      return false;
    if (CustomName.empty())
      return emitError(CustomLoc, "custom op name must not be empty");
  }

  std::unique_ptr<Node> N;
  switch (Kind) {
  case Node::Kind::Op:
    N = std::make_unique<OpNode>(*Op, OpLoc);
    break;
  case Node::Kind::Buffer:
    N = std::make_unique<BufferNode>(*Op, OpLoc);
    break;
  case Node::Kind::MultiTemplateBuffer:
    N = std::make_unique<MultiTemplateBufferNode>(*Op, OpLoc);
    break;
  case Node::Kind::CollectiveMultiTemplateBuffer:
    N = std::make_unique<CollectiveMultiTemplateBufferNode>(*Op, OpLoc);
    break;
  }
  N->setCustomName(CustomName);

  if (!expect(Token::LParen, "'(' to start the operand list"))
    return false;
  if (!parseCommaList(Token::RParen, ")", [&] {
        Operand O;
        if (!parseValueUse(O))
          return false;
        N->getOperands().push_back(O);
        return true;
      }))
    return false;
  if (!parseOptionalAttrDict(N->getAttrs()))
    return false;

  if (auto *O = llvm::dyn_cast<OpNode>(N.get())) {
    if (consumeKeyword("configs") && !parseChoiceList(O->getConfigs()))
      return false;
  } else if (auto *B = llvm::dyn_cast<BufferNode>(N.get())) {
    if (consumeKeyword("kernel")) {
      SMLoc KLoc = Tok.getLoc();
      int64_t K;
      if (!parseInteger(K, "a kernel id"))
        return false;
      if (K < 0 || K > INT32_MAX)
        return emitError(KLoc, "kernel id must be between 0 and 2^31-1, got " +
                                   llvm::Twine(K));
      B->setKernel(static_cast<int>(K));
    }
  } else if (!parseMTBClauses(*llvm::cast<MultiTemplateBufferNode>(N.get()))) {
    return false;
  }
  if (!rejectMisplacedClause(*N))
    return false;

  if (!expect(Token::Colon, Results.size() == 1
                                ? "':' before the result type"
                                : "':' before the result types"))
    return false;
  llvm::SmallVector<Value *, 2> Values;
  for (const auto &[Name, Loc] : Results) {
    if (!Values.empty() &&
        !expect(Token::Comma, "',' and the type of '%" + Name + "'"))
      return false;
    TensorType T;
    if (!parseType(T))
      return false;
    Values.push_back(G.createValue(Name.str(), T, Loc));
    Names->Defined[Name] = Values.back();
  }
  G.appendNode(std::move(N), Values.front(),
               llvm::ArrayRef<Value *>(Values).drop_front());
  return true;
}

bool Parser::resolveEpilogues(Graph &G) {
  for (const PendingUse &P : Pending) {
    Operand &O = (*P.List)[P.Index];
    auto It = Names->Defined.find(P.Name);
    if (It == Names->Defined.end())
      return emitError(O.Loc, "use of undefined value '%" + P.Name + "'");
    O.V = It->second;
  }
  Pending.clear();
  return true;
}

/// Records every name the graph body defines, so uses before the definition
/// get a precise message. Scans tokens only; the real parse follows.
static void collectDefinitions(StringRef Body, Scope &S) {
  Lexer L(Body);
  Token T = L.lex();
  // Names of a `%a, %b, ... =` run: an operand list has the same shape but
  // never ends in '='.
  llvm::SmallVector<Token, 2> Run;
  while (!T.is(Token::Eof) && !T.is(Token::Error) && !T.isKeyword("return")) {
    Token Next = L.lex();
    if (T.is(Token::PercentIdent)) {
      Run.push_back(T);
      if (Next.is(Token::Equal))
        for (const Token &R : Run)
          S.DefinedLater.try_emplace(R.ident(), R.getLoc());
      if (!Next.is(Token::Comma))
        Run.clear();
    } else if (!T.is(Token::Comma)) {
      Run.clear();
    }
    T = Next;
  }
}

bool Parser::parseGraph(Module &M) {
  consume(); // 'graph'
  if (!Tok.is(Token::AtIdent))
    return emitError("expected a graph name such as '@main'");
  auto G = std::make_unique<Graph>(Tok.ident().str(), Tok.getLoc());
  auto Other = GraphsByName.find(G->getName());
  if (Other != GraphsByName.end()) {
    emitError("redefinition of graph '@" + G->getName() + "'");
    SM.PrintMessage(Other->second->getLoc(), llvm::SourceMgr::DK_Note,
                    "previous definition is here");
    return false;
  }
  consume();

  Scope S;
  Names = &S;
  if (!expect(Token::LParen, "'(' to start the graph inputs"))
    return false;
  if (!parseCommaList(Token::RParen, ")", [&] {
        if (!Tok.is(Token::PercentIdent))
          return emitError("expected an input name such as '%x'");
        StringRef Name = Tok.ident();
        SMLoc Loc = Tok.getLoc();
        if (S.Defined.count(Name)) {
          emitError("duplicate input '%" + Name + "'");
          SM.PrintMessage(S.Defined[Name]->getLoc(), llvm::SourceMgr::DK_Note,
                          "previous definition is here");
          return false;
        }
        consume();
        if (!expect(Token::Colon, "':' after the input name"))
          return false;
        TensorType T;
        if (!parseType(T))
          return false;
        S.Defined[Name] = G->addInput(Name.str(), T, Loc);
        return true;
      }))
    return false;
  if (consumeKeyword("attributes") && !parseAttrDict(G->getAttrs()))
    return false;
  if (!Tok.is(Token::LBrace))
    return emitError("expected '{' to start the graph body");
  collectDefinitions(
      StringRef(Tok.Spelling.data() + 1,
                SM.getMemoryBuffer(SM.getMainFileID())->getBufferEnd() -
                    Tok.Spelling.data() - 1),
      S);
  consume();

  while (Tok.is(Token::PercentIdent))
    if (!parseNode(*G))
      return false;
  if (!Tok.isKeyword("return")) {
    if (Tok.is(Token::RBrace))
      return emitError("graph '@" + G->getName() +
                       "' must end with a 'return'");
    return emitError("expected a node definition or 'return'");
  }
  consume();
  if (Tok.is(Token::PercentIdent)) {
    do {
      Operand O;
      if (!parseValueUse(O))
        return false;
      G->getOutputs().push_back(O);
    } while (consumeIf(Token::Comma));
  }
  if (!expect(Token::RBrace, "'}' to end the graph body"))
    return false;
  if (!resolveEpilogues(*G))
    return false;
  Names = nullptr;
  GraphsByName[G->getName()] = G.get();
  M.getGraphs().push_back(std::move(G));
  return true;
}

std::unique_ptr<Module> Parser::parseModule() {
  auto M = std::make_unique<Module>();
  while (!Tok.is(Token::Eof)) {
    if (Tok.isKeyword("group")) {
      if (!parseGroup(*M))
        return nullptr;
    } else if (Tok.isKeyword("graph")) {
      if (!parseGraph(*M))
        return nullptr;
    } else {
      emitError("expected 'graph' or 'group'");
      return nullptr;
    }
  }
  return M;
}

std::unique_ptr<Module> mtsched::parseModule(llvm::SourceMgr &SM) {
  return Parser(SM).parseModule();
}
