//===- ParserImpl.h - The IR parser's state (internal) ---------*- C++ -*-===//
//
// Internal to lib/IR: the recursive-descent parser, whose members are
// defined in Parser.cpp (module, groups, graphs, nodes) and
// ParseAttributes.cpp (types, strings, attributes, choice lists, timings).
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_IR_PARSERIMPL_H
#define MTSCHED_LIB_IR_PARSERIMPL_H

#include "Lexer.h"
#include "mtsched/IR/Graph.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/SourceMgr.h"
#include <memory>
#include <string>
#include <vector>

namespace mtsched {
namespace ir_parser {

using llvm::SMLoc;
using llvm::StringRef;

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

} // namespace ir_parser
} // namespace mtsched

#endif // MTSCHED_LIB_IR_PARSERIMPL_H
