//===- Parser.cpp - Recursive-descent parser for the IR text -------------===//
//
// The grammar is documented in docs/IR.md. The parser stops at the first
// error; it resolves value names itself, so a use before the definition or a
// redefinition is reported here, at the offending name.
//
//===----------------------------------------------------------------------===//
#include "mtsched/IR/Parser.h"
#include "Lexer.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/SourceMgr.h"
#include <cmath>
#include <cstdlib>

using namespace mtsched;
using llvm::SMLoc;
using llvm::StringRef;

namespace {

/// Value names of the graph being parsed.
struct Scope {
  llvm::StringMap<Value *> Defined;
  /// Every name a node defines, so that a use before the definition gets a
  /// precise message.
  llvm::StringMap<SMLoc> DefinedLater;
};

class Parser {
public:
  Parser(llvm::SourceMgr &SM)
      : SM(SM), Lex(SM.getMemoryBuffer(SM.getMainFileID())->getBuffer()) {
    consume();
  }

  std::unique_ptr<Module> parseModule();

private:
  // Token handling.
  void consume() { Tok = Lex.lex(); }
  bool emitError(SMLoc Loc, const llvm::Twine &Msg) {
    SM.PrintMessage(Loc, llvm::SourceMgr::DK_Error, Msg);
    return false;
  }
  bool emitError(const llvm::Twine &Msg) {
    if (Tok.is(Token::Error))
      return emitError(Tok.getLoc(), Lex.getErrorMessage());
    return emitError(Tok.getLoc(), Msg);
  }
  bool expect(Token::Kind K, const llvm::Twine &What) {
    if (!Tok.is(K))
      return emitError("expected " + What);
    consume();
    return true;
  }
  bool consumeIf(Token::Kind K) {
    if (!Tok.is(K))
      return false;
    consume();
    return true;
  }
  bool consumeKeyword(StringRef W) {
    if (!Tok.isKeyword(W))
      return false;
    consume();
    return true;
  }
  bool expectKeyword(StringRef W) {
    if (!consumeKeyword(W))
      return emitError("expected '" + W + "'");
    return true;
  }

  /// Parses `elt (',' elt)*` up to Close, which is consumed.
  template <typename F>
  bool parseCommaList(Token::Kind Close, StringRef CloseSpelling, F Elt) {
    if (consumeIf(Close))
      return true;
    do {
      if (!Elt())
        return false;
    } while (consumeIf(Token::Comma));
    return expect(Close, "',' or '" + CloseSpelling + "'");
  }

  // Pieces.
  bool parseInteger(int64_t &V, StringRef What);
  bool parseString(std::string &Out);
  bool parseType(TensorType &T);
  bool parseAttribute(Attribute &A);
  bool parseAttrDict(AttrDict &D);
  bool parseOptionalAttrDict(AttrDict &D) {
    return !Tok.is(Token::LBrace) || parseAttrDict(D);
  }
  bool parseChoiceList(std::vector<Choice> &Choices);
  bool parseTimings(std::vector<ChoiceTiming> &Timings);
  bool parseDispatch(std::vector<DispatchEntry> &Dispatch);
  bool parseValueUse(Operand &O);

  // Top level.
  bool parseGroup(Module &M);
  bool parseGraph(Module &M);
  bool parseNode(Graph &G);
  bool parseMTBClauses(MultiTemplateBufferNode &N);
  bool rejectMisplacedClause(const Node &N);
  bool resolveEpilogues(Graph &G);

  llvm::SourceMgr &SM;
  Lexer Lex;
  Token Tok;
  Scope *Names = nullptr;
  /// How deep the attribute list being parsed is nested.
  unsigned ListDepth = 0;
  static constexpr unsigned MaxListDepth = 64;
  /// Up to this many entries, searching a list beats hashing.
  static constexpr size_t SmallCollection = 8;
  /// Epilogue operands name values defined after their node; they are
  /// resolved at the end of the graph.
  struct PendingUse {
    std::vector<Operand> *List;
    size_t Index;
    std::string Name;
  };
  std::vector<PendingUse> Pending;
  /// Groups and graphs defined so far, by name: a redefinition check that
  /// scanned the module would make parsing quadratic in their number.
  /// Groups by index into the module's list, which grows as they come.
  llvm::StringMap<size_t> GroupsByName;
  llvm::StringMap<const Graph *> GraphsByName;
};

} // namespace

bool Parser::parseInteger(int64_t &V, StringRef What) {
  if (!Tok.is(Token::Integer))
    return emitError("expected " + What);
  if (Tok.Spelling.getAsInteger(10, V))
    return emitError("integer '" + Tok.Spelling + "' is out of range");
  consume();
  return true;
}

