//===- ParseAttributes.cpp - Types, strings, attributes, choice lists -----===//
//
// The parser's pieces below a node: tensor types, string literals,
// attribute values and dictionaries, choice lists, timings and dispatch
// tables (grammar in docs/IR.md).
//
//===----------------------------------------------------------------------===//
#include "ParserImpl.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/SourceMgr.h"
#include <cmath>
#include <cstdlib>

using namespace mtsched;
using namespace mtsched::ir_parser;

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
    return emitError(
        "unknown element type '" + Tok.Spelling +
        "' (expected f32, f16, bf16, f8e4m3, f8e5m2, i32, i64 or bool)");
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
    if (Tok.Spelling == "inf" || Tok.Spelling == "nan") {
      // Non-finite numbers are spelled as the printer writes them; a
      // masked_fill's -inf is the lexer's Float token.
      A = Attribute::getFloat(Tok.Spelling == "inf" ? INFINITY : NAN);
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
