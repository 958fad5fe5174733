//===- Lexer.cpp ----------------------------------------------------------===//
#include "Lexer.h"
#include "llvm/ADT/StringExtras.h"
#include <cstdio>

using namespace mtsched;

static bool isIdentStart(char C) { return llvm::isAlpha(C) || C == '_'; }
static bool isIdentChar(char C) {
  return llvm::isAlnum(C) || C == '_' || C == '.';
}

Token Lexer::make(Token::Kind K, const char *Start) {
  Token T;
  T.K = K;
  T.Spelling = llvm::StringRef(Start, Cur - Start);
  return T;
}

Token Lexer::error(const char *Start, std::string Msg) {
  ErrorMsg = std::move(Msg);
  Token T;
  T.K = Token::Error;
  T.Spelling = llvm::StringRef(Start, std::max<ptrdiff_t>(Cur - Start, 0));
  return T;
}

Token Lexer::lex() {
  while (true) {
    if (Cur == End)
      return make(Token::Eof, Cur);
    char C = *Cur;
    if (C == ' ' || C == '\t' || C == '\n' || C == '\r') {
      ++Cur;
      continue;
    }
    if (C == '/' && Cur + 1 != End && Cur[1] == '/') {
      while (Cur != End && *Cur != '\n')
        ++Cur;
      continue;
    }
    break;
  }
  const char *Start = Cur++;
  switch (*Start) {
  case '(':
    return make(Token::LParen, Start);
  case ')':
    return make(Token::RParen, Start);
  case '[':
    return make(Token::LSquare, Start);
  case ']':
    return make(Token::RSquare, Start);
  case '{':
    return make(Token::LBrace, Start);
  case '}':
    return make(Token::RBrace, Start);
  case ',':
    return make(Token::Comma, Start);
  case ':':
    return make(Token::Colon, Start);
  case '=':
    return make(Token::Equal, Start);
  case '"':
    return lexString(Start);
  case '%':
    if (Cur == End || !isIdentChar(*Cur))
      return error(Start, "expected a value name after '%'");
    return lexIdentTail(Token::PercentIdent, Start);
  case '@':
    if (Cur == End || !isIdentStart(*Cur))
      return error(Start, "expected a symbol name after '@'");
    return lexIdentTail(Token::AtIdent, Start);
  case '-':
    if (Cur != End && llvm::isDigit(*Cur))
      return lexNumber(Start);
    if (llvm::StringRef(Cur, End - Cur).starts_with("inf") &&
        (Cur + 3 == End || !isIdentChar(Cur[3]))) {
      Cur += 3;
      return make(Token::Float, Start);
    }
    return error(Start, "unexpected character '-'");
  default:
    break;
  }
  if (llvm::isDigit(*Start))
    return lexNumber(Start);
  if (isIdentStart(*Start))
    return lexIdentTail(Token::BareIdent, Start);
  if (llvm::isPrint(*Start))
    return error(Start,
                 "unexpected character '" + std::string(1, *Start) + "'");
  // Control characters and non-ASCII bytes are only allowed in strings and
  // comments; name the byte, since a terminal may not show it.
  char Hex[8];
  std::snprintf(Hex, sizeof(Hex), "0x%02x",
                unsigned(static_cast<unsigned char>(*Start)));
  return error(Start, "unexpected byte " + std::string(Hex) + " in input");
}

Token Lexer::lexIdentTail(Token::Kind K, const char *Start) {
  while (Cur != End && isIdentChar(*Cur))
    ++Cur;
  return make(K, Start);
}

Token Lexer::lexNumber(const char *Start) {
  bool IsFloat = false;
  while (Cur != End && llvm::isDigit(*Cur))
    ++Cur;
  if (Cur != End && *Cur == '.' && Cur + 1 != End && llvm::isDigit(Cur[1])) {
    IsFloat = true;
    ++Cur;
    while (Cur != End && llvm::isDigit(*Cur))
      ++Cur;
  }
  if (Cur != End && (*Cur == 'e' || *Cur == 'E')) {
    const char *P = Cur + 1;
    if (P != End && (*P == '+' || *P == '-'))
      ++P;
    if (P != End && llvm::isDigit(*P)) {
      IsFloat = true;
      Cur = P;
      while (Cur != End && llvm::isDigit(*Cur))
        ++Cur;
    }
  }
  return make(IsFloat ? Token::Float : Token::Integer, Start);
}

Token Lexer::lexString(const char *Start) {
  while (Cur != End) {
    char C = *Cur++;
    if (C == '"')
      return make(Token::String, Start);
    if (C == '\n')
      break;
    if (C == '\\' && Cur != End)
      ++Cur;
  }
  Cur = Start + 1;
  return error(Start, "unterminated string");
}