bool Parser::parseType(TensorType &T) {
  if (!Tok.is(Token::BareIdent))
    return emitError("expected a tensor type such as 'bf16[4,8]'");
  std::optional<DType> D = parseDType(Tok.Spelling);
  if (!D)
    return emitError("unknown element type '" + Tok.Spelling +
                     "' (expected f32, f16, bf16, i32 or i64)");
  SMLoc TypeLoc = Tok.getLoc();
  T.Dtype = *D;
  T.Shape.clear();
  consume();
  if (!expect(Token::LSquare, "'[' to start the shape"))
    return false;
  bool OK = parseCommaList(Token::RSquare, "]", [&] {
    SMLoc Loc = Tok.getLoc();
    int64_t Dim;
    if (!parseInteger(Dim, "a dimension size"))
      return false;
    if (Dim <= 0)
      return emitError(Loc, "dimension size must be positive, got " +
                                llvm::Twine(Dim));
    T.Shape.push_back(Dim);
    return true;
  });
  if (!OK)
    return false;
  // Later layers compute element and byte counts in int64_t; refuse types
  // whose size cannot be represented rather than let that overflow.
  int64_t Bytes = dtypeBytes(T.Dtype);
  for (int64_t Dim : T.Shape)
    if (llvm::MulOverflow(Bytes, Dim, Bytes))
      return emitError(TypeLoc, "tensor type " + T.str() +
                                    " is too large (more than 2^63-1 bytes)");
  return true;
}

/// Undoes the escapes raw_ostream::write_escaped produces: \\, \", \n, \t
/// and three octal digits. On failure BadPos is the offset of the bad
/// escape's backslash.
static bool unescape(StringRef In, std::string &Out, size_t &BadPos) {
  for (size_t I = 0; I < In.size(); ++I) {
    char C = In[I];
    if (C != '\\') {
      Out += C;
      continue;
    }
    BadPos = I;
    if (++I == In.size())
      return false;
    switch (In[I]) {
    case 'n':
      Out += '\n';
      break;
    case 't':
      Out += '\t';
      break;
    case '\\':
    case '"':
      Out += In[I];
      break;
    default: {
      // Three octal digits.
      if (I + 3 > In.size())
        return false;
      unsigned V = 0;
      for (size_t J = I; J < I + 3; ++J) {
        if (In[J] < '0' || In[J] > '7')
          return false;
        V = V * 8 + (In[J] - '0');
      }
      if (V > 255)
        return false;
      Out += static_cast<char>(V);
      I += 2;
    }
    }
  }
  return true;
}

bool Parser::parseString(std::string &Out) {
  if (!Tok.is(Token::String))
    return emitError("expected a string");
  size_t BadPos = 0;
  Out.clear();
  if (!unescape(Tok.Spelling.drop_front().drop_back(), Out, BadPos))
    return emitError(SMLoc::getFromPointer(Tok.Spelling.data() + 1 + BadPos),
                     "invalid escape sequence in string (expected \\\\, "
                     "\\\", \\n, \\t or three octal digits)");
  consume();
  return true;
}

bool Parser::parseAttribute(Attribute &A) {
  switch (Tok.K) {
  case Token::Integer: {
    int64_t V;
    if (!parseInteger(V, "an integer"))
      return false;
    A = Attribute::getInt(V);
    return true;
  }
  case Token::Float: {
    double V = std::strtod(Tok.Spelling.str().c_str(), nullptr);
    // Overflow gives inf and underflow of a non-zero literal gives zero;
    // subnormal results are kept, since the printer can produce them.
    bool NonZeroLiteral =
        Tok.Spelling.take_until([](char C) { return C == 'e' || C == 'E'; })
            .find_first_of("123456789") != StringRef::npos;
    if ((std::isinf(V) && !Tok.Spelling.ends_with("inf")) ||
        (V == 0 && NonZeroLiteral))
      return emitError("float '" + Tok.Spelling + "' is out of range");
    A = Attribute::getFloat(V);
    consume();
    return true;
  }
  case Token::String: {
    std::string S;
    if (!parseString(S))
      return false;
    A = Attribute::getString(S);
    return true;
  }
  case Token::LSquare: {
    // Lists nest by recursion; bound it so that deep input is an error
    // rather than a stack overflow.
    if (ListDepth == MaxListDepth)
      return emitError("attribute lists are nested more than " +
                       llvm::Twine(MaxListDepth) + " deep");
    consume();
    std::vector<Attribute> Elts;
    ++ListDepth;
    bool OK = parseCommaList(Token::RSquare, "]", [&] {
      Attribute E;
      if (!parseAttribute(E))
        return false;
      Elts.push_back(std::move(E));
      return true;
    });
    --ListDepth;
    if (!OK)
      return false;
    A = Attribute::getList(std::move(Elts));
    return true;
  }
  case Token::BareIdent:
    if (Tok.Spelling == "true" || Tok.Spelling == "false") {
      A = Attribute::getBool(Tok.Spelling == "true");
      consume();
      return true;
    }
    if (Tok.Spelling == "inf") {
      A = Attribute::getFloat(INFINITY);
      consume();
      return true;
    }
    break;
  default:
    break;
  }
  return emitError("expected an attribute value (integer, float, string, "
                   "true, false or list)");
}

