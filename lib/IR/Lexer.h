//===- Lexer.h - Tokens of the IR text --------------------------*- C++ -*-===//
#ifndef MTSCHED_LIB_IR_LEXER_H
#define MTSCHED_LIB_IR_LEXER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"
#include <string>

namespace mtsched {

struct Token {
  enum Kind {
    Eof,
    Error,
    BareIdent,    // matmul, bf16, extern.cublas
    PercentIdent, // %x
    AtIdent,      // @tp
    Integer,
    Float,
    String,
    LParen,
    RParen,
    LSquare,
    RSquare,
    LBrace,
    RBrace,
    Comma,
    Colon,
    Equal,
  };

  Kind K = Eof;
  llvm::StringRef Spelling;

  bool is(Kind Other) const { return K == Other; }
  bool isKeyword(llvm::StringRef W) const {
    return K == BareIdent && Spelling == W;
  }
  llvm::SMLoc getLoc() const {
    return llvm::SMLoc::getFromPointer(Spelling.data());
  }
  /// Identifier text without its sigil.
  llvm::StringRef ident() const {
    return K == BareIdent ? Spelling : Spelling.drop_front();
  }
};

/// Splits a buffer into tokens; `//` comments and whitespace are skipped.
class Lexer {
public:
  explicit Lexer(llvm::StringRef Buffer)
      : Cur(Buffer.begin()), End(Buffer.end()) {}
  Token lex();
  /// Message for the last Error token.
  llvm::StringRef getErrorMessage() const { return ErrorMsg; }

private:
  Token make(Token::Kind K, const char *Start);
  Token error(const char *Start, std::string Msg);
  Token lexNumber(const char *Start);
  Token lexString(const char *Start);
  Token lexIdentTail(Token::Kind K, const char *Start);

  const char *Cur;
  const char *End;
  std::string ErrorMsg;
};

} // namespace mtsched

#endif // MTSCHED_LIB_IR_LEXER_H