bool Parser::parseAttrDict(AttrDict &D) {
  if (!expect(Token::LBrace, "'{' to start the attributes"))
    return false;
  // AttrDict is a list searched from the start; past a few keys, a set of
  // the keys keeps a large dictionary linear to parse.
  llvm::StringSet<> Keys;
  auto IsDuplicate = [&](StringRef Key) {
    if (D.size() < SmallCollection)
      return D.contains(Key);
    if (Keys.empty())
      for (const AttrDict::Entry &E : D)
        Keys.insert(E.first);
    return !Keys.insert(Key).second;
  };
  return parseCommaList(Token::RBrace, "}", [&] {
    if (!Tok.is(Token::BareIdent))
      return emitError("expected an attribute name");
    StringRef Key = Tok.Spelling;
    SMLoc KeyLoc = Tok.getLoc();
    consume();
    if (IsDuplicate(Key))
      return emitError(KeyLoc, "duplicate attribute '" + Key + "'");
    if (!expect(Token::Equal, "'=' after attribute name"))
      return false;
    Attribute A;
    if (!parseAttribute(A))
      return false;
    D.append(Key, std::move(A));
    return true;
  });
}

bool Parser::parseChoiceList(std::vector<Choice> &Choices) {
  if (!expect(Token::LSquare, "'[' to start the choice list"))
    return false;
  return parseCommaList(Token::RSquare, "]", [&] {
    if (!Tok.is(Token::BareIdent))
      return emitError("expected a choice name");
    Choice C;
    C.Name = Tok.Spelling.str();
    C.Loc = Tok.getLoc();
    consume();
    if (!parseOptionalAttrDict(C.Params))
      return false;
    Choices.push_back(std::move(C));
    return true;
  });
}

bool Parser::parseTimings(std::vector<ChoiceTiming> &Timings) {
  if (!expect(Token::LBrace, "'{' to start the timings"))
    return false;
  return parseCommaList(Token::RBrace, "}", [&] {
    if (!Tok.is(Token::BareIdent))
      return emitError("expected a choice name");
    ChoiceTiming T;
    T.Choice = Tok.Spelling.str();
    T.Loc = Tok.getLoc();
    consume();
    if (!expect(Token::Equal, "'='"))
      return false;
    if (consumeKeyword("inf")) {
      Timings.push_back(T);
      return true;
    }
    if (!Tok.is(Token::Float) && !Tok.is(Token::Integer))
      return emitError("expected a time such as '12.5us' or 'inf'");
    T.Us = std::strtod(Tok.Spelling.str().c_str(), nullptr);
    if (T.Us < 0 || std::isinf(T.Us))
      return emitError("a time must be finite and not negative");
    consume();
    if (!consumeKeyword("us"))
      return emitError("expected the unit 'us' after a time");
    Timings.push_back(T);
    return true;
  });
}

bool Parser::parseDispatch(std::vector<DispatchEntry> &Dispatch) {
  if (!expect(Token::LBrace, "'{' to start the dispatch table"))
    return false;
  return parseCommaList(Token::RBrace, "}", [&] {
    DispatchEntry E;
    E.Loc = Tok.getLoc();
    if (!parseInteger(E.Hint, "a size hint"))
      return false;
    if (!expect(Token::Equal, "'='"))
      return false;
    if (!Tok.is(Token::BareIdent))
      return emitError("expected a choice name");
    E.Choice = Tok.Spelling.str();
    consume();
    Dispatch.push_back(E);
    return true;
  });
}

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
  llvm::DenseSet<int64_t> Seen;
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
  StringRef Name = Tok.ident();
  SMLoc NameLoc = Tok.getLoc();
  if (Names->Defined.count(Name)) {
    emitError("redefinition of value '%" + Name + "'");
    SM.PrintMessage(Names->Defined[Name]->getLoc(), llvm::SourceMgr::DK_Note,
                    "previous definition is here");
    return false;
  }
  consume();
  if (!expect(Token::Equal, "'=' after the value name"))
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

  if (!expect(Token::Colon, "':' before the result type"))
    return false;
  TensorType T;
  if (!parseType(T))
    return false;
  Value *Result = G.createValue(Name.str(), T, NameLoc);
  G.appendNode(std::move(N), Result);
  Names->Defined[Name] = Result;
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
  while (!T.is(Token::Eof) && !T.is(Token::Error) && !T.isKeyword("return")) {
    Token Next = L.lex();
    if (T.is(Token::PercentIdent) && Next.is(Token::Equal))
      S.DefinedLater.try_emplace(T.ident(), T.getLoc());
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
